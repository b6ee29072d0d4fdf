"""Human-readable rendering of events: the live view of ``run``, ``show`` and ``--follow``.

Reasoning is dimmed, assistant text plain, tool calls and results highlighted, usage and
errors on their own lines. Output goes to a ``rich`` console (stderr for live views). Given
the store, messages that enter the history (the task prompt, an injected or edited message)
are shown with their text, and the system prompt with ``verbose``. A decision point (see
:mod:`agentrunner.lifecycle.decisions`) is shown at its turn: the candidates with their values and
continuations, then the adopted action as the turn's assistant message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from agentrunner.cli.batched_output import BatchedOutput
from agentrunner.cli.common import reward_text
from agentrunner.cli.event_fields import read_fields
from agentrunner.lifecycle.decision_log import Decision, read_decisions
from agentrunner.values import events as ev
from agentrunner.values.errors import StoreError
from agentrunner.values.formatting import (
    GAVE_UP,
    KEPT_RAW,
    MESSAGE_LABELS,
    count,
    plural,
    unique_prefixes,
)
from agentrunner.values.safe_text import Part, line
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentrunner.store import EventRow
    from agentrunner.store.protocol import StoreBackend

MAX_OBS_LINES = 12
MAX_PROMPT_LINES = 20
CHANNEL_STYLE = {"reasoning": "dim italic", "refusal": "bold red"}


def _short_args(arguments: str, parsed: dict[str, Any] | None, limit: int = 160) -> str:
    if parsed is None:
        text = arguments
    else:
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_message(message: Message, limit: int = 160) -> str:
    """One line for an assistant message: its tool calls, then its text (both shortened)."""
    parts = []
    for call in message.tool_calls:
        parsed = call.checked_arguments()[0]
        parts.append(f"{call.name}({_short_args(call.arguments, parsed, limit)})")
    text = " ".join(message.content.split())
    if text:
        parts.append(json.dumps(text if len(text) <= limit else text[: limit - 1] + "…"))
    return " · ".join(parts) or "(empty message)"


class EventRenderer:
    """Renders typed event payloads one at a time, as they are recorded.

    ``store`` lets it show the text of messages (events name them by hash) and decision
    points; ``episode_id`` is shown in the header (also settable later, before
    ``episode.start``). ``decisions``: the episode's, when already read (otherwise they are
    read when an adopted action shows up).
    """

    def __init__(
        self,
        console: Console,
        *,
        verbose: bool = False,
        store: StoreBackend | None = None,
        episode_id: str | None = None,
        decisions: Sequence[Decision] | None = None,
        batched: bool = False,
    ) -> None:
        self.console = console
        self.out = BatchedOutput(console, hold=batched)
        self.verbose = verbose
        self.store = store
        self.episode_id = episode_id
        self._open_channel: str | None = None
        self._decisions: list[Decision] | None = None if decisions is None else list(decisions)
        self._unfinished = {d.seq: d for d in self._decisions or [] if d.adopted_seq is None}
        self._kept_raw: dict[str, int] = {}  # why -> how many, of a run of records kept raw

    def flush(self) -> None:
        """Print what is held back: a run of records an import kept raw, as one line, and a
        batch of output (call it when no more events come, or before waiting for more)."""
        self._flush_kept_raw()
        self.out.flush()

    def _print(self, *objects: Any, **kwargs: Any) -> None:
        """Print through the console itself (after what is batched)."""
        self.out.flush()
        self.console.print(*objects, **kwargs)

    def _rule(self, title: str | Text) -> None:
        self.out.rule(title)

    def _flush_kept_raw(self) -> None:
        held, self._kept_raw = self._kept_raw, {}
        total = sum(held.values())
        if total == 1:
            [(why, _)] = held.items()
            self.out.line(("error", "bold red"), f" in import: unmapped: {why}")
        elif total:
            whys = sorted(held.items(), key=lambda kv: -kv[1])
            said = "; ".join(f"{n:,} × {why}" for why, n in whys[:3])
            more = f"; {plural(len(whys) - 3, 'other reason')}" if len(whys) > 3 else ""
            self.out.line(
                ("kept raw", "bold red"), f" by the import: {total:,} records ({said}{more})"
            )

    def bind_episode(self, episode_id: str) -> None:
        """Told by the recorder which episode it records (before its first event)."""
        self.episode_id = episode_id

    def _close_stream(self) -> None:
        if self._open_channel is not None:
            self.out.newline()
            self._open_channel = None

    def row(self, row: EventRow) -> None:
        """Render a stored event: one of the kinds a transcript is mostly made of from its
        payload's JSON fields (:mod:`~agentrunner.cli.event_fields`), any other typed."""
        p = read_fields(row.kind, row.payload_json)
        if p is None:
            self(row.seq, row.turn, row.typed())
            return
        if self._kept_raw:
            self._flush_kept_raw()
        kind = row.kind
        if kind == "model.chunk":
            self._model_chunk(p["channel"], p["text"])
        elif kind == "model.request":
            self._model_request(
                row.turn, p["provider"], p["model"], p.get("purpose", "turn"), p.get("covers")
            )
        elif kind == "model.response":
            self._model_response(p.get("refusal"), p.get("stop_reason"))
        elif kind == "usage":
            self._usage(
                p.get("input_tokens", 0),
                p.get("output_tokens", 0),
                p.get("reasoning_tokens", 0),
                p.get("cost_usd"),
            )
        elif kind == "tool.call":
            self._tool_call(p["name"], p["arguments"], p.get("parsed"))
        else:
            self._tool_result(
                p["observation"], p.get("error"), p.get("reward"), p.get("done", False)
            )
        if row.seq in self._unfinished:  # a decision point the main line has not finished
            self._decision(self._unfinished.pop(row.seq))

    def __call__(self, seq: int, turn: int, payload: BaseModel) -> None:
        if isinstance(payload, ev.Error) and (payload.where, payload.type) == KEPT_RAW:
            self._close_stream()
            self._kept_raw[payload.message] = self._kept_raw.get(payload.message, 0) + 1
            return  # one line for the run of them (flush)
        if self._kept_raw:
            self._flush_kept_raw()
        match payload:
            case ev.EpisodeStart():
                self._episode_start(turn, payload)
            case ev.MessageEvent(reason="adopted"):
                self._adopted(seq, turn, payload)
            case ev.MessageEvent():
                self._message(turn, payload)
            case ev.ModelRequest():
                p = payload
                self._model_request(turn, p.provider, p.model, p.purpose, p.covers)
            case ev.ModelChunk():
                self._model_chunk(payload.channel, payload.text)
            case ev.ModelResponse():
                self._model_response(payload.refusal, payload.stop_reason)
            case ev.Usage():
                self._usage(
                    payload.input_tokens,
                    payload.output_tokens,
                    payload.reasoning_tokens,
                    payload.cost_usd,
                )
            case ev.ToolCall():
                self._tool_call(payload.name, payload.arguments, payload.parsed)
            case ev.ToolResult():
                self._tool_result(payload.observation, payload.error, payload.reward, payload.done)
            case ev.Cancel():
                self._cancel(turn, payload)
            case ev.Error():
                self._error(turn, payload)
            case ev.Resume():
                self._resume(turn, payload)
            case ev.EpisodeEnd():
                self._episode_end(turn, payload)
        if seq in self._unfinished:  # a decision point the main line has not finished
            self._decision(self._unfinished.pop(seq))

    def _lines(self, text: str, style: str, limit: int) -> None:
        lines = text.split("\n")  # only newlines: a \r is shown (^M), never obeyed
        if len(lines) > 1 and not lines[-1]:
            lines.pop()
        shown = lines if self.verbose else lines[:limit]
        for text_line in shown:
            self.out.line(("  │", style), " ", text_line, soft_wrap=True)
        if len(shown) < len(lines):
            more = f"… {len(lines) - len(shown)} more lines (-v)"
            self.out.line("  ", ("│", style), " ", (more, "dim"))

    def _episode_start(self, turn: int, p: ev.EpisodeStart) -> None:
        model = p.model_spec.spec
        episode: list[Part] = [(self.episode_id, "bold"), " · "] if self.episode_id else []
        self.out.line(
            ("episode", "bold"),
            " ",
            *episode,
            "task ",
            (p.task_id, "cyan"),
            f" · seed {p.seed} · model ",
            (str(model), "cyan"),
            f" · env {p.env_spec.kind or '?'}",
        )

    def _message(self, turn: int, p: ev.MessageEvent) -> None:
        self._close_stream()
        label = MESSAGE_LABELS.get(p.reason, p.reason)
        message = self._read(p.message_hash)
        if message is None:
            self.out.line((f"» {label}", "magenta"), " ", (f"({p.role})", "dim"))
            return
        if p.reason == "system" and not self.verbose:
            size = plural(len(message.content.splitlines()), "line")
            self.out.line((f"» {label}", "magenta"), " ", (f"({size}; -v shows it)", "dim"))
            return
        if p.reason == "continue" or message.tool_calls:
            text = describe_message(message) if message.tool_calls else message.content
            self.out.line((f"» {label}:", "magenta"), " ", (text, "dim"))
            return
        self.out.line((f"» {label}", "magenta"), " ", (f"({p.role})", "dim"))
        self._lines(message.content, "magenta", MAX_PROMPT_LINES)

    def _adopted(self, seq: int, turn: int, p: ev.MessageEvent) -> None:
        """A decision point's turn: its candidates, then the adopted action as the turn's
        assistant message (its tool calls follow as the turn's ``tool.call`` events)."""
        self._close_stream()
        decision = self._decision_at(seq)
        if decision is None:
            self._rule(line((f"turn {turn}", "bold"), " · adopted action"))
        else:
            self._decision(decision)
        message = self._read(p.message_hash)
        if message is None:
            return
        if message.reasoning:
            self.out.line((f"thinking: {message.reasoning}", "dim italic"), soft_wrap=True)
        if message.content:
            self.out.line(message.content, soft_wrap=True)

    def _decision_at(self, seq: int) -> Decision | None:
        """The decision whose adopted message is at ``seq`` (made on this episode or, for a
        fork, on the ancestor the message is inherited from)."""
        if self.store is None or self.episode_id is None:
            return None
        for fresh in (False, True):  # a live main line: read again for a new decision
            if fresh or self._decisions is None:
                self._decisions = [
                    d
                    for ep in (self.episode_id, *self.store.ancestors(self.episode_id))
                    for d in read_decisions(self.store, ep)
                ]
            for decision in self._decisions:
                if decision.adopted_seq == seq:
                    return decision
        return None

    def _decision(self, d: Decision) -> None:
        """The decision point's rule and its candidates: value ± spread over n, the action
        in one line, duplicates, the adopted one, and the ids of its forks (as ``ls``
        prints them, for ``show``)."""
        done = d.adopted_seq is not None
        where = f"[bold]turn {d.turn}[/] · decision point at seq {d.seq}"
        chosen = (
            f"adopted candidate {d.adopted} ({d.adopt})"
            if done and d.candidates
            else "[yellow]not finished[/] (`agentrunner resume` finishes it)"
        )
        self._rule(f"{where} · {chosen}")
        ids = unique_prefixes(self.store.episode_ids(), minimum=8) if self.store else {}
        for c in d.candidates:
            adopted = done and c.index == d.adopted
            mark = "[bold green]★[/]" if adopted else " "
            same = f" [dim](= candidate {c.duplicate_of})[/]" if c.duplicate_of is not None else ""
            tail = " [bold green]adopted[/]" if adopted else ""
            self._print(
                f"{mark} [bold]candidate {c.index}[/] · value {c.mean:.3f} ± {c.spread:.3f}"
                f" (n {len(c.rewards)}){same}{tail}",
                highlight=False,
            )
            self.out.line("    action: ", describe_message(c.message, limit=100))
            forks = " ".join(ids.get(e, e) for e in c.continuations) or "-"
            self._print(
                f"    [dim]continuations {forks} · proposal {ids.get(c.proposal, c.proposal)}[/]",
                highlight=False,
            )
        if d.pending:
            waiting = " ".join(ids.get(e, e) for e in d.pending)
            self._print(
                f"  [yellow]{plural(len(d.pending), 'fork')} not finished:[/] [dim]{waiting}[/]",
                highlight=False,
            )
        if done:
            self.out.line(("» adopted action", "magenta"), " ", (f"(candidate {d.adopted})", "dim"))

    def _read(self, message_hash: str) -> Message | None:
        if self.store is None:
            return None
        try:
            return self.store.message(message_hash)
        except StoreError:
            return None

    def _model_request(
        self, turn: int, provider: str, model: str, purpose: str, covers: int | None
    ) -> None:
        """A call's rule: the turn it answers, or a compaction (a summary of the history's
        first ``covers`` messages, recorded at ``turn``: its answer is not the turn's)."""
        self._close_stream()
        if purpose == ev.COMPACTION:
            summary = "" if covers is None else f" of {plural(covers, 'message')}"
            title = line(("compaction", "bold"), f"{summary} at turn {turn} · {provider}:{model}")
        else:
            title = line((f"turn {turn}", "bold"), f" · {provider}:{model}")
        self._rule(title)

    def _model_chunk(self, channel: str, text: str) -> None:
        if channel == "tool_args":
            return
        if self._open_channel != channel:
            self._close_stream()
            self._open_channel = channel
            if channel == "reasoning":
                self.out.line(("thinking:", "dim italic"), " ", soft_wrap=True, end="")
        self.out.line((text, CHANNEL_STYLE.get(channel, "")), soft_wrap=True, end="")

    def _model_response(self, refusal: str | None, stop_reason: str | None) -> None:
        self._close_stream()
        if refusal:
            self.out.line(("refusal:", "bold red"), " ", refusal)
        if stop_reason in (None, ev.StopReason.INCOMPLETE):
            self.out.line(("stream ended without a finish reason", "yellow"))

    def _usage(
        self,
        input_tokens: int | None,
        output: int | None,
        reasoning: int | None,
        cost: float | None,
    ) -> None:
        spent = "?" if cost is None else f"${cost:.4f}"
        self.out.line(
            (
                f"  usage: {count(input_tokens)} in · {count(output)} out"
                f" · {count(reasoning)} reasoning · {spent}",
                "dim",
            )
        )

    def _tool_call(self, name: str, arguments: str, parsed: dict[str, Any] | None) -> None:
        self._close_stream()
        args = _short_args(arguments, parsed)
        self.out.line((f"▶ {name}", "bold cyan"), "(", (args, "cyan"), ")")

    def _tool_result(
        self, observation: str, error: str | None, reward: float | None, done: bool
    ) -> None:
        self._lines(observation, "red" if error else "green", MAX_OBS_LINES)
        extra = []
        if reward is not None:
            extra.append(f"reward {reward:g}")
        if done:
            extra.append("done")
        if extra:
            self.out.line("  ", (" · ".join(extra), "bold green"))

    def _cancel(self, turn: int, p: ev.Cancel) -> None:
        self._close_stream()
        self.out.line(("cancelled", "bold yellow"), f" during {p.where}: {p.reason}")

    def _error(self, turn: int, p: ev.Error) -> None:
        self._close_stream()
        # A retryable error is retried (or left for `resume`); one the adapter stopped
        # retrying says so in its message, and is not called retryable as well.
        retry = " (retryable)" if p.retryable and GAVE_UP not in p.message else ""
        self.out.line(("error", "bold red"), f" in {p.where}: {p.type}: {p.message}{retry}")

    def _resume(self, turn: int, p: ev.Resume) -> None:
        self._close_stream()
        what = "fork" if p.reason == "fork" else "episode"
        episode: list[Part] = [f" {what} ", (self.episode_id, "bold")] if self.episode_id else []
        self.out.line(
            ("resumed", "bold magenta"), *episode, f" from seq {p.from_seq} ({p.env_restore})"
        )

    def _episode_end(self, turn: int, p: ev.EpisodeEnd) -> None:
        self._close_stream()
        self.out.line(
            ("end", "bold"),
            f": {p.stop_reason} after {plural(p.turns, 'turn')} · reward ",
            (reward_text(p.total_reward), "bold"),
        )
