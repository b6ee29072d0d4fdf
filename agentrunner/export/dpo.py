"""DPO rows: preference pairs from sibling branches at one fork point (TRL preference shape).

At a fork point, the branches (the parent's own continuation and its forks at that
``fork_seq``, fan-out groups included) that answered the same prompt are grouped by what
they did there: their assistant message at the fork point (tool-call ids ignored). Each
distinct action is valued by the mean reward of its branches; every two actions whose values
differ give one row, the better one chosen::

    {"prompt": [...the exact input at the fork point...],
     "chosen": [assistant message], "rejected": [assistant message],
     "tools": [...], "chosen_reward": 1.0, "rejected_reward": 0.4,
     "source": {"episode_id": parent, "seq": fork_seq, "turn": K, "fork_groups": [...]},
     "chosen_source": {"episode_id", "seq", "turn", "episodes": [...], "rewards": [...]},
     "rejected_source": {...}}

``chosen`` / ``rejected`` hold only what the model wrote (its text and tool calls); with
``with_tool_results`` they also hold the tool results of that turn (environment output,
which a DPO trainer would then score as if the model had written it).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentrunner.export.chat import ExportOptions, chat, content_key, tool_schemas
from agentrunner.export.select import Selected
from agentrunner.export.sources import Branch, fork_points, tools_at
from agentrunner.store import TraceStore
from agentrunner.types import Message


@dataclass
class _Action:
    messages: list[dict[str, Any]]
    branches: list[Branch] = field(default_factory=list)

    @property
    def value(self) -> float:
        return statistics.fmean(b.episode.total_reward for b in self.branches)

    def source(self) -> dict[str, Any]:
        first = self.branches[0].decision
        return {
            **first.source(),
            "episodes": [b.episode.episode_id for b in self.branches],
            "rewards": [b.episode.total_reward for b in self.branches],
        }


def _turn_tool_results(store: TraceStore, branch: Branch) -> list[Message]:
    """The tool messages that answered the branch's decision (before its next turn)."""
    out: list[Message] = []
    rows = store.events(
        branch.episode.episode_id,
        after_seq=branch.decision.seq,
        limit=256,
        kinds=("tool.result", "model.request", "message"),
    )
    for row in rows:
        if row.kind != "tool.result":
            break
        out.append(store.message(row.payload["message_hash"]))
    return out


def dpo_rows(
    store: TraceStore, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    for point in fork_points(store, selected.by_id()):
        actions: dict[str, _Action] = {}
        for branch in point.branches:
            messages = [store.message(branch.decision.message_hash)]
            if options.with_tool_results:
                messages += _turn_tool_results(store, branch)
            completion = chat(messages, options)
            actions.setdefault(content_key(completion), _Action(completion)).branches.append(branch)
        ranked = sorted(actions.values(), key=lambda a: -a.value)
        pairs = [
            (better, worse)
            for i, better in enumerate(ranked)
            for worse in ranked[i + 1 :]
            if better.value > worse.value
        ]
        if not pairs:
            continue
        prompt = chat(store.message_chain(point.prompt_tip), options)
        first = point.branches[0]
        tools = tool_schemas(tools_at(store, first.episode.episode_id, first.decision.seq))
        for better, worse in pairs:
            yield {
                "prompt": prompt,
                "chosen": better.messages,
                "rejected": worse.messages,
                "tools": tools,
                "chosen_reward": better.value,
                "rejected_reward": worse.value,
                "source": point.source(),
                "chosen_source": better.source(),
                "rejected_source": worse.source(),
            }
