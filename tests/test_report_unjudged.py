"""`agentrunner report` on episodes with no reward: unknown is not zero.

The store: two real sessions imported from the shared fixtures (a Claude Code session, and a
Codex rollout that records no token counts and so no cost), neither with a reward, beside
one episode the scripted demo model runs to reward 1. The imported ones are *unjudged*:
counted apart, never in a pass rate, a reward mean or a pair of ``--compare``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from unjudged_support import unjudged_store


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unjudged_store(tmp_path_factory.mktemp("unjudged"))


def _json(*args: str) -> Any:
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def _group(made: dict[str, Any], model: str) -> dict[str, Any]:
    return next(g for g in made["groups"] if g["key"]["model"] == model)


def test_imported_episodes_are_unjudged_and_left_out_of_the_pass_rate(db: Path) -> None:
    overall = _json("report", "--db", str(db))["overall"]
    assert (overall["episodes"], overall["judged"], overall["unjudged"]) == (3, 1, 2)
    assert overall["passed"] == 1 and overall["pass_rate"] == 1.0
    assert overall["reward_mean"] == 1.0


def test_a_model_with_only_unjudged_episodes_has_no_pass_rate_rather_than_zero(db: Path) -> None:
    codex = _group(_json("report", "--db", str(db)), "codex")
    assert codex["unjudged"] == 1 and codex["judged"] == 0
    assert codex["pass_rate"] is None and codex["pass_rate_ci95"] is None
    assert codex["reward_mean"] is None and codex["pass_at_k"] == {}


def test_the_text_report_says_how_many_episodes_are_unjudged(db: Path) -> None:
    shown = run_cli("report", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "3 (unjudged 2)" in shown.stdout
    assert "unjudged 2: ended with no reward" in shown.stdout


def test_model_calls_without_token_counts_are_counted_not_added_as_zero(db: Path) -> None:
    made = _json("report", "--db", str(db))
    assert _group(made, "codex")["unknown_usage_calls"] > 0
    assert _group(made, "scripted:demo")["unknown_usage_calls"] == 0
    shown = run_cli("report", "--db", str(db))
    assert "model call(s) without token counts" in shown.stdout


def test_an_episode_without_a_cost_is_counted_never_priced_at_zero(db: Path) -> None:
    made = _json("report", "--db", str(db))
    codex = _group(made, "codex")
    assert codex["cost_usd"] is None and codex["cost_unknown"] == 1
    assert made["overall"]["cost_unknown"] == 1


def test_compare_counts_unjudged_episodes_apart_and_never_pairs_them(db: Path) -> None:
    result = _json("report", "--db", str(db), "--compare", "codex", "scripted:*")
    assert (result["unjudged_a"], result["unjudged_b"]) == (1, 0)
    assert result["pairs"] == 0


def test_compare_with_a_side_that_selects_no_episode_is_an_error(db: Path) -> None:
    result = run_cli("report", "--db", str(db), "--compare", "no-such-model", "scripted:*")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "A 'no-such-model' selects no episode" in result.stderr
