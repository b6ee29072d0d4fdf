"""Context policies: what of an episode's history each request sends.

A policy is any object with a ``name``, its ``settings()`` and ``select(view)`` (the
:class:`ContextPolicy` protocol): given the whole history as recorded, it returns the
messages the next request sends. The built-in ones (``--context``):

- ``none``: the whole history, every turn.
- ``mask[:K]``: tool outputs older than the last K turns become a short placeholder naming
  the tool, the output's size and the seq of the ``tool.result`` that holds it. The masked
  part advances in blocks of K turns, so between two advances every request extends the one
  before it (the provider's prompt cache keeps its prefix).
- ``summarize[:MODEL]``: past a share of the window (80%), one compaction call (``MODEL``,
  or the episode's model) summarizes the history but its last turns; requests then send the
  system prompt, the task, the summary and the turns since. When that still does not fit,
  the kept turns' older tool outputs are masked; when even that does not fit, the episode
  stops (one compaction attempt per request: never a loop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import PlainSerializer, PlainValidator

from agentrunner.runtime.context.budget import Budget
from agentrunner.values.errors import UsageError
from agentrunner.values.types import Message

NONE, MASK, SUMMARIZE = "none", "mask", "summarize"
DEFAULT_MASK_KEEP = 10
DEFAULT_SUMMARY_KEEP = 4
DEFAULT_THRESHOLD = 0.8
POLICY_HELP = (  # argparse help: a percent sign is written %%
    "what each request sends of the history: none (all of it; an over-limit request stops "
    f"the episode), mask[:K] (tool outputs older than the last K turns, default "
    f"{DEFAULT_MASK_KEEP}, become a placeholder naming the event that holds them) or "
    f"summarize[:MODEL] (at {DEFAULT_THRESHOLD * 100:.0f}%% of the window one recorded call to "
    "MODEL, default the episode's, summarizes all but the last turns)"
)
SUMMARY_PROMPT = (
    "The conversation above is getting too long for the context window. Summarize it for "
    "yourself: the task, what you did and found, what worked and what did not, and what is "
    "left to do. Keep names, paths, commands and numbers exactly. Answer with the summary only."
)


@dataclass(frozen=True)
class ToolOrigin:
    """Where a tool message of the history was recorded: its turn and its event's seq."""

    turn: int
    seq: int


@dataclass(frozen=True)
class Compaction:
    """A recorded compaction: its summary stands for the history's first ``covers``
    messages (after the system prompt and the task); made at request ``turn``; ``seq``: the
    ``model.response`` that holds it."""

    summary: str
    covers: int
    turn: int
    seq: int

    @cached_property
    def message(self) -> Message:
        """The summary as requests send it: one object, so each request after the
        compaction is seen to begin with the last one (counted and stored only for what
        it adds)."""
        return Message(
            role="user",
            content=f"[summary of the episode before turn {self.turn}, kept in event seq "
            f"{self.seq}]\n{self.summary}",
        )


@dataclass
class HistoryView:
    """What a policy sees before request ``turn``: the whole history as recorded, the budget,
    the episode's last compaction, and ``compact(request, covers)``: make one recorded
    compaction call sending ``request`` (None when it cannot be sent)."""

    messages: list[Message]
    turn: int
    budget: Budget
    compaction: Compaction | None
    compact: Callable[[list[Message], int], Compaction | None]
    find_origins: Callable[[], dict[int, ToolOrigin]]
    mask_cache: MaskCache = field(default_factory=lambda: MaskCache())
    """The episode's masked view so far (``mask:K`` extends it until its cut moves)."""

    @cached_property
    def origins(self) -> dict[int, ToolOrigin]:
        """History index of each tool message -> where its ``tool.result`` was recorded."""
        return self.find_origins()


@dataclass(frozen=True)
class Sent:
    """The messages a request sends, and how many tool outputs the policy masked."""

    messages: list[Message]
    masked: int = 0


@runtime_checkable
class ContextPolicy(Protocol):
    """A context policy: recorded in ``episode.start`` by ``name`` and ``settings()``."""

    @property
    def name(self) -> str: ...

    def settings(self) -> dict[str, Any]: ...

    def select(self, view: HistoryView) -> Sent: ...


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
    messages: list[Message],
    origins: dict[int, ToolOrigin],
    turn: int,
    keep: int,
    offset: int = 0,
) -> tuple[list[Message], int]:
    """``messages`` (the history's from index ``offset`` on) as ``mask:keep`` sends them at
    request ``turn``, and how many tool outputs it masked (outputs shorter than their
    placeholder are kept)."""
    cutoff = mask_cutoff(turn, keep)
    out: list[Message] = []
    count = 0
    for index, message in enumerate(messages, start=offset):
        origin = origins.get(index)
        if message.role == "tool" and origin is not None and origin.turn <= cutoff:
            text = placeholder(message, origin)
            if len(text) < len(message.content):
                message = message.model_copy(update={"content": text})
                count += 1
        out.append(message)
    return out, count


class MaskCache:
    """The history as ``mask:K`` last sent it, kept between requests. A history only grows
    and the cut only moves forward, so each request masks again only from the first tool
    output the last one left whole (the last K to 2K turns), not the whole history."""

    def __init__(self) -> None:
        self._keep, self._cutoff = 0, 0  # the kept view's settings
        self._sent: list[Message] = []
        self._last: Message | None = None  # the history's message the kept view ends with
        self._open = 0  # the first index a later request may still change
        self._count = 0  # how many of the kept view's messages are masked

    def masked(
        self, messages: list[Message], origins: dict[int, ToolOrigin], turn: int, keep: int
    ) -> tuple[list[Message], int]:
        """What :func:`masked` returns, from the kept view and the messages added since."""
        cutoff, done = mask_cutoff(turn, keep), len(self._sent)
        extends = done <= len(messages) and (done == 0 or messages[done - 1] is self._last)
        if keep != self._keep or cutoff < self._cutoff or not extends:
            self._sent, self._open, self._count, done = [], 0, 0, 0
        redone = zip(self._sent[self._open :], messages[self._open : done], strict=True)
        self._count -= sum(sent is not message for sent, message in redone)
        del self._sent[self._open :]
        added, count = masked(messages[self._open :], origins, turn, keep, offset=self._open)
        self._sent += added
        self._count += count
        self._keep, self._cutoff = keep, cutoff
        self._last = messages[-1] if messages else None
        while self._open < len(messages) and not self._open_at(messages, origins):
            self._open += 1
        return list(self._sent), self._count

    def _open_at(self, messages: list[Message], origins: dict[int, ToolOrigin]) -> bool:
        """Whether a later cut may still change the message at ``_open`` (a tool output the
        present cut leaves whole)."""
        origin = origins.get(self._open)
        tool = messages[self._open].role == "tool"
        return tool and (origin is None or origin.turn > self._cutoff)


@dataclass(frozen=True)
class NoPolicy:
    """``none``: the whole history."""

    name: str = NONE

    def settings(self) -> dict[str, Any]:
        return {}

    def select(self, view: HistoryView) -> Sent:
        return Sent(view.messages)

    def __str__(self) -> str:
        return NONE


@dataclass(frozen=True)
class MaskPolicy:
    """``mask:K``: tool outputs older than the last ``keep`` turns, in blocks, masked."""

    keep: int = DEFAULT_MASK_KEEP
    name: str = MASK

    def settings(self) -> dict[str, Any]:
        return {"keep": self.keep}

    def select(self, view: HistoryView) -> Sent:
        sent, count = view.mask_cache.masked(view.messages, view.origins, view.turn, self.keep)
        return Sent(sent, count)

    def __str__(self) -> str:
        return f"{MASK}:{self.keep}"


def head_length(messages: list[Message]) -> int:
    """How many messages open the history: up to and with the first user message (the
    system prompt and the task), which every request sends."""
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    return min(first_user + 1, len(messages))


def with_summary(messages: list[Message], compaction: Compaction | None) -> list[Message]:
    """``messages`` with the part ``compaction`` stands for replaced by its summary."""
    if compaction is None:
        return messages
    head = head_length(messages)
    return [*messages[:head], compaction.message, *messages[compaction.covers :]]


@dataclass(frozen=True)
class SummarizePolicy:
    """``summarize[:MODEL]``: a recorded compaction call past ``threshold`` of the window."""

    model: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    keep: int = DEFAULT_SUMMARY_KEEP
    name: str = SUMMARIZE

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "threshold": self.threshold, "keep": self.keep}

    def select(self, view: HistoryView) -> Sent:
        history, budget, turn = view.messages, view.budget, view.turn
        compaction = view.compaction
        if budget.fits(with_summary(history, compaction), self.threshold):
            return Sent(with_summary(history, compaction))
        split = recent_start(history, self.keep)
        covered = compaction.covers if compaction is not None else head_length(history)
        if sum(m.role == "assistant" for m in history[covered:split]) >= self.keep:
            made = self._compact(view, history[:split], split)
            compaction = made or compaction
        sent = with_summary(history, compaction)
        if budget.fits(sent):
            return Sent(sent)
        lighter, count = masked(history, view.origins, turn, 1)
        return Sent(with_summary(lighter, compaction), count)

    def _compact(self, view: HistoryView, older: list[Message], split: int) -> Compaction | None:
        """One compaction call summarizing ``older`` (masked first if it would not fit)."""
        ask = Message(role="user", content=SUMMARY_PROMPT)
        request = [*with_summary(older, view.compaction), ask]
        if not view.budget.fits(request):
            lighter, _ = masked(older, view.origins, view.turn, 1)
            request = [*with_summary(lighter, view.compaction), ask]
            if not view.budget.fits(request):
                return None
        return view.compact(request, split)

    def __str__(self) -> str:
        return SUMMARIZE if self.model is None else f"{SUMMARIZE}:{self.model}"


def recent_start(messages: list[Message], keep: int) -> int:
    """The index where the last ``keep`` turns begin (each turn begins with the model's
    message), or the history's end when it has fewer; read from the end, so a long history
    costs no more than a short one."""
    found = 0
    for index in range(len(messages) - 1, -1, -1):
        found += messages[index].role == "assistant"
        if found == keep:
            return index
    return len(messages)


BuiltIn = NoPolicy | MaskPolicy | SummarizePolicy


def parse_policy(text: str) -> BuiltIn:
    """``none``, ``mask``, ``mask:K``, ``summarize`` or ``summarize:PROVIDER:MODEL``;
    anything else is a ``UsageError``."""
    name, _, value = text.strip().partition(":")
    if name == NONE and not value:
        return NoPolicy()
    if name == MASK:
        if not value:
            return MaskPolicy()
        if value.isdigit() and int(value) >= 1:
            return MaskPolicy(int(value))
    if name == SUMMARIZE and (not value or ":" in value.strip(":")):
        return SummarizePolicy(value or None)
    raise UsageError(
        f"unknown context policy {text!r}: give none, mask, mask:K (K >= 1 turns), summarize"
        " or summarize:PROVIDER:MODEL",
        param="context",
    )


def _policy(value: Any) -> ContextPolicy:
    if isinstance(value, str):
        try:
            return parse_policy(value)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    if isinstance(value, ContextPolicy):
        return value
    name = value.get("name") if isinstance(value, dict) else value
    raise ValueError(
        f"context policy {name!r} is a Python object (a ContextPolicy): pass it again, or "
        "give a built-in one (none, mask:K, summarize)"
    )


def _recorded(policy: ContextPolicy) -> str | dict[str, Any]:
    if isinstance(policy, BuiltIn):
        return str(policy)
    return {"name": policy.name, "settings": policy.settings()}


PolicySetting = Annotated[
    ContextPolicy, PlainValidator(_policy), PlainSerializer(_recorded, return_type=Any)
]
"""A context policy as the runner's settings hold it: a built-in one's text (``mask:10``) or
a :class:`ContextPolicy` object; recorded as the text, or a custom one's name and settings."""
