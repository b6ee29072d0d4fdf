"""``agentrunner report``: what a set of runs says, in numbers; ``--compare A B`` pairs two
and shows each side by context policy."""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.report.build import GROUP_KEYS, Facts, ReportFilter, collect, compare, report
from agentrunner.report.html import write as write_html
from agentrunner.report.policy import NOT_RECORDED
from agentrunner.report.records import Comparison, Report
from agentrunner.report.text import (
    METRIC_COLUMNS,
    cache_hit,
    cells,
    episodes,
    key,
    num,
    rate,
    recorded,
    reward,
    spend,
    tokens,
)
from agentrunner.values.errors import UsageError

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

STATUSES = ("completed", "cancelled", "failed", "interrupted", "running", "pending")
CONTEXT_SIDE = "context="
"""A --compare side that names a context policy: ``context=mask:10``, ``context=mask:*``."""


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "report",
        run_report,
        help="an evaluation report: pass rate with its interval, pass@k, reward, cost, ...",
        description="Summarise the episodes the filters keep, from the store alone: per group "
        "(--by model, task, split, batch or context: the context policy each episode last ran "
        "with, as its episode.start or a fork's or resume's --context recorded it, e.g. none, "
        f"mask:10, summarize; '{NOT_RECORDED}' when its record names none, as for an imported "
        "session) and per task, the episodes and how they ended, the "
        "pass rate (reward >= --threshold, or a --verifier's latest result) with its 95% "
        "Wilson interval, mean reward ± standard error, pass@k over the seeds (unbiased "
        "estimator), tokens, the prompt-cache hit ratio (cache-read input tokens / all input "
        "tokens, of all the group's known tokens and the median of its episodes' ratios; "
        "'unknown', never 0%, when no episode's usage is known), cost (total and per solved "
        "task), turns and tool calls (median, "
        "p90), model latency (p50, p90), stop reasons and the most frequent errors. "
        "--compare A B (each a model spec, wildcards allowed, a batch id, prefix or "
        "name, or context=POLICY: the episodes that ran with that context policy, wildcards "
        "allowed) pairs the two by (task, seed) instead: the pass-rate difference with "
        "McNemar's exact test, reward and cost differences with 95% intervals, and the tasks "
        "each solves that the other does not; then each side grouped by context policy: "
        "episodes, reward, tokens, cache hit ratio and cost. So two batches run with "
        "--context mask:10 and --context summarize, or a root and its `fork --context` "
        "(with --include-forks), compare as policies. A side that selects no episode is an "
        "error (exit 2). An ended episode with no reward (an imported session, a run with no "
        "test) is unjudged: counted apart ('unjudged N'), never in a pass rate or reward "
        "mean; token sums and costs are of what is known and say how many are unknown. Only "
        "root "
        "episodes count unless --include-forks. "
        "--html FILE also writes the report as one self-contained HTML page with no script "
        "(tables; inline SVG charts of pass rate per task and model, reward vs cost, turns, "
        "cost over time; and per task its episodes, failures first, with the `agentrunner "
        "show EP` that opens each).",
    )
    p.add_argument(
        "--by",
        action="append",
        choices=GROUP_KEYS,
        help="group by this (repeatable; default: model); context: the context policy each"
        " episode ran with",
    )
    p.add_argument("--task", action="append", default=[], metavar="ID", help="task id or glob")
    p.add_argument("--model", action="append", default=[], metavar="SPEC", help="model or glob")
    p.add_argument("--batch", action="append", default=[], metavar="ID", help="batch id or name")
    p.add_argument("--status", action="append", default=[], choices=STATUSES)
    p.add_argument("--split", metavar="S", help="tasks of this split (from their tasks file)")
    p.add_argument("--since", metavar="TIME", help="started at or after (ISO 8601, UTC)")
    p.add_argument("--until", metavar="TIME", help="started at or before (ISO 8601, UTC)")
    p.add_argument(
        "--include-forks", action="store_true", help="count forks too (default: roots only)"
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=1.0,
        metavar="R",
        help="an episode passes when its reward is at least R (default 1.0)",
    )
    p.add_argument("--verifier", metavar="NAME", help="pass = that verifier's latest result passed")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="compare two model specs, batches or context=POLICY on the (task, seed) pairs"
        " both ran; each side is also shown by context policy",
    )
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the report to FILE as one self-contained HTML page with charts",
    )


def run_report(args: argparse.Namespace) -> int:
    store = open_store(args)
    where = ReportFilter(
        tasks=tuple(args.task),
        models=tuple(args.model),
        batches=tuple(args.batch),
        statuses=tuple(args.status),
        split=args.split,
        since=args.since,
        until=args.until,
        include_forks=args.include_forks,
    )
    options: dict[str, Any] = {"threshold": args.threshold, "verifier": args.verifier}
    if args.compare and args.html:
        raise UsageError("--html writes a report, not a --compare; use one or the other")
    if args.compare:
        shared = collect(store, where, need=("context",), **options)  # for both sides
        a, b = (_side(store, spec, shared) for spec in args.compare)
        for side, spec, chosen in (("A", args.compare[0], a), ("B", args.compare[1], b)):
            if not chosen:
                raise UsageError(
                    f"--compare {side} {spec!r} selects no episode among the {len(shared)} the "
                    "filters keep; give a model spec (wildcards allowed) or a batch id or name"
                )
        both = {e.summary.episode_id for e in a} & {e.summary.episode_id for e in b}
        if both:
            raise UsageError(
                f"A and B select {len(both)} of the same episodes; give two models or batches"
                " that do not overlap"
            )
        result = compare(a, b, names=(args.compare[0], args.compare[1]))
        if args.json:
            print_json(result.to_json())
        else:
            _print_compare(result)
        return 0
    facts = collect(store, where, need=tuple(args.by or ["model"]), **options)
    if not facts:
        raise UsageError(f"no episodes in {store.where} match the filters")
    made = report(facts, args.by or ["model"], **options)
    if args.html:
        write_html(args.html, made, facts, source=_store_name(store.where))
    if args.json:
        print_json(made.to_json())
    else:
        _print_report(made)
    if args.html:
        stderr_console().print(f"wrote {args.html}", markup=False, soft_wrap=True)
    return 0


def _store_name(where: str) -> str:
    """The store as the HTML page names it: its file name, or a Postgres database's name;
    never the path (the page is made to be shared)."""
    if "://" in where:
        return f"the Postgres database {where.rsplit('/', 1)[-1].split('?')[0] or '-'}"
    return Path(where).name


def _side(store: StoreBackend, spec: str, facts: list[Facts]) -> list[Facts]:
    """One side of a comparison, among the episodes the filters keep: a context policy
    (``context=POLICY``), a batch (id, prefix or name) or a model spec (shell-style
    wildcards)."""
    if spec.startswith(CONTEXT_SIDE):
        policy = spec.removeprefix(CONTEXT_SIDE)
        return [f for f in facts if fnmatch.fnmatchcase(f.key("context"), policy)]
    try:
        batch = store.resolve_batch(spec)
    except UsageError as exc:
        if "ambiguous" in str(exc):
            raise
        return [f for f in facts if fnmatch.fnmatchcase(f.model, spec)]
    return [f for f in facts if batch in f.batches]


def _print_report(made: Report) -> None:
    out = stdout_console()
    table = Table(title=f"by {', '.join(made.by)}", show_lines=False)
    for column in (*made.by, *METRIC_COLUMNS):
        table.add_column(column)
    for group in made.groups:
        table.add_row(*[key(value) for value in group.values], *cells(group.metrics))
    table.add_row(*[key("all") for _ in made.by], *cells(made.overall))
    out.print(table)
    overall = made.overall
    stops = ", ".join(f"{k} {v}" for k, v in overall.stop_reasons.items())
    out.print(f"stop reasons: {recorded(stops or '-')}")
    if overall.unjudged:
        out.print(
            f"unjudged {overall.unjudged}: ended with no reward (imported, or run with no"
            " test) or no verdict; left out of pass rates, reward means and pass@k"
        )
    if overall.unknown_usage_calls or overall.cost_unknown:
        out.print(
            f"unknown usage: {overall.unknown_usage_calls} model call(s) without token"
            f" counts, {overall.cost_unknown} episode(s) without a cost; sums are of what"
            " is known"
        )
    if made.reward_not_reproduced:
        ids = ", ".join(made.reward_not_reproduced)
        out.print(f"[bold red]![/] reward not reproduced by `agentrunner verify`: {ids}")
    for error in overall.errors:
        out.print(f"  {error.count} x {recorded(error.error)}")
    tasks = Table(title="per task")
    for column in ("task", "model", "episodes", "pass rate [95%]", "reward ± se", "cost"):
        tasks.add_column(column)
    for task in made.tasks:
        for row in task.rows:
            m = row.metrics
            tasks.add_row(
                key(task.task_id), key(row.model), episodes(m), rate(m), reward(m), spend(m)
            )
    out.print(tasks)


def _print_compare(result: Comparison) -> None:
    out = stdout_console()
    if result.unjudged_a + result.unjudged_b:
        out.print(
            f"unjudged (no reward, never paired): A {result.unjudged_a}, B {result.unjudged_b}"
        )
    if result.pairs:
        _print_pairs(result)
    else:
        out.print(f"no judged (task, seed) pair was run by both {result.a} and {result.b}")
    table = Table(title="each side by context policy (the --context its episodes ran with)")
    for column in (
        "side",
        "context policy",
        "episodes",
        "reward ± se",
        "tokens in/cached/out/reasoning",
        "cache hit all/ep med",
        "cost",
    ):
        table.add_column(column)
    for group in result.by_context:
        m = group.metrics
        side = result.a if group.side == "A" else result.b
        table.add_row(
            key(f"{group.side} {side}"),
            key(group.context),
            episodes(m),
            reward(m),
            tokens(m),
            cache_hit(m),
            spend(m),
        )
    out.print(table)


def _print_pairs(result: Comparison) -> None:
    """The paired comparison: pass rates with McNemar's test, reward and cost differences,
    the tasks only one side solved."""
    out = stdout_console()
    test = result.mcnemar
    out.print(
        f"{result.pairs} (task, seed) pairs run by both: pass rate A {result.pass_rate_a:.0%}"
        f", B {result.pass_rate_b:.0%} (B - A {result.pass_rate_difference:+.0%});"
        f" only A passed {test.only_a}, only B {test.only_b}: McNemar exact p ="
        f" {test.p_value:.3g}"
    )
    ci = result.reward_difference_ci95
    out.print(
        f"reward B - A: {num(result.reward_difference, 3)}"
        + (f" [{ci.low:.3f}, {ci.high:.3f}]" if ci else "")
    )
    cost_ci = result.cost_difference_ci95
    if result.cost_difference_usd is not None:
        out.print(
            f"cost B - A per pair: ${result.cost_difference_usd:.4f}"
            + (f" [{cost_ci.low:.4f}, {cost_ci.high:.4f}]" if cost_ci else "")
            + f" ({result.priced_pairs} priced pairs)"
        )
    out.print(f"solved only by A: {recorded(', '.join(result.solved_only_by_a) or '-')}")
    out.print(f"solved only by B: {recorded(', '.join(result.solved_only_by_b) or '-')}")
