"""Exports of episodes with no reward: unknown is not zero.

The store: a real Claude Code session and a real Codex rollout imported from the shared
fixtures (no reward: unjudged) and one episode the scripted demo model runs to reward 1.
KTO gives an unjudged episode no label (no row, and a note); SFT writes its reward as null;
the reward filters never keep it as a pass nor as a failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from unjudged_support import CLAUDE, TRACES, unjudged_store


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unjudged_store(tmp_path_factory.mktemp("unjudged-export"))


def _export(db: Path, out: Path, *args: str) -> tuple[list[dict[str, Any]], str]:
    result = run_cli("export", "--db", str(db), "-o", str(out), *args)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return rows, result.stderr


def test_kto_gives_unjudged_episodes_no_label_and_says_how_many(db: Path, tmp_path: Path) -> None:
    rows, said = _export(db, tmp_path / "kto.jsonl", "--format", "kto")
    assert [(r["source"]["model"], r["label"], r["reward"]) for r in rows] == [
        ("scripted:demo", True, 1.0)
    ]
    assert "kto: 2 unjudged episode(s)" in said


def test_sft_writes_an_unjudged_episodes_reward_as_null(db: Path, tmp_path: Path) -> None:
    rows, said = _export(db, tmp_path / "sft.jsonl", "--format", "sft")
    rewards = {r["source"]["model"]: r["reward"] for r in rows}
    assert rewards == {"claude-code:claude-opus-4-6": None, "codex": None, "scripted:demo": 1.0}
    assert "sft: 2 row(s) of unjudged episodes have reward null" in said


def test_a_reward_filter_keeps_no_unjudged_episode_as_a_failure(db: Path, tmp_path: Path) -> None:
    rows, said = _export(db, tmp_path / "sft.jsonl", "--format", "sft", "--min-reward", "0")
    assert [r["source"]["model"] for r in rows] == ["scripted:demo"]
    assert "2 unjudged episode(s) (no reward) left out by the reward filter" in said


def test_a_reward_percentile_is_computed_over_judged_rewards_only(db: Path, tmp_path: Path) -> None:
    rows, said = _export(db, tmp_path / "sft.jsonl", "--format", "sft", "--reward-percentile", "50")
    assert [r["reward"] for r in rows] == [1.0]
    assert "reward >= 1" in said


def test_on_postgres_too_kto_skips_and_report_counts_unjudged_episodes(
    pg_url: str, tmp_path: Path
) -> None:
    if not CLAUDE.is_file():
        pytest.skip(f"the shared foreign-trace fixtures are absent ({TRACES})")
    assert run_cli("import", "--db", pg_url, str(CLAUDE)).returncode == 0
    ran = run_cli("run", "--db", pg_url, "--model", "scripted:demo", "--task", "demo-mean")
    assert ran.returncode == 0, ran.stderr
    rows = run_cli("export", "--db", pg_url, "--format", "kto", "-o", str(tmp_path / "k.jsonl"))
    assert rows.returncode == 0 and "kto: 1 unjudged episode(s)" in rows.stderr
    assert len((tmp_path / "k.jsonl").read_text().splitlines()) == 1
    made = run_cli("report", "--db", pg_url, "--json")
    assert made.returncode == 0, made.stderr
    overall = json.loads(made.stdout.splitlines()[-1])["overall"]
    assert (overall["judged"], overall["unjudged"], overall["pass_rate"]) == (1, 1, 1.0)
