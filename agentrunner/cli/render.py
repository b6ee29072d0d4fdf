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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from agentrunner.cli.batched_output import BatchedOutput
from agentrunner.cli.common import reward_text
from agentrunner.cli.event_fields import read_fields
from agentrunner.cli.message_fields import PlainMessage, read_message
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
from agentrunner.values.spec_text import env_kind, model_text
from agentrunner.values.statuses import COMPACTION, StopReason

if TYPE_CHECKING:  # pydantic and the models: loaded only where a row is read typed
    from pydantic import BaseModel

    from agentrunner.lifecycle.decision_log import Decision
    from agentrunner.store import EventRow
    from agentrunner.store.protocol import StoreBackend
    from agentrunner.values.types import Message

Fields = dict[str, Any]
"""An event's payload as a JSON object (:func:`~agentrunner.cli.event_fields.read_fields`)."""

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
    """Renders event payloads one at a time, as they are recorded: a stored row from its
    JSON fields (:meth:`row`), a typed payload (calling it) from the same fields.

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
        self._by_kind: dict[str, Callable[[int, int, Fields], None]] = {
            "model.chunk": self._model_chunk,
            "usage": self._usage,
            "model.request": self._model_request,
            "model.response": self._model_response,
            "tool.call": self._tool_call,
            "tool.result": self._tool_result,
            "message": self._message,
            "episode.start": self._episode_start,
            "episode.end": self._episode_end,
            "error": self._error,
            "cancel": self._cancel,
            "resume": self._resume,
        }

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
        """Render a stored event from its payload's JSON fields
        (:mod:`~agentrunner.cli.event_fields`); a row whose fields the model would convert
        or refuse is read typed."""
        p = read_fields(row.kind, row.payload_json)
        if p is None:
            self(row.seq, row.turn, row.typed())
        else:
            self._render(row.seq, row.turn, row.kind, p)

    def __call__(self, seq: int, turn: int, payload: BaseModel) -> None:
        fields = payload.model_dump()
        self._render(seq, turn, fields["kind"], fields)

    def _render(self, seq: int, turn: int, kind: str, p: Fields) -> None:
        if kind == "error" and (p["where"], p["type"]) == KEPT_RAW:
            self._close_stream()
            self._kept_raw[p["message"]] = self._kept_raw.get(p["message"], 0) + 1
            return  # one line for the run of them (flush)
        if self._kept_raw:
            self._flush_kept_raw()
        self._by_kind[kind](seq, turn, p)
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

    def _episode_start(self, seq: int, turn: int, p: Fields) -> None:
        episode: list[Part] = [(self.episode_id, "bold"), " · "] if self.episode_id else []
        self.out.line(
            ("episode", "bold"),
            " ",
            *episode,
            "task ",
            (p["task_id"], "cyan"),
            f" · seed {p['seed']} · model ",
            (model_text(p["model"]), "cyan"),
            f" · env {env_kind(p['env']) or '?'}",
        )

    def _message(self, seq: int, turn: int, p: Fields) -> None:
        reason, role = p.get("reason", "prompt"), p["role"]
        if reason == "adopted":
            self._adopted(seq, turn, p["message_hash"])
            return
        self._close_stream()
        label = MESSAGE_LABELS.get(reason, reason)
        message = self._read(p["message_hash"])
        if message is None:
            self.out.line((f"» {label}", "magenta"), " ", (f"({role})", "dim"))
            return
        if reason == "system" and not self.verbose:
            size = plural(len(message.content.splitlines()), "line")
            self.out.line((f"» {label}", "magenta"), " ", (f"({size}; -v shows it)", "dim"))
            return
        if reason == "continue" or message.tool_calls:
            text = message.content
            if not isinstance(message, PlainMessage) and message.tool_calls:
                text = describe_message(message)
            self.out.line((f"» {label}:", "magenta"), " ", (text, "dim"))
            return
        self.out.line((f"» {label}", "magenta"), " ", (f"({role})", "dim"))
        self._lines(message.content, "magenta", MAX_PROMPT_LINES)

    def _adopted(self, seq: int, turn: int, message_hash: str) -> None:
        """A decision point's turn: its candidates, then the adopted action as the turn's
        assistant message (its tool calls follow as the turn's ``tool.call`` events)."""
        self._close_stream()
        decision = self._decision_at(seq)
        if decision is None:
            self._rule(line((f"turn {turn}", "bold"), " · adopted action"))
        else:
            self._decision(decision)
        message = self._read(message_hash)
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
        from agentrunner.lifecycle.decision_log import read_decisions

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

    def _read(self, message_hash: str) -> Message | PlainMessage | None:
        if self.store is None:
            return None
        try:
            return read_message(self.store, message_hash)
        except StoreError:
            return None

    def _model_request(self, seq: int, turn: int, p: Fields) -> None:
        """A call's rule: the turn it answers, or a compaction (a summary of the history's
        first ``covers`` messages, recorded at ``turn``: its answer is not the turn's)."""
        self._close_stream()
        provider, model, covers = p["provider"], p["model"], p.get("covers")
        if p.get("purpose", "turn") == COMPACTION:
            summary = "" if covers is None else f" of {plural(covers, 'message')}"
            title = line(("compaction", "bold"), f"{summary} at turn {turn} · {provider}:{model}")
        else:
            title = line((f"turn {turn}", "bold"), f" · {provider}:{model}")
        self._rule(title)

    def _model_chunk(self, seq: int, turn: int, p: Fields) -> None:
        channel = p["channel"]
        if channel == "tool_args":
            return
        if self._open_channel != channel:
            self._close_stream()
            self._open_channel = channel
            if channel == "reasoning":
                self.out.line(("thinking:", "dim italic"), " ", soft_wrap=True, end="")
        self.out.line((p["text"], CHANNEL_STYLE.get(channel, "")), soft_wrap=True, end="")

    def _model_response(self, seq: int, turn: int, p: Fields) -> None:
        self._close_stream()
        refusal = p.get("refusal")
        if refusal:
            self.out.line(("refusal:", "bold red"), " ", refusal)
        if p.get("stop_reason") in (None, StopReason.INCOMPLETE):
            self.out.line(("stream ended without a finish reason", "yellow"))

    def _usage(self, seq: int, turn: int, p: Fields) -> None:
        cost = p.get("cost_usd")
        spent = "?" if cost is None else f"${cost:.4f}"
        tokens = [count(p.get(f"{of}_tokens", 0)) for of in ("input", "output", "reasoning")]
        self.out.line(
            (
                f"  usage: {tokens[0]} in · {tokens[1]} out · {tokens[2]} reasoning · {spent}",
                "dim",
            )
        )

    def _tool_call(self, seq: int, turn: int, p: Fields) -> None:
        self._close_stream()
        args = _short_args(p["arguments"], p.get("parsed"))
        self.out.line((f"▶ {p['name']}", "bold cyan"), "(", (args, "cyan"), ")")

    def _tool_result(self, seq: int, turn: int, p: Fields) -> None:
        self._lines(p["observation"], "red" if p.get("error") else "green", MAX_OBS_LINES)
        extra = []
        reward = p.get("reward")
        if reward is not None:
            extra.append(f"reward {reward:g}")
        if p.get("done", False):
            extra.append("done")
        if extra:
            self.out.line("  ", (" · ".join(extra), "bold green"))

    def _cancel(self, seq: int, turn: int, p: Fields) -> None:
        self._close_stream()
        self.out.line(("cancelled", "bold yellow"), f" during {p['where']}: {p['reason']}")

    def _error(self, seq: int, turn: int, p: Fields) -> None:
        self._close_stream()
        # A retryable error is retried (or left for `resume`); one the adapter stopped
        # retrying says so in its message, and is not called retryable as well.
        message = p["message"]
        retry = " (retryable)" if p.get("retryable", False) and GAVE_UP not in message else ""
        self.out.line(("error", "bold red"), f" in {p['where']}: {p['type']}: {message}{retry}")

    def _resume(self, seq: int, turn: int, p: Fields) -> None:
        self._close_stream()
        what = "fork" if p.get("reason", "resume") == "fork" else "episode"
        episode: list[Part] = [f" {what} ", (self.episode_id, "bold")] if self.episode_id else []
        self.out.line(
            ("resumed", "bold magenta"),
            *episode,
            f" from seq {p['from_seq']} ({p['env_restore']})",
        )

    def _episode_end(self, seq: int, turn: int, p: Fields) -> None:
        self._close_stream()
        self.out.line(
            ("end", "bold"),
            f": {p['stop_reason']} after {plural(p['turns'], 'turn')} · reward ",
            (reward_text(p["total_reward"]), "bold"),
        )
