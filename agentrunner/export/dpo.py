"""DPO rows: preference pairs from sibling branches at one fork point (TRL preference shape).

At a fork point, the branches (the parent's own continuation and its forks at that
``fork_seq``, fan-out groups included) that answered the same prompt are grouped by what
they did there: their assistant message at the fork point, compared as an action (its text,
refusal and tool calls with their arguments parsed; tool-call ids and reasoning ignored, so
a fan-out continuation that replays a sampled action without its reasoning counts as that
action, and no row option changes which pairs there are). Each distinct action is valued by
the mean reward of its branches; every two actions whose values differ give one row, the
better one chosen. A branch with no reward (unjudged: a run with no test) takes no part: a
pair needs two judged rewards::

    {"prompt": [...the exact input at the fork point...],
     "chosen": [assistant message], "rejected": [assistant message],
     "tools": [...], "chosen_reward": 1.0, "rejected_reward": 0.4,
     "source": {"episode_id": parent, "seq": fork_seq, "turn": K, "fork_groups": [...]},
     "chosen_source": {"episode_id", "seq", "turn", "episodes": [...], "rewards": [...]},
     "rejected_source": {...}}

``chosen`` / ``rejected`` hold only what the model wrote (its text and tool calls), taken
from the action's first branch that has reasoning (else its first branch), which
``chosen_source`` / ``rejected_source`` name; with ``with_tool_results`` they also hold the
tool results of that turn in that branch (environment output, which a DPO trainer would then
score as if the model had written it).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.export.chat import ExportOptions, chat, tool_schemas
from agentrunner.export.select import Selected
from agentrunner.export.sources import Branch, fork_points, tools_at
from agentrunner.values.events import ToolResult
from agentrunner.values.types import AgentToolCall, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def _call_key(call: AgentToolCall) -> list[Any]:
    try:
        return [call.name, call.parsed_arguments()]
    except ValueError:
        return [call.name, call.arguments]


def action_key(message: Message) -> str:
    """What an assistant message did, whatever the row options: text, refusal, tool calls
    (arguments parsed when they are JSON); tool-call ids and reasoning left out."""
    calls = [_call_key(c) for c in message.tool_calls]
    return json.dumps([message.content, message.refusal, calls], sort_keys=True, ensure_ascii=False)


@dataclass
class _Action:
    branches: list[Branch] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    lead: Branch | None = None  # the branch whose message the row shows
    has_reasoning: bool = False

    def add(self, branch: Branch, message: Message, reward: float) -> None:
        self.branches.append(branch)
        self.rewards.append(reward)
        if self.lead is None or (message.reasoning and not self.has_reasoning):
            self.lead, self.has_reasoning = branch, bool(message.reasoning)

    @property
    def value(self) -> float:
        return statistics.fmean(self.rewards)

    def source(self) -> dict[str, Any]:
        assert self.lead is not None
        return {
            **self.lead.decision.source(),
            "episodes": [b.episode.episode_id for b in self.branches],
            "rewards": list(self.rewards),
        }


def _turn_tool_results(store: StoreBackend, branch: Branch) -> list[Message]:
    """The tool messages that answered the branch's decision (before its next turn)."""
    out: list[Message] = []
    rows = store.events(
        branch.episode.episode_id,
        after_seq=branch.decision.seq,
        limit=256,
        kinds=("tool.result", "model.request", "message"),
    )
    for row in rows:
        result = row.typed()
        if not isinstance(result, ToolResult):
            break
        out.append(store.message(result.message_hash))
    return out


def _completion(
    store: StoreBackend, action: _Action, options: ExportOptions
) -> list[dict[str, Any]]:
    assert action.lead is not None
    messages = [store.message(action.lead.decision.message_hash)]
    if options.with_tool_results:
        messages += _turn_tool_results(store, action.lead)
    return chat(messages, options)


def dpo_rows(
    store: StoreBackend, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    unjudged = 0
    for point in fork_points(store, selected.by_id()):
        actions: dict[str, _Action] = {}
        for branch in point.branches:
            reward = selected.reward(branch.episode)
            if reward is None:
                unjudged += 1
                continue
            message = store.message(branch.decision.message_hash)
            actions.setdefault(action_key(message), _Action()).add(branch, message, reward)
        ranked = sorted(actions.values(), key=lambda a: -a.value)
        pairs = [
            (i, j)
            for i in range(len(ranked))
            for j in range(i + 1, len(ranked))
            if ranked[i].value > ranked[j].value
        ]
        if not pairs:
            continue
        prompt = chat(store.message_chain(point.prompt_tip), options)
        first = point.branches[0]
        tools = tool_schemas(tools_at(store, first.episode.episode_id, first.decision.seq))
        completions = [_completion(store, action, options) for action in ranked]
        for i, j in pairs:
            better, worse = ranked[i], ranked[j]
            yield {
                "prompt": prompt,
                "chosen": completions[i],
                "rejected": completions[j],
                "tools": tools,
                "chosen_reward": better.value,
                "rejected_reward": worse.value,
                "source": point.source(),
                "chosen_source": better.source(),
                "rejected_source": worse.source(),
            }
    if unjudged:
        selected.notes.append(f"dpo: {unjudged} unjudged branch(es) (no reward) left out of pairs")
