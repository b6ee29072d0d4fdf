"""The context budget and the context policies: what of an episode's history each request sends.

Before every model request the runner estimates how many input tokens it will send
(:mod:`.budget`) and asks the episode's policy (:mod:`.policies`: ``none``, ``mask[:K]``,
``summarize[:MODEL]`` or any :class:`ContextPolicy`) which messages to send. A request whose
estimate passes the model's context window is never sent: the episode stops with
``context_exhausted``. What was sent is recorded as a message chain of its own whenever it
differs from the history, so ``reconstruct_request`` returns it exactly.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from agentrunner.runtime.context.budget import (
    Budget,
    context_window,
    message_chars,
    shared_prefix,
)
from agentrunner.runtime.context.compaction import Caller, RecordedCompactions, compact
from agentrunner.runtime.context.policies import (
    POLICY_HELP,
    Compaction,
    ContextPolicy,
    HistoryView,
    MaskCache,
    MaskPolicy,
    NoPolicy,
    PolicySetting,
    Sent,
    SummarizePolicy,
    ToolOrigin,
    mask_cutoff,
    masked,
    parse_policy,
)
from agentrunner.runtime.recorder import Recorder
from agentrunner.values.events import ModelRequest
from agentrunner.values.model import Model
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

__all__ = [
    "POLICY_HELP",
    "Budget",
    "ContextPolicy",
    "EpisodeContext",
    "HistoryView",
    "MaskPolicy",
    "NoPolicy",
    "PolicySetting",
    "Prepared",
    "Sent",
    "SummarizePolicy",
    "context_window",
    "mask_cutoff",
    "masked",
    "message_chars",
    "parse_policy",
]


@dataclass(frozen=True)
class Prepared:
    """A request as the policy would send it: its messages and estimated input tokens."""

    messages: list[Message]
    estimate: int
    masked: int


class EpisodeContext:
    """One episode's policy, budget, compactions and the origins of its tool messages, as
    the runner prepares each request."""

    def __init__(self, policy: ContextPolicy, window: int | None, model: Model) -> None:
        self.policy = policy
        self.budget = Budget(window)
        self.model = model
        """The model a compaction call asks (the episode's, or ``summarize:MODEL``'s)."""
        self.origins: dict[int, ToolOrigin] = {}
        """Index in the history -> where that tool message was recorded."""
        self.compactions = RecordedCompactions()
        self._results: defaultdict[str, deque[ToolOrigin]] = defaultdict(deque)
        self._read_seq = 0  # the log's tool results are read up to this seq
        self._scanned = 0  # the history's messages are matched up to this index
        self._sent: list[Message] = []  # the last request that did not send the history
        self._tips: list[str] = []  # _tips[i]: the chain tip of _sent[: i + 1]
        self.mask_cache = MaskCache()

    @classmethod
    def configured(cls, policy: ContextPolicy, window: int | None, model: Model) -> EpisodeContext:
        """The context of an episode run with these settings by ``model`` (``window`` None:
        the model table's window for it)."""
        window = window or context_window(model.provider, model.model)
        if isinstance(policy, SummarizePolicy) and policy.model is not None:
            from providers import get_model  # the summaries' own model, built before a turn

            model = get_model(policy.model)
        return cls(policy, window, model)

    def over_budget(self, prepared: Prepared, episode_id: str, turn: int) -> str | None:
        """Why ``prepared`` must not be sent (it passes the window), or None when it fits
        (``turn``: the episode's last complete turn, where a fork can take it on)."""
        window = self.budget.window
        if window is None or prepared.estimate <= window:
            return None
        return (
            f"the next request (about {prepared.estimate:,} input tokens) would pass the "
            f"model's context window ({window:,} tokens) under context policy "
            f"{self.policy}: it was not sent; fork the episode with a policy that keeps less "
            f"(agentrunner fork {episode_id} --turn {max(turn, 1)} --context mask:10 --run)"
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
        (the history's own when it sends it whole), with the budget's estimate."""
        assert rec.tip is not None, "a model request needs at least one message"
        rec.chunk_index = 0
        rec.record(
            ModelRequest(
                call_id=call_id,
                tip_hash=self.sent_tip(rec.store, prepared, rec.messages, rec.tip),
                tools_hash=tools_hash,
                params=params,
                provider=model.provider,
                model=model.model,
                input_tokens_estimate=prepared.estimate,
                context_window=self.budget.window,
                masked=prepared.masked,
            )
        )

    def prepare(self, run: Caller, turn: int) -> Prepared:
        """What request ``turn`` sends of ``run``'s history (the caller checks the budget);
        a policy may make one recorded compaction call first."""
        rec = run.rec
        view = HistoryView(
            messages=rec.messages,
            turn=turn,
            budget=self.budget,
            compaction=self.compactions.read(rec.store, rec.episode_id),
            compact=partial(self._compact, run, turn),
            find_origins=partial(self._find_origins, rec),
            mask_cache=self.mask_cache,
        )
        sent = self.policy.select(view)
        return Prepared(sent.messages, self.budget.estimate(sent.messages), sent.masked)

    def _compact(self, run: Caller, turn: int, request: list[Message], covers: int) -> Compaction:
        made = compact(run, self.model, self.budget, request, covers, turn)
        self.compactions.last = made
        return made

    def _find_origins(self, rec: Recorder) -> dict[int, ToolOrigin]:
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
        return self.origins

    def sent_tip(
        self, store: StoreBackend, prepared: Prepared, history: list[Message], tip: str
    ) -> str:
        """The chain tip of the messages a request sends: the history's own ``tip`` when it
        sends the history unchanged, else a chain of its own, stored from the first message
        that differs from the last such request's (the messages before keep their tips)."""
        sent = prepared.messages
        if sent is history or sent == history:
            return tip
        shared = shared_prefix(self._sent, sent)
        del self._tips[shared:]
        for message in sent[shared:]:
            self._tips.append(store.put_message(self._tips[-1] if self._tips else None, message))
        assert self._tips, "a model request needs at least one message"
        self._sent = list(sent)
        return self._tips[-1]
