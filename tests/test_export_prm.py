"""PRM export: one (state, action, value) row per candidate of every decision point, made
while an episode ran or by ``fanout`` on a finished one, its state the exact model input."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from test_branching import DEMO, SUBMIT, _run, _script
from test_fanout import FIX
from test_fanout import SUBMIT as SUBMIT_CALL

from agentrunner import Branching, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.export import ExportOptions, Selection, chat, export, export_rows, tool_schemas
from agentrunner.export.chat import chat_message
from agentrunner.lifecycle.decisions import PROPOSAL, decisions
from agentrunner.lifecycle.fanout import score_actions
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.store.groups import GroupMember, add_group_member, create_fork_group, fork_groups
from providers.scripted import ScriptedModel

RAW = ExportOptions(tool_args="string")  # tool arguments byte for byte as the model wrote them


def _branched(root: Path, adopt: str, alternatives: list[Any]) -> tuple[TraceStore, str]:
    """A store holding one demo episode that branched at turns 2, 4 and 6 (3 candidates x 2
    continuations; turn 4's candidates are ``alternatives``)."""
    store = TraceStore(root / "traces.db")
    branching = Branching(every=2, actions=3, samples=2, adopt=adopt)  # type: ignore[arg-type]
    rollout = _run(store, root, _script(root, alternatives), branching)
    return store, rollout.episode_id


@pytest.fixture(scope="module")
def best(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TraceStore, str]]:
    store, main = _branched(tmp_path_factory.mktemp("best"), "best", [SUBMIT, "fix", "fix"])
    yield store, main
    store.close()


@pytest.fixture(scope="module")
def measure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TraceStore, str]]:
    store, main = _branched(tmp_path_factory.mktemp("measure"), "measure", ["fix", SUBMIT, "fix"])
    yield store, main
    store.close()


@pytest.fixture(scope="module")
def fanned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TraceStore, str]]:
    """A finished demo episode with two fan-outs at turn 4: given candidates, and sampled."""
    root = tmp_path_factory.mktemp("fanout")
    store = TraceStore(root / "traces.db")
    model = ScriptedModel(str(DEMO), pace=0)  # module scope: the no-pacing fixture is not on
    with WorkspaceEnv(snapshot_dir=root / "snaps") as env:
        parent = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=model, store=store
        ).episode_id
    actions = [[SUBMIT_CALL], [FIX, SUBMIT_CALL]]
    score_actions(store, parent, turn=4, actions=actions, n=2, model_fn=model)
    score_actions(store, parent, turn=4, k=2, n=1, horizon=1, model_fn=model)
    yield store, parent
    store.close()


def _rows(store: TraceStore, options: ExportOptions | None = None, **kw: Any) -> list[Any]:
    _, rows = export_rows(store, "prm", selection=Selection(**kw), options=options)
    return list(rows)


def _adopted_message(store: TraceStore, episode_id: str, turn: int) -> Any:
    """The message the main line went on with at a decision turn, as the log records it."""
    (row,) = [
        e
        for e in store.iter_events(episode_id, kinds=["message"])
        if e.turn == turn and e.payload["reason"] == "adopted"
    ]
    return row.payload["message_hash"]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ------------------------------------------------------------------ values and adoption


def test_prm_values_are_the_mean_rewards_of_the_recorded_continuations(
    best: tuple[TraceStore, str],
) -> None:
    store, main = best
    rewards: dict[tuple[str, int], list[float]] = {}
    for group in fork_groups(store, main):
        for member in group.members:
            if member.sample != PROPOSAL:
                reward = store.episode(member.episode_id).total_reward
                rewards.setdefault((group.group_id, member.candidate), []).append(reward)
    rows = _rows(store)
    assert len(rows) == len(rewards) == 9
    for row in rows:
        source = row["source"]
        expected = rewards[(source["fork_group"], source["candidate"])]
        assert row["value"] == statistics.fmean(expected)
        assert row["spread"] == statistics.pstdev(expected)
        assert row["n"] == len(expected) == 2
        assert source["rewards"] == expected and len(source["continuations"]) == 2
    at_four = [r["value"] for r in rows if r["source"]["turn"] == 4]
    assert at_four == [0.0, 1.0, 1.0]  # submitting first earns 0, the fix earns 1


def test_every_decision_point_gives_one_row_per_candidate_in_order(
    best: tuple[TraceStore, str],
) -> None:
    store, main = best
    rows = _rows(store)
    groups = list(decisions(store, main))
    assert [g.turn for g in groups] == [2, 4, 6]
    for group in groups:
        mine = [r for r in rows if r["source"]["fork_group"] == group.group_id]
        assert [r["source"]["candidate"] for r in mine] == [0, 1, 2]
        assert {(r["source"]["episode_id"], r["source"]["seq"]) for r in mine} == {
            (main, group.fork_seq)
        }
        proposals = {m.candidate: m.episode_id for m in group.members if m.sample == PROPOSAL}
        assert [r["source"]["proposal"] for r in mine] == [proposals[i] for i in range(3)]


def test_best_marks_only_the_highest_valued_candidate_adopted(
    best: tuple[TraceStore, str],
) -> None:
    store, main = best
    rows = _rows(store)
    at_four = [r for r in rows if r["source"]["turn"] == 4]
    assert [r["adopted"] for r in at_four] == [False, True, False]  # tie 1 = 2: lowest index
    assert [r["duplicate_of"] for r in at_four] == [None, None, 1]
    assert {r["mode"] for r in rows} == {"best"}
    for turn in (2, 4, 6):
        (adopted,) = [r for r in rows if r["source"]["turn"] == turn and r["adopted"]]
        recorded = store.message(_adopted_message(store, main, turn))
        assert adopted["action"] == chat_message(recorded, ExportOptions("reasoning_content"))


def test_measure_marks_the_main_line_s_own_sample_adopted_whatever_the_values(
    measure: tuple[TraceStore, str],
) -> None:
    store, main = measure
    at_four = [r for r in _rows(store) if r["source"]["turn"] == 4]
    assert [r["value"] for r in at_four] == [1.0, 0.0, 1.0]
    assert [r["adopted"] for r in at_four] == [True, False, False]
    assert {r["mode"] for r in at_four} == {"measure"}
    recorded = store.message(_adopted_message(store, main, 4))
    assert at_four[0]["action"]["content"] == recorded.content


def test_the_action_carries_the_candidate_s_reasoning_text_and_tool_calls(
    best: tuple[TraceStore, str],
) -> None:
    store, _ = best

    def fix(options: ExportOptions) -> dict[str, Any]:
        rows = _rows(store, options)
        return next(r for r in rows if r["source"]["turn"] == 4 and r["adopted"])["action"]

    action = fix(ExportOptions())
    assert action["role"] == "assistant" and action["content"]
    assert action["reasoning_content"]
    assert [c["function"]["name"] for c in action["tool_calls"]] == ["str_replace"]
    assert fix(ExportOptions(reasoning_key="thinking"))["thinking"] == action["reasoning_content"]


# ------------------------------------------------------------------ the state, byte for byte


def test_every_state_is_the_reconstructed_request_at_its_source_byte_for_byte(
    best: tuple[TraceStore, str], tmp_path: Path
) -> None:
    store, main = best
    out = tmp_path / "prm.jsonl"
    export(store, "prm", out, options=RAW)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 9
    for group in {r["source"]["fork_group"] for r in rows}:  # one state per decision point
        assert len({_dumps(r["state"]) for r in rows if r["source"]["fork_group"] == group}) == 1
    for row in rows:
        source = row["source"]
        request = store.reconstruct_request(source["proposal"], source["turn"])
        assert _dumps(row["state"]["messages"]) == _dumps(chat(request.messages, RAW))
        assert _dumps(row["state"]["tools"]) == _dumps(tool_schemas(request.tools))
        if row["adopted"]:  # the main line went on from exactly that input with this action
            adopted = _adopted_message(store, main, source["turn"])
            assert store.message_parent(adopted) == request.tip_hash
            after = store.reconstruct_request(main, source["turn"] + 1)
            n = len(request.messages)
            assert _dumps(chat(after.messages[: n + 1], RAW)) == _dumps(
                [*row["state"]["messages"], chat_message(store.message(adopted), RAW)]
            )
            assert _dumps(tool_schemas(after.tools)) == _dumps(row["state"]["tools"])


# ------------------------------------------------------------------ fan-outs


def test_a_fanout_on_a_finished_episode_gives_fanout_rows(
    fanned: tuple[TraceStore, str],
) -> None:
    store, parent = fanned
    given, sampled = fork_groups(store, parent)
    rows = _rows(store, RAW)
    assert [r["source"]["fork_group"] for r in rows] == [given.group_id] * 2 + [
        sampled.group_id
    ] * 2
    assert {r["mode"] for r in rows} == {"fanout"} and not any(r["adopted"] for r in rows)
    assert [r["value"] for r in rows[:2]] == [0.0, 1.0]
    assert [r["source"]["proposal"] for r in rows[:2]] == [None, None]
    assert all(r["source"]["proposal"] for r in rows[2:])
    assert [c["function"]["name"] for c in rows[1]["action"]["tool_calls"]] == [
        "str_replace",
        "submit",
    ]
    own = store.reconstruct_request(parent, 4)  # the parent's own request at that turn
    for row in rows:
        assert row["source"]["episode_id"] == parent and row["source"]["turn"] == 4
        assert _dumps(row["state"]["messages"]) == _dumps(chat(own.messages, RAW))
        assert _dumps(row["state"]["tools"]) == _dumps(tool_schemas(own.tools))


def test_a_decision_point_not_yet_finished_gives_no_rows(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    model = ScriptedModel(str(DEMO), pace=0)
    main = run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store)
    (proposal,) = fork_episode(store, main.episode_id, turn=4)  # made, never run
    config = Branching(every=4, actions=1, samples=1).config()
    seq = store.episode(proposal).fork_seq
    assert seq is not None
    with store.atomic():
        group = create_fork_group(store, main.episode_id, seq, 4, config)
        add_group_member(store, group, GroupMember(proposal, 0, PROPOSAL, None))
    assert _rows(store) == []


# ------------------------------------------------------------------ filters, files, CLI


def test_filters_choose_the_episodes_whose_decision_points_are_exported(
    best: tuple[TraceStore, str],
) -> None:
    store, main = best
    assert len(_rows(store, episodes=(main,))) == 9
    assert _rows(store, tasks=("no-such-task",)) == []
    assert _rows(store, models=("openai:*",)) == []
    (continuation, *_) = _rows(store)[0]["source"]["continuations"]
    assert _rows(store, episodes=(continuation,)) == []  # a fork made no decision points


def test_prm_parquet_reads_back_as_the_json_lines_rows(
    best: tuple[TraceStore, str], tmp_path: Path
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    store, _ = best
    expected = _rows(store)
    result = export(store, "prm", tmp_path / "prm.parquet")
    back = pq.read_table(tmp_path / "prm.parquet").to_pylist()
    assert result.rows == len(back) == 9
    for got, want in zip(back, expected, strict=True):
        got["state"]["tools"] = json.loads(got["state"]["tools"])
        for call in got["action"]["tool_calls"] or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        assert got["state"]["tools"] == want["state"]["tools"]
        assert {k: v for k, v in got["action"].items() if v is not None} == want["action"]
        assert got["source"] == want["source"]
        assert (got["value"], got["adopted"], got["duplicate_of"]) == (
            want["value"],
            want["adopted"],
            want["duplicate_of"],
        )


def test_cli_exports_prm_rows_to_a_file(best: tuple[TraceStore, str], tmp_path: Path) -> None:
    store, _ = best
    out = tmp_path / "out.jsonl"
    done = run_cli("export", "--format", "prm", "-o", str(out), "--db", str(store.path))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == _rows(store)
    assert "wrote 9 prm row(s)" in done.stderr


def test_cli_export_help_lists_prm() -> None:
    done = run_cli("export", "--help")
    assert done.returncode == 0
    assert "prm" in done.stdout.split("--format")[1]
