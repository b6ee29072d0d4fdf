"""``agentrunner run``: one episode, shown live, then its id and outcome."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from agentrunner.cli.branching_opts import add_branching_options, branching_from_args, spend_line
from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    reward_text,
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
from agentrunner.cli.render import EventRenderer
from agentrunner.cli.sandbox_opts import add_sandbox_options, sandbox_from_args, warn_about_sandbox
from agentrunner.envs.factory import make_env
from agentrunner.envs.registry import flag_help
from agentrunner.envs.tasks import DEFAULT_TASK
from agentrunner.envs.workspace import REPO_MAX_STEPS, WorkspaceEnv
from agentrunner.lifecycle.batch import SEED_MAX, SEED_MIN
from agentrunner.lifecycle.decisions import spend
from agentrunner.lifecycle.resume import can_resume
from agentrunner.runtime.recorder import Observer
from agentrunner.runtime.runner import MAX_TURNS_LIMIT, Rollout, RunConfig, run_agent_episode
from agentrunner.values.environment import Environment
from agentrunner.values.errors import StoreError, UsageError
from agentrunner.values.events import MessageEvent
from agentrunner.values.formatting import plural
from agentrunner.values.safe_text import literal
from agentrunner.values.system_prompt import with_system_prompt
from providers import get_model

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

DEFAULT_MODEL = "scripted:demo"
EXIT_BY_STATUS = {"completed": 0, "cancelled": 130}


def seed_value(text: str) -> int:
    """``--seed``: an integer the store can keep."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not SEED_MIN <= seed <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"a seed is between {SEED_MIN} and {SEED_MAX}")
    return seed


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "run",
        run,
        help="run one episode and record it",
        description="Run one episode of a model against an environment, recording every "
        "request, chunk, tool call and result in the trace store as it happens. With no "
        "arguments it runs the offline scripted model on the bundled demo task. With --repo "
        "the agent works on a private copy of your git repository (never on the repository "
        "itself); `agentrunner diff EP` then prints its change as a patch.",
    )
    p.add_argument("--task", default=DEFAULT_TASK, help=f"task id (default: {DEFAULT_TASK})")
    p.add_argument(
        "--tasks",
        type=Path,
        metavar="PATH",
        help="a tasks file: a JSON list of task objects, or JSON Lines (default: bundled)",
    )
    p.add_argument(
        "--env",
        default="workspace",
        help=flag_help(),
    )
    p.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"PROVIDER:MODEL (default: {DEFAULT_MODEL})"
    )
    p.add_argument("--base-url", metavar="URL", help="the provider's base URL (any provider)")
    p.add_argument("--seed", type=seed_value, default=0, help="episode seed (default: 0)")
    repo = p.add_argument_group("your own repository")
    repo.add_argument(
        "--repo",
        metavar="PATH",
        help="a git repository (path or file:// URL): the agent works on a private copy",
    )
    repo.add_argument(
        "--rev",
        metavar="REV",
        help="the revision to copy (default: HEAD plus the uncommitted changes to tracked files)",
    )
    prompt = repo.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", help="what the agent should do")
    prompt.add_argument("--prompt-file", type=Path, metavar="FILE", help="the prompt, from a file")
    repo.add_argument(
        "--test",
        metavar="CMD",
        help="test command run by submit() in the sandbox: reward 1 on exit status 0",
    )
    repo.add_argument(
        "--test-report",
        metavar="PATH",
        help="JUnit XML file the test command writes (relative to the repository): reward = "
        "the fraction of test cases that passed",
    )
    repo.add_argument(
        "--setup", metavar="CMD", help="command run once in the copy before the agent starts"
    )
    repo.add_argument(
        "--with-git",
        action="store_true",
        help="give the agent a private copy of .git (git log / git diff work inside)",
    )
    repo.add_argument(
        "--max-steps",
        type=int,
        default=REPO_MAX_STEPS,
        metavar="N",
        help=f"tool calls at most on a repository (default {REPO_MAX_STEPS})",
    )
    p.add_argument(
        "--max-turns",
        type=int,
        default=100,
        metavar="N",
        help=f"model turns at most (1..{MAX_TURNS_LIMIT}, default 100); the only runner limit",
    )
    add_model_options(p, system_prompt=True)
    add_context_options(p, keeps="none, and the model table's window")
    add_sandbox_options(p)
    add_otlp_options(p)
    add_branching_options(p, concurrency=True)


def rollout_exit_code(rollout: Rollout) -> int:
    return EXIT_BY_STATUS.get(rollout.status, 1)


def resumable(store: StoreBackend, rollout: Rollout) -> bool:
    """Whether ``agentrunner resume`` can continue the episode (cancelled, interrupted, or
    failed on a retryable error: :func:`~agentrunner.lifecycle.resume.can_resume`)."""
    try:
        return can_resume(store, store.episode(rollout.episode_id)) is None
    except StoreError:
        return False


def report(args: argparse.Namespace, rollout: Rollout, store: StoreBackend | None = None) -> int:
    """Print the outcome (one JSON object with ``--json``) and return the exit code. Given
    the store, an episode that can be resumed says how; one that branched, what branching
    cost apart from the main line."""
    spent = spend(store, rollout.episode_id) if store is not None else None
    if args.json:
        extra = {"branching": spent} if spent is not None and spent["decisions"] else {}
        print_json({**rollout.to_dict(), **extra})
    else:
        out = stdout_console()
        out.print(
            f"episode [bold]{rollout.episode_id}[/] {rollout.status} ({rollout.stop_reason}) · "
            f"{plural(rollout.turns_completed, 'turn')} · reward "
            f"[bold]{reward_text(rollout.total_reward)}[/]"
        )
        if spent is not None and spent["decisions"]:
            tokens = sum(spent["tokens"].values())
            cost = spent["cost_usd"]
            out.print(
                f"branching: {plural(spent['decisions'], 'decision point')}, {tokens:,} tokens"
                + (f", ${cost:.4f}" if cost is not None else "")
                + " (apart from the main line's)"
            )
        if rollout.error:
            out.print(f"[red]{literal(rollout.error)}[/]")
        if store is not None and resumable(store, rollout):
            out.print(f"resume it with: agentrunner resume {rollout.episode_id}")
    return rollout_exit_code(rollout)


def _environment(args: argparse.Namespace) -> tuple[Environment, str]:
    """The environment and task id the flags ask for."""
    sandbox = sandbox_from_args(args)
    if args.repo is None:
        if args.prompt or args.prompt_file or args.rev or args.test or args.setup:
            raise UsageError("--prompt, --rev, --test and --setup go with --repo PATH")
        return make_env(args.env, tasks_path=args.tasks, sandbox=sandbox), args.task
    if args.env != "workspace" or args.tasks or args.task != DEFAULT_TASK:
        raise UsageError(
            "--repo runs its own task; it does not combine with --env, --tasks or --task"
        )
    if args.prompt_file is not None:
        try:
            prompt = args.prompt_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --prompt-file {args.prompt_file}: {exc}") from None
    elif args.prompt:
        prompt = args.prompt
    else:
        raise UsageError(
            "--repo needs --prompt TEXT or --prompt-file FILE: what should the agent do?"
        )
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    if args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    env = WorkspaceEnv.for_repo(
        args.repo,
        prompt=prompt,
        rev=args.rev,
        test=args.test,
        test_report=args.test_report,
        setup=args.setup,
        with_git=args.with_git,
        max_steps=args.max_steps,
        sandbox=sandbox,
    )
    assert env.task is not None
    return env, env.task.task_id


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"--max-turns must be between 1 and {MAX_TURNS_LIMIT}")
    model = get_model(args.model, **model_options(args, args.model))
    addition = system_prompt(args)
    env, task_id = _environment(args)
    warn_about_sandbox(env)
    env = with_system_prompt(env, addition)
    branching = branching_from_args(args)
    store = open_store(args)
    renderer = EventRenderer(stderr_console(), verbose=args.verbose, store=store)
    observer: Observer = renderer if branching is None else _WithDecisions(renderer, store)
    live = live_otlp(args, store)
    if live is not None:
        observer = live.observer(observer)
    try:
        rollout = run_agent_episode(
            env=env,
            task_id=task_id,
            seed=args.seed,
            model_fn=model,
            store=store,
            max_turns=args.max_turns,
            config=RunConfig(max_turns=args.max_turns, **context_settings(args)),
            observer=observer,
            branching=branching,
        )
    finally:
        env.close()
        close_live_otlp(live)
    return report(args, rollout, store)


class _WithDecisions:
    """The live view, with a line for each decision point as its adopted action lands."""

    def __init__(self, renderer: EventRenderer, store: StoreBackend) -> None:
        self._renderer = renderer
        self._store = store
        self._console = stderr_console()
        self._episode_id: str | None = None

    def bind_episode(self, episode_id: str) -> None:
        self._episode_id = episode_id
        self._renderer.bind_episode(episode_id)

    def __call__(self, seq: int, turn: int, payload: BaseModel) -> None:
        self._renderer(seq, turn, payload)
        adopted = isinstance(payload, MessageEvent) and payload.reason == "adopted"
        if adopted and self._episode_id is not None:
            line = spend_line(self._store, self._episode_id)
            self._console.print(f"[magenta]{literal(line)}[/]")
