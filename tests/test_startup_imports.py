"""Start-up loads only what the command needs: ``agentrunner --help`` no command module,
``ls`` and ``show`` no migration library, no provider SDK, no TUI, no other command,
``ls`` no pydantic (it reads what it lists as JSON, not through the event models), and
``show`` of an episode without forks or sub-agents no event, spec or decision model (it reads
its events as JSON; only the messages it shows are read typed).

Each command runs as a user runs it, in a subprocess, which writes the names of the modules
it loaded (``sys.modules`` at exit) to a file; nothing here is timed (the start-up time is
``tests/benchmarks/test_bench_startup.py``'s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.cli.main import COMMANDS, build_parser

LOADED_AT_EXIT = """
import atexit, runpy, sys
out, *argv = sys.argv[1:]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv = ["agentrunner", *argv]
runpy.run_module("agentrunner.cli.main", run_name="__main__")
"""

NEVER_AT_START = (
    "pandas",
    "sqlite_utils",  # only a store that needs a migration loads it
    "textual",
    "openai",
    "anthropic",
    "httpx",
    "aiohttp",
    "providers",
    "agentrunner.verifiers",
    "agentrunner.runtime.runner",
    "agentrunner.envs",
    "agentrunner.record",
    "agentrunner.tui",
)
"""Heavy packages none of ``--help``, ``ls`` and ``show`` uses."""

NOT_FOR_HELP = (
    "rich",
    "pydantic",
    "sqlite3",
    "agentrunner.store.store",
    "agentrunner.values.events",
)
"""What the top-level help does not need either: it opens no store and prints no table."""


def loaded(tmp_path: Path, *argv: str) -> set[str]:
    """The modules ``agentrunner ARGV`` has loaded when it exits (it must exit 0)."""
    out = tmp_path / "modules.txt"
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"}
    env.pop("AGENTRUNNER_DB", None)
    proc = subprocess.run(
        [sys.executable, "-c", LOADED_AT_EXIT, str(out), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return set(out.read_text().splitlines())


def under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The packages of ``packages`` that ``modules`` holds (or a module of)."""
    return [p for p in packages if any(m == p or m.startswith(p + ".") for m in modules)]


def command_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("agentrunner.cli.") and m.endswith("_cmd")}


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding the demo episode (the scripted model's run); its path and the id."""
    db = tmp_path_factory.mktemp("startup") / "traces.db"
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"}
    run = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "run", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return db, json.loads(run.stdout.strip().splitlines()[-1])["episode_id"]


def test_the_top_level_help_imports_no_command_store_rich_or_pydantic(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--help")
    assert under(modules, NEVER_AT_START + NOT_FOR_HELP) == []
    assert command_modules(modules) == set()


def test_a_commands_help_imports_that_command_only(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "export", "--help")
    assert command_modules(modules) == {"agentrunner.cli.export_cmd"}


def test_ls_imports_no_migration_library_sdk_tui_or_other_command(
    tmp_path: Path, demo_store: tuple[Path, str]
) -> None:
    db, _ = demo_store
    modules = loaded(tmp_path, "ls", "--db", str(db))
    assert under(modules, NEVER_AT_START) == []
    assert command_modules(modules) == {"agentrunner.cli.ls_cmd"}


def test_ls_and_ls_batches_import_no_pydantic(tmp_path: Path, demo_store: tuple[Path, str]) -> None:
    db, _ = demo_store
    for argv in (("ls",), ("ls", "--json"), ("ls", "--batches")):
        assert under(loaded(tmp_path, *argv, "--db", str(db)), ("pydantic",)) == [], argv


def test_show_imports_no_migration_library_sdk_tui_or_other_command(
    tmp_path: Path, demo_store: tuple[Path, str]
) -> None:
    db, episode_id = demo_store
    modules = loaded(tmp_path, "show", "--db", str(db), episode_id)
    assert under(modules, NEVER_AT_START) == []
    assert command_modules(modules) <= {"agentrunner.cli.show_cmd", "agentrunner.cli.ls_cmd"}


NOT_FOR_A_PLAIN_SHOW = (
    "pydantic",
    "agentrunner.values.types",
    "agentrunner.values.events",
    "agentrunner.values.specs",
    "agentrunner.values.branching",
    "agentrunner.lifecycle.decision_log",
    "agentrunner.store.groups",
    "ulid",
    "rich.tree",
    "rich.table",
)
"""What ``show`` of an episode with no decision points and no sub-agents does not need."""


def test_show_of_a_plain_episode_loads_no_pydantic_event_spec_or_decision_model(
    tmp_path: Path, demo_store: tuple[Path, str]
) -> None:
    db, episode_id = demo_store
    for verbose in ((), ("-v",)):
        modules = loaded(tmp_path, "show", "--db", str(db), episode_id, *verbose)
        assert under(modules, NOT_FOR_A_PLAIN_SHOW) == [], verbose


def listed(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    """The commands the top-level help lists, in order, with their help."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(a.dest, a.help) for a in action._choices_actions]


def test_the_table_of_commands_lists_each_with_the_help_its_module_registers() -> None:
    assert listed(build_parser(())) == listed(build_parser())
    assert [name for name, _ in listed(build_parser())] == list(COMMANDS)
