"""A report's numbers as text, one way for every place that shows them (the command line's
tables and the TUI's report screen); recorded names in it (tasks, models, errors) as text
that is never markup and shows its control characters (:func:`key`, :func:`recorded`)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from agentrunner.formatting import cost
from agentrunner.safe_text import literal, one_line_visible, plain

METRIC_COLUMNS = (
    "episodes",
    "done/cxl/fail",
    "pass rate [95%]",
    "reward ± se",
    "pass@k",
    "tokens in/cached/out/reasoning",
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


def rate(m: dict[str, Any]) -> str:
    """The pass rate with its 95% Wilson interval."""
    if m["pass_rate"] is None:
        return "-"
    low, high = m["pass_rate_ci95"]
    return f"{m['pass_rate']:.0%} [{low:.0%}, {high:.0%}]"


def episodes(m: dict[str, Any]) -> str:
    """How many episodes, and how many of them are unjudged (ended with no reward or
    verdict) or not ended (no outcome yet)."""
    judged, unjudged = m.get("judged", m["episodes"]), m.get("unjudged", 0)
    parts = [f"unjudged {unjudged}"] if unjudged else []
    if m["episodes"] - judged - unjudged:
        parts.append(f"{m['episodes'] - judged - unjudged} not ended")
    return str(m["episodes"]) + (f" ({', '.join(parts)})" if parts else "")


def tokens(m: dict[str, Any]) -> str:
    """Token sums (of what is known), and how many model calls had unknown counts."""
    t, unknown = m["tokens"], m.get("unknown_usage_calls", 0)
    known = f"{t['input']:,}/{t['cached']:,}/{t['output']:,}/{t['reasoning']:,}"
    return known + (f" (+{unknown} calls unknown)" if unknown else "")


def spend(m: dict[str, Any]) -> str:
    """The cost (of what is known), and how many episodes had an unknown cost."""
    unknown, known = m.get("cost_unknown", 0), m["cost_usd"]
    return cost(known) + (f" (+{unknown} unknown)" if unknown and known is not None else "")


def cells(m: dict[str, Any]) -> list[str]:
    """One row of metrics, in :data:`METRIC_COLUMNS` order."""
    at_k = m["pass_at_k"]
    top = max(at_k, key=int) if at_k else None
    return [
        episodes(m),
        f"{m['completed']}/{m['cancelled']}/{m['failed']}",
        rate(m),
        f"{num(m['reward_mean'])} ± {num(m['reward_se'])}",
        f"@{top} {at_k[top]:.0%}" if top is not None else "-",
        tokens(m),
        spend(m),
        cost(m["cost_per_solved_usd"]),
        f"{num(m['turns']['median'], 0)}/{num(m['turns']['p90'], 0)}",
        f"{num(m['tool_calls']['median'], 0)}/{num(m['tool_calls']['p90'], 0)}",
        f"{num(m['latency_s']['p50'])}s/{num(m['latency_s']['p90'])}s",
    ]
