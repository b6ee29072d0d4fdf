"""SFT rows: one conversation per episode (TRL conversational language-modeling shape).

``{"messages": [...], "tools": [...], "reward": R, "source": {"episode_id", "seq", "turn",
"task_id", "seed", "model"}}``. ``messages`` is the chain ending at the episode's last
assistant message: for an episode whose last assistant message is a model response that is
exactly ``reconstruct_request(ep, last_turn).messages`` plus the response, i.e. what the
model saw at its last decision and what it answered (tool results after it are left out, so
the conversation ends with the assistant). ``source.seq`` is that response's seq.
``reward`` is null for an unjudged episode (no reward: an imported session, a run with no
test), never 0; ``--min-reward`` and ``--reward-percentile`` leave such episodes out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentrunner.export.chat import ExportOptions, chat, tool_schemas
from agentrunner.export.select import Selected
from agentrunner.export.sources import last_decision, tools_at

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def sft_rows(
    store: StoreBackend, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    unjudged = 0
    for episode in selected.episodes:
        decision = last_decision(store, episode.episode_id)
        if decision is None:
            continue
        messages = store.message_chain(decision.message_hash)
        reward = selected.reward(episode)
        unjudged += reward is None
        yield {
            "messages": chat(messages, options),
            "tools": tool_schemas(tools_at(store, episode.episode_id, decision.seq)),
            "reward": reward,
            "source": {
                **decision.source(),
                "task_id": episode.task_id,
                "seed": episode.seed,
                "model": episode.model_spec.spec,
            },
        }
    if unjudged:
        selected.notes.append(f"sft: {unjudged} row(s) of unjudged episodes have reward null")
