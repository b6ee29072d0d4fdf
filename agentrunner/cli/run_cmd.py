"""``agentrunner run``: one episode, shown live, then its id and outcome."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.render import EventRenderer
from agentrunner.envs.factory import make_env
from agentrunner.envs.tasks import DEFAULT_TASK
from agentrunner.runner import MAX_TURNS_LIMIT, Rollout, run_agent_episode

DEFAULT_MODEL = "scripted:demo"
EXIT_BY_STATUS = {"completed": 0, "cancelled": 130}


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "run",
        run,
        help="run one episode and record it",
        description="Run one episode of a model against an environment, recording every "
        "request, chunk, tool call and result in the trace store as it happens. With no "
        "arguments it runs the offline scripted model on the bundled demo task.",
    )
    p.add_argument("--task", default=DEFAULT_TASK, help=f"task id (default: {DEFAULT_TASK})")
    p.add_argument(
        "--tasks", type=Path, metavar="PATH", help="a tasks.json file (default: bundled)"
    )
    p.add_argument(
        "--env",
        default="workspace",
        help="'workspace' (the coding workspace, default) or the URL of an OpenEnv server",
    )
    p.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"PROVIDER:MODEL (default: {DEFAULT_MODEL})"
    )
    p.add_argument("--base-url", metavar="URL", help="the provider's base URL (any provider)")
    p.add_argument("--seed", type=int, default=0, help="episode seed (default: 0)")
    p.add_argument(
        "--max-turns",
        type=int,
        default=100,
        metavar="N",
        help=f"model turns at most (1..{MAX_TURNS_LIMIT}, default 100); the only runner limit",
    )


def rollout_exit_code(rollout: Rollout) -> int:
    return EXIT_BY_STATUS.get(rollout.status, 1)


def report(args: argparse.Namespace, rollout: Rollout) -> int:
    if args.json:
        print_json(rollout.to_dict())
    else:
        out = stdout_console()
        out.print(
            f"episode [bold]{rollout.episode_id}[/] {rollout.status} ({rollout.stop_reason}) · "
            f"{rollout.turns_completed} turns · reward [bold]{rollout.total_reward:g}[/]"
        )
        if rollout.error:
            out.print(f"[red]{rollout.error}[/]")
    return rollout_exit_code(rollout)


def run(args: argparse.Namespace) -> int:
    from agentrunner.errors import UsageError
    from providers import get_model

    if not 1 <= args.max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"--max-turns must be between 1 and {MAX_TURNS_LIMIT}")
    options = {"base_url": args.base_url} if args.base_url else {}
    if args.model.startswith("scripted:") and args.base_url:
        stderr_console().print("[yellow]warning:[/] --base-url is ignored by the scripted model")
        options = {}
    model = get_model(args.model, **options)
    store = open_store(args)
    env = make_env(args.env, tasks_path=args.tasks, snapshot_dir=store.path.parent / "snapshots")
    try:
        rollout = run_agent_episode(
            env=env,
            task_id=args.task,
            seed=args.seed,
            model_fn=model,
            store=store,
            max_turns=args.max_turns,
            observer=EventRenderer(stderr_console(), verbose=args.verbose),
        )
    finally:
        env.close()
    return report(args, rollout)
