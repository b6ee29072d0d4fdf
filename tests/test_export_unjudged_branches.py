"""DPO, GRPO and PRM exports of fork points whose branches have no reward.

The store: the scripted model run on a git repository made at test time with no test command
(``run --repo`` without ``--test``: nothing judges it, so its reward is unknown, null), then a
fan-out at its turn 1 with two given candidate actions run twice each. None of the five
branches has a reward: a pair, a group and a value need rewards, so there are no rows, and a
note says how many branches were left out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

ACTIONS = ('{"name": "list_files", "arguments": {}}', '{"name": "submit", "arguments": {}}')


def _json(*args: str) -> Any:
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path_factory.mktemp("unjudged-branches")
    repo = root / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    path = root / "traces.db"
    ran = _json("run", "--db", str(path), "--repo", str(repo), "--prompt", "fix it")
    if ran["total_reward"] is not None:
        pytest.skip("this agentrunner scores a run with no test command (no null reward)")
    actions = [a for action in ACTIONS for a in ("--action", action)]
    fanned = run_cli(
        "fanout", ran["episode_id"], "--turn", "1", "-n", "2", "--db", str(path), *actions
    )
    assert fanned.returncode == 0, fanned.stderr
    return path


def _export(db: Path, fmt: str, out: Path) -> tuple[list[dict[str, Any]], str]:
    result = run_cli("export", "--db", str(db), "--format", fmt, "-o", str(out))
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text().splitlines()], result.stderr


def test_dpo_makes_no_pair_of_branches_without_a_reward(db: Path, tmp_path: Path) -> None:
    rows, said = _export(db, "dpo", tmp_path / "dpo.jsonl")
    assert rows == []
    assert "dpo: 5 unjudged branch(es) (no reward) left out of pairs" in said


def test_grpo_makes_no_group_of_completions_without_a_reward(db: Path, tmp_path: Path) -> None:
    rows, said = _export(db, "grpo", tmp_path / "grpo.jsonl")
    assert rows == []
    assert "grpo: 5 unjudged episode(s) (no reward) left out" in said


def test_prm_values_no_candidate_whose_continuations_have_no_reward(
    db: Path, tmp_path: Path
) -> None:
    rows, said = _export(db, "prm", tmp_path / "prm.jsonl")
    assert rows == []
    assert "prm: 4 unjudged continuation(s) (no reward) left out" in said
    assert "prm: 1 fan-out(s) with a candidate no continuation judged skipped" in said
