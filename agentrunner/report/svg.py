"""The charts of an HTML report, drawn as inline SVG: no script, no network, a few kilobytes.

Hand-written on purpose: no chart library is a dependency (plotly inlined 4.8 MB of
JavaScript for these four charts). Grouped bars with interval whiskers (pass rate per task
and model), a scatter (reward against cost), a histogram (turns) and step lines (cumulative
cost over time); axes have round ticks, and a quantity that cannot be negative starts at 0.
A chart with nothing to draw (no priced episode, or every cost 0) is None, never an empty
frame. Hover text is each mark's SVG ``<title>``; every recorded text (task ids, model specs)
is escaped.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from agentrunner.report.build import Facts
from agentrunner.report.records import Metrics, Report

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d", "#eeca3b")
ALL = "#52606d"
WIDTH, HEIGHT = 560, 330
LEFT, RIGHT, TOP, BOTTOM = 60, 40, 14, 78
LABEL = 22  # the longest category label shown (the whole one is its title)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Axis:
    """A value range with round ticks."""

    lo: float
    hi: float
    ticks: tuple[float, ...]

    def at(self, value: float, start: float, end: float) -> float:
        """``value``'s position between pixels ``start`` (at ``lo``) and ``end`` (``hi``)."""
        return start + (value - self.lo) / ((self.hi - self.lo) or 1.0) * (end - start)


def axis(lo: float, hi: float, count: int = 5, *, whole: bool = False) -> Axis:
    """A range covering ``lo``..``hi`` whose ``count`` or so ticks are round numbers (1, 2,
    2.5 or 5 times a power of ten; ``whole``: whole numbers only, for counts)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = max((hi - lo) / count, 1.0) if whole else (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if whole else (1, 2, 2.5, 5, 10)
    step = next(m * power for m in steps if m * power >= raw * (1 - 1e-9))
    bottom = math.floor(lo / step + 1e-9) * step
    top = math.ceil(hi / step - 1e-9) * step
    ticks = tuple(bottom + i * step for i in range(round((top - bottom) / step) + 1))
    return Axis(bottom, top, ticks)


def colours(models: Iterable[str]) -> dict[str, str]:
    names = sorted(set(models))
    return dict(zip(names, itertools.cycle(PALETTE), strict=False))


def _x(a: Axis, value: float) -> float:
    return a.at(value, LEFT, WIDTH - RIGHT)


def _y(a: Axis, value: float) -> float:
    return a.at(value, HEIGHT - BOTTOM, TOP)


def _frame(name: str, title: str, y: Axis, y_label: str, fmt: Callable[[float], str]) -> str:
    """The chart's opening: its box, the y axis with its grid, and the axis title."""
    grid = "".join(
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_y(y, t):.1f}" y2="{_y(y, t):.1f}"'
        ' class="grid"/>'
        f'<text x="{LEFT - 6}" y="{_y(y, t) + 4:.1f}" class="tick" text-anchor="end">'
        f"{_e(fmt(t))}</text>"
        for t in y.ticks
    )
    base = HEIGHT - BOTTOM
    return (
        f'<svg id="{name}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"'
        f' xmlns="http://www.w3.org/2000/svg"><title>{_e(title)}</title>{grid}'
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base}" y2="{base}" class="axis"/>'
        f'<text class="label" transform="translate(14 {(TOP + base) / 2:.0f}) rotate(-90)"'
        f' text-anchor="middle">{_e(y_label)}</text>'
    )


def _x_title(text: str) -> str:
    return (
        f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 6}"'
        f' text-anchor="middle">{_e(text)}</text>'
    )


def _x_ticks(x: Axis, fmt: Callable[[float], str]) -> str:
    base = HEIGHT - BOTTOM
    return "".join(
        f'<text x="{_x(x, t):.1f}" y="{base + 16}" class="tick" text-anchor="middle">'
        f"{_e(fmt(t))}</text>"
        for t in x.ticks
    )


def _category(label: str, centre: float) -> str:
    """A category's name under the axis, slanted; cut when long (its title is whole)."""
    shown = label if len(label) <= LABEL else label[: LABEL - 1] + "…"
    y = HEIGHT - BOTTOM + 14
    return (
        f'<text class="tick" text-anchor="end" transform="translate({centre:.1f} {y})'
        f' rotate(-25)"><title>{_e(label)}</title>{_e(shown)}</text>'
    )


def percent(value: float) -> str:
    return f"{value:.0%}"


def usd(value: float) -> str:
    return f"${value:.4g}"


def pass_rates(made: Report, palette: dict[str, str]) -> str | None:
    """Pass rate per task, a bar per model with its 95% Wilson interval as a whisker; a
    (task, model) with no judged episode draws no bar and says why in its title."""
    tasks = made.tasks
    models = sorted({r.model for t in tasks for r in t.rows})
    if not tasks:
        return None
    y = Axis(0.0, 1.0, (0.0, 0.25, 0.5, 0.75, 1.0))
    slot = (WIDTH - LEFT - RIGHT) / len(tasks)
    bar = min(28.0, slot * 0.8 / len(models))
    out = [_frame("pass-rate", "Pass rate per task (95% interval)", y, "pass rate", percent)]
    for i, task in enumerate(tasks):
        centre = LEFT + slot * (i + 0.5)
        rows = {r.model: r.metrics for r in task.rows}
        for j, model in enumerate(models):
            row = rows.get(model)
            if row is None:
                continue
            left = centre - bar * len(models) / 2 + j * bar
            out.append(_rate_bar(task.task_id, model, row, left, bar, y, palette[model]))
        out.append(_category(task.task_id, centre))
    out.append(_x_title("task"))
    return "".join(out) + "</svg>"


def _rate_bar(
    task: str, model: str, row: Metrics, left: float, width: float, y: Axis, fill: str
) -> str:
    unjudged = f"; unjudged {row.unjudged}" if row.unjudged else ""
    if row.pass_rate is None or row.pass_rate_ci95 is None:
        tip = f"{task} · {model}: no judged episode{unjudged}"
        base = HEIGHT - BOTTOM
        return (
            f'<text x="{left + width / 2:.1f}" y="{base - 4}" class="none"'
            f' text-anchor="middle"><title>{_e(tip)}</title>n/a</text>'
        )
    rate, low, high = row.pass_rate, row.pass_rate_ci95.low, row.pass_rate_ci95.high
    tip = (
        f"{task} · {model}: {rate:.1%} ({row.passed} of {row.judged} judged)"
        f" [{low:.1%}, {high:.1%}]{unjudged}"
    )
    top, bottom = _y(y, rate), _y(y, 0.0)
    mid = left + width * 0.45
    return (
        f'<g class="bar"><title>{_e(tip)}</title>'
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{width * 0.9:.1f}"'
        f' height="{max(bottom - top, 0.5):.1f}" fill="{fill}"/>'
        f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{_y(y, low):.1f}" y2="{_y(y, high):.1f}"'
        ' class="whisker"/></g>'
    )


def reward_cost(facts: Sequence[Facts], palette: dict[str, str]) -> str | None:
    """Reward against cost, a point per judged, priced episode; None when no such episode
    cost anything (an axis of nothing but $0 says nothing)."""
    points = [f for f in facts if f.reward is not None and f.summary.cost_usd is not None]
    if not points or max(float(f.summary.cost_usd or 0.0) for f in points) <= 0:
        return None
    x = axis(0.0, max(float(f.summary.cost_usd or 0.0) for f in points))
    rewards = [float(f.reward or 0.0) for f in points]
    y = axis(min(0.0, *rewards), max(1.0, *rewards))
    out = [_frame("reward-cost", "Reward against cost per episode", y, "reward", _plain)]
    for f in points:
        s, spent, reward = f.summary, float(f.summary.cost_usd or 0.0), float(f.reward or 0.0)
        tip = f"{s.task_id} seed {s.seed} · {f.model}: reward {reward:g}, {usd(spent)}"
        out.append(
            f'<circle class="point" cx="{_x(x, spent):.1f}" cy="{_y(y, reward):.1f}" r="5"'
            f' fill="{palette[f.model]}">'
            f"<title>{_e(f'{tip} · {s.episode_id}')}</title></circle>"
        )
    out += [_x_ticks(x, usd), _x_title("cost (USD)")]
    return "".join(out) + "</svg>"


def _plain(value: float) -> str:
    return f"{value:g}"


def turns(facts: Sequence[Facts], palette: dict[str, str]) -> str | None:
    """How many turns episodes took: a bar per model in each bin of turns."""
    if not facts:
        return None
    most = max(f.summary.turns for f in facts)
    width = max(1, math.ceil((most + 1) / 24))  # at most 24 bins
    bins = range(0, most + 1, width)
    models = sorted({f.model for f in facts})
    counts = {(m, b): 0 for m in models for b in bins}
    for f in facts:
        counts[(f.model, f.summary.turns // width * width)] += 1
    y = axis(0.0, max(counts.values()), whole=True)
    slot = (WIDTH - LEFT - RIGHT) / len(bins)
    bar = slot * 0.85 / len(models)
    out = [_frame("turns", "Turns per episode", y, "episodes", _plain)]
    for i, start in enumerate(bins):
        centre = LEFT + slot * (i + 0.5)
        label = str(start) if width == 1 else f"{start}-{start + width - 1}"
        for j, model in enumerate(models):
            n = counts[(model, start)]
            if not n:
                continue
            left = centre - bar * len(models) / 2 + j * bar
            top = _y(y, n)
            out.append(
                f'<rect class="bar" x="{left:.1f}" y="{top:.1f}" width="{bar:.1f}"'
                f' height="{_y(y, 0) - top:.1f}" fill="{palette[model]}">'
                f"<title>{_e(f'{model}: {n} episode(s) of {label} turns')}</title></rect>"
            )
        out.append(
            f'<text x="{centre:.1f}" y="{HEIGHT - BOTTOM + 16}" class="tick"'
            f' text-anchor="middle">{_e(label)}</text>'
        )
    out.append(_x_title("turns"))
    return "".join(out) + "</svg>"


def _when(created_at: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def cost_over_time(facts: Sequence[Facts], palette: dict[str, str]) -> str | None:
    """Cumulative cost by the episodes' start times (UTC), a step line per model and one
    for all; None when nothing priced cost anything."""
    priced = sorted(
        (
            (when, f)
            for f in facts
            if f.summary.cost_usd is not None and (when := _when(f.summary.created_at))
        ),
        key=lambda p: p[0],
    )
    total = sum(float(f.summary.cost_usd or 0.0) for _, f in priced)
    if total <= 0:
        return None
    start, end = priced[0][0].timestamp(), priced[-1][0].timestamp()
    x = axis(0.0, max(end - start, 1.0), 4)
    y = axis(0.0, total)
    out = [_frame("cost-time", "Cumulative cost over time", y, "cost (USD)", usd)]
    lines = [(m, [p for p in priced if p[1].model == m]) for m in sorted(palette)]
    for name, mine in [*lines, ("all models", priced)]:
        if not mine:
            continue
        spent, points = 0.0, [f"{_x(x, 0.0):.1f},{_y(y, 0.0):.1f}"]
        for when, f in mine:
            at = _x(x, when.timestamp() - start)
            points.append(f"{at:.1f},{_y(y, spent):.1f}")
            spent += float(f.summary.cost_usd or 0.0)
            points.append(f"{at:.1f},{_y(y, spent):.1f}")
        colour = palette.get(name, ALL)
        dash = ' stroke-dasharray="5 3"' if name == "all models" else ""
        out.append(
            f'<polyline class="line" points="{" ".join(points)}" stroke="{colour}"{dash}>'
            f"<title>{_e(f'{name}: {usd(spent)} in all')}</title></polyline>"
        )

    def clock(seconds: float) -> str:
        return datetime.fromtimestamp(start + seconds, UTC).strftime("%m-%d %H:%M:%S")

    out += [_x_ticks(x, clock), _x_title("episode started (UTC)")]
    return "".join(out) + "</svg>"
