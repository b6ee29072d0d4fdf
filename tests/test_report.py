"""`agentrunner report`: every number checked against a hand computation, on episodes written
through the real runner by scripted models whose reward is fixed per task and seed.

Two models on two tasks (demo-mean, paginate-off-by-one) and seeds 0, 1, 2. Model A gives
up (submits at once: reward 0) on (demo-mean, 0) and on every seed of paginate-off-by-one;
model B gives up on (demo-mean, 0) only; otherwise both play the demo script (reward 1).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

TASKS = ("demo-mean", "paginate-off-by-one")
FAILS = {
    "a": {
        ("demo-mean", 0),
        ("paginate-off-by-one", 0),
        ("paginate-off-by-one", 1),
        ("paginate-off-by-one", 2),
    },
    "b": {("demo-mean", 0)},
}


class _Fixed:
    """The demo script, or giving up at once, by (task, seed)."""

    provider = "scripted"

    def __init__(self, name: str, fails: set[tuple[str, int]], give_up: ScriptedModel) -> None:
        self.model, self.params, self.fails = f"model-{name}", {}, fails
        self.good, self.bad = ScriptedModel("demo", pace=0), give_up

    def spec(self) -> dict[str, Any]:
        return {"spec": f"scripted:{self.model}", "provider": "scripted", "model": self.model}

    def __call__(self, context: Any) -> Any:
        failing = (context.task_id, context.seed) in self.fails
        return (self.bad if failing else self.good)(context)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    script = root / "give-up.json"
    script.write_text(
        json.dumps(
            {
                "name": "give-up",
                "episodes": [
                    {
                        "match": "",
                        "turns": [
                            {
                                "text": "Giving up.",
                                "tool_calls": [{"name": "submit", "arguments": {}}],
                            }
                        ],
                    }
                ],
            }
        )
    )
    give_up = ScriptedModel(str(script), pace=0)
    path = root / "traces.db"
    mp = pytest.MonkeyPatch()
    mp.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
    with TraceStore(path) as store, WorkspaceEnv(snapshot_dir=root / "snaps") as env:
        for name in ("a", "b"):
            model = _Fixed(name, FAILS[name], give_up)
            for task in TASKS:
                for seed in range(3):
                    run_agent_episode(env=env, task_id=task, seed=seed, model_fn=model, store=store)
    mp.undo()
    return path


def _json(*args: str) -> Any:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def _wilson(passed: int, n: int) -> list[float]:
    """The Wilson score interval, spelled out: z = 1.959964."""
    z = 1.959964
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [centre - half, centre + half]


def test_pass_rates_come_with_their_wilson_intervals(db: Path) -> None:
    made = _json("report", "--db", str(db), "--json")
    groups = {g["key"]["model"]: g for g in made["groups"]}
    a, b = groups["scripted:model-a"], groups["scripted:model-b"]
    assert (a["episodes"], a["passed"], b["passed"]) == (6, 2, 5)
    assert a["pass_rate"] == pytest.approx(2 / 6) and b["pass_rate"] == pytest.approx(5 / 6)
    assert a["pass_rate_ci95"] == pytest.approx(_wilson(2, 6), abs=1e-6)
    assert b["pass_rate_ci95"] == pytest.approx(_wilson(5, 6), abs=1e-6)
    assert _wilson(2, 6) == pytest.approx([0.0968, 0.7000], abs=1e-4)  # a textbook value


def test_mean_reward_comes_with_its_standard_error(db: Path) -> None:
    made = _json("report", "--db", str(db), "--json")
    a = {g["key"]["model"]: g for g in made["groups"]}["scripted:model-a"]
    # rewards 1, 1, 0, 0, 0, 0: mean 1/3; sample sd sqrt(4/15); se = sd / sqrt(6)
    assert a["reward_mean"] == pytest.approx(1 / 3)
    assert a["reward_se"] == pytest.approx(math.sqrt(4 / 15) / math.sqrt(6))


def test_pass_at_k_is_the_unbiased_estimate_averaged_over_tasks(db: Path) -> None:
    made = _json("report", "--db", str(db), "--json")
    a = {g["key"]["model"]: g for g in made["groups"]}["scripted:model-a"]
    # demo-mean: 2 of 3 seeds pass; paginate: 0 of 3.
    # pass@1 = (2/3 + 0) / 2; pass@2 = (1 - C(1,2)/C(3,2) + 0) / 2 = 1/2;
    # pass@3 = (1 + 0) / 2
    assert a["pass_at_k"] == pytest.approx({"1": 1 / 3, "2": 1 / 2, "3": 1 / 2})


def test_counts_tokens_turns_and_tool_calls_from_the_log(db: Path) -> None:
    made = _json("report", "--db", str(db), "--json", "--model", "scripted:model-a")
    (a,) = made["groups"]
    with TraceStore(db) as store:
        mine = [e for e in store.list_episodes() if e.model["spec"] == "scripted:model-a"]
        turns = sorted(e.turns for e in mine)
        tokens = sum(e.tokens["input"] for e in mine)
    assert a["completed"] == 6 and a["stop_reasons"] == {"done": 6}
    assert a["tokens"]["input"] == tokens
    assert turns == [1, 1, 1, 1, 7, 7]  # four give-ups (one turn), two demo runs (seven)
    assert a["turns"] == {"median": 1.0, "p90": 7.0}
    assert a["tool_calls"]["median"] == 1.0 and a["latency_s"]["p50"] is not None


def test_per_task_rows_give_each_model_its_numbers(db: Path) -> None:
    made = _json("report", "--db", str(db), "--json")
    rows = {t["task_id"]: {r["model"]: r for r in t["rows"]} for t in made["tasks"]}
    assert rows["paginate-off-by-one"]["scripted:model-a"]["pass_rate"] == 0.0
    assert rows["paginate-off-by-one"]["scripted:model-b"]["pass_rate"] == 1.0
    assert rows["demo-mean"]["scripted:model-a"]["passed"] == 2


def test_compare_pairs_by_task_and_seed_with_mcnemar(db: Path) -> None:
    result = _json(
        "report", "--db", str(db), "--json", "--compare", "scripted:model-a", "scripted:model-b"
    )
    assert result["pairs"] == 6
    # discordant pairs: B alone passes the three paginate seeds; A alone passes none.
    # exact McNemar: p = 2 * P(X <= 0), X ~ Bin(3, 1/2) = 2 / 8
    assert result["mcnemar"] == {"only_a": 0, "only_b": 3, "p_value": pytest.approx(0.25)}
    assert result["pass_rate_difference"] == pytest.approx(5 / 6 - 2 / 6)
    # reward differences B - A per pair: 0, 0, 0, 1, 1, 1: mean 1/2, se = sd / sqrt 6
    se = math.sqrt(0.3) / math.sqrt(6)
    assert result["reward_difference"] == pytest.approx(0.5)
    assert result["reward_difference_ci95"] == pytest.approx(
        [0.5 - 1.959964 * se, 0.5 + 1.959964 * se], abs=1e-5
    )
    assert result["solved_only_by_b"] == ["paginate-off-by-one"]
    assert result["solved_only_by_a"] == []


def test_report_says_so_when_nothing_matches(db: Path) -> None:
    result = run_cli("report", "--db", str(db), "--task", "no-such-task")
    assert result.returncode == 2 and "no episodes" in result.stderr


def test_split_filter_keeps_the_tasks_of_that_split(db: Path) -> None:
    made = _json("report", "--db", str(db), "--json", "--split", "train", "--by", "split")
    assert [g["key"]["split"] for g in made["groups"]] == ["train"]
    assert made["overall"]["episodes"] == 12  # both tasks are in the train split
    result = run_cli("report", "--db", str(db), "--split", "test")
    assert result.returncode == 2 and "no episodes" in result.stderr


def test_the_time_range_takes_dates_and_times(db: Path) -> None:
    with TraceStore(db) as store:
        days = sorted(e.created_at[:10] for e in store.list_episodes())
    first, last = days[0], days[-1]
    whole_day = _json("report", "--db", str(db), "--json", "--since", first, "--until", last)
    assert whole_day["overall"]["episodes"] == 12  # --until a date: up to its end
    before = run_cli("report", "--db", str(db), "--until", "2000-01-01T00:00Z")
    assert before.returncode == 2 and "no episodes" in before.stderr
    bad = run_cli("report", "--db", str(db), "--since", "yesterday")
    assert bad.returncode == 2 and "--since must be an ISO 8601 date or time" in bad.stderr


def test_compare_sides_narrow_the_shared_filters_and_may_not_overlap(db: Path) -> None:
    narrowed = run_cli(
        "report",
        "--db",
        str(db),
        "--json",
        "--model",
        "scripted:model-a",
        "--compare",
        "scripted:model-a",
        "scripted:model-b",
    )  # B is outside --model: it selects nothing, which is an error, never an empty result
    assert narrowed.returncode == 2 and "B 'scripted:model-b' selects no episode" in narrowed.stderr
    overlap = run_cli("report", "--db", str(db), "--compare", "scripted:*", "scripted:model-b")
    assert overlap.returncode == 2 and "same episodes" in overlap.stderr


def test_a_verifier_no_episode_has_is_an_error_not_a_zero(db: Path) -> None:
    result = run_cli("report", "--db", str(db), "--verifier", "no-such-verifier")
    assert result.returncode == 2 and "no episode has a result" in result.stderr


def test_episodes_not_ended_are_listed_but_not_judged(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with TraceStore(path) as store, WorkspaceEnv(snapshot_dir=tmp_path / "s") as env:
        run_agent_episode(
            env=env, task_id="demo-mean", model_fn=ScriptedModel("demo", pace=0), store=store
        )
        spec = {"spec": "scripted:demo"}
        store.add_batch(  # planned, not run yet: pending (interrupted before that status)
            "b-1",
            {},
            [
                ("demo-mean", 1, {"kind": "workspace"}, spec),
                ("demo-mean", 2, {"kind": "workspace"}, spec),
            ],
        )
    made = _json("report", "--db", str(path), "--json")
    overall = made["overall"]
    assert (overall["episodes"], overall["judged"], overall["unjudged"]) == (3, 1, 0)
    assert overall["interrupted"] + overall["pending"] == 2
    assert overall["pass_rate"] == 1.0 and overall["pass_at_k"] == {"1": 1.0}


def test_mcnemar_stays_exact_and_quick_with_many_discordant_pairs() -> None:
    from agentrunner.report.stats import mcnemar

    assert mcnemar(0, 3).p_value == pytest.approx(0.25)
    assert mcnemar(2, 1).p_value == pytest.approx(1.0)
    large = mcnemar(20_000, 20_500)  # the normal approximation: z = 500 / sqrt(40500) ~ 2.48
    assert 0.01 < large.p_value < 0.02


def test_pass_at_k_averages_the_tasks_that_have_k_seeds() -> None:
    from agentrunner.report.build import _pass_at_k

    def fact(task: str, seed: int, passed: bool) -> Any:
        class Summary:
            task_id, status = task, "completed"

        Summary.seed = seed  # type: ignore[attr-defined]
        return type("F", (), {"model": "m", "summary": Summary, "passed": passed})()

    facts = [fact("t1", 0, True), fact("t1", 1, False), fact("t1", 2, False), fact("t2", 0, True)]
    # t1: n=3, c=1; t2: n=1, c=1. pass@1 = (1/3 + 1) / 2; pass@2 (t1 only) = 1 - C(2,2)/C(3,2)
    assert _pass_at_k(facts) == pytest.approx({"1": 2 / 3, "2": 2 / 3, "3": 1.0})
