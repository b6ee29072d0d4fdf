"""GRPO rows: groups of recorded completions of one prompt with their rewards.

Groups come from fork points (the branches at one fork point that answered the same prompt:
fan-out groups and plain forks, with the parent's own continuation) and from task groups
(root episodes of one task that started from the same prompt: a batch's episodes of that
task and seed, or across seeds when the seed does not change the prompt). Shape::

    {"prompt": [...messages...],
     "reference_completions": [[...messages...], ...],  # one per episode, to its last
                                                        # assistant message
     "reference_rewards": [1.0, 0.4, ...],              # each episode's total reward
     "tools": [...],
     "source": {"kind": "fork", "episode_id": parent, "seq": fork_seq, "turn": K,
                "fork_groups": [...]}
               | {"kind": "task", "task_id": ..., "seeds": [...], "batches": [...]},
     "sources": [{"episode_id", "seq", "turn"}, ...]}   # parallel to reference_completions

``prompt`` alone is TRL's conversational prompt-only shape, what ``GRPOTrainer`` generates
from. Every other column reaches its reward functions as a keyword argument of the same
name, so none may be one of the names ``GRPOTrainer._calculate_rewards`` passes itself
(``prompts``, ``completions``, ``completion_ids``, ``trainer_state``, ``log_extra``,
``log_metric``, ``environments``): hence ``reference_completions``, not ``completions``. The
``tools`` column too reaches reward functions only: ``GRPOTrainer`` renders the prompt with
the tools given to the trainer, not with this column. The recorded completions and rewards
serve offline group-relative training, analysis and reward functions that compare against
them. A completion is the conversation after the prompt, so it holds the agent's turns and
the tool results between them. An unjudged episode (no reward: an imported session, a run with
no test) is left out of its group, which needs a reward per completion; a note counts them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agentrunner.export.chat import ExportOptions, chat, tool_schemas
from agentrunner.export.select import Selected
from agentrunner.export.sources import (
    after_prefix,
    fork_points,
    last_decision,
    task_groups,
    tools_at,
)
from agentrunner.store import EpisodeSummary
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def _group(
    store: StoreBackend,
    prompt: list[Message],
    episodes: Sequence[EpisodeSummary],
    options: ExportOptions,
    selected: Selected,
) -> tuple[list[list[dict[str, Any]]], list[float], list[dict[str, Any]]]:
    completions, rewards, sources = [], [], []
    for episode in episodes:
        reward = selected.reward(episode)
        if reward is None:
            continue
        decision = last_decision(store, episode.episode_id)
        if decision is None:
            continue
        rest = after_prefix(store.message_chain(decision.message_hash), prompt)
        if not rest:
            continue
        completions.append(chat(rest, options))
        rewards.append(reward)
        sources.append(decision.source())
    return completions, rewards, sources


def grpo_rows(
    store: StoreBackend, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    for point in fork_points(store, selected.by_id()):
        prompt = store.message_chain(point.prompt_tip)
        episodes = [b.episode for b in point.branches]
        completions, rewards, sources = _group(store, prompt, episodes, options, selected)
        if len(completions) < 2:
            continue
        first = point.branches[0]
        yield {
            "prompt": chat(prompt, options),
            "reference_completions": completions,
            "reference_rewards": rewards,
            "tools": tool_schemas(tools_at(store, first.episode.episode_id, first.decision.seq)),
            "source": {"kind": "fork", **point.source()},
            "sources": sources,
        }
    for task_id, tip, episodes in task_groups(store, selected.episodes):
        prompt = store.message_chain(tip)
        completions, rewards, sources = _group(store, prompt, episodes, options, selected)
        if len(completions) < 2:
            continue
        yield {
            "prompt": chat(prompt, options),
            "reference_completions": completions,
            "reference_rewards": rewards,
            "tools": tool_schemas(tools_at(store, episodes[0].episode_id, 0)),
            "source": {
                "kind": "task",
                "task_id": task_id,
                "seeds": sorted({e.seed for e in episodes}),
                "batches": store.batches_of(e.episode_id for e in episodes),
            },
            "sources": sources,
        }
    unjudged = selected.unjudged()
    if unjudged:
        selected.notes.append(f"grpo: {unjudged} unjudged episode(s) (no reward) left out")
