"""``agentrunner show EP --request-diff K``: a request diff printed for people (or as JSON).

Everything shown from the store is recorded text and goes through ``safe_text``: a system
prompt or message that holds escape sequences prints them visibly.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentrunner.cli.common import print_json, stdout_console
from agentrunner.request_diff import describe, diff, pick

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def show_request_diff(store: StoreBackend, episode_id: str, args: argparse.Namespace) -> int:
    before, after = pick(store, episode_id, args.request_diff)
    found = diff(before, after)
    if args.json:
        print_json({"episode_id": episode_id, **found.to_dict()})
        return 0
    for line in describe(found, verbose=args.verbose):
        stdout_console().print(line)
    return 0
