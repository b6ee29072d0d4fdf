"""``report --html``: a report as one self-contained HTML page: its tables, its charts and
the episodes of each task with the command that opens each.

The charts are inline SVG (:mod:`agentrunner.report.svg`): the page has no script, loads
nothing and opens with no network. Every text that comes from the store (task ids, model
specs, error messages, episode ids) is escaped. The page names the store by its file name
only, never by its path.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path

from agentrunner.report import svg
from agentrunner.report.build import ENDED, Facts
from agentrunner.report.cache import episode_ratio
from agentrunner.report.records import CacheHits, Metrics, Report
from agentrunner.report.stats import Interval
from agentrunner.report.text import episodes as episodes_cell
from agentrunner.report.text import reward, spend
from agentrunner.report.text import tokens as tokens_cell
from agentrunner.values.errors import UsageError

STYLE = """
body { font: 13px/1.45 system-ui, sans-serif; color: #1f2933; margin: 20px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
h3 { font-size: 14px; margin: 16px 0 4px; }
p.meta { color: #52606d; margin: 0 0 16px; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; font: 12px system-ui, sans-serif; margin-bottom: 8px; }
th, td { border-bottom: 1px solid #d9e2ec; padding: 4px 6px; text-align: right; }
th { background: #f0f4f8; vertical-align: bottom; max-width: 9em; }
td { white-space: nowrap; font-variant-numeric: tabular-nums; }
td.key, th.key { text-align: left; }
tr.overall td { font-weight: 600; border-top: 2px solid #9fb3c8; }
td.failed { color: #b42318; } td.passed { color: #2f7d32; } td.unjudged { color: #7b6d00; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px; }
@media (max-width: 900px) { .charts { grid-template-columns: minmax(0, 1fr); } }
figure { margin: 0; border: 1px solid #d9e2ec; padding: 8px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg.chart { width: 100%; height: auto; display: block; }
svg .grid { stroke: #e4e7eb; } svg .axis { stroke: #7b8794; }
svg .tick { font-size: 10px; fill: #52606d; } svg .label { font-size: 11px; fill: #323f4b; }
svg .none { font-size: 10px; fill: #9aa5b1; } svg .whisker { stroke: #1f2933; }
svg .line { fill: none; stroke-width: 2; } svg .point { fill-opacity: 0.75; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; }
ul.legend li { margin-right: 14px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
code { font-size: 12px; }
"""


def write(path: Path, made: Report, facts: Sequence[Facts], *, source: str) -> None:
    """Write :func:`render`'s page to ``path``."""
    page = render(made, facts, source=source)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the HTML report to {path}: {exc.strerror or exc}") from None


def render(made: Report, facts: Sequence[Facts], *, source: str) -> str:
    """The page of a report (``made``, from :func:`~agentrunner.report.build.report`) and
    its episodes (``facts``, for the per-episode charts and lists); ``source`` names the
    store (its file name: the page never shows where it lives)."""
    rule = (
        f"the verifier {made.verifier}'s latest result passed"
        if made.verifier
        else f"reward ≥ {made.threshold:g}"
    )
    overall = made.overall
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>agentrunner report</title><style>{STYLE}</style></head><body>"
        "<h1>agentrunner report</h1>"
        f'<p class="meta">{overall.episodes} episodes from {_e(source)}; an episode passes'
        f" when {_e(rule)}; intervals are 95% (Wilson for pass rates).</p>"
        f"{_unjudged(overall)}{_not_reproduced(made)}"
        f"<h2>By {_e(', '.join(made.by))}</h2>{_groups_table(made)}"
        f"<h2>Charts</h2>{_charts(made, facts)}"
        f"<h2>Per task</h2>{_tasks_table(made)}"
        f"<h2>Episodes per task</h2>{_episodes(facts)}"
        f"<h2>pass@k (unbiased, averaged over tasks)</h2>{_pass_at_k_table(made)}"
        f"<h2>How episodes ended</h2>{_endings(overall)}"
        "</body></html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _interval(ci: Interval | None) -> str:
    return "-" if ci is None else f"[{ci.low:.1%}, {ci.high:.1%}]"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _ratio(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1%}"


def _cache_hits(hits: CacheHits) -> str:
    """All known input tokens' ratio / the episodes' median / their lowest (unknown when no
    episode's usage is known), and how many episodes' ratio is unknown."""
    if hits.ratio is None:
        return "unknown"
    known = " / ".join(_ratio(r) for r in (hits.ratio, hits.episode_median, hits.episode_min))
    return known + (f" (+{hits.unknown} unknown)" if hits.unknown else "")


def _pair(a: float | None, b: float | None, digits: int = 1) -> str:
    return f"{_num(a, digits)} / {_num(b, digits)}"


def _metric_cells(m: Metrics) -> list[str]:
    """A group's numbers as the tables show them (the order of :data:`_HEADERS`)."""
    return [
        episodes_cell(m),
        f"{m.completed} / {m.cancelled} / {m.failed}",
        str(m.passed),
        f"{_pct(m.pass_rate)} {_interval(m.pass_rate_ci95)}",
        reward(m, 3),
        tokens_cell(m).replace("/", " / "),
        _cache_hits(m.cache_hits),
        spend(m),
        _usd(m.cost_per_solved_usd),
        _pair(m.turns.median, m.turns.p90),
        _pair(m.tool_calls.median, m.tool_calls.p90),
        _pair(m.latency_s.p50, m.latency_s.p90, 2),
    ]


_HEADERS = (
    "episodes",
    "done / cxl / fail",
    "passed",
    "pass rate [95%]",
    "reward ± se",
    "tokens in / cached / out / reasoning",
    "cache hit all / ep med / ep min",
    "cost",
    "$ / solved",
    "turns med / p90",
    "tools med / p90",
    "latency s p50 / p90",
)


def _table(keys: Sequence[str], rows: Iterable[tuple[list[str], list[str], str]]) -> str:
    head = "".join(f'<th class="key">{_e(k)}</th>' for k in keys)
    head += "".join(f"<th>{_e(h)}</th>" for h in _HEADERS)
    body = "".join(
        f'<tr class="{cls}">'
        + "".join(f'<td class="key">{_e(k)}</td>' for k in key)
        + "".join(f"<td>{_e(c)}</td>" for c in cells)
        + "</tr>"
        for key, cells, cls in rows
    )
    return _wide(head, body)


def _wide(head: str, body: str) -> str:
    """A table that scrolls sideways when the window is narrower."""
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="wide">{table}</div>'


def _groups_table(made: Report) -> str:
    rows = [(list(g.values), _metric_cells(g.metrics), "group") for g in made.groups]
    rows.append((["all"] * len(made.by), _metric_cells(made.overall), "overall"))
    return _table(made.by, rows)


def _tasks_table(made: Report) -> str:
    rows = [
        ([task.task_id, row.model], _metric_cells(row.metrics), "row")
        for task in made.tasks
        for row in task.rows
    ]
    return _table(["task", "model"], rows)


def _pass_at_k_table(made: Report) -> str:
    by = made.by
    groups = [(list(g.values), g.metrics.pass_at_k) for g in made.groups]
    groups.append((["all"] * len(by), made.overall.pass_at_k))
    top = max((int(k) for _, at_k in groups for k in at_k), default=0)
    head = "".join(f'<th class="key">{_e(k)}</th>' for k in by)
    head += "".join(f"<th>pass@{k}</th>" for k in range(1, top + 1))
    body = "".join(
        "<tr>"
        + "".join(f'<td class="key">{_e(k)}</td>' for k in key)
        + "".join(f"<td>{_pct(at_k.get(str(k)))}</td>" for k in range(1, top + 1))
        + "</tr>"
        for key, at_k in groups
    )
    return _wide(head, body)


def _not_reproduced(made: Report) -> str:
    """The episodes whose recorded reward ``verify`` did not reproduce (nothing when none)."""
    if not made.reward_not_reproduced:
        return ""
    listed = ", ".join(f"<code>{_e(i)}</code>" for i in made.reward_not_reproduced)
    head = "! reward not reproduced by <code>agentrunner verify</code>:"
    return f"<p><strong>{head}</strong> {listed}</p>"


def _endings(m: Metrics) -> str:
    stops = "".join(f"<li>{_e(k)}: {v}</li>" for k, v in m.stop_reasons.items())
    errors = "".join(f"<li>{e.count} × <code>{_e(e.error)}</code></li>" for e in m.errors)
    return (
        f"<p>Stop reasons:</p><ul>{stops or '<li>-</li>'}</ul>"
        f"<p>Most frequent errors:</p><ul>{errors or '<li>none</li>'}</ul>"
    )


def _unjudged(m: Metrics) -> str:
    """What the numbers leave out: unjudged episodes, unknown usage (nothing when none)."""
    out = []
    if m.unjudged:
        out.append(
            f"unjudged {m.unjudged}: ended with no reward (imported, or run with no test)"
            " or no verdict; left out of pass rates, reward means and pass@k."
        )
    if m.unknown_usage_calls or m.cost_unknown:
        out.append(
            f"Unknown usage: {m.unknown_usage_calls} model call(s) without token counts,"
            f" {m.cost_unknown} episode(s) without a cost; sums are of what is known."
        )
    return "".join(f'<p class="meta">{_e(line)}</p>' for line in out)


def _charts(made: Report, facts: Sequence[Facts]) -> str:
    palette = svg.colours(f.model for f in facts)
    drawn = [
        ("Pass rate per task and model (95% interval)", svg.pass_rates(made, palette), False),
        ("Reward against cost per episode", svg.reward_cost(facts, palette), False),
        ("Turns per episode", svg.turns(facts, palette), False),
        ("Cumulative cost over time", svg.cost_over_time(facts, palette), True),
    ]
    figures = "".join(
        f"<figure><figcaption>{_e(title)}</figcaption>{chart}{_legend(palette, total)}</figure>"
        for title, chart, total in drawn
        if chart is not None
    )
    left_out = [title for title, chart, _ in drawn if chart is None]
    note = (
        f'<p class="meta">Not drawn (nothing priced cost anything, or no episode to show):'
        f" {_e(', '.join(left_out))}.</p>"
        if left_out
        else ""
    )
    return f'<div class="charts">{figures}</div>{note}'


def _legend(palette: dict[str, str], total: bool) -> str:
    items = [*palette.items(), *([("all models (dashed)", svg.ALL)] if total else [])]
    return (
        '<ul class="legend">'
        + "".join(
            f'<li><span class="swatch" style="background:{colour}"></span>{_e(name)}</li>'
            for name, colour in items
        )
        + "</ul>"
    )


def outcome(f: Facts) -> str:
    """How an episode is counted: failed, passed, unjudged or not ended."""
    if f.summary.status not in ENDED:
        return "not ended"
    if f.passed is None:
        return "unjudged"
    return "passed" if f.passed else "failed"


ORDER = {"failed": 0, "unjudged": 1, "not ended": 2, "passed": 3}


def _episodes(facts: Iterable[Facts]) -> str:
    """Per task, its episodes (failures first, then unjudged, not ended, passed) with the
    command that opens each."""
    by_task: dict[str, list[Facts]] = {}
    for f in facts:
        by_task.setdefault(f.summary.task_id, []).append(f)
    out = []
    head = "".join(
        f'<th class="key">{h}</th>'
        for h in (
            "outcome",
            "episode",
            "model",
            "seed",
            "reward",
            "cache hit",
            "stop",
            "open it with",
        )
    )
    for task, mine in sorted(by_task.items()):
        rows = "".join(
            f'<tr><td class="key {outcome(f)}">{outcome(f)}</td>'
            f'<td class="key"><code>{_e(f.summary.episode_id)}</code></td>'
            f'<td class="key">{_e(f.model)}</td><td>{f.summary.seed}</td>'
            f"<td>{'-' if f.reward is None else _e(f'{f.reward:g}')}</td>"
            f"<td>{_ratio(episode_ratio(f.summary.tokens))}</td>"
            f'<td class="key">{_e(f.summary.stop_reason or f.summary.status)}</td>'
            f'<td class="key"><code>agentrunner show {_e(f.summary.episode_id)}</code></td></tr>'
            for f in sorted(mine, key=lambda f: (ORDER[outcome(f)], f.summary.created_at))
        )
        out.append(f"<h3>{_e(task)}</h3>{_wide(head, rows)}")
    return "".join(out)
