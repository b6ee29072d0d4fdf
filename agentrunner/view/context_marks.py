"""What a context policy did, read from the log for the page and the TUI: compactions and
masked tool outputs.

A compaction is a ``model.request`` whose ``purpose`` is ``compaction``
(:mod:`agentrunner.runtime.context.compaction`): its answer is the summary standing for the
history's first ``covers`` messages, and its own request holds the messages it summarized.
:func:`read_compaction` gathers what the log holds about one: the input tokens of the last
turn's request before it and of the first one after it (reported, else the budget's
estimate), the tool outputs that request masked, the summary, and the messages it replaced.

A ``mask`` placeholder (the tool output a request sent in place of the original) and a
summary message are recognised by :func:`placeholder_of` and :func:`summary_of`, so both
front ends can show them as what they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.runtime.context.policies import SUMMARY_PROMPT, head_length
from agentrunner.values.errors import StoreError
from agentrunner.values.events import COMPACTION, ModelRequest, ModelResponse, Usage
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from agentrunner.store import EventRow, Segment
    from agentrunner.store.protocol import StoreBackend

_PLACEHOLDER = re.compile(
    r"\[output of (?P<tool>.+?) masked to save context: (?P<chars>[\d,]+) characters, "
    r"kept in event seq (?P<seq>\d+)\]"
)
_SUMMARY = re.compile(
    r"\[summary of the episode before turn (?P<turn>\d+), kept in event seq (?P<seq>\d+)\]\n"
)
LOOK_AROUND = 64
"""Events of the request and usage kinds read on each side of a compaction."""


@dataclass(frozen=True)
class Placeholder:
    """A masked tool output: the tool, the original's size and the seq that holds it."""

    tool: str
    chars: int
    seq: int

    def describe(self) -> str:
        return f"masked {self.tool} output · {self.chars:,} characters · original at seq {self.seq}"


def placeholder_of(message: Message) -> Placeholder | None:
    """The placeholder a tool message is, or None when it is not one."""
    if message.role != "tool":
        return None
    found = _PLACEHOLDER.fullmatch(message.content)
    if found is None:
        return None
    chars = int(found["chars"].replace(",", ""))
    return Placeholder(found["tool"], chars, int(found["seq"]))


def summary_of(message: Message) -> tuple[int, str] | None:
    """(the seq holding it, the text) of a compaction's summary as a request sent it."""
    found = _SUMMARY.match(message.content) if message.role == "user" else None
    return None if found is None else (int(found["seq"]), message.content[found.end() :])


@dataclass(frozen=True)
class Tokens:
    """A request's input tokens: reported by the provider, else the budget's estimate."""

    count: int | None
    reported: bool
    turn: int

    def describe(self) -> str:
        if self.count is None:
            return f"? (turn {self.turn}'s request)"
        how = "" if self.reported else "~"
        return f"{how}{self.count:,} (turn {self.turn}'s request)"


@dataclass(frozen=True)
class CompactionMark:
    """One compaction as the log holds it (``seq``: its ``model.request``)."""

    seq: int
    turn: int
    call_id: str
    provider: str
    model: str
    covers: int | None
    summary: str | None
    """The summary, None while the call has not answered."""
    summarized: Tokens | None
    """The compaction call's own input (the part it summarized)."""
    before: Tokens | None
    after: Tokens | None
    masked_after: int
    """Tool outputs the request after it masked as well (summarize's fallback)."""
    replaced: list[Message]
    """The messages the summary replaced (the compaction request's, less the ones kept)."""

    def headline(self) -> str:
        covers = "" if self.covers is None else f" of {self.covers:,} messages"
        return f"compaction{covers} at turn {self.turn} · {self.provider}:{self.model}"

    def facts(self) -> list[tuple[str, str]]:
        """(name, value) lines: tokens, what was dropped and masked."""
        rows = [
            ("tokens before", self.before.describe() if self.before else "? (no earlier request)"),
            (
                "tokens after",
                self.after.describe() if self.after else "? (no request after it yet)",
            ),
        ]
        if self.summarized is not None and self.summarized.count is not None:
            how = "" if self.summarized.reported else "~"
            rows.append(("summarized", f"{how}{self.summarized.count:,} tokens in the call"))
        kept = "the system prompt and the task kept"
        rows.append(
            ("dropped", f"{len(self.replaced):,} message(s) replaced by the summary; {kept}")
        )
        if self.masked_after:
            rows.append(("masked", f"{self.masked_after:,} tool output(s) in the request after it"))
        return rows


def is_compaction(row: EventRow) -> bool:
    return row.kind == "model.request" and row.payload.get("purpose") == COMPACTION


def read_compaction(
    store: StoreBackend, episode_id: str, seq: int, segments: Sequence[Segment] | None = None
) -> CompactionMark:
    """The compaction whose ``model.request`` is at ``seq`` (a ``StoreError`` when there is
    none there)."""
    rows = store.events(episode_id, after_seq=seq - 1, limit=1, segments=segments)
    request = rows[0].typed() if rows and rows[0].seq == seq else None
    if not isinstance(request, ModelRequest) or request.purpose != COMPACTION:
        raise StoreError(f"seq {seq} of episode {episode_id} is not a compaction call")
    turn = rows[0].turn
    kinds = ("model.request", "model.response", "usage")
    later = store.events(
        episode_id, after_seq=seq, limit=LOOK_AROUND, kinds=kinds, segments=segments
    )
    earlier = store.events_before(
        episode_id, seq, limit=LOOK_AROUND, kinds=kinds, segments=segments
    )
    summary = None
    for r in later:
        event = r.typed()
        if isinstance(event, ModelResponse) and event.call_id == request.call_id:
            summary = _content(store, event.message_hash)
            break
    before, after = _turn_tokens(earlier), _turn_tokens(later)
    return CompactionMark(
        seq=seq,
        turn=turn,
        call_id=request.call_id,
        provider=request.provider,
        model=request.model,
        covers=request.covers,
        summary=summary,
        summarized=_tokens(request, turn, later),
        before=before[0] if before else None,
        after=after[0] if after else None,
        masked_after=after[1] if after else 0,
        replaced=_replaced(store, request),
    )


def _content(store: StoreBackend, message_hash: str) -> str | None:
    try:
        return store.message(message_hash).content
    except StoreError:
        return None


def _tokens(request: ModelRequest, turn: int, rows: Sequence[EventRow]) -> Tokens:
    """``request``'s input: its usage among ``rows`` (in any order) if there, else its
    estimate."""
    for r in rows:
        event = r.typed()
        if not isinstance(event, Usage) or event.call_id != request.call_id:
            continue
        if event.input_tokens is not None:
            return Tokens(event.input_tokens, True, turn)
    return Tokens(request.input_tokens_estimate, False, turn)


def _turn_tokens(rows: Sequence[EventRow]) -> tuple[Tokens, int] | None:
    """The first turn request in ``rows`` (read away from the compaction: the one after it,
    or the one before it): its input and how many tool outputs it masked."""
    for r in rows:
        event = r.typed()
        if isinstance(event, ModelRequest) and event.purpose != COMPACTION:
            return _tokens(event, r.turn, rows), event.masked
    return None


def _replaced(store: StoreBackend, request: ModelRequest) -> list[Message]:
    """The compaction request's messages but its opening ones and its closing ask."""
    try:
        chain = store.message_chain(request.tip_hash)
    except StoreError:
        return []
    if chain and chain[-1].role == "user" and chain[-1].content == SUMMARY_PROMPT:
        chain = chain[:-1]
    return chain[head_length(chain) :]
