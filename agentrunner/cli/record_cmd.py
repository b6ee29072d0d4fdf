"""``agentrunner record -- COMMAND`` and ``agentrunner proxy``: other agents' model calls
recorded through a loopback proxy."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.cli.common import (
    listening_token,
    new_command,
    open_store,
    print_json,
    stderr_console,
    store_location,
)
from agentrunner.cli.otlp_opts import add_otlp_options, close_live_otlp, live_otlp
from agentrunner.record.clients import CLIENTS, client
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.launch import plan, record, upstreams
from agentrunner.record.proxy import TOKEN_HEADER, ForkPlan, Proxy, ProxySettings
from agentrunner.record.replay import answer_file
from agentrunner.values.errors import UsageError
from agentrunner.values.formatting import plural, unique_prefixes
from agentrunner.values.redaction import public_url

if TYPE_CHECKING:
    from agentrunner.export.otlp_live import LiveOtlp

TOKEN_VAR = "AGENTRUNNER_PROXY_TOKEN"


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "record",
        run_record,
        help="run any agent with its model calls recorded through a loopback proxy",
        description="Run COMMAND (Claude Code, Codex, aider, an OpenAI or Anthropic SDK app, "
        "...) with its model clients pointed at a recording proxy on 127.0.0.1, and record "
        "every model call it makes into the trace store as it happens: the request before it "
        "is forwarded, each streamed chunk as it passes, the answer, usage and cost, the tool "
        "calls the model makes and the results the agent sends back. The agent receives the "
        "upstream's bytes unchanged; keys are forwarded and never recorded. Each conversation "
        "is an episode (kind `recorded`); a sub-agent's is linked to the call that started it. "
        "Exits with COMMAND's exit status.",
    )
    _upstream_options(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say which client adapter COMMAND gets, what it would change (arguments, variables)"
        " and the upstreams it found; run nothing",
    )
    p.add_argument("--list-clients", action="store_true", help="list the client adapters and exit")
    p.add_argument(
        "--replay",
        metavar="EP",
        help="serve the agent the recorded answers of EP (and of its sub-agents) instead of"
        " calling any upstream; the first request the recording does not hold ends the replay"
        " with a report (exit 1); the replay is recorded as an episode of its own",
    )
    p.add_argument(
        "--on-miss",
        choices=("stop", "live"),
        default="stop",
        help="with --replay: what a request the recording lacks does: stop the replay with a"
        " report (default), or go on live against the upstream, recorded as a fork of the"
        " recording at that call",
    )
    p.add_argument(
        "--fork",
        metavar="EP",
        help="serve EP's recorded answers for the calls before --turn, then send call --turn"
        " and the rest live; recorded as a fork of EP at that call",
    )
    p.add_argument("--turn", type=int, metavar="K", help="with --fork: the call to go live at")
    p.add_argument(
        "--message",
        metavar="TEXT",
        help="with --fork: add TEXT to call K's request as the user's last words",
    )
    p.add_argument(
        "--model",
        metavar="MODEL",
        help="with --fork: send call K and every call after it to MODEL (same API)",
    )
    p.add_argument(
        "--response",
        metavar="FILE",
        type=Path,
        help="with --fork: answer call K with FILE (an answer in that API's own format: an"
        " SSE stream for a streamed call, else its JSON body) instead of the upstream; the"
        " calls after it go live",
    )
    p.add_argument(
        "--snapshots",
        action="store_true",
        help="snapshot the working folder (secrets redacted, .git left out) as each request"
        " arrives, after the tools whose results it carries ran, so that `agentrunner diff EP"
        " [--turn K]` shows the agent's change and `agentrunner verify EP --test CMD` scores"
        " it; the first snapshot is taken before COMMAND starts",
    )
    p.add_argument(
        "--pace",
        action="store_true",
        help="with --replay: send each answer spread over its recorded latency (default: at"
        " full speed)",
    )
    add_otlp_options(p)
    p.add_argument(
        "agent", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the agent to run"
    )
    q = new_command(
        sub,
        "proxy",
        run_proxy,
        help="run the recording proxy on its own, for agents started elsewhere",
        description="Serve the recording proxy until Ctrl-C: point clients at "
        "http://HOST:PORT/anthropic (ANTHROPIC_BASE_URL) or http://HOST:PORT/openai "
        "(OPENAI_BASE_URL). Several agents can record through it at once, each conversation "
        "its own episode; they end when the proxy stops.",
    )
    q.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    q.add_argument("--port", type=int, default=8765, help="port to listen on (8765; 0: any)")
    q.add_argument(
        "--token",
        default=None,
        help=f"a token clients must send in the {TOKEN_HEADER} header (default: ${TOKEN_VAR});"
        " required when --host is not a loopback address",
    )
    _upstream_options(q)
    add_otlp_options(q)


def _upstream_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--upstream-anthropic",
        metavar="URL",
        help="where Anthropic API calls go (default: $ANTHROPIC_BASE_URL, else Anthropic's API)",
    )
    p.add_argument(
        "--upstream-openai",
        metavar="URL",
        help="where OpenAI API calls go (default: $OPENAI_BASE_URL or $OPENAI_API_BASE,"
        " else OpenAI's API)",
    )
    p.add_argument(
        "--upstream-gemini",
        metavar="URL",
        help="where Gemini API calls go (default: $GOOGLE_GEMINI_BASE_URL, else Google's API)",
    )
    p.add_argument(
        "--upstream-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds an upstream may stay silent before its call is recorded as failed (600)",
    )


def _upstream_choices(args: argparse.Namespace) -> dict[str, str | None]:
    return {
        "anthropic": args.upstream_anthropic,
        "openai": args.upstream_openai,
        "gemini": args.upstream_gemini,
    }


def _location(args: argparse.Namespace) -> str:
    return str(store_location(args))


def run_record(args: argparse.Namespace) -> int:
    command = list(args.agent)
    if command[:1] == ["--"]:
        command = command[1:]
    options = _upstream_choices(args)
    if args.list_clients:
        return _list_clients(args)
    if args.dry_run:
        return _dry_run(command, options, args)
    if args.pace and not (args.replay or args.fork):
        raise UsageError("--pace paces a replay: give --replay EP (or --fork EP) too")
    if args.fork and args.replay:
        raise UsageError("give --replay EP or --fork EP, not both")
    if (args.turn is not None) != bool(args.fork):
        raise UsageError(
            "--fork EP needs --turn K (the call to go live at), and --turn needs --fork"
        )
    if (args.message or args.model or args.response) and not args.fork:
        raise UsageError(
            "--message, --model and --response change a fork's call: give --fork EP --turn K"
        )
    if args.turn is not None and args.turn < 1:
        raise UsageError("--turn counts recorded calls from 1")
    plan = None
    if args.fork:
        plan = ForkPlan(
            args.fork,
            args.turn,
            message=args.message,
            model=args.model,
            response=answer_file(args.response) if args.response else None,
        )
    with _live_otlp(args) as live:
        done = record(
            command,
            _location(args),
            options,
            timeout_s=args.upstream_timeout,
            replay_of=args.replay,
            pace=args.pace,
            on_miss_live=args.on_miss == "live",
            fork=plan,
            snapshots=args.snapshots,
            observer_factory=live.observer if live is not None else None,
        )
    err = stderr_console()
    short: dict[str, str] = {}
    if done.episodes:
        with open_store(args) as store:  # the ids as `ls` shows them
            short = unique_prefixes(store.episode_ids())
    ids = ", ".join(short.get(ep, ep) for ep in done.episodes) or "none"
    err.print(
        f"recorded {plural(len(done.episodes), 'episode')} ({ids}); the agent exited with "
        f"{done.exit_status}",
        markup=False,
        highlight=False,
    )
    if done.diverged:
        err.print(f"replay stopped: {done.diverged}", markup=False, highlight=False, soft_wrap=True)
    if done.went_live is not None:
        episode, call = done.went_live
        err.print(
            f"went live at call {call} of {short.get(episode, episode)} (a fork of it)",
            markup=False,
        )
    if args.json:
        result: dict[str, Any] = {"exit_status": done.exit_status, "episodes": done.episodes}
        if args.replay or args.fork:
            result["diverged"] = done.diverged
            result["went_live"] = list(done.went_live) if done.went_live else None
        print_json(result)
    if done.diverged:
        return 1
    return done.exit_status if done.exit_status is not None else 1


def run_proxy(args: argparse.Namespace) -> int:
    why = "a recording holds private code and keys pass through the proxy"
    token = listening_token(args.host, args.token, TOKEN_VAR, why)
    found = client("sdk").redirect([], os.environ, "", Path.cwd()).upstreams
    chosen = upstreams(found, _upstream_choices(args))
    origin = Origin(upstreams={family: public_url(url) for family, url in chosen.items()})
    settings = ProxySettings(
        upstreams=chosen,
        host=args.host,
        port=args.port,
        token=token,
        upstream_timeout_s=args.upstream_timeout,
    )
    with _live_otlp(args) as live:
        factory = live.observer if live is not None else None
        journal = Journal(_location(args), origin, observer_factory=factory)
        journal.start()
        try:
            asyncio.run(_serve(Proxy(journal, settings), args.host))
        finally:
            episodes = [c.episode_id for c in journal.episodes.conversations.all]
            journal.close("done")
    stderr_console().print(
        f"proxy stopped; recorded {plural(len(episodes), 'episode')}", markup=False
    )
    if args.json:
        print_json({"episodes": episodes})
    return 0


@contextlib.contextmanager
def _live_otlp(args: argparse.Namespace) -> Iterator[LiveOtlp | None]:
    """The live exporter ``--otlp-endpoint`` asks for, reading its own store connection;
    closed (its one line printed) after the recording."""
    if not args.otlp_endpoint:
        yield None
        return
    with open_store(args) as store:
        live = live_otlp(args, store)
        try:
            yield live
        finally:
            close_live_otlp(live)


async def _serve(proxy: Proxy, host: str) -> None:
    port = await proxy.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    shown = f"[{host}]" if ":" in host else host
    print(
        f"recording proxy on http://{shown}:{port}: ANTHROPIC_BASE_URL=http://{shown}:{port}/anthropic"
        f" OPENAI_BASE_URL=http://{shown}:{port}/openai (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await proxy.stop()


def _list_clients(args: argparse.Namespace) -> int:
    rows = [(name, client(name).summary) for name in CLIENTS]
    if args.json:
        print_json([{"client": name, "redirect": summary} for name, summary in rows])
    else:
        for name, summary in rows:
            print(f"{name:12} {summary}")
    return 0


def _dry_run(command: list[str], options: dict[str, str | None], args: argparse.Namespace) -> int:
    redirect, chosen = plan(command, options, port=0)
    if args.json:
        print_json(
            {"client": redirect.client, "command": redirect.command, "upstreams": chosen,
             "changes": redirect.notes}
        )  # fmt: skip
        return 0
    print(f"client adapter: {redirect.client}")
    for family, url in chosen.items():
        print(f"{family} upstream: {public_url(url)}")
    for note in redirect.notes:
        print(f"changes: {note}")
    print(f"runs: {' '.join(redirect.command)}  (port 0 stands for the proxy's, chosen at start)")
    return 0
