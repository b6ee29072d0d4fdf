"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) read as items.

Each line is ``{timestamp, type, payload}``: ``session_meta``, ``response_item`` (a Responses
API item exactly as it went to or came from the model), ``event_msg`` (what Codex showed its
UI), ``turn_context`` (a request's settings), ``compacted``, and since Codex 0.171
``token_usage_record`` and ``world_state``. One file is one session.

- ``session_meta`` is the session (id, ``cli_version``, ``cwd``; its other fields, such as
  ``originator``, ``source``, ``model_provider`` and ``git``, go into ``Source.extra``, with
  ``price_provider``: usage is priced for the ``model_provider``, ``openai`` by default); its
  ``base_instructions`` (sent as the request's ``instructions``) are the first system message.
- The first ``turn_context`` names the model and is kept whole in ``Source.extra``; the
  :class:`Begin` waits for it (or for the model's first output, or the end of the file), so
  the records before it are emitted with it, at its place. A later one that repeats the
  settings before it (its ``turn_id`` aside, which names the calls) adds nothing; one that
  changes them is kept raw, and its model is used from then on.
- ``message`` items of role ``developer`` (or ``system``) are system messages, role ``user``
  ones user messages, including the context Codex injects as user messages
  (``<environment_context>``, ``<user_instructions>``, AGENTS.md): the model read them with
  role user, so that is how a request is rebuilt. A message with images is also kept raw.
- A model call is one run of output items (``reasoning``, assistant ``message``,
  ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``, ...)
  between inputs. It opens at its first output item (:class:`Ask`, then a :class:`Piece` per
  reasoning summary, output text and tool-call argument string) and closes (:class:`Answer`)
  at the first ``token_count`` event whose running totals grew: Codex writes one when the
  response completes, and its ``last_token_usage`` is this call's usage (its rate-limit
  reading is not kept; the snapshot Codex writes as the next request starts is). A call that
  sees no such event closes without usage at the next input (a user or developer message, a
  tool output, a ``turn_context``, a compaction, an aborted turn) or, as ``incomplete``, at the
  end of a finished file. ``turn_context`` alone cannot delimit calls: some versions write one
  per request, others one per user turn. The answer keeps the call's output items in order
  as the OpenAI adapter keeps a live turn's (``layout_parts``): reasoning (encrypted content
  included) verbatim, messages and function calls as placeholders whose text and arguments
  the turn holds once. Codex 0.171 writes a ``token_usage_record`` as the response completes
  (before the tool's output and the ``token_count``): its ``usage`` is the call's, and it
  closes the call; the ``token_count`` after it repeats its totals.
- ``function_call_output`` / ``custom_tool_call_output`` are tool results.
- A compaction (:mod:`~agentrunner.imports.codex_compaction`) is a compaction call (purpose
  ``compaction``): its output items are the summary; the ``compacted`` record after it is the
  history Codex went on from, messages that begin a new chain (the base instructions first).
- ``event_msg`` ``agent_message`` / ``agent_reasoning`` / ``agent_reasoning_raw_content`` /
  ``user_message`` are the UI's copies of the text of the response item beside them: a copy
  that says exactly what that item says adds nothing; one that differs is kept raw. A
  ``user_message`` with no user message item beside it is the only record of the user's
  prompt (Codex 0.128's Desktop rollouts hold no user item): it is the user's message.
- ``error`` / ``stream_error`` events are failures. Everything else is kept raw
  (:class:`Unmapped`): ``token_count`` events without new usage (rate-limit snapshots), a usage
  no open call can take, ``task_started`` / ``task_complete``, ``turn_aborted``, ``world_state``
  snapshots, encrypted
  compaction items, a replacement history's items that are not messages, ghost snapshots,
  unknown types, lines that are not JSON.

Call ids are ``<turn id>/<n>`` (the session id when no turn id is known yet), numbered in file
order: the same records always give the same ids.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrunner.imports.codex_compaction import (
    compaction_call,
    is_compaction_output,
    replacement,
)
from agentrunner.imports.codex_fields import (
    LINE_TYPES,
    TEXT_PARTS,
    dicts,
    kind_of,
    minus,
    offers,
    output_text,
    part_type,
    reasoning_texts,
    seconds_between,
    tool_call,
    usage_of,
)
from agentrunner.imports.items import (
    Answer,
    Ask,
    BadLine,
    Begin,
    Emit,
    Failure,
    Item,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
    iter_lines,
    jsonl_records,
    text_of,
)
from agentrunner.values.events import COMPACTION
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, Channel
from providers.openai_messages import layout_parts

NAME = "codex"
APPENDS = True
PROVIDER = "openai"
_LINE_START = re.compile(
    r'\{\s*"timestamp":\s*"[^"]*",\s*"type":\s*"(' + "|".join(LINE_TYPES) + ')"'
)
OUTPUTS = frozenset(
    ["item:message:assistant"]
    + [f"item:{t}" for t in ("reasoning", "web_search_call", "image_generation_call")]
    + [f"item:{t}" for t in ("function_call", "custom_tool_call", "local_shell_call")]
)
TOOL_OUTPUTS = frozenset({"item:function_call_output", "item:custom_tool_call_output"})
ECHOES = {  # a UI event that copies an item's text -> the field holding the text
    "event:agent_message": "message",
    "event:agent_reasoning": "text",
    "event:agent_reasoning_raw_content": "text",
    "event:user_message": "message",
}
_ECHO_FIELDS = frozenset({"type", "message", "text", "kind", "phase"})
_WHY = {
    "bad": "a line that is not a rollout record",
    "session_meta": "a second session_meta (a forked session's header)",
    "compacted": "a compaction whose replacement history holds items that are not messages",
    "item:compaction": "an encrypted compaction of the history",
    "item:compaction_summary": "an encrypted compaction of the history",
    "event:turn_aborted": "the turn was aborted (an interrupt: no item stands for a cancel)",
    "item:ghost_snapshot": "a ghost snapshot (Codex's undo point, not model input)",
    "event:task_started": "a turn started",
    "event:task_complete": "a turn completed",
    "world_state": "Codex's world state (what it builds instructions from, not model input)",
}
_USER_ITEM = "item:message:user"
_CLOSING = frozenset({"item:compaction", "item:compaction_summary"})


def sniff(path: Path, head: str) -> bool:
    """A rollout's first line is ``{"timestamp", "type": <a rollout type>, "payload": {..}}``
    (when that line is longer than the head, only its start is checked)."""
    for line in iter_lines(head):
        return (
            line.get("type") in LINE_TYPES
            and isinstance(line.get("payload"), dict)
            and isinstance(line.get("timestamp"), str)
        )
    return bool(_LINE_START.match(head))


def records(path: Path, *, live: bool) -> list[Any]:
    return jsonl_records(path, live=live)


def parser(path: Path) -> RolloutParser:
    return RolloutParser(path)


@dataclass
class _Call:
    """One model call while it is open."""

    call_id: str
    model: str | None
    start: str | None  # when its input was complete (for the latency)
    items: list[dict[str, Any]] = field(default_factory=list)
    said: dict[str, list[str]] = field(default_factory=dict)  # channel -> texts
    tools: list[AgentToolCall] = field(default_factory=list)

    def text(self, channel: str) -> str:
        return "".join(self.said.get(channel, []))


@dataclass
class _Copy:
    """A UI event that may copy the text of the response item beside it."""

    kind: str
    text: str | None  # None: it carries more than a text, so it is never only a copy
    record: Any
    ts: str | None
    alone: bool  # no user message item is right before it


class RolloutParser:
    """Turns one rollout's records into items, in order (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fed = False
        self.meta: dict[str, Any] | None = None
        self.meta_ts: str | None = None
        self.first_context: dict[str, Any] | None = None
        self.settings: dict[str, Any] | None = None  # the last turn_context, turn id aside
        self.model: str | None = None
        self.turn_id: str | None = None
        self.ready = False  # the Begin can go out
        self.held: list[Item] | None = []  # items before the Begin (None once it is out)
        self.call: _Call | None = None
        self.numbers: Counter[str] = Counter()
        self.totals: Any = None  # the last running totals a token_count gave
        self.names: dict[str, str] = {}  # tool call id -> tool name
        self.asked: str | None = None  # when the last input arrived
        self.copies: list[_Copy] = []  # UI copies waiting for the item they copy
        self.offered: list[tuple[str, str]] = []  # what the last record offers to copies
        self.last_kind = ""  # the kind of the last record that is not a UI copy
        self.last_ts: str | None = None
        self.instructions: str | None = None  # the session's base instructions
        self.summarized = False  # a compaction call's output came, its compacted record not

    def feed(self, index: int, record: Any) -> list[Emit]:
        self.fed = True
        ts = record.get("timestamp") if isinstance(record, dict) else None
        ts = ts if isinstance(ts, str) else self.last_ts
        self.last_ts = ts
        kind, payload = kind_of(record)
        if kind in ECHOES:
            self._copy(kind, payload, record, ts)
            return []
        offered = offers(kind, payload)
        items = self._settle(offered, kind)
        items += self._record(kind, payload, record, ts)
        self.offered, self.last_kind = offered, kind
        return self._emit(items)

    def finish(self) -> list[Emit]:
        if not self.fed:
            return []
        items = self._settle([], "")
        if self.call is not None:
            items.append(self._close(self.last_ts, None, "incomplete"))
        self.ready = True
        return self._emit(items)

    # -- records

    def _record(
        self, kind: str, payload: dict[str, Any], record: Any, ts: str | None
    ) -> list[Item]:
        if kind == "session_meta" and self.meta is None and self.held is not None:
            self.meta, self.meta_ts = payload, ts
            instructions = text_of(payload.get("base_instructions"))
            self.instructions = instructions or None
            return [Said("system", instructions, ts)] if instructions else []
        if kind == "turn_context":
            return self._turn_context(payload, record, ts)
        if kind in OUTPUTS:
            return self._output(payload, ts, is_compaction_output(record))
        if kind == "compacted":
            return self._compacted(payload, record, ts)
        if kind.startswith("item:message:"):
            return self._message(kind.removeprefix("item:message:"), payload, record, ts)
        if kind in TOOL_OUTPUTS:
            return self._tool_output(payload, record, ts)
        if kind == "event:token_count":
            return self._usage(payload, record, ts)
        if kind == "token_usage_record":
            return self._usage_record(payload, record, ts)
        if kind in ("event:error", "event:stream_error"):
            text = str(payload.get("message") or json.dumps(payload, sort_keys=True))
            return [Failure("generate", kind.removeprefix("event:"), text, ts)]
        if kind in _CLOSING or kind == "event:turn_aborted":
            stop = "incomplete" if kind == "event:turn_aborted" else None
            return [*self._input(ts, stop), Unmapped(record, _WHY[kind], ts)]
        if isinstance(record, BadLine):
            return [Unmapped(record, f"a line that is not JSON ({record.problem})", ts)]
        return [Unmapped(record, _WHY.get(kind) or f"{kind} (no item stands for it)", ts)]

    def _turn_context(self, payload: dict[str, Any], record: Any, ts: str | None) -> list[Item]:
        items = self._input(ts, None)  # a new request: an open call saw no completion
        self.turn_id = str(payload.get("turn_id") or "") or self.turn_id
        settings = {k: v for k, v in payload.items() if k != "turn_id"}
        if self.first_context is None and self.held is not None:
            self.first_context = payload  # goes into the Begin
        elif settings != self.settings:
            items.append(Unmapped(record, "changed turn settings (its model applies)", ts))
        self.settings = settings
        self.model = str(payload.get("model") or "") or self.model
        self.ready = True
        return items

    def _message(
        self, role: str, payload: dict[str, Any], record: Any, ts: str | None
    ) -> list[Item]:
        if role not in ("user", "developer", "system"):
            return [*self._input(ts, None), Unmapped(record, f"a message of role {role!r}", ts)]
        content = payload.get("content")
        items = [
            *self._input(ts, None),
            Said("user" if role == "user" else "system", text_of(content), ts),
        ]
        if isinstance(content, list) and any(part_type(p) not in TEXT_PARTS for p in content):
            items.append(Unmapped(record, "a message with non-text parts (its text is said)", ts))
        return items

    def _output(self, payload: dict[str, Any], ts: str | None, compaction: bool) -> list[Item]:
        items: list[Item] = []
        if self.call is None:
            self.ready = True
            self.call = _Call(self._next_call_id(), self.model, self.asked or ts)
            purpose = COMPACTION if compaction else "turn"
            items.append(Ask(self.call.call_id, self.model, ts, purpose=purpose))
            self.summarized = compaction
        call = self.call
        call.items.append(payload)
        kind = payload.get("type")
        if kind == "message":
            for part in dicts(payload.get("content")):
                if part.get("type") == "output_text":
                    items += _piece(call, "text", str(part.get("text") or ""), ts)
                elif part.get("type") == "refusal":
                    items += _piece(call, "refusal", str(part.get("refusal") or ""), ts)
        elif kind == "reasoning":
            for text in reasoning_texts(payload):
                items += _piece(call, "reasoning", text, ts)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            tool = tool_call(payload, f"{call.call_id}.{len(call.tools) + 1}")
            call.tools.append(tool)
            self.names[tool.call_id] = tool.name
            items += _piece(call, "tool_args", tool.arguments, ts, tool.call_id)
        return items

    def _compacted(self, payload: dict[str, Any], record: Any, ts: str | None) -> list[Item]:
        """A compaction's record: its call (when the rollout holds no output of it), then the
        history Codex replaced the model's with."""
        items = self._input(ts, None)
        if not self.summarized:
            provider = str((self.meta or {}).get("model_provider") or PROVIDER)
            items += compaction_call(self._next_call_id(), payload, self.model, provider, ts)
        self.summarized = False
        replaced = replacement(payload, self.instructions, ts)
        if replaced is not None:
            said, other = replaced
            items += said
            if other:
                items.append(Unmapped(record, _WHY["compacted"], ts))
        return items

    def _next_call_id(self) -> str:
        base = self.turn_id or self._session_id()
        self.numbers[base] += 1
        return f"{base}/{self.numbers[base]}"

    def _tool_output(self, payload: dict[str, Any], record: Any, ts: str | None) -> list[Item]:
        items = self._input(ts, None)
        call_id = str(payload.get("call_id") or "")
        text, error, whole = output_text(payload.get("output"))
        items.append(Observed(call_id, self.names.get(call_id, ""), text, error, ts))
        if whole:
            items.append(Unmapped(record, "a tool output that is not only text", ts))
        return items

    def _usage(self, payload: dict[str, Any], record: Any, ts: str | None) -> list[Item]:
        info = payload.get("info")
        info = info if isinstance(info, dict) else {}
        totals, last = info.get("total_token_usage"), info.get("last_token_usage")
        if not isinstance(totals, dict) or totals == self.totals:
            return [Unmapped(record, "a token_count without new usage (rate limits)", ts)]
        usage = usage_of(last if isinstance(last, dict) else minus(totals, self.totals))
        self.totals = totals
        if self.call is None:
            why = "usage of a model call whose output the rollout does not hold"
            return [Unmapped(record, why, ts)]
        return [self._close(ts, usage, "completed")]

    def _usage_record(self, payload: dict[str, Any], record: Any, ts: str | None) -> list[Item]:
        """One response's usage as it completed, and the thread's running totals then."""
        usage, totals = payload.get("usage"), payload.get("thread_token_usage")
        if self.call is None or not isinstance(usage, dict):
            why = "usage of a model call whose output the rollout does not hold"
            return [Unmapped(record, why, ts)]
        if isinstance(totals, dict):
            self.totals = totals
        return [self._close(ts, usage_of(usage), "completed")]

    # -- calls, copies, the session

    def _input(self, ts: str | None, stop: str | None) -> list[Item]:
        """What the next model call reads arrived: the open call (if any) is over."""
        self.asked = ts
        return [self._close(ts, None, stop)] if self.call is not None else []

    def _close(self, ts: str | None, usage: AgentUsage | None, stop: str | None) -> Answer:
        call, self.call = self.call, None
        assert call is not None
        turn = AgentTurn(
            reasoning=call.text("reasoning") or None,
            message=call.text("text"),
            tool_calls=tuple(call.tools),
            usage=usage or AgentUsage.unknown(),  # no token_count said what it used
            provider=str((self.meta or {}).get("model_provider") or PROVIDER),
            model=call.model,
            stop_reason=stop,
            refusal=call.text("refusal") or None,
            opaque=tuple(layout_parts(call.items)),
        )
        return Answer(call.call_id, turn, ts, seconds_between(call.start, ts))

    def _copy(self, kind: str, payload: dict[str, Any], record: Any, ts: str | None) -> None:
        text = payload.get(ECHOES[kind])
        more = any(v for k, v in payload.items() if k not in _ECHO_FIELDS)
        text = text if isinstance(text, str) and not more else None
        copy = _Copy(kind, text, record, ts, self.last_kind != _USER_ITEM)
        if copy.text is not None and (kind, copy.text) in self.offered:
            self.offered.remove((kind, copy.text))  # the item before it says the same
        else:
            self.copies.append(copy)

    def _settle(self, offered: list[tuple[str, str]], kind: str) -> list[Item]:
        """Waiting copies: those whose text ``offered`` (by the next record, a ``kind``) holds
        are copies, a user's message with no user item beside it is said, the rest kept raw."""
        items: list[Item] = []
        for copy in self.copies:
            if copy.text is not None and (copy.kind, copy.text) in offered:
                offered.remove((copy.kind, copy.text))
            elif (
                copy.kind == "event:user_message"
                and copy.text
                and copy.alone
                and (kind != _USER_ITEM)
            ):
                items += [*self._input(copy.ts, None), Said("user", copy.text, copy.ts)]
            else:
                why = f"{copy.kind.removeprefix('event:')}: a UI copy no response item repeats"
                items.append(Unmapped(copy.record, why, copy.ts))
        self.copies = []
        return items

    def _session_id(self) -> str:
        if (self.meta or {}).get("id"):
            return str((self.meta or {})["id"])
        found = re.search(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", self.path.stem)
        return found.group(0) if found else self.path.stem

    def _emit(self, items: list[Item]) -> list[Emit]:
        if self.held is not None:
            if not self.ready:
                self.held += items
                return []
            items, self.held = [self._begin(), *self.held, *items], None
        return [("", item) for item in items]

    def _begin(self) -> Begin:
        meta = dict(self.meta or {})
        cwd, version = meta.get("cwd"), meta.get("cli_version")
        for key in ("id", "cwd", "cli_version", "base_instructions"):
            meta.pop(key, None)
        extra: dict[str, Any] = {"price_provider": str(meta.get("model_provider") or PROVIDER)}
        if meta:
            extra["session_meta"] = meta
        if self.first_context is not None:
            extra["turn_context"] = self.first_context
            cwd = cwd or self.first_context.get("cwd")
        source = Source(
            format=NAME,
            path=str(self.path),
            session_id=self._session_id(),
            agent="codex",
            agent_version=str(version) if version else None,
            model=self.model,
            cwd=str(cwd) if cwd else None,
            extra=extra,
        )
        return Begin(source, self.meta_ts)


def _piece(
    call: _Call, channel: Channel, text: str, ts: str | None, tool: str | None = None
) -> list[Item]:
    if not text:
        return []
    if channel != "tool_args":
        call.said.setdefault(channel, []).append(text)
    return [Piece(call.call_id, channel, text, tool, ts)]
