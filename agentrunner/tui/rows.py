"""One-line summaries of events for the trace list, and how a row is drawn.

``summarize`` turns a stored :class:`~agentrunner.store.EventRow` into a small
:class:`RowInfo` (no payload kept: detail is read again when an event is selected);
:class:`RunInfo` summarises a folded run of streamed chunks; ``render_row`` draws either as
a Rich ``Text`` line: seq, a turn gutter (model turns vs environment steps; ``━━T3`` starts
turn 3, ``━━T3✎`` a fork's edited turn 3), a label, the summary. Styles are passed in by
name (they live in the app's one ``.tcss`` file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rich.style import Style
from rich.text import Text

from agentrunner.formatting import plural
from agentrunner.store import EventRow
from agentrunner.tui.format import cost, one_line, reward

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


def _args(p: dict[str, Any]) -> str:
    parsed = p.get("parsed")
    if isinstance(parsed, dict):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    return str(p.get("arguments", ""))


def _summary(kind: str, p: dict[str, Any], preview: str | None) -> tuple[str, str]:
    """(text, tone) for an event's payload."""
    if kind == "episode.start":
        model = p.get("model", {}).get("spec", "?")
        env = p.get("env", {}).get("kind", "?")
        return f"task {p.get('task_id')} · seed {p.get('seed')} · {model} · env {env}", "meta"
    if kind == "message":
        head = f"{p.get('role')} ({p.get('reason', 'prompt')})"
        return (f"{head}: {preview}" if preview else head), "meta"
    if kind == "model.request":
        return f"model turn · {p.get('provider')}:{p.get('model')}", "turn"
    if kind == "model.chunk":
        return str(p.get("text", "")), "model"
    if kind == "model.response":
        stop = p.get("stop_reason") or "no finish reason"
        extra = f" · refusal: {p['refusal']}" if p.get("refusal") else ""
        return f"{stop} · {p.get('latency_s', 0.0):.2f}s{extra}", "model"
    if kind == "usage":
        return (
            f"{p.get('input_tokens', 0)} in · {p.get('output_tokens', 0)} out · "
            f"{p.get('reasoning_tokens', 0)} reasoning · {p.get('cache_read_tokens', 0)} cached"
            f" · {cost(p.get('cost_usd'))}",
            "usage",
        )
    if kind == "tool.call":
        bad = f" · bad arguments: {p['parse_error']}" if p.get("parse_error") else ""
        return f"{p.get('name')}({_args(p)}){bad}", "env"
    if kind == "tool.result":
        bits = [f"{p.get('name')} → {p.get('observation', '')}"]
        if p.get("reward") is not None:
            bits.append(f"reward {reward(p['reward'])}")
        if p.get("done"):
            bits.append("done")
        if p.get("error"):
            return f"{p.get('name')} failed: {p['error']} · " + " · ".join(bits[1:]), "error"
        return " · ".join(bits), "env"
    if kind == "cancel":
        return f"cancelled during {p.get('where')}: {p.get('reason')}", "cancel"
    if kind == "error":
        retry = " (retryable)" if p.get("retryable") else ""
        return f"{p.get('where')}: {p.get('type')}: {p.get('message')}{retry}", "error"
    if kind == "resume":
        what = "fork run" if p.get("reason") == "fork" else "resumed"
        dangling = len(p.get("dangling", []))
        return (
            f"{what} from seq {p.get('from_seq')} · env {p.get('env_restore')}"
            + (f" · {dangling} dangling" if dangling else ""),
            "resume",
        )
    if kind == "episode.end":
        totals = p.get("totals", {})
        return (
            f"{p.get('stop_reason')} after {plural(p.get('turns') or 0, 'turn')} · reward "
            f"{reward(p.get('total_reward'))} · {cost(totals.get('cost_usd'))}",
            "end",
        )
    return json.dumps(p)[:200], "meta"


def summarize(row: EventRow, preview: str | None = None) -> RowInfo:
    """The list row for one event (``preview``: a message event's content, if known)."""
    p = row.payload
    text, tone = _summary(row.kind, p, preview)
    call_id = p.get("call_id") if isinstance(p.get("call_id"), str) else None
    return RowInfo(
        seq=row.seq,
        turn=row.turn,
        attempt=row.attempt,
        kind=row.kind,
        ts=row.ts,
        text=one_line(text, 240),
        tone=tone,
        channel=p.get("channel") if row.kind == "model.chunk" else None,
        call_id=call_id,
        edited_turn=row.kind == "message" and p.get("reason") == "edit",
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
) -> Text:
    """Draw one row: ``seq · turn gutter · label · summary``."""
    line = Text(no_wrap=True, overflow="crop", end="")
    line.append(f"{seq:>8} ", styles["seq"])
    if info is None:
        line.append("      loading…", styles["dim"])
        return line
    turn_style = styles["turn-a"] if info.turn % 2 else styles["turn-b"]
    if info.kind == "model.request":
        line.append(f"━━T{info.turn:<3}", turn_style)
    elif isinstance(info, RowInfo) and info.edited_turn:  # ✎: written by a person
        line.append(f"━━T{info.turn}✎".ljust(6), turn_style)
    elif info.turn:
        bar = "┃ ⚙ " if info.kind in ENV_KINDS else "┃   "  # environment steps vs model
        line.append(f"{bar}{'':<2}", turn_style)
    else:
        line.append(" " * 6)
    if folded_run:
        label = "▸ stream"
    elif isinstance(info, RowInfo) and info.channel:
        label = "· " + CHANNEL_NAMES.get(info.channel, info.channel)
    else:
        label = LABELS.get(info.kind, info.kind)
    tone = info.tone
    line.append(f"{label:<9} ", styles.get(f"label-{tone}", styles["label-meta"]))
    line.append(info.text, styles.get(f"text-{tone}", Style()))
    if tone in ("error", "cancel"):
        line.stylize(styles[f"row-{tone}"])
    if term:
        line.highlight_words([term], styles["match"], case_sensitive=False)
    return line
