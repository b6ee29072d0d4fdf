"""Attacks on what the workspace's snapshots store, made the way a model makes them: a scripted
model's bash commands through the real runner, a real SQLite store in tmp_path, in both
sandbox modes.

A step that leaves the workspace over its size limit (sparse files count at their apparent
size) or with a path too long to restore is undone with an error observation and the episode
goes on; a folder chain deeper than Python's recursion limit is snapshotted and restored; a
restore never recreates setuid, setgid or sticky bits; a store whose disk is full during a
snapshot stops the episode resumable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attack_helpers import DEMO, CommandModel, bash, case, modes

from agentrunner import TraceStore, resume_episode, run_agent_episode
from agentrunner.cli.sandbox_opts import add_sandbox_options, sandbox_from_args
from agentrunner.envs.jail import Limits, SandboxConfig
from agentrunner.envs.tasks import Task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.errors import UsageError

MiB = 1 << 20
DEEP = 900
"""Deeper than Python's recursion limit (1000 frames) allows a recursive walk to go."""
DEEP_CHAIN = "mkdir -p " + "d/" * DEEP + " && echo made"
DEEP_CHECK = "test -d " + "d/" * DEEP + " && echo deep-is-there"
SETUID = (
    "cp /bin/true tool && chmod 6755 tool && mkdir shared && chmod 1777 shared"
    " && stat -c '%a %n' tool shared"
)


def sandbox(mode: str, **limits: int) -> SandboxConfig:
    return SandboxConfig(mode=mode, limits=Limits(**limits))  # type: ignore[arg-type]


def results(store: TraceStore, episode_id: str) -> list[dict[str, Any]]:
    """The payloads of the episode's tool results, in order."""
    return [e.payload for e in store.events(episode_id, kinds=["tool.result"])]


def store_bytes(db: Path) -> int:
    """What the store occupies on disk: the database and its write-ahead log."""
    files = [db, db.with_name(db.name + "-wal")]
    return sum(os.stat(f).st_blocks * 512 for f in files if f.exists())


def cancel_from(command: int) -> tuple[Callable[[int], None], Callable[[], bool]]:
    """A model hook and a cancel check that cancel the episode once the model reaches
    ``command`` (before it runs)."""
    reached = [False]

    def before(i: int) -> None:
        reached[0] = reached[0] or i >= command

    return before, lambda: reached[0]


# -- size ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", modes())
def test_sparse_files_over_the_workspace_limit_are_refused_and_the_episode_goes_on(
    mode: str, tmp_path: Path
) -> None:
    db = tmp_path / "traces.db"
    commands = ["truncate -s 512M a.bin b.bin && echo truncated", "ls", "echo still-here"]
    env = WorkspaceEnv(sandbox=sandbox(mode))  # the default limit: 1024 MB
    with TraceStore(db) as store, env:
        before = store_bytes(db)
        episode = run_agent_episode(
            env=env, task_id=DEMO, model_fn=CommandModel(commands), store=store
        )
        attack, listing, last = results(store, episode.episode_id)
    assert episode.status == "completed"
    assert "truncated" in attack["observation"]
    assert attack["error"] and "over the limit of 1,024 MiB" in attack["error"]
    assert "a.bin (512 MiB, sparse" in attack["observation"]
    assert "back as it was before this step" in attack["observation"]
    assert "a.bin" not in listing["observation"]  # the step was undone
    assert "still-here" in last["observation"]
    assert store_bytes(db) - before < 16 * MiB  # not 1 GiB of zeros


@pytest.mark.parametrize("mode", modes())
def test_files_over_a_lowered_workspace_limit_are_undone_and_the_limit_is_recorded(
    mode: str, tmp_path: Path
) -> None:
    commands = ["head -c 3000000 /dev/zero > big.bin && echo wrote", "ls", "echo after"]
    env = WorkspaceEnv(sandbox=sandbox(mode, workspace_mb=2))
    with TraceStore(tmp_path / "traces.db") as store, env:
        episode = run_agent_episode(
            env=env, task_id=DEMO, model_fn=CommandModel(commands), store=store
        )
        start = store.events(episode.episode_id, kinds=["episode.start"])[0].payload
        attack, listing, _ = results(store, episode.episode_id)
    assert start["env"]["sandbox"]["limits"]["workspace_mb"] == 2
    assert episode.status == "completed"
    assert "over the limit of 2 MiB" in attack["error"]
    assert "big.bin" not in listing["observation"]


@pytest.mark.parametrize("mode", modes())
def test_a_task_whose_starting_files_exceed_the_limit_is_refused_at_reset(mode: str) -> None:
    task = Task(task_id="too-big", prompt="p", files={"big.txt": "x" * (2 * MiB)})
    refused = r"too-big: the starting workspace holds .* over the limit of 1 MiB.*--workspace-size"
    env = WorkspaceEnv(sandbox=sandbox(mode, workspace_mb=1), task=task)
    with env, pytest.raises(UsageError, match=refused):
        env.reset("too-big", seed=0)


def test_workspace_size_is_a_sandbox_option_of_the_command_line() -> None:
    parser = argparse.ArgumentParser()
    add_sandbox_options(parser)
    default = sandbox_from_args(parser.parse_args([]))
    chosen = sandbox_from_args(parser.parse_args(["--workspace-size", "64"]))
    assert (default.limits.workspace_mb, chosen.limits.workspace_mb) == (1024, 64)
    assert chosen.to_dict()["limits"]["workspace_mb"] == 64


# -- depth and path length ------------------------------------------------------------------


@pytest.mark.parametrize("mode", modes())
def test_a_900_deep_folder_is_snapshotted_and_the_resumed_episode_completes(
    mode: str, tmp_path: Path
) -> None:
    before, cancel = cancel_from(1)
    model = CommandModel([DEEP_CHAIN, "echo cancelled-before"], before=before)
    env = WorkspaceEnv(sandbox=sandbox(mode))
    with TraceStore(tmp_path / "traces.db") as store, env:
        first = run_agent_episode(
            env=env, task_id=DEMO, model_fn=model, store=store, cancel_check=cancel
        )
        made = results(store, first.episode_id)[0]
    assert first.status == "cancelled"
    assert "made" in made["observation"] and made["error"] is None and made["snapshot"]
    with TraceStore(tmp_path / "traces.db") as store:
        resumed = resume_episode(store, first.episode_id, model_fn=CommandModel([DEEP_CHECK]))
        last = results(store, first.episode_id)[-1]
    assert resumed.status == "completed"
    assert "deep-is-there" in last["observation"]


LONG_NAME = "x" * 250
TOO_LONG = {
    "long-names": f"for i in $(seq 20); do mkdir {LONG_NAME} && cd {LONG_NAME}; done; echo made",
    "3000-deep": "python3 -c \"import os\nfor _ in range(3000): os.mkdir('d'); os.chdir('d')\"",
}


@pytest.mark.parametrize(
    ("mode", "how"), [case(mode, how) for mode in ("bwrap", "process") for how in TOO_LONG]
)
def test_a_path_past_the_length_limit_is_undone_and_the_episode_goes_on(
    mode: str, how: str, tmp_path: Path
) -> None:
    commands = [TOO_LONG[how], "ls", "echo still-here"]
    env = WorkspaceEnv(sandbox=sandbox(mode))
    with TraceStore(tmp_path / "traces.db") as store, env:
        episode = run_agent_episode(
            env=env, task_id=DEMO, model_fn=CommandModel(commands), store=store
        )
        attack, listing, last = results(store, episode.episode_id)
    assert episode.status == "completed"
    assert "longer than 3072 bytes" in attack["error"]
    assert LONG_NAME not in listing["observation"] and "d\n" not in listing["observation"]
    assert "still-here" in last["observation"]


@pytest.mark.parametrize("mode", modes())
def test_a_workspace_holding_a_3000_deep_chain_is_removed_when_the_environment_closes(
    mode: str,
) -> None:
    env = WorkspaceEnv(sandbox=sandbox(mode), snapshots=False)  # no step is undone
    with env:
        env.reset(DEMO, seed=0)
        made = bash(env, TOO_LONG["3000-deep"] + " && echo made")
        root = env.workspace.parent
    assert "made" in made.observation
    assert not root.exists()


# -- permission bits on restore ---------------------------------------------------------------


@pytest.mark.parametrize("mode", modes())
def test_a_setuid_file_is_restored_without_the_bit(mode: str, tmp_path: Path) -> None:
    before, cancel = cancel_from(1)
    model = CommandModel([SETUID, "echo cancelled-before"], before=before)
    env = WorkspaceEnv(sandbox=sandbox(mode))
    with TraceStore(tmp_path / "traces.db") as store, env:
        first = run_agent_episode(
            env=env, task_id=DEMO, model_fn=model, store=store, cancel_check=cancel
        )
        made = results(store, first.episode_id)[0]["observation"]
    assert "6755 tool" in made and "1777 shared" in made  # the attack itself worked
    resumed_env = WorkspaceEnv(sandbox=sandbox(mode))
    with TraceStore(tmp_path / "traces.db") as store, resumed_env:
        resumed_env.bind_store(store)
        resume_episode(
            store,
            first.episode_id,
            env=resumed_env,
            model_fn=CommandModel(["stat -c '%a %n' tool shared"]),
        )
        modes_seen = {
            name: stat.S_IMODE(os.lstat(resumed_env.workspace / name).st_mode)
            for name in ("tool", "shared")
        }
        shown = results(store, first.episode_id)[-1]["observation"]
    assert modes_seen == {"tool": 0o755, "shared": 0o777}
    assert "755 tool" in shown and "777 shared" in shown


# -- a full store ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", modes())
def test_a_store_full_during_a_snapshot_leaves_the_episode_resumable(
    mode: str, tmp_path: Path
) -> None:
    db = tmp_path / "traces.db"
    commands = ["head -c 4000000 /dev/urandom > noise.bin && echo wrote", "echo next"]
    env = WorkspaceEnv(sandbox=sandbox(mode))
    with TraceStore(db) as store, env:

        def fill_up(i: int) -> None:  # the store may grow 256 KiB more: no room for 4 MB
            if i == 0:
                conn = store._conn
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                conn.execute(f"PRAGMA max_page_count = {pages + 64}")

        first = run_agent_episode(
            env=env, task_id=DEMO, model_fn=CommandModel(commands, before=fill_up), store=store
        )
        errors = [e.payload for e in store.events(first.episode_id, kinds=["error"])]
    assert first.status == "interrupted"
    assert any("full" in str(e) for e in errors)
    with TraceStore(db) as store:  # room again: a new connection has no page limit
        resumed = resume_episode(store, first.episode_id, model_fn=CommandModel(["ls -l"]))
        steps = results(store, first.episode_id)
    with contextlib.closing(sqlite3.connect(db)) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert resumed.status == "completed"
    assert "wrote" in steps[0]["observation"] and steps[0]["snapshot"]
    assert "noise.bin" in steps[-1]["observation"]
