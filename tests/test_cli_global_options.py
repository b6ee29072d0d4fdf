"""``--db``, ``--json`` and ``-v`` before the subcommand as well as after it (after wins)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import last_json, run_cli


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one finished demo episode."""
    db = tmp_path_factory.mktemp("global-options") / "traces.db"
    result = run_cli("run", "--db", str(db))
    assert result.returncode == 0, result.stderr
    return db


def test_db_and_json_given_before_the_subcommand_are_taken(demo_db: Path) -> None:
    result = run_cli("--db", str(demo_db), "--json", "ls")
    assert result.returncode == 0, result.stderr
    assert [e["status"] for e in last_json(result.stdout)] == ["completed"]


def test_db_given_after_the_subcommand_wins_over_one_given_before(
    demo_db: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.db"
    result = run_cli("--db", str(missing), "ls", "--db", str(demo_db), "--json")
    assert result.returncode == 0, result.stderr
    assert len(last_json(result.stdout)) == 1


def test_db_given_before_is_kept_when_the_subcommand_has_none(
    demo_db: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.db"
    result = run_cli("--db", str(missing), "ls")
    assert result.returncode != 0
    assert str(missing) in result.stderr


def test_verbose_before_the_subcommand_shows_the_traceback_of_a_failure(tmp_path: Path) -> None:
    result = run_cli("-v", "--db", str(tmp_path / "nowhere.db"), "show", "01ABCDEFGH")
    assert result.returncode != 0
    assert "Traceback" in result.stderr


def test_the_main_help_lists_the_common_options() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert all(flag in result.stdout for flag in ("--db", "--json", "--verbose"))
