"""A report's numbers as typed records: what the text, HTML, TUI and JSON renderings read,
by attribute.

:mod:`agentrunner.report.build` makes them once; ``to_json()`` gives what ``report --json``
prints (its keys, their order and their values are a contract: users read them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agentrunner.report.stats import Interval, McNemar


def _listed(interval: Interval | None) -> list[float] | None:
    return None if interval is None else interval.as_list()


@dataclass(frozen=True)
class Spread:
    """The median and 90th percentile of a count per episode (turns, tool calls)."""

    median: float | None
    p90: float | None


@dataclass(frozen=True)
class Latency:
    """Model calls' latencies in seconds: the 50th and 90th percentiles."""

    p50: float | None
    p90: float | None


@dataclass(frozen=True)
class Tokens:
    """Token sums of the model calls whose counts are known."""

    input: int
    cached: int
    output: int
    reasoning: int


@dataclass(frozen=True)
class CacheHits:
    """Prompt-cache hits: cache-read input tokens / all input tokens (None: unknown, never
    0), over the episodes whose input token counts are known
    (:mod:`agentrunner.report.cache`)."""

    ratio: float | None
    """Over all the input tokens of those episodes."""
    episode_median: float | None
    """The median of their ratios, one per episode."""
    episode_min: float | None
    """The lowest of their ratios."""
    unknown: int
    """Episodes with no known input token (left out: their ratio is unknown)."""


@dataclass(frozen=True)
class ErrorCount:
    """One of the most frequent errors (``type: first line``) and how often it occurred."""

    error: str
    count: int


@dataclass(frozen=True)
class Metrics:
    """Everything a report says of a set of episodes."""

    episodes: int
    completed: int
    cancelled: int
    failed: int
    interrupted: int
    running: int
    pending: int
    judged: int
    """Ended and judged: counted in the pass rate."""
    unjudged: int
    """Ended with no reward (or no verdict of ``--verifier``): never in a pass rate."""
    passed: int
    reward_not_reproduced: int
    pass_rate: float | None
    pass_rate_ci95: Interval | None
    reward_mean: float | None
    reward_se: float | None
    pass_at_k: dict[str, float]
    """pass@k by k (as the JSON names it, ``"1"``, ``"2"``, ...)."""
    tokens: Tokens
    unknown_usage_calls: int
    """Model calls whose token counts are unknown (left out of :attr:`tokens`)."""
    cost_usd: float | None
    cost_unknown: int
    """Episodes whose cost is unknown (left out of :attr:`cost_usd`)."""
    cost_per_solved_usd: float | None
    turns: Spread
    tool_calls: Spread
    latency_s: Latency
    stop_reasons: dict[str, int]
    """How many episodes stopped for each reason, most frequent first."""
    errors: tuple[ErrorCount, ...]
    """The most frequent errors, most frequent first."""
    cache_hits: CacheHits

    @property
    def not_ended(self) -> int:
        """Episodes with no outcome yet (pending, running or interrupted)."""
        return self.episodes - self.judged - self.unjudged

    @property
    def top_pass_at_k(self) -> tuple[int, float] | None:
        """The largest k with a pass@k, and that pass@k (None when there is none)."""
        if not self.pass_at_k:
            return None
        top = max(self.pass_at_k, key=int)
        return int(top), self.pass_at_k[top]

    def to_json(self) -> dict[str, Any]:
        """The fields in order, nested records as objects, intervals as ``[low, high]``."""
        return {**asdict(self), "pass_rate_ci95": _listed(self.pass_rate_ci95)}


@dataclass(frozen=True)
class Group:
    """The metrics of one group: its value of each grouping (``Report.by``), in order."""

    values: tuple[str, ...]
    metrics: Metrics


@dataclass(frozen=True)
class TaskRow:
    """One model's metrics on one task."""

    model: str
    metrics: Metrics

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, **self.metrics.to_json()}


@dataclass(frozen=True)
class TaskMetrics:
    """One task, a row per model that ran it."""

    task_id: str
    rows: tuple[TaskRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "rows": [row.to_json() for row in self.rows]}


@dataclass(frozen=True)
class Report:
    """Per group, overall and per task; ``threshold`` and ``verifier`` say what passes."""

    by: tuple[str, ...]
    """The groupings (model, task, split, batch, context), in the order of each group's
    values."""
    overall: Metrics
    reward_not_reproduced: tuple[str, ...]
    """The episodes whose recorded reward ``verify`` did not reproduce."""
    groups: tuple[Group, ...]
    tasks: tuple[TaskMetrics, ...]
    threshold: float = 1.0
    verifier: str | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``report --json`` prints: each group's values under ``key``, by grouping."""
        groups = [
            {"key": dict(zip(self.by, g.values, strict=True)), **g.metrics.to_json()}
            for g in self.groups
        ]
        return {
            "by": list(self.by),
            "overall": self.overall.to_json(),
            "reward_not_reproduced": list(self.reward_not_reproduced),
            "groups": groups,
            "tasks": [task.to_json() for task in self.tasks],
            "threshold": self.threshold,
            "verifier": self.verifier,
        }


@dataclass(frozen=True)
class SidePolicy:
    """The episodes of one side of a comparison that ran with one context policy."""

    side: str
    """``A`` or ``B``."""
    context: str
    """The context policy as recorded (``mask:10``; ``-``: the record names none)."""
    metrics: Metrics

    def to_json(self) -> dict[str, Any]:
        return {"side": self.side, "context": self.context, **self.metrics.to_json()}


@dataclass(frozen=True)
class Comparison:
    """A against B over the (task, seed) pairs both judged; differences are B - A."""

    a: str
    """Side A as the command named it (a model spec or a batch)."""
    b: str
    pairs: int
    unjudged_a: int
    unjudged_b: int
    pass_rate_a: float | None
    pass_rate_b: float | None
    pass_rate_difference: float | None
    mcnemar: McNemar
    reward_difference: float | None
    reward_difference_ci95: Interval | None
    cost_difference_usd: float | None
    cost_difference_ci95: Interval | None
    priced_pairs: int
    solved_only_by_a: tuple[str, ...]
    solved_only_by_b: tuple[str, ...]
    by_context: tuple[SidePolicy, ...]
    """Each side's episodes by the context policy they ran with (reward, tokens, cost)."""

    def to_json(self) -> dict[str, Any]:
        """What ``report --compare --json`` prints."""
        return {
            **asdict(self),
            "reward_difference_ci95": _listed(self.reward_difference_ci95),
            "cost_difference_ci95": _listed(self.cost_difference_ci95),
            "by_context": [group.to_json() for group in self.by_context],
        }
