"""The branching options ``run`` and ``batch`` share, and the live line of a decision point."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentrunner.lifecycle.decisions import spend
from agentrunner.values.branching import Branching
from agentrunner.values.errors import UsageError
from agentrunner.values.formatting import plural

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

_FLAGS = ("actions", "samples", "adopt", "horizon", "max_cost")


def add_branching_options(parser: argparse.ArgumentParser, *, concurrency: bool) -> None:
    group = parser.add_argument_group(
        "branching while running (best-of-N decision points; see README, Branching)"
    )
    group.add_argument(
        "--branch-every",
        type=int,
        metavar="N",
        help="at every N-th model turn, sample --actions candidate actions at that exact "
        "input, run --samples recorded continuations of each, and go on with the best one",
    )
    group.add_argument("--actions", type=int, metavar="K", help="candidates per decision point")
    group.add_argument("--samples", type=int, metavar="M", help="continuations run per candidate")
    group.add_argument(
        "--adopt",
        choices=("best", "measure"),
        help="best (default): continue with the highest-valued candidate (ties: the first); "
        "measure: keep the main line's own action and only measure the others",
    )
    group.add_argument(
        "--horizon",
        type=int,
        metavar="H",
        help="continuations run H turns past the decision point (default: to their end)",
    )
    names = ("--branch-concurrency", "--concurrency") if concurrency else ("--branch-concurrency",)
    group.add_argument(
        *names,
        dest="branch_concurrency",
        type=int,
        default=4,
        metavar="C",
        help="forks run at once while branching (default 4)",
    )
    group.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop branching (not the episode) once it has cost this much; recorded as an event",
    )


def branching_from_args(args: argparse.Namespace) -> Branching | None:
    """The settings the flags ask for (None: no branching)."""
    given = [f for f in _FLAGS if getattr(args, f, None) is not None]
    if args.branch_every is None:
        if given:
            flags = ", ".join("--" + f.replace("_", "-") for f in given)
            raise UsageError(f"{flags} go with --branch-every N")
        return None
    if args.actions is None or args.samples is None:
        raise UsageError("--branch-every needs --actions K and --samples M")
    return Branching(
        every=args.branch_every,
        actions=args.actions,
        samples=args.samples,
        adopt=args.adopt or "best",
        horizon=args.horizon,
        concurrency=args.branch_concurrency,
        max_cost=args.max_cost,
    )


def spend_line(store: StoreBackend, episode_id: str) -> str:
    """What branching has cost so far, apart from the main line (the live view's line after
    each decision point, whose candidates and values the transcript shows)."""
    spent = spend(store, episode_id)
    tokens = sum(spent["tokens"].values())
    cost = spent["cost_usd"]
    return (
        f"branching so far: {plural(spent['decisions'], 'decision point')}, {tokens:,} tokens"
        + (f", ${cost:.4f}" if cost is not None else "")
        + " (apart from the main line)"
    )
