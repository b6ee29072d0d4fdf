"""KTO rows: one unpaired-preference example per episode (TRL conversational shape).

``{"prompt": [...], "completion": [...], "label": bool, "reward": R, "tools": [...],
"source": {"episode_id", "seq", "turn", "task_id", "seed", "model"}}``. ``prompt`` is the
episode's first model input (system prompt and task); ``completion`` is everything after it
up to the last assistant message (the agent's turns and the tool results between them);
``label`` is ``reward >= kto_threshold``. ``source.seq`` is the last assistant message's seq.
An unjudged episode (no reward: an imported session, a run with no test) has no label, so it
gives no row; a note counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentrunner.export.chat import ExportOptions, chat, tool_schemas
from agentrunner.export.select import Selected
from agentrunner.export.sources import after_prefix, first_request, last_decision

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def kto_rows(
    store: StoreBackend, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    unjudged = 0
    for episode in selected.episodes:
        reward = selected.reward(episode)
        if reward is None:
            unjudged += 1
            continue
        first = first_request(store, episode.episode_id)
        decision = last_decision(store, episode.episode_id)
        if first is None or decision is None:
            continue
        _, tip, tools_hash = first
        prompt = store.message_chain(tip)
        completion = after_prefix(store.message_chain(decision.message_hash), prompt)
        if not completion:
            continue
        yield {
            "prompt": chat(prompt, options),
            "completion": chat(completion, options),
            "label": reward >= options.kto_threshold,
            "reward": reward,
            "tools": tool_schemas(store.tools(tools_hash)),
            "source": {
                **decision.source(),
                "task_id": episode.task_id,
                "seed": episode.seed,
                "model": episode.model_spec.spec,
            },
        }
    if unjudged:
        selected.notes.append(
            f"kto: {unjudged} unjudged episode(s) (no reward, so no label) skipped"
        )
