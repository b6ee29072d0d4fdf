"""Which episodes an export reads: filters by status, task, split, model, reward, verifier.

Filters apply in this order: episode ids (when given: only those), status (default:
completed), fan-out proposal forks (left out unless named by id: they ran one turn to propose
a candidate), task, model, split, verifier, minimum reward, and last the reward percentile,
computed over the episodes the other filters kept.

An episode with no reward (an imported session, a run with no test) is *unjudged*: its reward
is None here (:meth:`Selected.reward`), never 0. The reward filters leave it out, and each
format says what it does with it (KTO gives it no label, DPO, GRPO and PRM compare only
judged rewards, SFT writes a null reward).
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.envs.tasks import load_tasks
from agentrunner.store import EpisodeSummary
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Status
from agentrunner.values.specs import WorkspaceSpec
from agentrunner.verifiers import latest_verifications

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

STATUSES = (Status.COMPLETED, Status.CANCELLED, Status.INTERRUPTED, Status.FAILED, Status.RUNNING)


@dataclass(frozen=True)
class Selection:
    """Export filters. Empty tuples and None mean "no filter"."""

    episodes: tuple[str, ...] = ()  # episode ids or unique prefixes
    tasks: tuple[str, ...] = ()
    split: str | None = None
    tasks_path: Path | None = None  # the tasks file for --split (default: each episode's own)
    models: tuple[str, ...] = ()  # model specs, shell-style wildcards allowed (openai:*)
    statuses: tuple[str, ...] = (Status.COMPLETED,)  # empty: any status
    min_reward: float | None = None
    reward_percentile: float | None = None  # keep rewards at or above this percentile
    verifier: str | None = None  # drop episodes whose latest result from it failed
    verified_only: bool = False  # keep only episodes with a passing result
    include_proposals: bool = False

    def __post_init__(self) -> None:
        unknown = [s for s in self.statuses if s not in STATUSES]
        if unknown:
            raise UsageError(f"unknown status {unknown[0]!r}; one of {', '.join(STATUSES)}")
        p = self.reward_percentile
        if p is not None and not 0.0 <= p <= 100.0:
            raise UsageError(f"--reward-percentile must be between 0 and 100, not {p:g}")


@dataclass
class Selected:
    """The selected episodes (oldest first) and notes on what was left out and why."""

    episodes: list[EpisodeSummary]
    notes: list[str] = field(default_factory=list)
    judged: set[str] | None = None
    """The ids whose reward is known (None: every episode's)."""

    def by_id(self) -> dict[str, EpisodeSummary]:
        return {e.episode_id: e for e in self.episodes}

    def reward(self, episode: EpisodeSummary) -> float | None:
        """The episode's reward, None when it has none (unjudged, never 0)."""
        return known_reward(episode, self.judged)

    def unjudged(self) -> int:
        return sum(self.reward(e) is None for e in self.episodes)


def known_reward(episode: EpisodeSummary, judged: set[str] | None) -> float | None:
    """``episode``'s reward, or None when it has none: its summary says None, or ``judged``
    (the ids of :func:`~agentrunner.store.reports.rewarded`) does not hold it."""
    reward: float | None = episode.total_reward
    if reward is None or (judged is not None and episode.episode_id not in judged):
        return None
    return float(reward)


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (linear interpolation between ranks)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def task_splits(
    selection: Selection, episodes: list[EpisodeSummary], notes: list[str]
) -> list[str]:
    """The split of each episode's task ("" when it cannot be known)."""
    cache: dict[str, dict[str, str]] = {}
    out = []
    unknown = 0
    for e in episodes:
        env = e.env_spec  # "bundled", a path, or None (an OpenEnv environment has no tasks file)
        tasks = env.tasks if isinstance(env, WorkspaceSpec) else None
        source = str(selection.tasks_path) if selection.tasks_path else tasks
        if source is None:
            unknown += 1
            out.append("")
            continue
        if source not in cache:
            path = None if source == "bundled" else Path(source)
            if path is not None and not path.is_file():
                raise UsageError(
                    f"episode {e.episode_id} was run with tasks file {path}, which is gone; "
                    "give --tasks PATH to read the splits from another file"
                )
            cache[source] = {t.task_id: t.split for t in load_tasks(path)}
        split = cache[source].get(e.task_id, "")
        unknown += not split
        out.append(split)
    if unknown:
        notes.append(f"{unknown} episode(s) whose task split is unknown were left out by --split")
    return out


def select_episodes(store: StoreBackend, selection: Selection = Selection()) -> Selected:
    """The episodes an export reads, oldest first."""
    notes: list[str] = []
    episodes = list(reversed(store.list_episodes()))
    if selection.episodes:
        named = {store.resolve(e) for e in selection.episodes}
        episodes = [e for e in episodes if e.episode_id in named]
    if selection.statuses:
        episodes = [e for e in episodes if e.status in selection.statuses]
    if not selection.include_proposals and not selection.episodes:
        proposals = store.proposal_forks()
        episodes = [e for e in episodes if e.episode_id not in proposals]
    if selection.tasks:
        episodes = [e for e in episodes if e.task_id in selection.tasks]
    if selection.models:
        episodes = [
            e
            for e in episodes
            if any(fnmatch.fnmatchcase(e.model_spec.spec, m) for m in selection.models)
        ]
    if selection.split is not None:
        splits = task_splits(selection, episodes, notes)
        episodes = [e for e, s in zip(episodes, splits, strict=True) if s == selection.split]
    if selection.verifier or selection.verified_only:
        episodes = _by_verification(store, selection, episodes)
    judged = store.rewarded_episodes()
    if selection.min_reward is not None or selection.reward_percentile is not None:
        unknown = sum(known_reward(e, judged) is None for e in episodes)
        episodes = [e for e in episodes if known_reward(e, judged) is not None]
        if unknown:
            notes.append(f"{unknown} unjudged episode(s) (no reward) left out by the reward filter")
    if selection.min_reward is not None:
        floor = selection.min_reward
        episodes = [e for e in episodes if (e.total_reward or 0.0) >= floor]  # all judged
    if selection.reward_percentile is not None and episodes:
        rewards = [e.total_reward or 0.0 for e in episodes]  # all judged (None left out above)
        cut = percentile(rewards, selection.reward_percentile)
        episodes = [e for e in episodes if (e.total_reward or 0.0) >= cut]
        notes.append(f"reward percentile {selection.reward_percentile:g}: reward >= {cut:g}")
    return Selected(episodes, notes, judged)


def _by_verification(
    store: StoreBackend, selection: Selection, episodes: list[EpisodeSummary]
) -> list[EpisodeSummary]:
    latest = latest_verifications(store, [e.episode_id for e in episodes])
    kept = []
    for e in episodes:
        results = latest.get(e.episode_id, [])
        if selection.verifier:
            results = [r for r in results if r.verifier == selection.verifier]
        if any(not r.passed for r in results):
            continue
        if selection.verified_only and not results:
            continue
        kept.append(e)
    return kept
