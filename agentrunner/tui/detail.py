"""The selected event, rendered in full for the detail pane (read in a thread worker).

Every recorded text goes through :mod:`agentrunner.values.safe_text` first: control characters
are shown (``^[``), never sent to the terminal; links in Markdown are shown with their
address, never made live. What people and models write (prompts, reasoning, assistant
text) is Markdown; tool output
is plain text, never Markdown (``__init__.py`` stays as it is, lines stay lines), highlighted
with a lexer guessed from the file it came from. Tool calls are syntax-highlighted JSON,
with shell commands and file contents highlighted as code; a workspace step also shows the
files it changed with their diff. Long output is cut at ``MAX_LINES`` unless the full output
is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentrunner.store import EventRow, Segment
from agentrunner.tui.decisions import decision_panel
from agentrunner.tui.format import cost, reward
from agentrunner.tui.rows import typed
from agentrunner.values.errors import AgentRunnerError, StoreError
from agentrunner.values.events import (
    Cancel,
    Error,
    EventPayload,
    MessageEvent,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    Usage,
)
from agentrunner.values.safe_text import one_line_visible, plain, visible
from agentrunner.values.types import AgentToolCall, Message

if TYPE_CHECKING:
    from rich.markdown import Markdown
    from rich.syntax import Syntax

    from agentrunner.store.protocol import StoreBackend

MAX_LINES = 200
MAX_CHARS = 20_000
MAX_RUN = 20_000  # chunks of one folded run read for the pane (all of them with full)
CALLS_BACK = 32  # tool calls read back from a result to find the call it answers
THEME = "ansi_dark"


@dataclass(frozen=True)
class Detail:
    """What the detail pane shows: a title and a Rich renderable."""

    title: str
    body: RenderableType
    truncated: bool = False


def _cap(text: str, full: bool) -> tuple[str, bool]:
    if full:
        return text, False
    lines = text.splitlines()
    cut = "\n".join(lines[:MAX_LINES])
    if len(cut) > MAX_CHARS:
        cut = cut[:MAX_CHARS]
    if len(cut) < len(text.rstrip("\n")):
        more = len(lines) - len(cut.splitlines())
        return cut + f"\n… {max(more, 1)} more line(s): press o for the full output", True
    return text, False


def _code(text: str, lexer: str) -> Syntax:
    from rich.syntax import Syntax  # pygments: loaded in the worker of the first detail

    return Syntax(visible(text), lexer, theme=THEME, word_wrap=True, background_color="default")


def _markdown(text: str) -> Markdown:
    """What a person or model wrote, as Markdown: controls visible, links shown as text."""
    from rich.markdown import Markdown  # markdown-it: loaded with the first message shown

    return Markdown(visible(text), hyperlinks=False)


def _json(value: Any) -> Syntax:
    return _code(json.dumps(value, indent=2, ensure_ascii=False), "json")


def _lexer_for(path: str | None, text: str) -> str:
    if not path:
        return "text"
    from rich.syntax import Syntax

    try:
        return Syntax.guess_lexer(path, text[:2000]) or "text"
    except Exception:  # pygments lookups: any failure means plain text
        return "text"


def _tool_output(text: str, tool: str | None, path: str | None) -> Syntax:
    """Tool output as plain text; what ``read_file`` returned is highlighted as its file."""
    return _code(text, _lexer_for(path, text) if tool == "read_file" else "text")


def _path_of(call: AgentToolCall | None) -> str | None:
    if call is None:
        return None
    try:
        path = call.parsed_arguments().get("path")
    except ValueError:
        return None
    return path if isinstance(path, str) else None


def _call_for(chain: Sequence[Message], message: Message) -> AgentToolCall | None:
    """The assistant's tool call that a tool message answers (searched from the end)."""
    for earlier in reversed(chain):
        for call in earlier.tool_calls:
            if call.call_id == message.tool_call_id:
                return call
    return None


def _content(message: Message, text: str, call: AgentToolCall | None = None) -> RenderableType:
    """A message's ``text``: tool output as plain text, anything else as Markdown."""
    if message.role == "tool":
        return _tool_output(text, call.name if call else message.name, _path_of(call))
    return _markdown(text)


def _fields(**values: Any) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for key, value in values.items():
        if value is not None and value != "":
            table.add_row(key.replace("_", " "), plain(value))
    return table


def _message_body(store: StoreBackend, digest: str) -> list[RenderableType]:
    try:
        message = store.message(digest)
    except StoreError as exc:
        return [plain(exc, style="red")]
    parts: list[RenderableType] = []
    if message.reasoning:
        parts.append(Panel(_markdown(message.reasoning), title="thinking", border_style="dim"))
    if message.content:
        parts.append(_content(message, message.content))
    for call in message.tool_calls:
        try:
            args: Any = call.parsed_arguments()
        except ValueError:
            args = call.arguments
        parts.append(plain(f"tool call {call.name} ({call.call_id})", style="bold cyan"))
        parts.append(_json(args))
    if message.refusal:
        parts.append(plain(f"refusal: {message.refusal}", style="bold red"))
    return parts


def _tool_call(call: ToolCall) -> list[RenderableType]:
    parsed = call.parsed or {}
    name = call.name
    parts: list[RenderableType] = [_fields(tool=name, call_id=call.call_id)]
    if call.parse_error:
        parts.append(plain(f"arguments are not valid: {call.parse_error}", style="bold red"))
        parts.append(_code(call.arguments, "text"))
        return parts
    if name == "bash" and "command" in parsed:
        parts.append(_code(str(parsed["command"]), "bash"))
    elif name == "write_file" and "content" in parsed:
        parts.append(plain(f"path: {parsed.get('path')}", style="bold"))
        parts.append(_code(str(parsed["content"]), _lexer_for(parsed.get("path"), "")))
    elif name == "str_replace" and "old_str" in parsed:
        lexer = _lexer_for(parsed.get("path"), "")
        parts.append(plain(f"path: {parsed.get('path')}", style="bold"))
        parts.append(Panel(_code(str(parsed["old_str"]), lexer), title="old", border_style="red"))
        parts.append(
            Panel(_code(str(parsed.get("new_str", "")), lexer), title="new", border_style="green")
        )
    parts.append(Text("arguments", style="bold"))
    parts.append(_json(parsed))
    return parts


def _tool_result(
    store: StoreBackend,
    episode_id: str,
    ev: EventRow,
    result: ToolResult,
    segments: Sequence[Segment],
    full: bool,
) -> tuple[list[RenderableType], bool]:
    call = _find_call(store, episode_id, segments, ev.seq, result.call_id)
    path = (call.parsed or {}).get("path") if call is not None else None
    head = _fields(
        tool=result.name,
        reward=reward(result.reward),
        done=result.done,
        step=result.step,
        duration=f"{result.duration_s:.3f}s",
        file=path,
    )
    parts: list[RenderableType] = [head]
    if result.error:
        parts.append(Panel(plain(result.error), title="error", border_style="red"))
    text, cut = _cap(result.observation, full)
    parts.append(_tool_output(text, result.name, path))
    if result.snapshot:
        changed, diff_cut = _files_changed(store, episode_id, ev.seq, full)
        parts += changed
        cut = cut or diff_cut
    return parts, cut


def _files_changed(
    store: StoreBackend, episode_id: str, seq: int, full: bool
) -> tuple[list[RenderableType], bool]:
    """The files this step changed in the workspace, and their diff."""
    from agentrunner.readers.changes import step_change  # the workspace's code: for a step only

    try:
        change = step_change(store, episode_id, seq)
        if change is None:
            return [], False
        stat = change.patch(store, stat=True)
        patch = change.patch(store) if stat else ""
    except AgentRunnerError as exc:
        return [plain(f"files changed: unavailable ({exc})", style="dim")], False
    if not stat:
        return [Text("files changed: none", style="dim")], False
    text, cut = _cap(patch, full)
    body = Group(plain(stat.rstrip("\n")), _code(text, "diff"))
    return [Panel(body, title="files changed", border_style="magenta")], cut


def _find_call(
    store: StoreBackend, episode_id: str, segments: Sequence[Segment], seq: int, call_id: str
) -> ToolCall | None:
    """The tool call (among the last ``CALLS_BACK`` before ``seq``) that ``call_id`` names."""
    rows = store.events_before(
        episode_id, seq, limit=CALLS_BACK, kinds=("tool.call",), segments=segments
    )
    for row in rows:
        event = typed(row)
        if isinstance(event, ToolCall) and event.call_id == call_id:
            return event
    return None


def _chunks(rows: list[EventRow], partial: bool) -> list[RenderableType]:
    by_channel: dict[str, list[str]] = {}
    args: dict[str, list[str]] = {}
    for row in rows:
        chunk = typed(row)
        if not isinstance(chunk, ModelChunk):
            continue
        if chunk.channel == "tool_args":
            args.setdefault(str(chunk.tool_call_id), []).append(chunk.text)
        else:
            by_channel.setdefault(chunk.channel, []).append(chunk.text)
    parts: list[RenderableType] = []
    if "reasoning" in by_channel:
        body = _markdown("".join(by_channel.pop("reasoning")))
        parts.append(Panel(body, title="thinking", border_style="dim"))
    for channel, texts in by_channel.items():
        style = "red" if channel == "refusal" else "blue"
        parts.append(Panel(_markdown("".join(texts)), title=channel, border_style=style))
    for call_id, texts in args.items():
        raw = "".join(texts)
        try:
            shown: RenderableType = _json(json.loads(raw))
        except json.JSONDecodeError:
            shown = _code(raw, "json")
        title = plain(one_line_visible(f"tool arguments · {call_id}"))
        parts.append(Panel(shown, title=title, border_style="cyan"))
    if partial:
        parts.append(Text(f"… first {len(rows)} chunks shown: press o for all", style="dim"))
    return parts


def load_detail(
    store: StoreBackend,
    episode_id: str,
    segments: Sequence[Segment],
    lo: int,
    hi: int,
    *,
    full: bool = False,
) -> Detail:
    """The event(s) at seqs ``lo..hi`` (a folded run of chunks when ``hi > lo``)."""
    limit = hi - lo + 1 if full else min(hi - lo + 1, MAX_RUN)
    rows = store.events(episode_id, after_seq=lo - 1, limit=limit, segments=segments)
    if not rows:
        return Detail(f"seq {lo}", Text("(no such event)"))
    ev = rows[0]
    where = (
        f"seq {lo}" + (f"–{hi}" if hi > lo else "") + f" · turn {ev.turn} · attempt {ev.attempt}"
    )
    title = one_line_visible(f"{ev.kind} · {where} · {ev.ts}")
    event = typed(ev)
    if isinstance(event, ModelChunk):
        parts = _chunks(rows, len(rows) < hi - lo + 1)
        return Detail(title, Group(*parts), truncated=len(rows) < hi - lo + 1)
    parts, cut = _single(store, episode_id, ev, event, segments, full)
    # the payload as stored, shown as it is
    raw, raw_cut = _cap(json.dumps(json.loads(ev.payload_json), indent=2, ensure_ascii=False), full)
    parts += [Text("payload", style="bold dim"), _code(raw, "json")]
    return Detail(title, Group(*parts), truncated=cut or raw_cut)


def _single(
    store: StoreBackend,
    episode_id: str,
    ev: EventRow,
    event: EventPayload | None,
    segments: Sequence[Segment],
    full: bool,
) -> tuple[list[RenderableType], bool]:
    """The detail of one (non-chunk) event; nothing but its raw payload when it is not a
    valid event."""
    match event:
        case MessageEvent():
            head = _fields(role=event.role, reason=event.reason)
            message = _message_body(store, event.message_hash)
            if event.reason == "adopted":  # a decision point's action: its candidates first
                return [head, decision_panel(store, segments, ev.seq), *message], False
            return [head, *message], False
        case ModelRequest(purpose="compaction"):
            from agentrunner.tui.compaction import compaction_detail  # a compaction's only

            return compaction_detail(store, episode_id, segments, ev.seq), False
        case ModelRequest():
            return _request(store, event, full), False
        case ModelResponse():
            head = _fields(
                stop_reason=event.stop_reason or "none (stream ended without one)",
                latency=f"{event.latency_s:.3f}s",
                request_id=event.provider_request_id,
                opaque_parts=len(event.opaque) or None,
            )
            return [head, *_message_body(store, event.message_hash)], False
        case Usage():
            return [
                _fields(
                    input=event.input_tokens,
                    output=event.output_tokens,
                    reasoning=event.reasoning_tokens,
                    cache_read=event.cache_read_tokens,
                    cache_write=event.cache_write_tokens,
                    cost=cost(event.cost_usd),
                    price_source=event.price_source,
                )
            ], False
        case ToolCall():
            return _tool_call(event), False
        case ToolResult():
            return _tool_result(store, episode_id, ev, event, segments, full)
        case Error() | Cancel():
            style = "red" if isinstance(event, Error) else "yellow"
            values = event.model_dump(exclude={"kind"})
            body = _fields(**{k: v for k, v in values.items() if not isinstance(v, dict | list)})
            return [Panel(body, title=event.kind.upper(), border_style=style)], False
    return [], False


def _request(store: StoreBackend, request: ModelRequest, full: bool) -> list[RenderableType]:
    try:
        chain = store.message_chain(request.tip_hash)
    except StoreError as exc:
        return [plain(exc, style="red")]
    head = _fields(provider=request.provider, model=request.model, input=f"{len(chain)} messages")
    last = chain[-1] if chain else None
    parts: list[RenderableType] = [head, Text("params", style="bold"), _json(request.params)]
    if request.masked:  # the placeholders a mask policy sent in place of tool outputs
        from agentrunner.tui.compaction import masked_outputs

        parts += masked_outputs(chain)
    if last is not None and last.content:
        parts += [plain(f"last input message ({last.role})", style="bold")]
        call = _call_for(chain, last) if last.role == "tool" else None
        parts.append(_content(last, _cap(last.content, full)[0], call))
    return parts
