"""``agentrunner batch``: many episodes (task x seed) with a progress bar; re-run resumes."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentrunner.cli.branching_opts import add_branching_options, branching_from_args
from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.model_opts import (
    add_context_options,
    add_model_options,
    context_settings,
    model_options,
    system_prompt,
)
from agentrunner.cli.otlp_opts import add_otlp_options, close_live_otlp, live_otlp
from agentrunner.cli.ray_opts import add_ray_option, ray_executor
from agentrunner.cli.run_cmd import DEFAULT_MODEL
from agentrunner.cli.sandbox_opts import add_sandbox_options, sandbox_from_args, warn_about_sandbox
from agentrunner.cli.seeds import SEEDS_FORMS, parse_seeds
from agentrunner.envs.factory import make_env
from agentrunner.envs.registry import flag_help
from agentrunner.envs.tasks import load_tasks
from agentrunner.lifecycle.batch import BatchEpisode, run_batch, select_pairs
from agentrunner.runtime.runner import MAX_TURNS_LIMIT
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Status
from agentrunner.values.safe_text import line, one_line_visible, plain
from providers import get_model

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "batch",
        batch,
        help="run many episodes (tasks x seeds)",
        description="Run one episode per (task, seed) pair with bounded concurrency into one "
        "store, with a progress bar (running mean reward and cost) and a summary table. "
        "Running the same command again resumes the batch: finished episodes are skipped, "
        "interrupted or cancelled ones resumed, missing ones run. Ctrl-C cancels the running "
        "episodes cleanly (a second Ctrl-C quits at once; they stay resumable). With --ray "
        "the episodes run on a Ray cluster; a worker or node that dies mid-episode is "
        "replaced and its episodes resume from the store.",
    )
    p.add_argument(
        "--tasks",
        type=Path,
        metavar="PATH",
        help="a tasks file: a JSON list of task objects, or JSON Lines (default: bundled)",
    )
    p.add_argument(
        "--task", action="append", metavar="ID", help="a task id (repeatable; default: all)"
    )
    p.add_argument("--split", help="only tasks of this split (train, test, ...)")
    p.add_argument(
        "--seeds",
        required=True,
        help=f"seeds: inclusive ranges and single seeds, e.g. {SEEDS_FORMS}",
    )
    p.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"PROVIDER:MODEL (default {DEFAULT_MODEL})"
    )
    p.add_argument("--base-url", metavar="URL", help="the provider's base URL")
    p.add_argument("--env", default="workspace", help=flag_help())
    p.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="episodes at once (default 4)"
    )
    p.add_argument(
        "--max-turns",
        type=int,
        default=100,
        metavar="N",
        help="model turns per episode (default 100)",
    )
    p.add_argument("--name", help="a name for the batch (part of its identity)")
    add_ray_option(p)
    add_model_options(p, system_prompt=True)
    add_context_options(p, keeps="none, and the model table's window")
    add_sandbox_options(p)
    add_otlp_options(p)
    add_branching_options(p, concurrency=False)


def _task_ids(args: argparse.Namespace) -> list[str]:
    tasks = load_tasks(args.tasks)
    known = {t.task_id for t in tasks}
    unknown = [t for t in args.task or [] if t not in known]
    if unknown:
        raise UsageError(f"unknown task(s): {', '.join(unknown)}; see `agentrunner tasks`")
    selected = [
        t.task_id
        for t in tasks
        if (not args.task or t.task_id in args.task) and (not args.split or t.split == args.split)
    ]
    if not selected:
        raise UsageError("the selection (--task/--split) matches no task")
    return selected


def _absolute(tasks: Path | None) -> Path | None:
    """The tasks file's absolute path: a Ray worker builds the environment in a folder of its
    own (its node's)."""
    return tasks.resolve() if tasks is not None else None


def batch(args: argparse.Namespace) -> int:
    on_ray, address = ray_executor(args)
    branching = branching_from_args(args)
    if not 1 <= args.max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"--max-turns must be between 1 and {MAX_TURNS_LIMIT}")
    pairs = select_pairs(_task_ids(args), parse_seeds(args.seeds))
    options = model_options(args, args.model)
    addition = system_prompt(args)
    get_model(args.model, **options)  # fail fast on a bad spec or a missing key
    store = open_store(args)
    sandbox = sandbox_from_args(args)
    warn_about_sandbox(make_env(args.env, tasks_path=_absolute(args.tasks), sandbox=sandbox))

    rewards: list[float] = []
    costs: list[float] = []
    progress = Progress(
        TextColumn("[bold]batch"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=False,
    )
    bar = progress.add_task("batch", total=len(pairs), stats="")

    def on_episode(e: BatchEpisode) -> None:
        if e.status == Status.COMPLETED and e.total_reward is not None:
            rewards.append(e.total_reward)
        if e.cost_usd is not None:
            costs.append(e.cost_usd)
        mean = f"{sum(rewards) / len(rewards):.3f}" if rewards else "-"
        progress.update(
            bar, advance=1, stats=f"reward μ {mean} · {fmt.cost(sum(costs) if costs else None)}"
        )
        if args.verbose or e.action == "error":
            progress.console.print(
                line(f"{e.task_id} seed {e.seed}: {e.action} {e.status} {e.error or ''}")
            )

    live = live_otlp(args, store)
    try:
        with progress:
            result = run_batch(
                store,
                task_seed_pairs=pairs,
                # Plain functions and values: a Ray worker builds them again.
                env_factory=functools.partial(
                    make_env, args.env, tasks_path=_absolute(args.tasks), sandbox=sandbox
                ),
                model_factory=functools.partial(get_model, args.model, **options),
                concurrency=args.concurrency,
                max_turns=args.max_turns,
                name=args.name,
                on_episode=on_episode,
                system_prompt=addition,
                executor="ray" if on_ray else "threads",
                ray_address=address,
                branching=branching,
                context=context_settings(args) or None,
                observer_factory=live.observer if live is not None else None,
            )
    except KeyboardInterrupt:
        stderr_console().print("[yellow]batch cancelled[/]; run the same command to resume it")
        os._exit(130)
    finally:
        close_live_otlp(live)
    if args.json:
        print_json(result.to_dict())
    else:
        _print_summary(store, result.episodes)
        s = result.summary()
        mean = "-" if s["mean_reward"] is None else f"{s['mean_reward']:.3f}"
        stdout_console().print(
            f"batch {result.batch_id}: {s['completed']}/{s['episodes']} completed "
            f"(ran {s['ran']}, resumed {s['resumed']}, skipped {s['skipped']},"
            f" errors {s['errors']})"
            f" · mean reward {mean} · cost {fmt.cost(s['cost_usd'])}"
        )
    return 1 if any(e.action == "error" for e in result.episodes) else 0


def _print_summary(store: StoreBackend, episodes: list[BatchEpisode]) -> None:
    short = fmt.unique_prefixes(store.episode_ids())
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    for col in ("task", "seed", "episode", "action", "status", "turns", "reward", "cost"):
        table.add_column(
            col,
            no_wrap=True,
            justify="right" if col in ("seed", "turns", "reward", "cost") else "left",
        )
    for e in episodes:
        table.add_row(
            plain(one_line_visible(e.task_id)),
            str(e.seed),
            short.get(e.episode_id, e.episode_id) if e.episode_id else "-",
            e.action,
            e.status,
            str(e.turns),
            fmt.reward(e.total_reward),
            fmt.cost(e.cost_usd),
        )
    stdout_console().print(table)
