"""The context budget and the context policies: what of an episode's history each request sends.

Before every model request the runner estimates how many input tokens it will send: the
previous response's reported input tokens plus the characters added since, divided by a
characters-per-token ratio calibrated on this episode's reported usage (no tokenizer). A
request whose estimate passes the model's context window is never sent.

Policies (``--context``):

- ``none``: the whole history, every turn (an over-limit request stops the episode with
  ``context_exhausted``).
- ``mask[:K]``: tool outputs older than the last K turns are replaced by a short placeholder
  naming the tool, the output's size and the seq of the ``tool.result`` that holds it. The
  masked part advances in blocks of K turns, so between two advances every request extends the
  one before it (the provider's prompt cache keeps its prefix).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator

from agentrunner.errors import UsageError
from agentrunner.events import ModelRequest
from agentrunner.model import Model
from agentrunner.recorder import Recorder
from agentrunner.store import TraceStore
from agentrunner.types import AgentUsage, Message

NONE = "none"
MASK = "mask"
DEFAULT_MASK_KEEP = 10
DEFAULT_CHARS_PER_TOKEN = 4.0
POLICY_HELP = (
    "what each request sends of the history: none (all of it; an over-limit request stops "
    f"the episode) or mask[:K] (tool outputs older than the last K turns, default "
    f"{DEFAULT_MASK_KEEP}, become a placeholder naming the event that holds them)"
)


@dataclass(frozen=True)
class ContextPolicy:
    """A parsed ``--context`` value: the policy's name and, for ``mask``, how many turns'
    tool outputs it keeps."""

    name: str
    keep: int = 0

    @classmethod
    def parse(cls, text: str) -> ContextPolicy:
        """``none``, ``mask`` or ``mask:K``; anything else is a ``UsageError``."""
        name, _, value = text.strip().partition(":")
        if name == NONE and not value:
            return cls(NONE)
        if name == MASK:
            if not value:
                return cls(MASK, DEFAULT_MASK_KEEP)
            if value.isdigit() and int(value) >= 1:
                return cls(MASK, int(value))
        raise UsageError(
            f"unknown context policy {text!r}: give none, mask or mask:K (K >= 1 turns)",
            param="context",
        )

    def __str__(self) -> str:
        return self.name if self.name == NONE else f"{self.name}:{self.keep}"


def _policy_text(value: str) -> str:
    try:
        return str(ContextPolicy.parse(value))
    except UsageError as exc:
        raise ValueError(str(exc)) from None


PolicyText = Annotated[str, AfterValidator(_policy_text)]
"""A context policy as the runner's settings record it (checked, normalised: ``mask:10``)."""


@dataclass(frozen=True)
class ToolOrigin:
    """Where a tool message of the history was recorded: its turn and its event's seq."""

    turn: int
    seq: int


def context_window(provider: str, model: str) -> int | None:
    """The model's context window from genai-prices' bundled model table (the one pricing
    reads), or None when the table does not know the model."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    for provider_id in (provider, None):
        try:
            _, info = snapshot.find_provider_model(model, None, provider_id, None)
        except (LookupError, ValueError):
            continue
        return info.context_window
    return None


def message_chars(message: Message) -> int:
    """The characters a message puts in a request (what the estimate counts)."""
    calls = sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return len(message.content) + len(message.reasoning or "") + calls


class Budget:
    """Estimates a request's input tokens from the last reported usage and the characters
    added since, at a characters-per-token ratio calibrated on this episode's reports."""

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.reported_tokens = 0
        self.reported_chars = 0
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN

    def estimate(self, messages: list[Message]) -> int:
        chars = sum(message_chars(m) for m in messages)
        added = (chars - self.reported_chars) / self.chars_per_token
        return max(0, round(self.reported_tokens + added))

    def calibrate(self, messages: list[Message], usage: AgentUsage | None) -> None:
        """Take a response's reported input tokens for the request of ``messages``."""
        tokens = usage.input_tokens if usage is not None else None
        if not tokens:
            return
        chars = sum(message_chars(m) for m in messages)
        self.reported_tokens, self.reported_chars = tokens, chars
        self.chars_per_token = max(chars / tokens, 0.5)


def mask_cutoff(turn: int, keep: int) -> int:
    """The last turn whose tool outputs ``mask:keep`` hides at request ``turn`` (0: none).
    It moves every ``keep`` turns and always leaves the last ``keep`` turns whole."""
    return max(0, (turn - 1 - keep) // keep * keep)


def placeholder(message: Message, origin: ToolOrigin) -> str:
    return (
        f"[output of {message.name or 'a tool'} masked to save context: "
        f"{len(message.content):,} characters, kept in event seq {origin.seq}]"
    )


def masked(
    messages: list[Message], origins: dict[int, ToolOrigin], turn: int, keep: int
) -> tuple[list[Message], int]:
    """``messages`` as ``mask:keep`` sends them at request ``turn``, and how many tool outputs
    it masked (outputs shorter than their placeholder are kept)."""
    cutoff = mask_cutoff(turn, keep)
    out: list[Message] = []
    count = 0
    for index, message in enumerate(messages):
        origin = origins.get(index)
        if message.role == "tool" and origin is not None and origin.turn <= cutoff:
            text = placeholder(message, origin)
            if len(text) < len(message.content):
                message = message.model_copy(update={"content": text})
                count += 1
        out.append(message)
    return out, count


@dataclass(frozen=True)
class Prepared:
    """A request as the policy would send it: its messages and estimated input tokens."""

    messages: list[Message]
    estimate: int
    masked: int


def prepare(
    policy: ContextPolicy,
    messages: list[Message],
    origins: dict[int, ToolOrigin],
    turn: int,
    budget: Budget,
) -> Prepared:
    """What request ``turn`` sends under ``policy``; the caller checks it fits the budget."""
    sent, count = (
        masked(messages, origins, turn, policy.keep) if policy.name == MASK else (messages, 0)
    )
    return Prepared(sent, budget.estimate(sent), count)


class EpisodeContext:
    """One episode's policy, budget and the origins of its tool messages, as the runner
    prepares each request."""

    def __init__(self, policy: ContextPolicy, window: int | None) -> None:
        self.policy = policy
        self.budget = Budget(window)
        self.origins: dict[int, ToolOrigin] = {}
        """Index in the history -> where that tool message was recorded."""
        self._results: defaultdict[str, deque[ToolOrigin]] = defaultdict(deque)
        self._read_seq = 0  # the log's tool results are read up to this seq
        self._scanned = 0  # the history's messages are matched up to this index
        self._chain: tuple[list[Message], str] | None = None

    @classmethod
    def configured(cls, policy: str, window: int | None, model: Model) -> EpisodeContext:
        """The context of an episode run with these settings (``window`` None: the model
        table's window for ``model``)."""
        window = window or context_window(model.provider, model.model)
        return cls(ContextPolicy.parse(policy), window)

    def over_budget(self, prepared: Prepared, episode_id: str, turn: int) -> str | None:
        """Why ``prepared`` must not be sent (it passes the window), or None when it fits
        (``turn``: the episode's last complete turn, where a fork can take it on)."""
        window = self.budget.window
        if window is None or prepared.estimate <= window:
            return None
        return (
            f"the next request (about {prepared.estimate:,} input tokens) would pass the "
            f"model's context window ({window:,} tokens) under context policy {self.policy}: it"
            " was not sent; fork the episode with a policy that keeps less (agentrunner fork "
            f"{episode_id} --turn {max(turn, 1)} --context mask:10 --run)"
        )

    def record_request(
        self,
        rec: Recorder,
        call_id: str,
        prepared: Prepared,
        tools_hash: str,
        model: Model,
        params: dict[str, Any],
    ) -> None:
        """Record the request as it is sent: the chain of the messages the policy sends
        (masked or not), with the budget's estimate."""
        assert rec.tip is not None, "a model request needs at least one message"
        rec.chunk_index = 0
        rec.record(
            ModelRequest(
                call_id=call_id,
                tip_hash=self.sent_tip(rec.store, prepared, rec.tip),
                tools_hash=tools_hash,
                params=params,
                provider=model.provider,
                model=model.model,
                input_tokens_estimate=prepared.estimate,
                context_window=self.budget.window,
                masked=prepared.masked,
            )
        )

    def prepare(self, rec: Recorder, turn: int) -> Prepared:
        """What request ``turn`` sends of ``rec``'s history (the caller checks the budget)."""
        if self.policy.name == MASK:
            self._find_origins(rec)
        return prepare(self.policy, rec.messages, self.origins, turn, self.budget)

    def _find_origins(self, rec: Recorder) -> None:
        """Match the history's new tool messages, in order, with their ``tool.result``
        events in the log (inherited ones too: a fork's, a resumed run's)."""
        while page := rec.store.events(
            rec.episode_id, after_seq=self._read_seq, kinds=["tool.result"]
        ):
            for row in page:
                self._results[str(row.payload.get("call_id"))].append(ToolOrigin(row.turn, row.seq))
            self._read_seq = page[-1].seq
        for index in range(self._scanned, len(rec.messages)):
            message = rec.messages[index]
            found = self._results.get(message.tool_call_id or "")
            if message.role == "tool" and found:
                self.origins[index] = found.popleft()
        self._scanned = len(rec.messages)

    def sent_tip(self, store: TraceStore, prepared: Prepared, tip: str) -> str:
        """The chain tip of the messages a request sends: the history's own ``tip`` when
        nothing is masked, else a chain of the masked messages (extending the last one while
        the masking has not advanced)."""
        if not prepared.masked:
            return tip
        sent = prepared.messages
        start, sent_tip = 0, None
        if self._chain is not None:
            previous, previous_tip = self._chain
            if sent[: len(previous)] == previous:
                start, sent_tip = len(previous), previous_tip
        for message in sent[start:]:
            sent_tip = store.put_message(sent_tip, message)
        assert sent_tip is not None, "a model request needs at least one message"
        self._chain = (list(sent), sent_tip)
        return sent_tip
