"""`agentrunner report`'s prompt-cache hit ratio (per model, per episode; unknown usage is
unknown, never 0%) and its grouping and comparing by context policy, on a store made through
the command line.

The store: two batches on demo-mean (seeds 0 and 1) by scripted models whose scripts declare
their usage: ``masked`` (``--context mask:3``; each episode 1,000 input tokens then 1,000 of
which 900 read from the cache: 45%) and ``summarized`` (``--context summarize``; 2,000 then
2,000 with 1,000 cached: 25%); a fork of the first masked episode at turn 2 that changes to
``--context summarize`` (its own call: 1,000 with 900 cached: 90%); and, when the shared
fixtures are there, an imported Codex rollout whose calls recorded no token counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from test_report_html import _parsed
from unjudged_support import CODEX

MASKED, SUMMARIZED = "masked", "summarized"


def _script(path: Path, first: int, cached: int) -> str:
    """A script of two turns (a command, then submit) declaring ``first`` input tokens, then
    ``first`` of which ``cached`` read from the cache; the model spec that plays it (from
    its folder)."""
    turns = [
        {
            "text": "Looking.",
            "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
            "usage": {"input_tokens": first, "cache_read_tokens": 0, "output_tokens": 10},
        },
        {
            "text": "Done.",
            "tool_calls": [{"name": "submit", "arguments": {}}],
            "usage": {"input_tokens": first, "cache_read_tokens": cached, "output_tokens": 10},
        },
    ]
    path.write_text(json.dumps({"name": path.stem, "episodes": [{"match": "", "turns": turns}]}))
    return f"scripted:{path.name}"


def _ok(*args: str, cwd: Path | None = None) -> str:
    done = run_cli(*args, env={"COLUMNS": "220"}, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report-context")
    db = str(root / "traces.db")
    models = {
        MASKED: _script(root / "masked.json", 1000, 900),
        SUMMARIZED: _script(root / "summarized.json", 2000, 1000),
    }
    for name, policy in ((MASKED, "mask:3"), (SUMMARIZED, "summarize")):
        _ok("batch", "--db", db, "--model", models[name], "--task", "demo-mean", "--seeds",
            "0-1", "--name", name, "--context", policy, cwd=root)  # fmt: skip
    listed = json.loads(_ok("ls", "--db", db, "--json").splitlines()[-1])
    first = next(e for e in listed if e["model"] == models[MASKED] and e["seed"] == 0)
    _ok("fork", "--db", db, first["episode_id"], "--turn", "2", "--context", "summarize", "--run")
    imported = CODEX.is_file()
    if imported:
        _ok("import", "--db", db, str(CODEX))
    return {"db": db, "models": models, "imported": imported, "root": root}


def _json(store: dict[str, Any], *args: str) -> Any:
    return json.loads(_ok("report", "--db", store["db"], *args, "--json").splitlines()[-1])


def _groups(made: Any) -> dict[tuple[str, ...], Any]:
    return {tuple(g["key"].values()): g for g in made["groups"]}


def test_the_cache_hit_ratio_is_cache_read_over_all_input_tokens_per_model(
    store: dict[str, Any],
) -> None:
    groups = _groups(_json(store))
    masked, summarized = (groups[(store["models"][n],)] for n in (MASKED, SUMMARIZED))
    assert masked["cache_hits"] == {
        "ratio": pytest.approx(900 / 2000),
        "episode_median": pytest.approx(0.45),
        "episode_min": pytest.approx(0.45),
        "unknown": 0,
    }
    assert summarized["cache_hits"]["ratio"] == pytest.approx(1000 / 4000)


def test_an_episode_whose_usage_is_unknown_has_an_unknown_ratio_never_zero(
    store: dict[str, Any],
) -> None:
    if not store["imported"]:
        pytest.skip(f"the shared Codex fixture is absent ({CODEX})")
    made = _json(store)
    codex = next(g for g in made["groups"] if g["key"]["model"].startswith("codex"))
    assert codex["unknown_usage_calls"] > 0  # the rollout recorded no token counts
    assert codex["cache_hits"] == {
        "ratio": None,
        "episode_median": None,
        "episode_min": None,
        "unknown": 1,
    }
    overall = made["overall"]["cache_hits"]  # the four root runs only: 2 x 900 + 2 x 1000
    assert overall["ratio"] == pytest.approx((1800 + 2000) / (4000 + 8000))
    assert overall["unknown"] == 1
    text = _ok("report", "--db", store["db"])
    assert "unknown" in next(line for line in text.splitlines() if "│ codex" in line)


def test_the_text_report_shows_each_models_cache_hit_ratio(store: dict[str, Any]) -> None:
    text = _ok("report", "--db", store["db"], "--model", store["models"][MASKED])
    assert "cache hit" in text
    row = next(line for line in text.splitlines() if line.startswith("│ all "))
    assert "45%/45%" in row


def test_the_html_report_shows_the_ratio_per_group_and_per_episode(
    store: dict[str, Any],
) -> None:
    out = store["root"] / "page.html"
    _ok("report", "--db", store["db"], "--html", str(out))
    tables = _parsed(out).tables
    header = "cache hit all / ep med / ep min"
    (groups,) = [t for t in tables if t[0][0] == "model" and header in t[0]]
    column = groups[0].index(header)
    cells = {row[0]: row[column] for row in groups[1:]}
    assert cells[store["models"][SUMMARIZED]] == "25.0% / 25.0% / 25.0%"
    lists = [t for t in tables if t and t[0][:2] == ["outcome", "episode"]]
    column = lists[0][0].index("cache hit")
    by_model = {row[2]: row[column] for t in lists for row in t[1:]}
    assert by_model[store["models"][MASKED]] == "45.0%"
    if store["imported"]:
        assert next(v for k, v in by_model.items() if k.startswith("codex")) == "unknown"


def test_report_by_context_groups_episodes_by_the_policy_they_ran_with(
    store: dict[str, Any],
) -> None:
    groups = _groups(_json(store, "--by", "context"))
    assert groups[("mask:3",)]["episodes"] == 2
    assert groups[("summarize",)]["tokens"]["input"] == 8000
    if store["imported"]:
        assert groups[("-",)]["episodes"] == 1  # an imported session records no policy


def test_a_fork_counts_under_the_policy_it_changed_to(store: dict[str, Any]) -> None:
    made = _json(store, "--include-forks", "--by", "context", "--by", "model")
    fork = _groups(made)[("summarize", store["models"][MASKED])]
    assert fork["episodes"] == 1
    assert fork["tokens"]["input"] == 1000  # its own call only: the fork point's turn
    assert fork["cache_hits"]["ratio"] == pytest.approx(0.9)


def test_compare_shows_reward_tokens_and_cost_per_context_policy(
    store: dict[str, Any],
) -> None:
    result = _json(store, "--compare", MASKED, SUMMARIZED)
    assert result["pairs"] == 2
    rows = [
        (g["side"], g["context"], g["episodes"], g["tokens"]["input"], g["cost_usd"])
        for g in result["by_context"]
    ]
    assert rows == [("A", "mask:3", 2, 4000, 0.0), ("B", "summarize", 2, 8000, 0.0)]
    assert [g["reward_mean"] for g in result["by_context"]] == [0.0, 0.0]
    text = _ok("report", "--db", store["db"], "--compare", MASKED, SUMMARIZED)
    assert "context policy" in text
    row = next(line for line in text.splitlines() if "B summarized" in line)
    assert "summarize" in row and "25%/25%" in row


def test_compare_sides_may_name_context_policies(store: dict[str, Any]) -> None:
    result = _json(
        store, "--include-forks", "--compare", "context=mask:*", "context=summarize"
    )  # the fork (seed 0) is the latest summarize episode of its pair
    assert result["pairs"] == 2
    assert [(g["side"], g["context"], g["episodes"]) for g in result["by_context"]] == [
        ("A", "mask:3", 2),
        ("B", "summarize", 3),
    ]


def test_the_help_names_the_context_grouping_and_sides() -> None:
    text = _ok("report", "--help")
    assert "{model,task,split,batch,context}" in text
    assert "context=POLICY" in text and "cache hit ratio" in text
