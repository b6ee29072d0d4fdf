"""``agentrunner tui [EP]``: the Textual app (episodes, live traces, replay, branches)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentrunner.cli.common import new_command, open_store, print_json
from agentrunner.values.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "tui",
        tui,
        help="browse, follow, replay, branch and resume episodes in a terminal UI",
        description="Open the Textual app on the store: the episodes list (Enter opens one), "
        "a trace view that follows running episodes live, replays them, forks them at a "
        "model turn (f) and resumes those that `resume` would (R). Press ? in the app for "
        "every key. With EP, open that episode's trace directly. Runs started from the app "
        "are cancelled (resumable) when it quits.",
    )
    p.add_argument("episode", metavar="EP", nargs="?", help="episode id or unique prefix to open")
    p.add_argument(
        "--keymap",
        type=Path,
        metavar="FILE",
        help='JSON object of binding id → keys, e.g. {"trace.fork": "F"} (ids: press ? in the '
        "app; an unknown id is an error that lists them)",
    )


def _keymap(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"--keymap {path}: {exc}") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise UsageError(f"--keymap {path}: must be a JSON object of binding id → keys")
    # Textual loads only for `tui` (~150 ms); the app's screens declare their keys as they load
    import agentrunner.tui.app  # noqa: F401
    from agentrunner.tui.keys import check_keymap

    try:
        check_keymap(value)
    except UsageError as exc:
        raise UsageError(f"--keymap {path}: {exc}") from None
    return value


def tui(args: argparse.Namespace) -> int:
    keymap = _keymap(args.keymap)
    store = open_store(args)  # checks the file is a trace store (clear error before the UI)
    try:
        episode = store.resolve(args.episode) if args.episode else None
        db_path, where = store.location, store.where
    finally:
        store.close()
    from agentrunner.tui.app import run_tui  # Textual loads only for `tui`

    app = run_tui(db_path, episode, keymap=keymap)
    if args.json:
        print_json({"db": where, "episode_id": app.last_opened, "runs_started": app.runs.started})
    return 0
