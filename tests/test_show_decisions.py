"""``show`` marks an episode's decision points at their turn: each candidate with its value
± spread over n, which one was adopted, and the ids of its forks, which ``show`` opens."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_branching import SUBMIT, _run, _script

from agentrunner import Branching, TraceStore
from agentrunner.cli.main import main
from agentrunner.lifecycle.decisions import PROPOSAL, decisions, read_decisions, spend
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.store.groups import GroupMember, add_group_member, create_fork_group
from agentrunner.values.formatting import unique_prefixes

BRANCHING = Branching(every=4, actions=2, samples=2)


@dataclass
class Made:
    db: Path
    episode_id: str


def _make(root: Path, alternatives: list[Any], branching: Branching) -> Made:
    root.mkdir(parents=True, exist_ok=True)
    with TraceStore(root / "traces.db") as store:
        rollout = _run(store, root, _script(root, alternatives), branching)
    return Made(root / "traces.db", rollout.episode_id)


@pytest.fixture(scope="module")
def best(tmp_path_factory: pytest.TempPathFactory) -> Made:
    """One decision point at turn 4: candidate 0 submits (reward 0), candidate 1 fixes (1)."""
    return _make(tmp_path_factory.mktemp("best"), [SUBMIT, "fix"], BRANCHING)


@pytest.fixture
def opened(best: Made) -> Iterator[TraceStore]:
    with TraceStore(best.db) as store:
        yield store


def _show(capsys: pytest.CaptureFixture[str], made: Made, *argv: str) -> str:
    code = main(["show", made.episode_id, "--db", str(made.db), *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _show_json(capsys: pytest.CaptureFixture[str], made: Made) -> dict[str, Any]:
    value = json.loads(_show(capsys, made, "--json").strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


def test_show_marks_the_decision_point_at_its_turn_with_values_and_the_adopted_candidate(
    best: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _show(capsys, best)
    assert re.search(r"turn 4 · decision point at seq \d+ · adopted candidate 1 \(best\)", out)
    assert "  candidate 0 · value 0.000 ± 0.000 (n 2)\n" in out
    assert "★ candidate 1 · value 1.000 ± 0.000 (n 2) adopted\n" in out
    assert '    action: submit() · "Submitting as it is."\n' in out
    assert '    action: str_replace(path="stats.py", old_str=' in out


def test_the_adopted_message_reads_as_the_turn_s_action_not_as_an_edit(
    best: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _show(capsys, best)
    after = out.split("» adopted action (candidate 1)\n", 1)[1].splitlines()
    assert after[0].startswith("thinking: ") and after[1] == "Confirmed. Fixing the divisor."
    assert after[2].startswith("▶ str_replace(")
    assert "edited turn" not in out and "» adopted:" not in out


def test_show_names_each_candidate_s_forks_as_ls_does(
    best: Made, opened: TraceStore, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _show(capsys, best)
    shortest = unique_prefixes(opened.episode_ids(), minimum=8)
    (group,) = decisions(opened, best.episode_id)
    for candidate in (0, 1):
        members = [m for m in group.members if m.candidate == candidate]
        forks = " ".join(shortest[m.episode_id] for m in members if m.sample != PROPOSAL)
        (proposal,) = [shortest[m.episode_id] for m in members if m.sample == PROPOSAL]
        assert f"    continuations {forks} · proposal {proposal}\n" in out


def test_a_continuation_id_that_show_prints_opens_that_continuation(
    best: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _show(capsys, best)
    printed = re.findall(r"continuations (\S+) (\S+) ·", out)[1]  # candidate 1's
    code = main(["show", printed[0], "--db", str(best.db), "--json"])
    opened = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and opened["parent_episode_id"] == best.episode_id
    assert opened["total_reward"] == 1.0


def test_show_json_lists_the_decisions_with_values_from_the_recorded_continuations(
    best: Made, opened: TraceStore, capsys: pytest.CaptureFixture[str]
) -> None:
    (decision,) = _show_json(capsys, best)["decisions"]
    (group,) = decisions(opened, best.episode_id)
    assert (decision["group_id"], decision["turn"], decision["seq"]) == (
        group.group_id,
        4,
        group.fork_seq,
    )
    assert (decision["adopt"], decision["adopted"], decision["pending"]) == ("best", 1, [])
    for c in decision["candidates"]:
        rewards = [opened.episode(e).total_reward for e in c["continuations"]]
        assert c["value"] == sum(rewards) / len(rewards) and c["n"] == 2
        assert c["spread"] == 0.0 and c["duplicate_of"] is None
        assert opened.episode(c["proposal"]).fork_group.proposal  # type: ignore[union-attr]
    assert [c["value"] for c in decision["candidates"]] == [0.0, 1.0]
    assert decision["candidates"][1]["action"]["tool_calls"][0]["name"] == "str_replace"


def test_show_json_reports_what_branching_spent_apart_from_the_main_line(
    best: Made, opened: TraceStore, capsys: pytest.CaptureFixture[str]
) -> None:
    value = _show_json(capsys, best)
    assert value["branching"] == spend(opened, best.episode_id)
    assert value["branching"]["decisions"] == 1
    assert value["branching"]["tokens"]["output"] > 0
    assert value["tokens"]["output"] != value["branching"]["tokens"]["output"]


def test_measure_shows_candidate_0_adopted_and_the_better_one_only_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = _make(
        tmp_path, [SUBMIT, "fix"], Branching(every=4, actions=2, samples=2, adopt="measure")
    )
    (decision,) = _show_json(capsys, made)["decisions"]
    assert (decision["adopt"], decision["adopted"]) == ("measure", 0)
    out = _show(capsys, made)
    assert "adopted candidate 0 (measure)" in out
    assert "★ candidate 0 · value 0.000 ± 0.000 (n 2) adopted\n" in out
    assert "  candidate 1 · value 1.000 ± 0.000 (n 2)\n" in out


def test_a_duplicate_candidate_is_marked_with_the_candidate_it_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = _make(tmp_path, [SUBMIT, "fix", SUBMIT], Branching(every=4, actions=3, samples=1))
    (decision,) = _show_json(capsys, made)["decisions"]
    assert [c["duplicate_of"] for c in decision["candidates"]] == [None, None, 0]
    assert "  candidate 2 · value 0.000 ± 0.000 (n 1) (= candidate 0)\n" in _show(capsys, made)


def test_an_unfinished_decision_point_shows_its_pending_forks_and_no_adopted_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A main line that stopped mid-decision: its group and a proposal that never ran."""
    made = _make(tmp_path, [SUBMIT], Branching(every=99, actions=1, samples=1))
    with TraceStore(made.db) as store:
        main_line = store.episode(made.episode_id)
        seq = 40
        group = create_fork_group(store, made.episode_id, seq, 3, {**BRANCHING.config()})
        fork = store.create_episode(
            task_id=main_line.task_id,
            seed=main_line.seed,
            env=main_line.env,
            model=main_line.model,
            parent_episode_id=made.episode_id,
            fork_seq=seq,
        )
        add_group_member(store, group, GroupMember(fork, 0, PROPOSAL, None))
        (read,) = read_decisions(store, made.episode_id)
        prefix = unique_prefixes(store.episode_ids(), minimum=8)[fork]
    assert (read.candidates, read.pending, read.adopted_seq) == ([], [fork], None)
    (decision,) = _show_json(capsys, made)["decisions"]
    assert decision["adopted"] is None and decision["pending"] == [fork]
    out = _show(capsys, made)
    assert f"turn 3 · decision point at seq {seq} · not finished" in out
    assert f"  1 fork not finished: {prefix}\n" in out


def test_a_fork_made_after_a_decision_point_shows_the_decision_it_inherits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = _make(tmp_path, [SUBMIT, "fix"], BRANCHING)
    with TraceStore(made.db) as store:
        (fork,) = fork_episode(store, made.episode_id, turn=6, message="Double-check it.")
    out = _show(capsys, Made(made.db, fork))
    assert re.search(r"turn 4 · decision point at seq \d+ · adopted candidate 1 \(best\)", out)
    assert "» adopted action (candidate 1)\n" in out
    assert _show_json(capsys, Made(made.db, fork))["decisions"] == []  # made on its parent
