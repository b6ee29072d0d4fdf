"""Verifiers: rules, an LLM judge (the scripted model), composites; stored, shown by show/ls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentrunner.verifiers as verifiers_module
from agentrunner import AgentContext, AgentTurn, TraceStore, run_agent_episode
from agentrunner.cli.main import main
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.errors import UsageError
from agentrunner.verifiers import (
    CompositeVerifier,
    JudgeVerifier,
    RuleVerifier,
    latest_verifications,
    load_trajectory,
    parse_rule,
    parse_score,
    verifications,
    verify_episode,
)
from providers import get_model


@pytest.fixture
def episode(store: TraceStore, env: WorkspaceEnv) -> str:
    """The demo episode: lists, reads stats.py, runs the tests, fixes it, submits (reward 1)."""
    return run_agent_episode(
        env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
    ).episode_id


@pytest.fixture
def judge_script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A scripted judge that answers ``text``."""

    def make(text: str) -> str:
        path = tmp_path / f"judge-{abs(hash(text))}.json"
        turns = [{"text": text}]
        path.write_text(json.dumps({"name": "judge", "episodes": [{"match": "", "turns": turns}]}))
        return f"scripted:{path}"

    return make


def _cli(db: Path, *args: str) -> int:
    return main([*args, "--db", str(db)])


# ------------------------------------------------------------------ rules


def test_rules_pass_when_every_condition_holds(store: TraceStore, episode: str) -> None:
    rules = RuleVerifier(
        [
            "tool:bash:command~unittest",
            "tool:str_replace:path=stats.py",
            "file:*.py",
            "command:^python -m unittest",
            "reward>=1",
            "stop:done",
            "turns<=7",
        ]
    )
    result = verify_episode(store, episode, rules)
    assert result.passed and result.score == 1.0


def test_rules_fail_and_say_which_condition_did_not_hold(store: TraceStore, episode: str) -> None:
    result = verify_episode(store, episode, RuleVerifier(["file:stats.py", "tool:write_file"]))
    checks = result.details["checks"]
    assert not result.passed and result.score == 0.5
    assert checks[1] == {
        "rule": "tool:write_file",
        "passed": False,
        "evidence": "no matching write_file call",
    }


def test_any_rule_passes_when_one_rule_holds(store: TraceStore, episode: str) -> None:
    result = verify_episode(
        store, episode, RuleVerifier(["tool:write_file", "stop:done"], match="any")
    )
    assert result.passed and result.score == 0.5


def test_argument_condition_must_match_the_same_call(store: TraceStore, episode: str) -> None:
    result = verify_episode(store, episode, RuleVerifier(["tool:read_file:path=tests.py"]))
    assert not result.passed


def test_not_rule_holds_when_its_rule_does_not(store: TraceStore, episode: str) -> None:
    result = verify_episode(store, episode, RuleVerifier(["not:tool:write_file", "not:turns>7"]))
    assert result.passed


def test_max_turns_rule_fails_past_the_limit(store: TraceStore, episode: str) -> None:
    result = verify_episode(store, episode, RuleVerifier(["turns<=3"]))
    assert not result.passed and result.details["checks"][0]["evidence"] == "turns 7"


def test_a_failed_edit_does_not_count_as_touching_the_file(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    bad_edit = {"path": "stats.py", "old_str": "no such text", "new_str": "x"}
    model = script([{"tool_calls": [{"name": "str_replace", "arguments": bad_edit}]}])
    ep = run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store).episode_id
    result = verify_episode(store, ep, RuleVerifier(["file:stats.py", "tool:str_replace"]))
    assert [c["passed"] for c in result.details["checks"]] == [False, True]


@pytest.mark.parametrize(
    "text",
    [
        "tool:bash",
        "tool:bash:command~pytest -x",
        "tool:str_replace:path=stats.py:new_str~len",
        "file:src/*.py",
        "command:make (test|check)",
        "reward>=0.5",
        "turns<=40",
        "stop:done,max_steps",
        "not:tool:write_file",
    ],
)
def test_rule_text_form_round_trips(text: str) -> None:
    assert parse_rule(text).describe() == text


def test_unreadable_rule_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="rules look like"):
        parse_rule("files touched: stats.py")


def test_rule_with_a_bad_regex_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="bad regular expression"):
        parse_rule("command:(unclosed")


# ------------------------------------------------------------------ judge


def test_judge_scores_an_episode_with_the_scripted_model(
    store: TraceStore, episode: str, judge_script: Any
) -> None:
    judge = JudgeVerifier(judge_script("Fixed the divisor, ran the tests.\nSCORE: 0.8"), "Fixes it")
    result = verify_episode(store, episode, judge)
    assert result.score == pytest.approx(0.8) and result.passed


def test_judge_below_its_threshold_fails(
    store: TraceStore, episode: str, judge_script: Any
) -> None:
    judge = JudgeVerifier(judge_script("SCORE: 0.3"), "Fixes it", threshold=0.5)
    assert not verify_episode(store, episode, judge).passed


def test_judge_is_asked_with_the_rubric_and_the_transcript(store: TraceStore, episode: str) -> None:
    seen: list[AgentContext] = []

    def judge_fn(context: AgentContext) -> AgentTurn:
        seen.append(context)
        return AgentTurn(message="SCORE: 1")

    verify_episode(store, episode, JudgeVerifier(judge_fn, "Runs the visible tests first."))
    prompt = seen[0].messages[-1].content
    assert "Runs the visible tests first." in prompt
    assert "-> str_replace(" in prompt and "## tool result (submit)\nsubmitted:" in prompt
    assert seen[0].messages[0].role == "system" and seen[0].tools == []


def test_judge_answer_without_a_score_fails_and_keeps_the_answer(
    store: TraceStore, episode: str, judge_script: Any
) -> None:
    result = verify_episode(store, episode, JudgeVerifier(judge_script("Looks fine."), "Fixes it"))
    assert result.score is None and not result.passed
    assert result.details["answer"] == "Looks fine." and "SCORE" in result.details["error"]


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("SCORE: 0.8", 0.8),
        ("score: 8/10", 0.8),
        ("Score = 80%", 0.8),
        ("**SCORE:** 1", 1.0),
        ("SCORE: 0.2 at first, but on reflection\nSCORE: 0.6", 0.6),
        ("SCORE: 7", None),
        ("no score here", None),
    ],
)
def test_score_is_read_from_the_last_score_line(answer: str, score: float | None) -> None:
    assert parse_score(answer) == (pytest.approx(score) if score is not None else None)


def test_judge_without_a_rubric_is_refused() -> None:
    with pytest.raises(UsageError, match="rubric"):
        JudgeVerifier("scripted:demo", "  ")


# ------------------------------------------------------------------ composite


def _judge(judge_script: Any, score: float) -> JudgeVerifier:
    return JudgeVerifier(judge_script(f"SCORE: {score}"), "rubric", name=f"judge-{score}")


def test_composite_all_fails_when_one_verifier_fails(
    store: TraceStore, episode: str, judge_script: Any
) -> None:
    both = CompositeVerifier([RuleVerifier(["stop:done"]), _judge(judge_script, 0.2)])
    result = verify_episode(store, episode, both)
    assert not result.passed and result.score == pytest.approx(0.2)
    assert [c["passed"] for c in result.details["children"]] == [True, False]


def test_composite_any_passes_when_one_verifier_passes(
    store: TraceStore, episode: str, judge_script: Any
) -> None:
    either = CompositeVerifier(
        [RuleVerifier(["tool:write_file"]), _judge(judge_script, 0.9)], mode="any"
    )
    result = verify_episode(store, episode, either)
    assert result.passed and result.score == pytest.approx(0.9)


def test_composite_mean_weighs_scores_against_its_threshold(
    store: TraceStore, episode: str, judge_script: Any
) -> None:
    mean = CompositeVerifier(
        [RuleVerifier(["tool:write_file"]), _judge(judge_script, 0.9)],
        mode="mean",
        weights=[1.0, 3.0],
        threshold=0.6,
    )
    result = verify_episode(store, episode, mean)
    assert result.score == pytest.approx(0.675) and result.passed


def test_composite_reads_the_log_once_for_all_verifiers(store: TraceStore, episode: str) -> None:
    trajectory = load_trajectory(store, episode)
    verdict = CompositeVerifier([RuleVerifier(["stop:done"]), RuleVerifier(["reward>=1"])]).verify(
        trajectory
    )
    assert verdict.passed and len(verdict.details["children"]) == 2


# ------------------------------------------------------------------ storage, show, ls


def test_result_is_stored_with_the_verifier_name_and_spec(store: TraceStore, episode: str) -> None:
    verify_episode(store, episode, RuleVerifier(["stop:done"], name="ended-well"))
    row = (
        store.raw_connection()
        .execute(
            "SELECT verifier, score, passed, details FROM verifications WHERE episode_id = ?",
            (episode,),
        )
        .fetchone()
    )
    assert row[:3] == ("ended-well", 1.0, 1)
    assert json.loads(row[3])["spec"] == {"kind": "rules", "match": "all", "rules": ["stop:done"]}


def test_unsaved_verification_leaves_the_table_alone(store: TraceStore, episode: str) -> None:
    verify_episode(store, episode, RuleVerifier(["stop:done"]), save=False)
    assert verifications(store, episode) == []


def test_latest_result_per_verifier_wins(store: TraceStore, episode: str) -> None:
    verify_episode(store, episode, RuleVerifier(["turns<=3"], name="short"))
    verify_episode(store, episode, RuleVerifier(["turns<=30"], name="short"))
    (latest,) = latest_verifications(store)[episode]
    assert latest.passed and len(verifications(store, episode)) == 2


def test_show_lists_the_verifier_results(
    store: TraceStore, episode: str, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_episode(store, episode, RuleVerifier(["stop:done", "tool:write_file"], name="mine"))
    assert _cli(db_path, "show", episode) == 0
    out = capsys.readouterr().out
    assert "verifiers" in out and "fail mine · score 0.50" in out
    assert "✗ tool:write_file: no matching write_file call" in out


def test_show_json_carries_the_verifications(
    store: TraceStore, episode: str, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_episode(store, episode, RuleVerifier(["stop:done"], name="mine"))
    _cli(db_path, "show", episode, "--json")
    value = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(v["verifier"], v["passed"]) for v in value["verifications"]] == [("mine", True)]


def test_ls_shows_passed_over_verified(
    store: TraceStore, episode: str, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_episode(store, episode, RuleVerifier(["stop:done"], name="a"))
    verify_episode(store, episode, RuleVerifier(["tool:write_file"], name="b"))
    _cli(db_path, "ls")
    out = capsys.readouterr().out
    assert "verified" in out.splitlines()[0] and " 1/2 " in out


def test_ls_json_lists_the_latest_result_of_each_verifier(
    store: TraceStore, episode: str, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verify_episode(store, episode, RuleVerifier(["turns<=3"], name="short"))
    verify_episode(store, episode, RuleVerifier(["turns<=30"], name="short"))
    _cli(db_path, "ls", "--json")
    (row,) = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(v["verifier"], v["passed"]) for v in row["verifications"]] == [("short", True)]


# ------------------------------------------------------------------ CLI


def test_verify_cli_stores_and_prints_one_json_summary(
    store: TraceStore, episode: str, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _cli(db_path, "verify", episode[:8], "--rule", "stop:done", "--name", "ok", "--json")
    value = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and value["passed"] == 1 and value["results"][0]["verifier"] == "ok"
    assert latest_verifications(store)[episode][0].verifier == "ok"


def test_verify_cli_combines_rules_and_a_judge(
    store: TraceStore,
    episode: str,
    db_path: Path,
    judge_script: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    judge = judge_script("SCORE: 0.4")
    args = ["verify", "--all", "--rule", "stop:done", "--judge", judge, "--rubric", "fixes it"]
    _cli(db_path, *args, "--combine", "mean", "--json")
    value = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert value["verifier"] == "composite" and value["results"][0]["score"] == pytest.approx(0.7)


def test_verify_require_all_exits_1_when_an_episode_fails(
    store: TraceStore, episode: str, db_path: Path
) -> None:
    assert _cli(db_path, "verify", "--all", "--rule", "turns<=3", "--require-all") == 1


def test_verify_skip_verified_leaves_verified_episodes_alone(
    store: TraceStore, episode: str, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cli(db_path, "verify", "--all", "--rule", "stop:done")
    capsys.readouterr()
    _cli(db_path, "verify", "--all", "--rule", "stop:done", "--skip-verified", "--json")
    value = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert value["verified"] == 0 and len(verifications(store, episode)) == 1


def test_verify_cli_judge_without_rubric_is_bad_usage(
    store: TraceStore, episode: str, db_path: Path
) -> None:
    assert _cli(db_path, "verify", "--all", "--judge", "scripted:demo") == 2


def test_verify_cli_with_a_name_but_no_verifier_is_bad_usage(
    store: TraceStore, db_path: Path
) -> None:
    assert _cli(db_path, "verify", "--all", "--name", "mine") == 2


def test_verifiers_all_names_exist_and_are_sorted() -> None:
    assert all(hasattr(verifiers_module, n) for n in verifiers_module.__all__)
    assert verifiers_module.__all__ == sorted(verifiers_module.__all__)
