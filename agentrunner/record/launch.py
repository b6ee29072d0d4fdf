"""``agentrunner record -- COMMAND``: an agent run with its model clients pointed at the proxy.

The upstream of each API family is what the agent would have used without the proxy: the
option given, else its base URL in the environment when ``record`` starts, else the public
endpoint. The agent gets the proxy's URLs in the variables the OpenAI and Anthropic SDKs (and
litellm) read; nothing the user wrote is changed. ``record`` exits with the agent's status;
Ctrl-C reaches the agent, and the calls it cuts short are recorded as cancelled.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from agentrunner.envs import recorded
from agentrunner.record.clients import Redirect, client_for
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import ForkPlan, Proxy, ProxySettings, ProxyThread
from agentrunner.record.replay import Replay
from agentrunner.runtime.recorder import Observer
from agentrunner.store import TraceStore
from agentrunner.values.errors import UsageError
from agentrunner.values.redaction import Redactor, known_secrets, public_url

DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}


def upstreams(found: Mapping[str, str], options: Mapping[str, str | None]) -> dict[str, str]:
    """The upstream of each API family: the option given, else what the client's own
    configuration or environment names (``found``), else the provider's public endpoint."""
    chosen = {
        family: options.get(family) or found.get(family) or default
        for family, default in DEFAULT_UPSTREAMS.items()
    }
    for family, url in chosen.items():
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"the {family} upstream {url!r} is not an http(s) URL")
    return chosen


def plan(
    command: list[str], options: Mapping[str, str | None], port: int = 0
) -> tuple[Redirect, dict[str, str]]:
    """How ``command`` is redirected to a proxy on ``port``, and the upstreams it records to."""
    if not command:
        raise UsageError("give the agent's command after --: agentrunner record -- COMMAND ...")
    redirect = client_for(command).redirect(
        command, os.environ, f"http://127.0.0.1:{port}", Path.cwd()
    )
    return redirect, upstreams(redirect.upstreams, options)


@dataclass
class Recording:
    """What a ``record`` run did: the agent's exit status, the episodes it made, and where a
    replayed agent left its recording (if it did)."""

    exit_status: int | None
    episodes: list[str]
    problems: list[str]
    diverged: str | None = None
    went_live: tuple[str, int] | None = None
    """Where a replay or a fork left the recording for the upstream (episode, call)."""


def record(
    command: list[str],
    location: str,
    options: Mapping[str, str | None],
    *,
    timeout_s: float = 600.0,
    replay_of: str | None = None,
    pace: bool = False,
    on_miss_live: bool = False,
    fork: ForkPlan | None = None,
    snapshots: bool = False,
    observer_factory: Callable[[], Observer] | None = None,
) -> Recording:
    """Run ``command`` through a recording proxy into the store at ``location``; with
    ``replay_of``, its model calls are answered from that recorded episode instead (until a
    request it lacks, which goes live as a fork with ``on_miss_live``); with ``fork``, the
    calls before the fork's call are served from its episode and the rest go live, recorded
    as a fork of it at that call. With ``snapshots``, the agent's working folder is
    snapshotted as each request arrives (see :mod:`agentrunner.record.snapshots`).
    ``observer_factory`` gives each recorded episode an observer (live OTLP export)."""
    chosen = plan(command, options)[1]
    redactor = Redactor(known_secrets())
    shown = [redactor.text(part) for part in command]
    replay = None
    source = fork.episode_id if fork is not None else replay_of
    if source is not None:
        with TraceStore(location, create=False) as store:
            replay = Replay(store, store.resolve(source), client_for(command).volatile)
            if fork is not None:
                fork = replace(fork, episode_id=replay.root)
                if not any(
                    a.episode_id == replay.root and a.turn == fork.turn for a in replay.answers
                ):
                    raise UsageError(
                        f"episode {replay.root} has no recorded call {fork.turn} to fork at"
                    )
    replaying = replay is not None and fork is None
    origin = Origin(
        command=shown,
        cwd=os.getcwd(),
        upstreams={family: public_url(url) for family, url in chosen.items()},
        kind="replay" if replaying else recorded.KIND,
        links={"replay_of": replay.root} if replay is not None and replaying else {},
        run=uuid.uuid4().hex,
    )
    folder = Path(origin.cwd or ".") if snapshots else None
    journal = Journal(location, origin, folder=folder, observer_factory=observer_factory)
    journal.start()
    refused = journal.submit(journal.prime).result()  # the folder's first snapshot
    if refused is not None:
        journal.close("failed")
        raise refused
    settings = ProxySettings(upstreams=chosen, upstream_timeout_s=timeout_s, pace=pace)
    proxy = Proxy(journal, settings, replay, fork=fork, on_miss_live=on_miss_live)
    server = ProxyThread(proxy)
    status: int | None = None
    cut = True  # until the agent has ended by itself
    try:
        port = server.start()
        print(
            f"recording `{shlex.join(shown)}` through http://127.0.0.1:{port} into {location}",
            file=sys.stderr,
        )
        redirect = plan(command, options, port)[0]
        status, cut = _run(redirect.command, redirect.environ)
    finally:
        server.stop()  # calls still open are recorded as cut short (their client is gone)
        episodes = [c.episode_id for c in journal.episodes.conversations.all]
        journal.close("cancelled" if cut else "done", exit_status=status)
    diverged = proxy.divergence.report() if proxy.divergence else None
    return Recording(status, episodes, journal.problems, diverged, proxy.went_live)


def _run(command: list[str], environ: dict[str, str]) -> tuple[int, bool]:
    """Run the agent to its end; (its exit status, whether it was cut short by a signal).
    A signal meant for the agent (Ctrl-C in the terminal reaches both; SIGTERM or a SIGINT
    sent to this process alone) is passed on and the agent's own end awaited."""
    try:
        agent = subprocess.Popen(command, env=environ)
    except OSError as exc:
        raise UsageError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
    cut = False
    while True:
        try:
            code = agent.wait()
            break
        except KeyboardInterrupt as exc:
            cut = True
            sent = signal.SIGTERM if exc.args and exc.args[0] == "SIGTERM" else signal.SIGINT
            if sent == signal.SIGTERM or not sys.stdin.isatty():
                agent.send_signal(sent)
    return (128 - code if code < 0 else code), cut or code < 0
