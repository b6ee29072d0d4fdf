"""``agentrunner serve-env``: the workspace tasks served to trainers over OpenEnv, every
served step recorded in the trace store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrunner.cli.common import listening_token, new_command, print_json, store_location
from agentrunner.cli.sandbox_opts import add_sandbox_options, sandbox_from_args
from agentrunner.serve.catalog import Catalog, RepoTask, repos_catalog, tasks_catalog
from agentrunner.serve.server import ServeSettings, run_server
from agentrunner.store import TraceStore
from agentrunner.values.errors import UsageError

TOKEN_VAR = "AGENTRUNNER_SERVE_TOKEN"


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "serve-env",
        run_serve_env,
        help="serve the workspace tasks to a trainer over OpenEnv, every step recorded",
        description="Serve the bundled tasks, a tasks file's or your repositories as an "
        "OpenEnv environment (HTTP and WebSocket, the protocol of the `openenv` package): "
        "each session is one sandboxed workspace with the runner's limits, hidden tests and "
        "rewards, and every step it serves is recorded as an episode in the trace store, so "
        "`show`, `diff`, `verify` and `report` work on a trainer's rollouts. A client that "
        "lost its connection, or whose server was killed and started again on the same "
        "store, continues its episode with a reset naming only its session "
        "(`reset(session_id=...)`). Ctrl-C stops.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--tasks", type=Path, metavar="FILE", help="a tasks.json file")
    source.add_argument(
        "--repo",
        nargs="+",
        metavar="PATH",
        help="git repositories, one task each (repo:NAME); give --prompt and --test",
    )
    p.add_argument("--prompt", metavar="TEXT", help="with --repo: what the agent should do")
    p.add_argument("--test", metavar="CMD", help="with --repo: submit()'s test command")
    p.add_argument("--setup", metavar="CMD", help="with --repo: run once in each new copy")
    p.add_argument("--max-steps", type=int, metavar="N", help="with --repo: tool calls at most")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (8000; 0: any)")
    p.add_argument(
        "--max-sessions",
        type=int,
        default=8,
        metavar="N",
        help="sessions served at once (8); past it a session is refused (CAPACITY_REACHED)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds a session may stay silent before it is ended, recorded as idle (600)",
    )
    p.add_argument(
        "--token",
        default=None,
        help=f"a token clients must send as 'Authorization: Bearer TOKEN' (default:"
        f" ${TOKEN_VAR}); required when --host is not a loopback address",
    )
    add_sandbox_options(p)


def _catalog(args: argparse.Namespace) -> Catalog:
    sandbox = sandbox_from_args(args)
    if not args.repo:
        if args.prompt or args.test or args.setup or args.max_steps is not None:
            raise UsageError("--prompt, --test, --setup and --max-steps go with --repo PATH")
        return tasks_catalog(args.tasks, sandbox)
    if not args.prompt or not args.prompt.strip():
        raise UsageError("--repo needs --prompt TEXT: what should the agent do?")
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    repos = [
        RepoTask(path, args.prompt, args.test, args.setup, args.max_steps) for path in args.repo
    ]
    return repos_catalog(repos, sandbox)


def run_serve_env(args: argparse.Namespace) -> int:
    token = listening_token(
        args.host,
        args.token,
        TOKEN_VAR,
        "a served workspace runs commands and its recordings hold code",
    )
    if args.max_sessions < 1:
        raise UsageError("--max-sessions must be at least 1")
    if args.idle_timeout <= 0:
        raise UsageError("--idle-timeout must be positive")
    settings = ServeSettings(
        catalog=_catalog(args),
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        token=token,
    )
    location = store_location(args)

    def ready(url: str) -> None:
        print(
            f"serving {len(settings.catalog.task_ids)} tasks over OpenEnv on {url} (WebSocket"
            f" {url.replace('http', 'ws', 1)}/ws), recording into {location} (Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )

    with TraceStore(location) as store:
        run_server(settings, store, ready)
    if args.json:
        print_json({"stopped": True})
    return 0
