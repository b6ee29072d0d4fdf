"""A report's numbers as text, one way for every place that shows them (the command line's
tables and the TUI's report screen); recorded names in it (tasks, models, errors) as text
that is never markup and shows its control characters (:func:`key`, :func:`recorded`)."""

from __future__ import annotations

from rich.text import Text

from agentrunner.report.records import Metrics
from agentrunner.values.formatting import cost
from agentrunner.values.safe_text import literal, one_line_visible, plain

METRIC_COLUMNS = (
    "episodes",
    "done/cxl/fail",
    "pass rate [95%]",
    "reward ± se",
    "pass@k",
    "tokens in/cached/out/reasoning",
    "cache hit all/ep med",
    "cost",
    "$/solved",
    "turns med/p90",
    "tools med/p90",
    "latency p50/p90",
)


def key(value: object) -> Text:
    """A recorded name (task id, model spec, group key) for one table cell."""
    return plain(one_line_visible(str(value)))


def recorded(value: object) -> str:
    """A recorded value (an error message, a stop reason) inside a markup string."""
    return literal(value)


def num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def rate(m: Metrics) -> str:
    """The pass rate with its 95% Wilson interval."""
    if m.pass_rate is None or m.pass_rate_ci95 is None:
        return "-"
    low, high = m.pass_rate_ci95.low, m.pass_rate_ci95.high
    return f"{m.pass_rate:.0%} [{low:.0%}, {high:.0%}]"


def episodes(m: Metrics) -> str:
    """How many episodes, and how many of them are unjudged (ended with no reward or
    verdict) or not ended (no outcome yet)."""
    parts = [f"unjudged {m.unjudged}"] if m.unjudged else []
    if m.not_ended:
        parts.append(f"{m.not_ended} not ended")
    return str(m.episodes) + (f" ({', '.join(parts)})" if parts else "")


def tokens(m: Metrics) -> str:
    """Token sums (of what is known), and how many model calls had unknown counts."""
    t, unknown = m.tokens, m.unknown_usage_calls
    known = f"{t.input:,}/{t.cached:,}/{t.output:,}/{t.reasoning:,}"
    return known + (f" (+{unknown} calls unknown)" if unknown else "")


def percent(value: float | None) -> str:
    """A ratio as a whole percentage; ``unknown`` when it is unknown (never 0%)."""
    return "unknown" if value is None else f"{value:.0%}"


def cache_hit(m: Metrics) -> str:
    """The prompt-cache hit ratio over all known input tokens / the median of the episodes'
    ratios, and how many episodes' ratio is unknown."""
    hits = m.cache_hits
    if hits.ratio is None:
        return "unknown"
    known = f"{percent(hits.ratio)}/{percent(hits.episode_median)}"
    return known + (f" (+{hits.unknown} unknown)" if hits.unknown else "")


def spend(m: Metrics) -> str:
    """The cost (of what is known), and how many episodes had an unknown cost."""
    unknown, known = m.cost_unknown, m.cost_usd
    return cost(known) + (f" (+{unknown} unknown)" if unknown and known is not None else "")


def reward(m: Metrics, digits: int = 2) -> str:
    """The mean reward ± its standard error."""
    return f"{num(m.reward_mean, digits)} ± {num(m.reward_se, digits)}"


def cells(m: Metrics) -> list[str]:
    """One row of metrics, in :data:`METRIC_COLUMNS` order."""
    top = m.top_pass_at_k
    return [
        episodes(m),
        f"{m.completed}/{m.cancelled}/{m.failed}",
        rate(m),
        reward(m),
        f"@{top[0]} {top[1]:.0%}" if top is not None else "-",
        tokens(m),
        cache_hit(m),
        spend(m),
        cost(m.cost_per_solved_usd),
        f"{num(m.turns.median, 0)}/{num(m.turns.p90, 0)}",
        f"{num(m.tool_calls.median, 0)}/{num(m.tool_calls.p90, 0)}",
        f"{num(m.latency_s.p50)}s/{num(m.latency_s.p90)}s",
    ]
