"""Export: SFT, DPO, GRPO and KTO rows in TRL's documented shapes, from real stores.

The shapes checked here are those of TRL's "Dataset formats and types" guide: conversational
language modeling (``messages``, with a ``tools`` column and assistant ``tool_calls`` of
``{"type": "function", "function": {"name", "arguments"}}`` for tool calling), conversational
preference (``prompt`` / ``chosen`` / ``rejected``), conversational unpaired preference
(``prompt`` / ``completion`` / ``label``) and prompt-only (``prompt``, which GRPO reads).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_fanout import BREAK_EMPTY, FIX, SUBMIT

import agentrunner.export as export_module
from agentrunner import TraceStore, run_agent_episode
from agentrunner.cli.main import main
from agentrunner.envs.tasks import get_task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.export import ExportOptions, Selection, export_rows, percentile
from agentrunner.lifecycle.batch import run_batch
from agentrunner.lifecycle.fanout import FanoutResult, score_actions
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.values.errors import UsageError
from agentrunner.verifiers import RuleVerifier, verify_episode
from providers import get_model

# demo-mean with partial credit: the buggy code passes 3 of 5 hidden tests.
CANDIDATES = [[BREAK_EMPTY, SUBMIT], [SUBMIT], [FIX, SUBMIT]]
REWARDS = {0: 0.4, 1: 0.6, 2: 1.0, "parent": 1.0}  # the parent fixes at turn 4, submits later
ROLES = {"system", "user", "assistant", "tool"}


# ------------------------------------------------------------------ fixtures


def make_fanout(tmp: Path) -> tuple[TraceStore, FanoutResult]:
    """A demo-mean parent forked at turn 4 into 3 candidates x 2 samples, in ``tmp``."""
    task = get_task("demo-mean").model_dump()
    task["reward_mode"] = "partial_credit"
    (tmp / "tasks.json").write_text(json.dumps([task]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
        store = TraceStore(tmp / "traces.db")
        with WorkspaceEnv(tasks_path=tmp / "tasks.json", snapshot_dir=tmp / "snaps") as env:
            parent = run_agent_episode(
                env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
            ).episode_id
        result = score_actions(store, parent, turn=4, actions=CANDIDATES, n=2, concurrency=3)
    return store, result


@pytest.fixture(scope="module")
def fanout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TraceStore, FanoutResult]]:
    """A demo-mean parent forked at turn 4 into 3 candidates x 2 samples (read-only)."""
    store, result = make_fanout(tmp_path_factory.mktemp("fanout"))
    yield store, result
    store.close()


@pytest.fixture
def two_tasks(store: TraceStore, env: WorkspaceEnv) -> dict[str, str]:
    """demo-mean (split train) and slugify-accents (split test), bundled tasks, reward 1."""
    model = get_model("scripted:demo")
    return {
        task: run_agent_episode(env=env, task_id=task, model_fn=model, store=store).episode_id
        for task in ("demo-mean", "slugify-accents")
    }


def _rows(store: TraceStore, fmt: str, **selection: Any) -> list[dict[str, Any]]:
    options = selection.pop("options", None)
    _, rows = export_rows(store, fmt, selection=Selection(**selection), options=options)
    return list(rows)


def _cli_export(db: Path, out: Path, fmt: str, *args: str) -> list[dict[str, Any]]:
    assert main(["export", "--db", str(db), "--format", fmt, "-o", str(out), *args]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def _arguments(call: dict[str, Any]) -> Any:
    """A tool call's arguments as an object, whichever --tool-args wrote them."""
    arguments = call["function"]["arguments"]
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def _action(completion: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    (message,) = completion
    return [(c["function"]["name"], _arguments(c)) for c in message["tool_calls"]]


def _label(completion: list[dict[str, Any]]) -> int | str:
    """Which candidate (or the parent's own turn 4) a DPO completion is."""
    action = _action(completion)
    for i, candidate in enumerate(CANDIDATES):
        if action == [(c["name"], c["arguments"]) for c in candidate]:
            return i
    assert action == [(FIX["name"], FIX["arguments"])]
    return "parent"


# ------------------------------------------------------------------ TRL shapes


def _is_conversational(example: dict[str, Any]) -> bool:
    """TRL's ``is_conversational``: a supported key holding a list of role/content dicts."""
    keys = [k for k in ("prompt", "chosen", "rejected", "completion", "messages") if k in example]
    if not keys:
        return False
    first = example[keys[0]]
    return isinstance(first, list) and "role" in first[0] and "content" in first[0]


def _check_messages(messages: Any) -> None:
    assert isinstance(messages, list) and messages
    for m in messages:
        assert m["role"] in ROLES and isinstance(m["content"], str)
        if m["role"] == "tool":
            assert isinstance(m["tool_call_id"], str) and isinstance(m["name"], str)
        for call in m.get("tool_calls", []):
            assert m["role"] == "assistant" and call["type"] == "function"
            assert isinstance(call["function"]["name"], str)
            assert isinstance(call["function"]["arguments"], str | dict)


def _check_tools(tools: Any) -> None:
    assert isinstance(tools, list) and tools
    for tool in tools:
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert tool["function"]["parameters"]["type"] == "object"


def _check_source(store: TraceStore, source: dict[str, Any]) -> None:
    """The source names an episode and the seq of an assistant message in its history."""
    (row,) = store.events(source["episode_id"], after_seq=source["seq"] - 1, limit=1)
    assert row.seq == source["seq"] and row.turn == source["turn"]
    assert row.kind == "model.response" or row.payload["role"] == "assistant"


def _check_sft(store: TraceStore, row: dict[str, Any]) -> None:
    assert _is_conversational(row)
    _check_messages(row["messages"])
    assert row["messages"][-1]["role"] == "assistant"
    _check_tools(row["tools"])
    _check_source(store, row["source"])


def _check_dpo(store: TraceStore, row: dict[str, Any]) -> None:
    assert _is_conversational(row)
    for key in ("prompt", "chosen", "rejected"):
        _check_messages(row[key])
    assert row["prompt"][-1]["role"] in ("user", "tool")
    assert row["chosen"][0]["role"] == row["rejected"][0]["role"] == "assistant"
    assert row["chosen_reward"] > row["rejected_reward"]
    _check_tools(row["tools"])
    for side in ("chosen_source", "rejected_source"):
        _check_source(store, row[side])
    assert store.episode(row["source"]["episode_id"]).episode_id == row["source"]["episode_id"]


def _check_kto(store: TraceStore, row: dict[str, Any]) -> None:
    assert _is_conversational(row)
    _check_messages(row["prompt"])
    _check_messages(row["completion"])
    assert row["completion"][0]["role"] == "assistant" == row["completion"][-1]["role"]
    assert isinstance(row["label"], bool)
    _check_tools(row["tools"])
    _check_source(store, row["source"])


def _check_grpo(store: TraceStore, row: dict[str, Any]) -> None:
    assert _is_conversational({"prompt": row["prompt"]})
    _check_messages(row["prompt"])
    completions, rewards = row["reference_completions"], row["reference_rewards"]
    assert len(completions) == len(rewards) == len(row["sources"]) >= 2
    for completion, reward, source in zip(completions, rewards, row["sources"], strict=True):
        _check_messages(completion)
        assert completion[0]["role"] == "assistant" == completion[-1]["role"]
        _check_source(store, source)
        assert store.episode(source["episode_id"]).total_reward == reward
    _check_tools(row["tools"])


# ------------------------------------------------------------------ DPO


def test_dpo_pairs_from_a_fanout_match_the_known_rewards(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    rows = _rows(store, "dpo")
    pairs = {
        (_label(r["chosen"]), _label(r["rejected"])): (r["chosen_reward"], r["rejected_reward"])
        for r in rows
    }
    assert pairs == {
        (2, 1): (1.0, 0.6),
        (2, 0): (1.0, 0.4),
        (1, 0): (0.6, 0.4),
        ("parent", 1): (1.0, 0.6),
        ("parent", 0): (1.0, 0.4),
    }
    assert all(REWARDS[_label(r["chosen"])] == r["chosen_reward"] for r in rows)


def test_dpo_sides_name_the_branches_that_took_each_action(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, result = fanout
    episodes = {c.candidate: sorted(c.episodes) for c in result.ranked}
    for row in _rows(store, "dpo"):
        for side in ("chosen", "rejected"):
            label = _label(row[side])
            if label != "parent":
                assert sorted(row[f"{side}_source"]["episodes"]) == episodes[label]
                assert row[f"{side}_source"]["rewards"] == [REWARDS[label]] * 2


def test_dpo_prompt_is_the_exact_input_at_the_fork_point(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, result = fanout
    expected = store.reconstruct_request(result.parent_episode_id, 4).messages
    for row in _rows(store, "dpo"):
        assert row["prompt"] == export_module.chat(expected)
        assert row["source"]["episode_id"] == result.parent_episode_id
        assert row["source"]["turn"] == 4 and row["source"]["fork_groups"] == [result.group_id]


def test_dpo_round_trip_has_the_trl_preference_shape_with_sources(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    rows = _cli_export(store.path, tmp_path / "dpo.jsonl", "dpo")
    assert len(rows) == 5
    for row in rows:
        _check_dpo(store, row)


def test_dpo_pairs_a_plain_fork_with_its_parent(store: TraceStore, env: WorkspaceEnv) -> None:
    parent = run_agent_episode(
        env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
    ).episode_id
    (fork,) = fork_episode(store, parent, turn=4, action=SUBMIT)
    resume_episode(store, fork)
    (row,) = _rows(store, "dpo")
    assert row["chosen_source"]["episodes"] == [parent]
    assert row["rejected_source"]["episodes"] == [fork]
    assert _action(row["rejected"]) == [("submit", {})]


def test_dpo_never_pairs_branches_that_saw_different_prompts(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    parent = run_agent_episode(
        env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
    ).episode_id
    (told,) = fork_episode(store, parent, turn=4, message="Submit as soon as you can.")
    (submitted,) = fork_episode(store, parent, turn=4, action=SUBMIT)
    for fork in (told, submitted):
        resume_episode(store, fork)
    (row,) = _rows(store, "dpo")
    assert {row["chosen_source"]["episode_id"], row["rejected_source"]["episode_id"]} == {
        parent,
        submitted,
    }


def test_dpo_with_tool_results_adds_the_turns_tool_messages(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    rows = _rows(store, "dpo", options=ExportOptions(with_tool_results=True))
    chosen = next(r["chosen"] for r in rows if r["chosen_source"]["turn"] == 4)
    assert chosen[0]["role"] == "assistant"
    assert {m["role"] for m in chosen[1:]} == {"tool"}
    assert [m["tool_call_id"] for m in chosen[1:]] == [c["id"] for c in chosen[0]["tool_calls"]]


# ------------------------------------------------------------------ GRPO


def test_grpo_groups_every_branch_of_a_fanout_with_its_reward(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, result = fanout
    (row,) = _rows(store, "grpo")
    assert row["source"]["kind"] == "fork"
    assert row["source"]["episode_id"] == result.parent_episode_id
    branches = {e for c in result.ranked for e in c.episodes} | {result.parent_episode_id}
    assert {s["episode_id"] for s in row["sources"]} == branches
    assert sorted(row["reference_rewards"]) == [0.4, 0.4, 0.6, 0.6, 1.0, 1.0, 1.0]


def test_grpo_groups_batch_episodes_of_one_task(store: TraceStore, tmp_path: Path) -> None:
    result = run_batch(
        store,
        task_seed_pairs=[("demo-mean", s) for s in range(3)],
        env_factory=lambda: WorkspaceEnv(snapshot_dir=tmp_path / "snapshots"),
        model_factory=lambda: get_model("scripted:demo"),
    )
    (row,) = _rows(store, "grpo")
    assert row["source"] == {
        "kind": "task",
        "task_id": "demo-mean",
        "seeds": [0, 1, 2],
        "batches": [result.batch_id],
    }
    assert row["prompt"][-1]["role"] == "user" and row["reference_rewards"] == [1.0, 1.0, 1.0]


def test_grpo_round_trip_has_the_documented_shape_with_sources(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    (row,) = _cli_export(store.path, tmp_path / "grpo.jsonl", "grpo")
    _check_grpo(store, row)


# ------------------------------------------------------------------ KTO


def test_kto_label_is_reward_at_or_above_the_threshold(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    rows = _rows(store, "kto", options=ExportOptions(kto_threshold=0.6))
    assert len(rows) == 7
    assert all(r["label"] == (r["reward"] >= 0.6) for r in rows)
    assert sum(r["label"] for r in rows) == 5


def test_kto_round_trip_has_the_trl_unpaired_preference_shape_with_sources(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    rows = _cli_export(store.path, tmp_path / "kto.jsonl", "kto")
    assert sum(r["label"] for r in rows) == 3  # default threshold 1.0
    for row in rows:
        _check_kto(store, row)


def test_kto_prompt_is_the_first_model_input(fanout: tuple[TraceStore, FanoutResult]) -> None:
    store, result = fanout
    first = store.reconstruct_request(result.parent_episode_id, 1).messages
    assert all(r["prompt"] == export_module.chat(first) for r in _rows(store, "kto"))


# ------------------------------------------------------------------ SFT


def test_sft_chat_is_the_reconstructed_last_request_plus_its_response(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, result = fanout
    parent = result.parent_episode_id
    raw = ExportOptions(tool_args="string")  # the arguments byte for byte as the model wrote them
    (row,) = [r for r in _rows(store, "sft", options=raw) if r["source"]["episode_id"] == parent]
    last = [r for r in store.iter_events(parent, kinds=["model.response"])][-1]
    request = store.reconstruct_request(parent, last.turn)
    expected = [*request.messages, store.message(last.payload["message_hash"])]
    assert row["source"]["seq"] == last.seq and row["source"]["turn"] == last.turn
    assert len(row["messages"]) == len(expected)
    for got, want in zip(row["messages"], expected, strict=True):
        assert (got["role"], got["content"]) == (want.role, want.content)
        assert got.get("tool_call_id") == want.tool_call_id
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in got.get("tool_calls", [])
        ]
        assert calls == [(c.call_id, c.name, c.arguments) for c in want.tool_calls]
    assert row["tools"] == export_module.tool_schemas(request.tools)


def test_sft_round_trip_has_the_trl_conversational_shape_with_sources(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    rows = _cli_export(store.path, tmp_path / "sft.jsonl", "sft")
    assert len(rows) == 7
    for row in rows:
        _check_sft(store, row)


def test_sft_of_an_edited_fork_ends_with_the_edit(fanout: tuple[TraceStore, FanoutResult]) -> None:
    store, result = fanout
    fix = next(c for c in result.ranked if c.candidate == 2).episodes[0]
    (row,) = [r for r in _rows(store, "sft") if r["source"]["episode_id"] == fix]
    prompt = store.reconstruct_request(result.parent_episode_id, 4).messages
    assert row["messages"][:-1] == export_module.chat(prompt)
    assert _label(row["messages"][-1:]) == 2


def test_sft_leaves_reasoning_out_unless_asked(fanout: tuple[TraceStore, FanoutResult]) -> None:
    store, _ = fanout
    plain = _rows(store, "sft")[0]["messages"]
    thinking = _rows(store, "sft", options=ExportOptions(reasoning_key="thinking"))[0]["messages"]
    assert not any("thinking" in m or "reasoning" in m for m in plain)
    assert any(m.get("thinking") for m in thinking if m["role"] == "assistant")


def test_tool_arguments_are_parsed_objects_by_default(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    row = _rows(store, "sft")[0]
    args = [c["function"]["arguments"] for m in row["messages"] for c in m.get("tool_calls", [])]
    assert args and all(isinstance(a, dict) for a in args)


def test_tool_arguments_can_be_the_raw_strings(fanout: tuple[TraceStore, FanoutResult]) -> None:
    store, _ = fanout
    row = _rows(store, "sft", options=ExportOptions(tool_args="string"))[0]
    args = [c["function"]["arguments"] for m in row["messages"] for c in m.get("tool_calls", [])]
    assert args and all(isinstance(a, str) for a in args)


# ------------------------------------------------------------------ filters


def test_task_filter_keeps_that_task(store: TraceStore, two_tasks: dict[str, str]) -> None:
    (row,) = _rows(store, "sft", tasks=("slugify-accents",))
    assert row["source"]["episode_id"] == two_tasks["slugify-accents"]


def test_split_filter_reads_the_episodes_tasks_file(
    store: TraceStore, two_tasks: dict[str, str]
) -> None:
    (row,) = _rows(store, "sft", split="test")
    assert row["source"]["task_id"] == "slugify-accents"


def test_split_filter_can_read_another_tasks_file(
    store: TraceStore, two_tasks: dict[str, str], tmp_path: Path
) -> None:
    task = get_task("demo-mean").model_dump()
    task["split"] = "holdout"
    (tmp_path / "other.json").write_text(json.dumps([task]))
    (row,) = _rows(store, "sft", split="holdout", tasks_path=tmp_path / "other.json")
    assert row["source"]["task_id"] == "demo-mean"


def test_model_filter_takes_wildcards(store: TraceStore, two_tasks: dict[str, str]) -> None:
    assert len(_rows(store, "sft", models=("scripted:*",))) == 2
    assert _rows(store, "sft", models=("openai:*",)) == []


def test_min_reward_filter(fanout: tuple[TraceStore, FanoutResult]) -> None:
    store, _ = fanout
    assert sorted(r["reward"] for r in _rows(store, "sft", min_reward=0.6)) == [0.6] * 2 + [1.0] * 3


def test_reward_percentile_keeps_the_top_of_the_selection(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    assert [r["reward"] for r in _rows(store, "sft", reward_percentile=90)] == [1.0] * 3


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([0.4, 0.4, 0.6, 0.6, 1.0], 50) == 0.6
    assert percentile([0.0, 1.0], 25) == pytest.approx(0.25)


def test_verifier_filter_leaves_out_episodes_that_failed_it(
    store: TraceStore, two_tasks: dict[str, str]
) -> None:
    verify_episode(store, two_tasks["demo-mean"], RuleVerifier(["tool:write_file"], name="w"))
    (row,) = _rows(store, "sft", verifier="w")
    assert row["source"]["episode_id"] == two_tasks["slugify-accents"]


def test_verified_only_keeps_episodes_with_a_passing_result(
    store: TraceStore, two_tasks: dict[str, str]
) -> None:
    verify_episode(store, two_tasks["demo-mean"], RuleVerifier(["stop:done"], name="ok"))
    (row,) = _rows(store, "sft", verifier="ok", verified_only=True)
    assert row["source"]["episode_id"] == two_tasks["demo-mean"]


def test_unfinished_episodes_are_left_out_by_default(
    store: TraceStore, two_tasks: dict[str, str]
) -> None:
    (fork,) = fork_episode(store, two_tasks["demo-mean"], turn=2)
    assert store.episode(fork).status == "pending"
    assert len(_rows(store, "sft")) == 2
    assert len(_rows(store, "sft", statuses=())) == 3


def test_fanout_proposal_forks_are_left_out(store: TraceStore, env: WorkspaceEnv) -> None:
    parent = run_agent_episode(
        env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
    ).episode_id
    score_actions(store, parent, turn=4, k=2, n=1, horizon=1)
    assert len(_rows(store, "sft", statuses=())) == 3  # the parent and 2 continuations
    assert len(_rows(store, "sft", statuses=(), include_proposals=True)) == 5


# ------------------------------------------------------------------ CLI and files


def test_empty_export_writes_an_empty_file_and_says_so(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["export", "--db", str(db_path), "--format", "dpo", "-o", str(out)])
    assert code == 0 and out.read_bytes() == b""
    assert "nothing to export" in capsys.readouterr().err


def test_export_json_prints_a_one_line_summary(
    store: TraceStore,
    two_tasks: dict[str, str],
    db_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "sft.jsonl"
    main(["export", "--db", str(db_path), "--format", "sft", "-o", str(out), "--json"])
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert len(lines) == 1
    assert {k: summary[k] for k in ("rows", "file", "format")} == {
        "rows": 2,
        "file": str(out),
        "format": "sft",
    }


def test_export_json_without_a_file_is_bad_usage(store: TraceStore, db_path: Path) -> None:
    assert main(["export", "--db", str(db_path), "--format", "sft", "--json"]) == 2


def test_export_to_stdout_writes_one_row_per_line(
    store: TraceStore,
    two_tasks: dict[str, str],
    db_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["export", "--db", str(db_path), "--format", "kto"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["source"]["task_id"] for r in rows] == ["demo-mean", "slugify-accents"]


def test_empty_parquet_export_is_a_valid_file_with_no_rows(
    store: TraceStore, db_path: Path, tmp_path: Path
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "none.parquet"
    assert main(["export", "--db", str(db_path), "--format", "sft", "-o", str(out)]) == 0
    assert pq.read_table(out).num_rows == 0


def test_parquet_without_pyarrow_says_how_to_install_it(
    store: TraceStore,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    code = main(
        ["export", "--db", str(db_path), "--format", "sft", "--parquet", "-o", str(tmp_path / "x")]
    )
    assert code == 2 and "pip install 'agentrunner[parquet]'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_cli_writes_tool_arguments_as_objects_by_default(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    rows = _cli_export(store.path, tmp_path / "sft.jsonl", "sft")
    calls = [c for r in rows for m in r["messages"] for c in m.get("tool_calls", [])]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)


def test_reasoning_key_cannot_replace_a_message_key() -> None:
    with pytest.raises(UsageError, match="a message already uses that key"):
        ExportOptions(reasoning_key="content")


def test_unknown_format_is_refused(store: TraceStore) -> None:
    with pytest.raises(UsageError, match="unknown export format"):
        export_rows(store, "csv")


def test_export_all_names_exist() -> None:  # their order is ruff's (RUF022)
    assert all(hasattr(export_module, n) for n in export_module.__all__)
    assert len(set(export_module.__all__)) == len(export_module.__all__)
