"""The selected event, rendered in full for the detail pane (read in a thread worker).

What people and models write (prompts, reasoning, assistant text) is Markdown; tool output
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
from typing import Any

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agentrunner.changes import step_change
from agentrunner.errors import AgentRunnerError, StoreError
from agentrunner.store import EventRow, Segment, TraceStore
from agentrunner.tui.format import cost, reward
from agentrunner.types import AgentToolCall, Message

MAX_LINES = 200
MAX_CHARS = 20_000
MAX_RUN = 20_000  # chunks of one folded run read for the pane (all of them with full)
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
    return Syntax(text, lexer, theme=THEME, word_wrap=True, background_color="default")


def _json(value: Any) -> Syntax:
    return _code(json.dumps(value, indent=2, ensure_ascii=False), "json")


def _lexer_for(path: str | None, text: str) -> str:
    if not path:
        return "text"
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
    return Markdown(text)


def _fields(**values: Any) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for key, value in values.items():
        if value is not None and value != "":
            table.add_row(key.replace("_", " "), str(value))
    return table


def _message_body(store: TraceStore, digest: str) -> list[RenderableType]:
    try:
        message = store.message(digest)
    except StoreError as exc:
        return [Text(str(exc), style="red")]
    parts: list[RenderableType] = []
    if message.reasoning:
        parts.append(Panel(Markdown(message.reasoning), title="thinking", border_style="dim"))
    if message.content:
        parts.append(_content(message, message.content))
    for call in message.tool_calls:
        try:
            args: Any = call.parsed_arguments()
        except ValueError:
            args = call.arguments
        parts.append(Text(f"tool call {call.name} ({call.call_id})", style="bold cyan"))
        parts.append(_json(args))
    if message.refusal:
        parts.append(Text(f"refusal: {message.refusal}", style="bold red"))
    return parts


def _tool_call(p: dict[str, Any]) -> list[RenderableType]:
    parsed = p.get("parsed") or {}
    name = p.get("name")
    parts: list[RenderableType] = [_fields(tool=name, call_id=p.get("call_id"))]
    if p.get("parse_error"):
        parts.append(Text(f"arguments are not valid: {p['parse_error']}", style="bold red"))
        parts.append(_code(str(p.get("arguments", "")), "text"))
        return parts
    if name == "bash" and "command" in parsed:
        parts.append(_code(str(parsed["command"]), "bash"))
    elif name == "write_file" and "content" in parsed:
        parts.append(Text(f"path: {parsed.get('path')}", style="bold"))
        parts.append(_code(str(parsed["content"]), _lexer_for(parsed.get("path"), "")))
    elif name == "str_replace" and "old_str" in parsed:
        lexer = _lexer_for(parsed.get("path"), "")
        parts.append(Text(f"path: {parsed.get('path')}", style="bold"))
        parts.append(Panel(_code(str(parsed["old_str"]), lexer), title="old", border_style="red"))
        parts.append(
            Panel(_code(str(parsed.get("new_str", "")), lexer), title="new", border_style="green")
        )
    parts.append(Text("arguments", style="bold"))
    parts.append(_json(parsed))
    return parts


def _tool_result(
    store: TraceStore, episode_id: str, ev: EventRow, segments: Sequence[Segment], full: bool
) -> tuple[list[RenderableType], bool]:
    p = ev.payload
    call = _find_call(store, segments, ev.seq, str(p.get("call_id")))
    path = (call or {}).get("parsed", {}).get("path") if call else None
    head = _fields(
        tool=p.get("name"),
        reward=reward(p.get("reward")),
        done=p.get("done"),
        step=p.get("step"),
        duration=f"{p.get('duration_s', 0.0):.3f}s",
        file=path,
    )
    parts: list[RenderableType] = [head]
    if p.get("error"):
        parts.append(Panel(Text(str(p["error"])), title="error", border_style="red"))
    text, cut = _cap(str(p.get("observation", "")), full)
    parts.append(_tool_output(text, p.get("name"), path))
    if p.get("snapshot"):
        changed, diff_cut = _files_changed(store, episode_id, ev.seq, full)
        parts += changed
        cut = cut or diff_cut
    return parts, cut


def _files_changed(
    store: TraceStore, episode_id: str, seq: int, full: bool
) -> tuple[list[RenderableType], bool]:
    """The files this step changed in the workspace, and their diff."""
    try:
        change = step_change(store, episode_id, seq)
        if change is None:
            return [], False
        stat = change.patch(store, stat=True)
        patch = change.patch(store) if stat else ""
    except AgentRunnerError as exc:
        return [Text(f"files changed: unavailable ({exc})", style="dim")], False
    if not stat:
        return [Text("files changed: none", style="dim")], False
    text, cut = _cap(patch, full)
    body = Group(Text(stat.rstrip("\n")), _code(text, "diff"))
    return [Panel(body, title="files changed", border_style="magenta")], cut


def _find_call(
    store: TraceStore, segments: Sequence[Segment], seq: int, call_id: str
) -> dict[str, Any] | None:
    for seg in reversed(segments):
        hi = min(seq - 1, seg.end if seg.end is not None else seq - 1)
        rows = store.conn.execute(
            "SELECT payload FROM events WHERE episode_id = ? AND kind = 'tool.call'"
            " AND seq BETWEEN ? AND ? ORDER BY seq DESC LIMIT 32",
            (seg.episode_id, seg.start, hi),
        ).fetchall()
        for (text,) in rows:
            payload: dict[str, Any] = json.loads(text)
            if payload.get("call_id") == call_id:
                return payload
    return None


def _chunks(rows: list[EventRow], partial: bool) -> list[RenderableType]:
    by_channel: dict[str, list[str]] = {}
    args: dict[str, list[str]] = {}
    for r in rows:
        p = r.payload
        if p.get("channel") == "tool_args":
            args.setdefault(str(p.get("tool_call_id")), []).append(p.get("text", ""))
        else:
            by_channel.setdefault(str(p.get("channel")), []).append(p.get("text", ""))
    parts: list[RenderableType] = []
    if "reasoning" in by_channel:
        body = Markdown("".join(by_channel.pop("reasoning")))
        parts.append(Panel(body, title="thinking", border_style="dim"))
    for channel, texts in by_channel.items():
        style = "red" if channel == "refusal" else "blue"
        parts.append(Panel(Markdown("".join(texts)), title=channel, border_style=style))
    for call_id, texts in args.items():
        raw = "".join(texts)
        try:
            shown: RenderableType = _json(json.loads(raw))
        except json.JSONDecodeError:
            shown = _code(raw, "json")
        parts.append(Panel(shown, title=f"tool arguments · {call_id}", border_style="cyan"))
    if partial:
        parts.append(Text(f"… first {len(rows)} chunks shown: press o for all", style="dim"))
    return parts


def load_detail(
    store: TraceStore,
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
    title = f"{ev.kind} · {where} · {ev.ts}"
    if ev.kind == "model.chunk":
        parts = _chunks(rows, len(rows) < hi - lo + 1)
        return Detail(title, Group(*parts), truncated=len(rows) < hi - lo + 1)
    parts, cut = _single(store, episode_id, ev, segments, full)
    raw, raw_cut = _cap(json.dumps(ev.payload, indent=2, ensure_ascii=False), full)
    parts += [Text("payload", style="bold dim"), _code(raw, "json")]
    return Detail(title, Group(*parts), truncated=cut or raw_cut)


def _single(
    store: TraceStore, episode_id: str, ev: EventRow, segments: Sequence[Segment], full: bool
) -> tuple[list[RenderableType], bool]:
    p = ev.payload
    kind = ev.kind
    if kind == "message":
        head = _fields(role=p.get("role"), reason=p.get("reason"))
        return [head, *_message_body(store, str(p.get("message_hash")))], False
    if kind == "model.request":
        try:
            chain = store.message_chain(p.get("tip_hash"))
        except StoreError as exc:
            return [Text(str(exc), style="red")], False
        head = _fields(
            provider=p.get("provider"), model=p.get("model"), input=f"{len(chain)} messages"
        )
        last = chain[-1] if chain else None
        parts: list[RenderableType] = [head, Text("params", style="bold"), _json(p.get("params"))]
        if last is not None and last.content:
            parts += [Text(f"last input message ({last.role})", style="bold")]
            call = _call_for(chain, last) if last.role == "tool" else None
            parts.append(_content(last, _cap(last.content, full)[0], call))
        return parts, False
    if kind == "model.response":
        head = _fields(
            stop_reason=p.get("stop_reason") or "none (stream ended without one)",
            latency=f"{p.get('latency_s', 0.0):.3f}s",
            request_id=p.get("provider_request_id"),
            opaque_parts=len(p.get("opaque") or []) or None,
        )
        return [head, *_message_body(store, str(p.get("message_hash")))], False
    if kind == "usage":
        return [
            _fields(
                input=p.get("input_tokens"),
                output=p.get("output_tokens"),
                reasoning=p.get("reasoning_tokens"),
                cache_read=p.get("cache_read_tokens"),
                cache_write=p.get("cache_write_tokens"),
                cost=cost(p.get("cost_usd")),
                price_source=p.get("price_source"),
            )
        ], False
    if kind == "tool.call":
        return _tool_call(p), False
    if kind == "tool.result":
        return _tool_result(store, episode_id, ev, segments, full)
    if kind in ("error", "cancel"):
        style = "red" if kind == "error" else "yellow"
        body = _fields(**{k: v for k, v in p.items() if not isinstance(v, dict | list)})
        return [Panel(body, title=kind.upper(), border_style=style)], False
    return [], False
