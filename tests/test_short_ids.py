"""Episode ids on screen: one rule everywhere, the shortest prefix of at least 8 characters
that no other id in the store shares, short even for episodes made in the same millisecond."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_process import last_json, run_cli

from agentrunner import TraceStore
from agentrunner.values.formatting import unique_prefixes

ID = re.compile(r"\b01[0-9A-HJKMNP-TV-Z]{6,24}\b")  # a ULID or a prefix of one


def _same_millisecond_pair(store: TraceStore) -> list[str]:
    """Make episodes until two of them share their creation millisecond; all of their ids."""
    made: list[str] = []
    for _ in range(2000):
        made.append(store.create_episode(task_id="t", seed=0, env={}, model={}))
        if len({i[:10] for i in made}) < len(made):  # the first 10 characters are the time
            return made
    pytest.skip("no two episodes were made in the same millisecond on this machine")


def test_episodes_made_in_the_same_millisecond_are_told_apart_within_16_characters(
    tmp_path: Path,
) -> None:
    store = TraceStore(tmp_path / "traces.db")
    made = _same_millisecond_pair(store)
    assert max(len(p) for p in unique_prefixes(made).values()) < 16


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """A store with a demo episode and three forks of it (not run): the path, the parent's
    id and what `fork` printed."""
    db = tmp_path_factory.mktemp("short-ids") / "traces.db"
    parent = last_json(run_cli("run", "--db", str(db), "--json").stdout)["episode_id"]
    made = run_cli("fork", parent, "--turn", "2", "-n", "3", "--db", str(db))
    assert made.returncode == 0, made.stderr
    return db, parent, made.stdout.splitlines()


def _ls_ids(db: Path) -> set[str]:
    listed = run_cli("ls", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    return {line.split()[0] for line in listed.stdout.splitlines()[1:]}


def test_fork_names_its_forks_and_parent_by_the_prefixes_ls_shows(
    forked: tuple[Path, str, list[str]],
) -> None:
    db, _, printed = forked
    named = [text for text in printed if text.startswith("fork ")]
    shown = {m for text in named for m in ID.findall(text)}
    assert len(named) == 3 and len(shown) == 4 and shown <= _ls_ids(db)


def test_verify_prints_episodes_by_the_prefixes_ls_shows(
    forked: tuple[Path, str, list[str]],
) -> None:
    db, parent, _ = forked
    result = run_cli("verify", parent, "--rule", "reward>=1", "--db", str(db))
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines()[1:] if line.strip()]
    assert row.split()[0] in _ls_ids(db)


def test_fanout_names_its_parent_by_the_prefix_ls_shows(tmp_path: Path) -> None:
    db = str(tmp_path / "traces.db")
    parent = last_json(run_cli("run", "--db", db, "--json").stdout)["episode_id"]
    made = run_cli("fanout", parent, "--turn", "2", "-k", "2", "-n", "1", "--db", db)
    assert made.returncode == 0, made.stderr
    (line,) = [text for text in made.stdout.splitlines() if text.startswith("fork group")]
    assert line.split()[-1] in _ls_ids(Path(db))
