"""One-line summaries of events for the trace list, and how a row is drawn.

``summarize`` turns a stored :class:`~agentrunner.store.EventRow` into a small
:class:`RowInfo` (no payload kept: detail is read again when an event is selected);
:class:`RunInfo` summarises a folded run of streamed chunks; ``render_row`` draws either as
a Rich ``Text`` line: seq, a turn gutter (model turns vs environment steps; ``━━T3`` starts
turn 3, ``━━T3✎`` a fork's edited turn 3, ``━━T3◆`` a decision point's adopted turn 3,
``≋≋T3`` the compaction call made before turn 3's request), a label, the summary (after the
decision point's mark, on the row that carries one). Styles are passed in by name (they live
in the app's one ``.tcss`` file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import ValidationError
from rich.style import Style
from rich.text import Text

from agentrunner.store import EventRow
from agentrunner.tui.format import cost, one_line, reward
from agentrunner.values.errors import StoreCorruptError
from agentrunner.values.events import (
    COMPACTION,
    Cancel,
    EpisodeEnd,
    EpisodeStart,
    Error,
    EventPayload,
    MessageEvent,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    Resume,
    ToolCall,
    ToolResult,
    Usage,
)
from agentrunner.values.formatting import count as token_count
from agentrunner.values.formatting import plural

# tone of a row: model side, environment side, or something to notice
MODEL_KINDS = ("model.request", "model.chunk", "model.response", "usage")
ENV_KINDS = ("tool.call", "tool.result")
LABELS = {
    "episode.start": "start",
    "message": "message",
    "model.request": "request",
    "model.chunk": "chunk",
    "model.response": "response",
    "usage": "usage",
    "tool.call": "call",
    "tool.result": "result",
    "cancel": "CANCEL",
    "error": "ERROR",
    "resume": "resume",
    "episode.end": "end",
}
_WITH_CALL_ID = (ModelRequest, ModelChunk, ModelResponse, Usage, ToolCall, ToolResult)
CHANNEL_NAMES = {"reasoning": "thinking", "text": "text", "tool_args": "args", "refusal": "refusal"}


@dataclass(slots=True)
class RowInfo:
    """What the trace list needs to draw and navigate one event."""

    seq: int
    turn: int
    attempt: int
    kind: str
    ts: str
    text: str
    tone: str = "meta"
    channel: str | None = None
    call_id: str | None = None
    edited_turn: bool = False  # a fork's edited assistant turn (it has no model request)
    adopted_turn: bool = False  # a decision point's adopted action (it has no model request)
    compaction: bool = False  # a compaction call (its answer is a summary, not the turn's)


@dataclass(slots=True)
class RunInfo:
    """A folded run of streamed chunks (one model call's reasoning, text, tool args)."""

    lo: int
    hi: int
    turn: int
    ts: str
    counts: dict[str, int] = field(default_factory=dict)
    previews: dict[str, str] = field(default_factory=dict)
    partial: bool = False  # only the run's first chunks were read

    @property
    def seq(self) -> int:
        return self.lo

    @property
    def kind(self) -> str:
        return "model.chunk"

    @property
    def tone(self) -> str:
        return "model"

    @property
    def text(self) -> str:
        n = self.hi - self.lo + 1
        parts = [f"{n} chunk{'s' if n != 1 else ''}"]
        for channel, count in self.counts.items():
            name = CHANNEL_NAMES.get(channel, channel)
            more = "+" if self.partial else ""
            parts.append(f"{name} ({count}{more}): {self.previews.get(channel, '')}")
        return " · ".join(parts)


def _args(call: ToolCall) -> str:
    if call.parsed is not None:
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.parsed.items())
    return call.arguments


def typed(row: EventRow) -> EventPayload | None:
    """The row's typed event, or None when its payload is not one (it is then shown raw)."""
    try:
        return row.typed()
    except (ValidationError, StoreCorruptError):
        return None


def _summary(event: EventPayload, preview: str | None) -> tuple[str, str]:
    """(text, tone) for an event."""
    match event:
        case EpisodeStart():
            model = event.model_spec.spec
            env = event.env_spec.kind or "?"
            return f"task {event.task_id} · seed {event.seed} · {model} · env {env}", "meta"
        case MessageEvent(reason="adopted"):
            return preview or "adopted action", "decision"
        case MessageEvent():
            head = f"{event.role} ({event.reason})"
            return (f"{head}: {preview}" if preview else head), "meta"
        case ModelRequest(purpose="compaction"):
            covers = "" if event.covers is None else f" of {plural(event.covers, 'message')}"
            where = f"{event.provider}:{event.model}"
            return f"context compacted: summary{covers} · {where}", "compaction"
        case ModelRequest():
            masked = f" · {plural(event.masked, 'tool output')} masked" if event.masked else ""
            return f"model turn{masked} · {event.provider}:{event.model}", "turn"
        case ModelChunk():
            return event.text, "model"
        case ModelResponse():
            stop = event.stop_reason or "no finish reason"
            extra = f" · refusal: {event.refusal}" if event.refusal else ""
            return f"{stop} · {event.latency_s:.2f}s{extra}", "model"
        case Usage():
            return (
                f"{token_count(event.input_tokens)} in · {token_count(event.output_tokens)} out · "
                f"{token_count(event.reasoning_tokens)} reasoning · "
                f"{token_count(event.cache_read_tokens)} cached"
                f" · {cost(event.cost_usd)}",
                "usage",
            )
        case ToolCall():
            bad = f" · bad arguments: {event.parse_error}" if event.parse_error else ""
            return f"{event.name}({_args(event)}){bad}", "env"
        case ToolResult():
            bits = [f"{event.name} → {event.observation}"]
            if event.reward is not None:
                bits.append(f"reward {reward(event.reward)}")
            if event.done:
                bits.append("done")
            if event.error:
                return f"{event.name} failed: {event.error} · " + " · ".join(bits[1:]), "error"
            return " · ".join(bits), "env"
        case Cancel():
            return f"cancelled during {event.where}: {event.reason}", "cancel"
        case Error():
            retry = " (retryable)" if event.retryable else ""
            return f"{event.where}: {event.type}: {event.message}{retry}", "error"
        case Resume():
            what = "fork run" if event.reason == "fork" else "resumed"
            dangling = len(event.dangling)
            return (
                f"{what} from seq {event.from_seq} · env {event.env_restore}"
                + (f" · {dangling} dangling" if dangling else ""),
                "resume",
            )
        case EpisodeEnd():
            return (
                f"{event.stop_reason} after {plural(event.turns, 'turn')} · reward "
                f"{reward(event.total_reward)} · {cost(event.spend.cost_usd)}",
                "end",
            )


def summarize(
    row: EventRow, event: EventPayload | None = None, preview: str | None = None
) -> RowInfo:
    """The list row for one event (``event``: the row's typed event when already read;
    ``preview``: a message event's content, if known)."""
    event = event if event is not None else typed(row)
    if event is None:
        text, tone = row.payload_json[:200], "meta"
    else:
        text, tone = _summary(event, preview)
    return RowInfo(
        seq=row.seq,
        turn=row.turn,
        attempt=row.attempt,
        kind=row.kind,
        ts=row.ts,
        text=one_line(text, 240),
        tone=tone,
        channel=event.channel if isinstance(event, ModelChunk) else None,
        call_id=event.call_id if isinstance(event, _WITH_CALL_ID) else None,
        edited_turn=isinstance(event, MessageEvent) and event.reason == "edit",
        adopted_turn=isinstance(event, MessageEvent) and event.reason == "adopted",
        compaction=isinstance(event, ModelRequest) and event.purpose == COMPACTION,
    )


def fold(lo: int, hi: int, chunks: list[RowInfo]) -> RunInfo:
    """Summarise the chunks ``chunks`` (the first of seqs ``lo..hi``) as one run."""
    run = RunInfo(lo, hi, chunks[0].turn if chunks else 0, chunks[0].ts if chunks else "")
    texts: dict[str, list[str]] = {}
    for c in chunks:
        channel = c.channel or "text"
        run.counts[channel] = run.counts.get(channel, 0) + 1
        if sum(len(t) for t in texts.get(channel, [])) < 200:
            texts.setdefault(channel, []).append(c.text)
    run.previews = {k: one_line("".join(v), 120) for k, v in texts.items()}
    run.partial = len(chunks) < hi - lo + 1
    return run


def render_row(
    info: RowInfo | RunInfo | None,
    seq: int,
    styles: dict[str, Style],
    *,
    folded_run: bool = False,
    term: str = "",
    mark: str = "",
) -> Text:
    """Draw one row: ``seq · turn gutter · label · summary`` (``mark``: the decision point
    this row marks, drawn before the summary)."""
    line = Text(no_wrap=True, overflow="crop", end="")
    line.append(f"{seq:>8} ", styles["seq"])
    if info is None:
        line.append("      loading…", styles["dim"])
        return line
    turn_style = styles["turn-a"] if info.turn % 2 else styles["turn-b"]
    if isinstance(info, RowInfo) and info.compaction:  # ≋: the history summarized
        line.append(f"≋≋T{info.turn:<3}", turn_style)
    elif info.kind == "model.request":
        line.append(f"━━T{info.turn:<3}", turn_style)
    elif isinstance(info, RowInfo) and info.edited_turn:  # ✎: written by a person
        line.append(f"━━T{info.turn}✎".ljust(6), turn_style)
    elif isinstance(info, RowInfo) and info.adopted_turn:  # ◆: chosen at a decision point
        line.append(f"━━T{info.turn}◆".ljust(6), turn_style)
    elif info.turn:
        bar = "┃ ⚙ " if info.kind in ENV_KINDS else "┃   "  # environment steps vs model
        line.append(f"{bar}{'':<2}", turn_style)
    else:
        line.append(" " * 6)
    if folded_run:
        label = "▸ stream"
    elif isinstance(info, RowInfo) and info.adopted_turn:
        label = "decision"
    elif isinstance(info, RowInfo) and info.compaction:
        label = "compact"
    elif isinstance(info, RowInfo) and info.channel:
        label = "· " + CHANNEL_NAMES.get(info.channel, info.channel)
    else:
        label = LABELS.get(info.kind, info.kind)
    tone = info.tone
    line.append(f"{label:<9} ", styles.get(f"label-{tone}", styles["label-meta"]))
    if mark:
        line.append(f"◆ {mark} │ ", styles["decision"])
    line.append(info.text, styles.get(f"text-{tone}", Style()))
    if tone in ("error", "cancel"):
        line.stylize(styles[f"row-{tone}"])
    if term:
        line.highlight_words([term], styles["match"], case_sensitive=False)
    return line
