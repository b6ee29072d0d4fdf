"""The ``--ray [ADDRESS]`` option ``batch`` and ``fanout`` share: run on a Ray cluster."""

from __future__ import annotations

import argparse

from agentrunner.runtime.distributed import require_ray

LOCAL = "local"  # ``--ray`` with no address: a local cluster started for the command

RAY_HELP = (
    "run the episodes on a Ray cluster, a unit of work per episode on long-lived workers "
    "(--concurrency episodes at once): with no ADDRESS (or 'local') a local cluster started "
    "for this command; 'auto' the one `ray start` runs on this machine; or HOST:PORT, "
    "ray://HOST:10001. Every worker must reach the store (across machines: a postgresql:// "
    "--db) and the model's API key. A unit whose worker dies is submitted again and resumes "
    "from the store (after 8 losses it is an error, its episode resumable); an address where "
    "nothing answers within 10 s is an error. Needs `pip install 'agentrunner[ray]'` "
    "(ray:// also 'ray[client]'). Put --ray after positional arguments, or write --ray=ADDRESS"
)


def add_ray_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS", help=RAY_HELP
    )


def ray_executor(args: argparse.Namespace) -> tuple[bool, str | None]:
    """Whether ``--ray`` was given, and the cluster's address (None: start a local one).
    Without Ray installed it is a UsageError saying how to install it, before anything
    else happens."""
    if args.ray is None:
        return False, None
    require_ray()
    return True, None if args.ray == LOCAL else args.ray
