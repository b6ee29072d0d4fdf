"""The sandbox options ``run`` and ``batch`` share: mode, network, mounts and limits."""

from __future__ import annotations

import argparse
import os

from agentrunner.cli.common import stderr_console
from agentrunner.envs.jail import Limits, SandboxConfig
from agentrunner.values.environment import Environment

_DEFAULTS = Limits()


def add_sandbox_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sandbox (workspace commands: bash, --setup, --test and the hidden verifier)"
    )
    group.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "process"),
        default=os.environ.get("AGENTRUNNER_SANDBOX") or "auto",
        help="bwrap: bubblewrap namespaces (only the workspace is writable; the trace store, "
        "$HOME, the runner and the hidden tests are invisible; no network); process: the "
        "runner's user in a process group (protects little); auto (default, or "
        "$AGENTRUNNER_SANDBOX): bwrap when it works, else process with a warning",
    )
    group.add_argument(
        "--network",
        action="store_true",
        help="let commands reach the network through slirp4netns (bwrap mode), never the "
        "host's loopback or abstract unix sockets; without slirp4netns, and in process mode, "
        "refused while anything listens on the host's loopback",
    )
    group.add_argument(
        "--mount",
        action="append",
        default=[],
        metavar="PATH",
        help="expose PATH read-only at the same place (repeatable), e.g. a virtualenv the "
        "tests need; a mounted virtualenv's bin/ comes first on PATH",
    )
    group.add_argument(
        "--cpu-time",
        type=int,
        default=_DEFAULTS.cpu_seconds,
        metavar="S",
        help=f"CPU seconds per process (default {_DEFAULTS.cpu_seconds})",
    )
    group.add_argument(
        "--memory",
        type=int,
        default=_DEFAULTS.memory_mb,
        metavar="MB",
        help=f"address space per process, in MB (default {_DEFAULTS.memory_mb})",
    )
    group.add_argument(
        "--processes",
        type=int,
        default=_DEFAULTS.processes,
        metavar="N",
        help=f"processes and threads per command (default {_DEFAULTS.processes})",
    )
    group.add_argument(
        "--file-size",
        type=int,
        default=_DEFAULTS.file_size_mb,
        metavar="MB",
        help=f"largest file a command may write, in MB; also the size of /tmp and of "
        f"/dev/shm (at most --memory) (default {_DEFAULTS.file_size_mb})",
    )
    group.add_argument(
        "--workspace-size",
        type=int,
        default=_DEFAULTS.workspace_mb,
        metavar="MB",
        help="most MB of files the workspace may hold when a step ends (a sparse file counts "
        "at its full size); a step that leaves more is undone and the model told why "
        f"(default {_DEFAULTS.workspace_mb})",
    )


def sandbox_from_args(args: argparse.Namespace) -> SandboxConfig:
    return SandboxConfig(
        mode=args.sandbox,
        network=args.network,
        mounts=tuple(args.mount),
        limits=Limits(
            cpu_seconds=args.cpu_time,
            memory_mb=args.memory,
            processes=args.processes,
            file_size_mb=args.file_size,
            workspace_mb=args.workspace_size,
        ),
    )


def warn_about_sandbox(env: Environment) -> None:
    """Say once, on stderr, what process confinement does not protect."""
    warning = getattr(env, "sandbox_warning", None)
    if warning:
        stderr_console().print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
