"""KTO rows: one unpaired-preference example per episode (TRL conversational shape).

``{"prompt": [...], "completion": [...], "label": bool, "reward": R, "tools": [...],
"source": {"episode_id", "seq", "turn", "task_id", "seed", "model"}}``. ``prompt`` is the
episode's first model input (system prompt and task); ``completion`` is everything after it
up to the last assistant message (the agent's turns and the tool results between them);
``label`` is ``reward >= kto_threshold``. ``source.seq`` is the last assistant message's seq.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentrunner.export.chat import ExportOptions, chat, tool_schemas
from agentrunner.export.select import Selected
from agentrunner.export.sources import after_prefix, first_request, last_decision
from agentrunner.store import TraceStore


def kto_rows(
    store: TraceStore, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    for episode in selected.episodes:
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
            "label": episode.total_reward >= options.kto_threshold,
            "reward": episode.total_reward,
            "tools": tool_schemas(store.tools(tools_hash)),
            "source": {
                **decision.source(),
                "task_id": episode.task_id,
                "seed": episode.seed,
                "model": episode.model.get("spec"),
            },
        }
