"""``report --html``: a report as one self-contained HTML file, its tables and its charts.

The charts are plotly figures with plotly.js inlined once in the page, so the file opens with
no network. Every text that comes from the store (task ids, model specs, error messages) is
escaped, in the tables and in the charts' labels too: plotly reads labels as a small HTML
subset, and shows the escaped text as it was.
"""

from __future__ import annotations

import html
import importlib
import itertools
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentrunner.errors import UsageError
from agentrunner.report.build import Facts

INSTALL_HINT = "HTML reports need plotly: pip install 'agentrunner[report]'"
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d", "#eeca3b")
CONFIG = {"displaylogo": False, "responsive": True}

STYLE = """
body { font: 13px/1.45 system-ui, sans-serif; color: #1f2933; margin: 20px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
p.meta { color: #52606d; margin: 0 0 16px; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; font: 12px system-ui, sans-serif; margin-bottom: 8px; }
th, td { border-bottom: 1px solid #d9e2ec; padding: 4px 6px; text-align: right; }
th { background: #f0f4f8; vertical-align: bottom; max-width: 9em; }
td { white-space: nowrap; font-variant-numeric: tabular-nums; }
td.key, th.key { text-align: left; }
tr.overall td { font-weight: 600; border-top: 2px solid #9fb3c8; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px; }
@media (max-width: 900px) { .charts { grid-template-columns: minmax(0, 1fr); } }
.chart { height: 400px; border: 1px solid #d9e2ec; }
"""


def _plotly() -> Any:
    """plotly's graph objects (an optional extra)."""
    try:
        return importlib.import_module("plotly.graph_objects")
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def write(path: Path, made: dict[str, Any], facts: Sequence[Facts], *, source: str) -> None:
    """Write :func:`render`'s page to ``path``."""
    page = render(made, facts, source=source)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the HTML report to {path}: {exc.strerror or exc}") from None


def render(made: dict[str, Any], facts: Sequence[Facts], *, source: str) -> str:
    """The page of a report (``made``, from :func:`~agentrunner.report.build.report`) and
    its episodes (``facts``, for the per-episode charts); ``source`` names the store."""
    go = _plotly()
    from plotly.offline import get_plotlyjs

    colours = _colours(f.model for f in facts)
    figures = [
        ("pass-rate", _pass_rates(go, made, colours)),
        ("reward-cost", _reward_cost(go, facts, colours)),
        ("turns", _turns(go, facts, colours)),
        ("cost-time", _cost_over_time(go, facts, colours)),
    ]
    charts = "".join(
        '<div class="chart">'
        + fig.to_html(include_plotlyjs=False, full_html=False, div_id=name, config=CONFIG)
        + "</div>"
        for name, fig in figures
    )
    rule = (
        f"the verifier {made['verifier']}'s latest result passed"
        if made.get("verifier")
        else f"reward ≥ {made.get('threshold', 1.0):g}"
    )
    overall = made["overall"]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>agentrunner report</title>"
        f"<style>{STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        "<h1>agentrunner report</h1>"
        f'<p class="meta">{overall["episodes"]} episodes from {_e(source)}; an episode passes'
        f" when {_e(rule)}; intervals are 95% (Wilson for pass rates).</p>"
        f"{_not_reproduced(made)}"
        f"<h2>By {_e(', '.join(made['by']))}</h2>{_groups_table(made)}"
        f'<h2>Charts</h2><div class="charts">{charts}</div>'
        f"<h2>Per task</h2>{_tasks_table(made)}"
        f"<h2>pass@k (unbiased, averaged over tasks)</h2>{_pass_at_k_table(made)}"
        f"<h2>How episodes ended</h2>{_endings(overall)}"
        "</body></html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _interval(ci: Sequence[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.1%}, {ci[1]:.1%}]"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _pair(values: dict[str, float | None], a: str, b: str, digits: int = 1) -> str:
    return f"{_num(values[a], digits)} / {_num(values[b], digits)}"


def _metric_cells(m: dict[str, Any]) -> list[str]:
    """A group's numbers as the tables show them (the order of :data:`_HEADERS`)."""
    t = m["tokens"]
    return [
        str(m["episodes"]),
        f"{m['completed']} / {m['cancelled']} / {m['failed']}",
        str(m["passed"]),
        f"{_pct(m['pass_rate'])} {_interval(m['pass_rate_ci95'])}",
        f"{_num(m['reward_mean'])} ± {_num(m['reward_se'])}",
        f"{t['input']:,} / {t['cached']:,} / {t['output']:,} / {t['reasoning']:,}",
        _usd(m["cost_usd"]),
        _usd(m["cost_per_solved_usd"]),
        _pair(m["turns"], "median", "p90"),
        _pair(m["tool_calls"], "median", "p90"),
        _pair(m["latency_s"], "p50", "p90", 2),
    ]


_HEADERS = (
    "episodes",
    "done / cxl / fail",
    "passed",
    "pass rate [95%]",
    "reward ± se",
    "tokens in / cached / out / reasoning",
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


def _groups_table(made: dict[str, Any]) -> str:
    by = made["by"]
    rows = [([str(g["key"][k]) for k in by], _metric_cells(g), "group") for g in made["groups"]]
    rows.append((["all"] * len(by), _metric_cells(made["overall"]), "overall"))
    return _table(by, rows)


def _tasks_table(made: dict[str, Any]) -> str:
    rows = [
        ([task["task_id"], str(row["model"])], _metric_cells(row), "row")
        for task in made["tasks"]
        for row in task["rows"]
    ]
    return _table(["task", "model"], rows)


def _pass_at_k_table(made: dict[str, Any]) -> str:
    by = made["by"]
    groups = [([str(g["key"][k]) for k in by], g["pass_at_k"]) for g in made["groups"]]
    groups.append((["all"] * len(by), made["overall"]["pass_at_k"]))
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


def _not_reproduced(made: dict[str, Any]) -> str:
    """The episodes whose recorded reward ``verify`` did not reproduce (nothing when none)."""
    ids = made.get("reward_not_reproduced") or []
    if not ids:
        return ""
    listed = ", ".join(f"<code>{_e(i)}</code>" for i in ids)
    head = "! reward not reproduced by <code>agentrunner verify</code>:"
    return f"<p><strong>{head}</strong> {listed}</p>"


def _endings(m: dict[str, Any]) -> str:
    stops = "".join(f"<li>{_e(k)}: {v}</li>" for k, v in m["stop_reasons"].items())
    errors = "".join(f"<li>{e['count']} × <code>{_e(e['error'])}</code></li>" for e in m["errors"])
    return (
        f"<p>Stop reasons:</p><ul>{stops or '<li>-</li>'}</ul>"
        f"<p>Most frequent errors:</p><ul>{errors or '<li>none</li>'}</ul>"
    )


def _colours(models: Iterable[str]) -> dict[str, str]:
    names = sorted(set(models))
    return dict(zip(names, itertools.cycle(PALETTE), strict=False))


def _layout(fig: Any, title: str, x: str, y: str, **extra: Any) -> Any:
    fig.update_layout(
        title={"text": title, "x": 0.02, "font": {"size": 15}},
        xaxis_title=x,
        yaxis_title=y,
        template="plotly_white",
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
        legend={"orientation": "h", "y": -0.2},
        **extra,
    )
    return fig


def _by_model(facts: Iterable[Facts]) -> dict[str, list[Facts]]:
    out: dict[str, list[Facts]] = {}
    for f in facts:
        out.setdefault(f.model, []).append(f)
    return dict(sorted(out.items()))


def _pass_rates(go: Any, made: dict[str, Any], colours: dict[str, str]) -> Any:
    """Pass rate per task, a bar per model, with its Wilson interval as error bars."""
    rows: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for task in made["tasks"]:
        for row in task["rows"]:
            rows.setdefault(str(row["model"]), []).append((task["task_id"], row))
    fig = go.Figure()
    for model, cells in sorted(rows.items()):
        rates = [r["pass_rate"] or 0.0 for _, r in cells]
        cis = [r["pass_rate_ci95"] or [0.0, 0.0] for _, r in cells]
        fig.add_trace(
            go.Bar(
                name=_e(model),
                x=[_e(task) for task, _ in cells],
                y=rates,
                marker_color=colours.get(model, PALETTE[0]),
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [hi - rate for rate, (_, hi) in zip(rates, cis, strict=True)],
                    "arrayminus": [rate - lo for rate, (lo, _) in zip(rates, cis, strict=True)],
                },
                customdata=[[r["passed"], r["episodes"]] for _, r in cells],
                hovertemplate="%{x}: %{y:.1%} (%{customdata[0]} of %{customdata[1]})",
            )
        )
    return _layout(
        fig,
        "Pass rate per task (95% interval)",
        "task",
        "pass rate",
        barmode="group",
        yaxis={"range": [0, 1.05], "tickformat": ".0%"},
    )


def _reward_cost(go: Any, facts: Sequence[Facts], colours: dict[str, str]) -> Any:
    """Reward against cost, a point per priced episode."""
    fig = go.Figure()
    for model, mine in _by_model(facts).items():
        priced = [f for f in mine if f.summary.cost_usd is not None]
        fig.add_trace(
            go.Scatter(
                name=_e(model),
                mode="markers",
                x=[f.summary.cost_usd for f in priced],
                y=[f.summary.total_reward for f in priced],
                text=[_e(f"{f.summary.task_id} seed {f.summary.seed}") for f in priced],
                hovertemplate="%{text}: reward %{y:.3f}, $%{x:.4f}",
                marker={"color": colours.get(model, PALETTE[0]), "size": 9, "opacity": 0.7},
            )
        )
    unpriced = sum(f.summary.cost_usd is None for f in facts)
    note = f" ({unpriced} without a price left out)" if unpriced else ""
    return _layout(fig, f"Reward vs cost per episode{note}", "cost (USD)", "reward")


def _turns(go: Any, facts: Sequence[Facts], colours: dict[str, str]) -> Any:
    """How many turns episodes took, a histogram per model."""
    fig = go.Figure()
    for model, mine in _by_model(facts).items():
        fig.add_trace(
            go.Histogram(
                name=_e(model),
                x=[f.summary.turns for f in mine],
                xbins={"size": 1},
                marker_color=colours.get(model, PALETTE[0]),
            )
        )
    return _layout(fig, "Turns per episode", "turns", "episodes", barmode="group")


def _when(created_at: str) -> str:
    """An ISO 8601 time in UTC as plotly's date axis reads it."""
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return created_at
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _cost_over_time(go: Any, facts: Sequence[Facts], colours: dict[str, str]) -> Any:
    """Cumulative cost by the episodes' start times, a line per model and one for all."""
    fig = go.Figure()
    for model, mine in [*_by_model(facts).items(), ("all models", list(facts))]:
        priced = sorted(
            (f for f in mine if f.summary.cost_usd is not None), key=lambda f: f.summary.created_at
        )
        if not priced:
            continue
        fig.add_trace(
            go.Scatter(
                name=_e(model),
                mode="lines",
                x=[_when(f.summary.created_at) for f in priced],
                y=list(itertools.accumulate(float(f.summary.cost_usd or 0.0) for f in priced)),
                line={"color": colours.get(model, "#52606d"), "width": 2, "shape": "hv"},
                hovertemplate="%{x}: $%{y:.4f}",
            )
        )
    return _layout(fig, "Cumulative cost over time", "episode started (UTC)", "cost (USD)")
