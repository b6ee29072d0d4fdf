"""``ls``, ``show`` and ``rm`` over real stores: unique id prefixes, a fork's own spend,
fan-out roles, filters, cut listings, batches and removing a fork tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore, run_agent_episode
from agentrunner.cli.main import main
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import run_batch
from agentrunner.lifecycle.fanout import PROPOSAL, score_actions
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.store.records import PROPOSAL_SAMPLE
from agentrunner.values.formatting import unique_prefixes
from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentTurn
from providers import get_model
from providers.scripted import ScriptedModel


class _Priced(ScriptedModel):
    """The scripted demo with a price: each call costs its output tokens in milli-dollars."""

    def __call__(self, context: AgentContext) -> AgentTurn:
        turn = super().__call__(context)
        usage = turn.usage.model_copy(update={"cost_usd": turn.usage.output_tokens / 1000})
        return turn.model_copy(update={"usage": usage})


class _Crash(BaseException):
    """Stands in for the process dying right after an event was committed."""


def _run(store: TraceStore, tmp_path: Path, task: str = "demo-mean", **kw: Any) -> str:
    model = kw.pop("model_fn", None) or ScriptedModel("demo", pace=0)
    with WorkspaceEnv(snapshot_dir=tmp_path / "snapshots") as env:
        return run_agent_episode(
            env=env, task_id=task, model_fn=model, store=store, **kw
        ).episode_id


def _fork_and_run(store: TraceStore, episode_id: str, turn: int, **kw: Any) -> str:
    (fork,) = fork_episode(store, episode_id, turn=turn)
    resume_episode(store, fork, **kw)
    return fork


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _ls_json(capsys: pytest.CaptureFixture[str], db: Path, *argv: str) -> list[dict[str, Any]]:
    code, out, err = _cli(capsys, "ls", "--db", str(db), "--json", *argv)
    assert code == 0, err
    value = json.loads(out.strip().splitlines()[-1])
    assert isinstance(value, list)
    return value


def _ls_rows(capsys: pytest.CaptureFixture[str], db: Path, *argv: str) -> list[list[str]]:
    """The table ``ls`` prints, one list of whitespace-separated cells per episode."""
    code, out, err = _cli(capsys, "ls", "--db", str(db), *argv)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].split()[:2] == ["id", "parent"]
    return [line.split() for line in lines[1:]]


def _own_usage(store: TraceStore, episode_id: str, key: str) -> float:
    """A usage field summed over the episode's own events (not the ones it inherits)."""
    row = (
        store.raw_connection()
        .execute(
            f"SELECT total(json_extract(payload, '$.{key}')) FROM events"
            " WHERE episode_id = ? AND kind = 'usage'",
            (episode_id,),
        )
        .fetchone()
    )
    return float(row[0])


@pytest.fixture
def family(store: TraceStore, tmp_path: Path) -> dict[str, Any]:
    """A completed root and six sibling forks of it made together (in the same millisecond,
    so their ULIDs share more than 10 characters), one of them run."""
    root = _run(store, tmp_path)
    forks = fork_episode(store, root, turn=3, n=6)
    resume_episode(store, forks[0])
    return {"root": root, "forks": forks}


# ---------------------------------------------------------------- 9: unique id prefixes


def test_ls_ids_resolve_to_the_episode_they_name(
    store: TraceStore, db_path: Path, family: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    printed = [row[0] for row in _ls_rows(capsys, db_path)]
    full = [e["episode_id"] for e in _ls_json(capsys, db_path)]
    assert [store.resolve(p) for p in printed] == full


def test_ls_prints_the_shortest_unique_prefix_of_at_least_8_characters(
    store: TraceStore, db_path: Path, family: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    printed = [row[0] for row in _ls_rows(capsys, db_path)]
    full = [e["episode_id"] for e in _ls_json(capsys, db_path)]
    shortest = unique_prefixes(store.episode_ids(), minimum=8)
    assert printed == [shortest[e] for e in full]


def test_ls_parent_column_names_the_parent_by_a_prefix_that_resolves_to_it(
    store: TraceStore,
    db_path: Path,
    tmp_path: Path,
    family: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    grandchildren = [fork_episode(store, f, turn=2)[0] for f in family["forks"][:3]]
    rows = {store.resolve(row[0]): row[1] for row in _ls_rows(capsys, db_path)}
    parents = {g: store.resolve(rows[g].split("@")[0]) for g in grandchildren}
    assert parents == dict(zip(grandchildren, family["forks"][:3], strict=True))


def test_show_accepts_the_id_ls_prints(
    store: TraceStore, db_path: Path, family: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    sibling = family["forks"][3]
    printed = next(row[0] for row in _ls_rows(capsys, db_path) if sibling.startswith(row[0]))
    code, out, _ = _cli(capsys, "show", printed, "--db", str(db_path))
    assert code == 0 and f"episode {sibling}" in out


# ---------------------------------------------------------------- 15: a fork's own spend


def test_fork_tokens_count_only_the_calls_it_made_after_its_fork_point(
    store: TraceStore, tmp_path: Path
) -> None:
    root = _run(store, tmp_path)
    fork = _fork_and_run(store, root, 3)
    assert store.episode(fork).tokens["input"] == _own_usage(store, fork, "input_tokens")


def test_fork_inherited_tokens_are_its_parents_up_to_the_fork_point(
    store: TraceStore, tmp_path: Path
) -> None:
    root = _run(store, tmp_path)
    fork = _fork_and_run(store, root, 3)
    fork_seq = store.episode(fork).fork_seq
    inherited = sum(
        e.payload["input_tokens"]
        for e in store.events(root, kinds=["usage"])
        if fork_seq is not None and e.seq <= fork_seq
    )
    assert store.episode(fork).inherited_tokens["input"] == inherited


def test_tokens_summed_over_a_family_count_each_model_call_once(
    store: TraceStore, tmp_path: Path
) -> None:
    root = _run(store, tmp_path)
    child = _fork_and_run(store, root, 3)
    _fork_and_run(store, child, 5)
    listed = sum(e.tokens["output"] for e in store.list_episodes())
    recorded = (
        store.raw_connection()
        .execute(
            "SELECT total(json_extract(payload, '$.output_tokens')) FROM events"
            " WHERE kind = 'usage'"
        )
        .fetchone()[0]
    )
    assert listed == recorded


def test_fork_cost_is_the_cost_of_its_own_calls(store: TraceStore, tmp_path: Path) -> None:
    root = _run(store, tmp_path, model_fn=_Priced("demo", pace=0))
    fork = _fork_and_run(store, root, 3, model_fn=_Priced("demo", pace=0))
    own = _own_usage(store, fork, "cost_usd")
    assert store.episode(fork).cost_usd == pytest.approx(own) and own > 0


def test_fork_inherited_cost_is_its_parents_up_to_the_fork_point(
    store: TraceStore, tmp_path: Path
) -> None:
    root = _run(store, tmp_path, model_fn=_Priced("demo", pace=0))
    fork = _fork_and_run(store, root, 3, model_fn=_Priced("demo", pace=0))
    summary = store.episode(fork)
    inherited = sum(
        e.payload["cost_usd"]
        for e in store.events(root, kinds=["usage"])
        if summary.fork_seq is not None and e.seq <= summary.fork_seq
    )
    assert summary.inherited_cost_usd == pytest.approx(inherited) and inherited > 0


def test_interrupted_fork_tokens_count_only_its_own_calls(
    store: TraceStore, tmp_path: Path
) -> None:
    root = _run(store, tmp_path)
    (fork,) = fork_episode(store, root, turn=3)

    def die_at_turn_5(seq: int, turn: int, payload: Any) -> None:
        if payload.kind == "tool.result" and turn == 5:
            raise _Crash

    with pytest.raises(_Crash):
        resume_episode(store, fork, observer=die_at_turn_5)
    summary = store.episode(fork)
    assert summary.status == "interrupted"
    assert summary.tokens["input"] == _own_usage(store, fork, "input_tokens")


def test_root_episode_inherits_nothing(store: TraceStore, tmp_path: Path) -> None:
    root = store.episode(_run(store, tmp_path))
    assert (sum(root.inherited_tokens.values()), root.inherited_cost_usd) == (0, None)


def test_ls_json_gives_a_forks_own_and_inherited_tokens_apart(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    fork = _fork_and_run(store, root, 3)
    listed = {e["episode_id"]: e for e in _ls_json(capsys, db_path)}
    parent_total = listed[root]["tokens"]["input"]
    fork_row = listed[fork]
    assert fork_row["tokens"]["input"] == _own_usage(store, fork, "input_tokens")
    assert fork_row["inherited_tokens"]["input"] < parent_total
    assert "inherited_cost_usd" in fork_row and "cost_usd" in fork_row


def test_show_of_a_fork_prints_its_inherited_spend_on_its_own_line(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    fork = _fork_and_run(store, root, 3)
    inherited = store.episode(fork).inherited_tokens["input"]
    _, out, _ = _cli(capsys, "show", fork, "--db", str(db_path))
    assert f"inherited {inherited} in" in out


# ---------------------------------------------------------------- 16: fan-out proposals


@pytest.fixture
def fanned(store: TraceStore, tmp_path: Path) -> dict[str, Any]:
    """A root fanned out at turn 2: two sampled candidates (two proposal forks), one
    continuation of each."""
    root = _run(store, tmp_path)
    result = score_actions(store, root, turn=2, k=2, n=1, horizon=1, concurrency=1)
    continuations = [e for c in result.ranked for e in c.episodes]
    return {"root": root, "group": result.group_id, "continuations": continuations}


def test_ls_marks_fanout_proposal_forks_as_proposals(
    store: TraceStore, db_path: Path, fanned: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _ls_rows(capsys, db_path)
    proposals = {store.resolve(r[0]) for r in rows if r[2] == "proposal"}
    expected = {
        r[0]
        for r in store.raw_connection().execute(
            "SELECT episode_id FROM fork_group_members WHERE sample < 0"
        )
    }
    assert proposals == expected and len(proposals) == 2


def test_ls_marks_fanout_continuations_with_their_candidate(
    store: TraceStore, db_path: Path, fanned: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _ls_rows(capsys, db_path)
    marked = {store.resolve(r[0]) for r in rows if r[2] == "cand"}
    assert marked == set(fanned["continuations"])


def test_ls_json_names_a_proposal_forks_group_and_candidate(
    db_path: Path, fanned: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    groups = [e["fork_group"] for e in _ls_json(capsys, db_path) if e["fork_group"]]
    proposals = sorted(g["candidate"] for g in groups if g["proposal"])
    assert proposals == [0, 1] and {g["group_id"] for g in groups} == {fanned["group"]}


def test_proposal_sample_of_the_store_records_is_the_fanouts(store: TraceStore) -> None:
    assert PROPOSAL_SAMPLE == PROPOSAL


# ---------------------------------------------------------------- 17: filters, cuts, batches


def test_ls_says_on_stderr_when_the_listing_is_cut(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    fork_episode(store, root, turn=2, n=2)
    _, _, err = _cli(capsys, "ls", "--db", str(db_path), "--limit", "2")
    assert "showing 2 of 3 episodes; --limit 0 for all" in err


def test_ls_json_says_on_stderr_when_the_listing_is_cut(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    fork_episode(store, root, turn=2, n=2)
    _, out, err = _cli(capsys, "ls", "--db", str(db_path), "--limit", "2", "--json")
    assert "showing 2 of 3 episodes" in err and len(json.loads(out)) == 2


def test_ls_says_nothing_when_every_episode_is_shown(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    fork_episode(store, root, turn=2)
    _, _, err = _cli(capsys, "ls", "--db", str(db_path), "--limit", "2")
    assert "showing" not in err


def test_ls_status_filter_counts_only_matching_episodes_when_cut(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    fork_episode(store, root, turn=2, n=3)  # not run yet: pending
    _, _, err = _cli(capsys, "ls", "--db", str(db_path), "--status", "pending", "--limit", "2")
    assert "showing 2 of 3 episodes" in err


def test_ls_task_filter_keeps_only_that_tasks_episodes(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(store, tmp_path, "demo-mean")
    slug = _run(store, tmp_path, "slugify-accents")
    listed = _ls_json(capsys, db_path, "--task", "slugify-accents")
    assert [e["episode_id"] for e in listed] == [slug]


def test_ls_task_filter_takes_wildcards(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(store, tmp_path, "demo-mean")
    slug = _run(store, tmp_path, "slugify-accents")
    listed = _ls_json(capsys, db_path, "--task", "slug*")
    assert [e["episode_id"] for e in listed] == [slug]


def test_ls_model_filter_takes_wildcards(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], script
) -> None:  # type: ignore[no-untyped-def]
    demo = _run(store, tmp_path)
    custom = _run(store, tmp_path, model_fn=script([{"text": "done", "tool_calls": []}]))
    assert [e["episode_id"] for e in _ls_json(capsys, db_path, "--model", "scripted:demo")] == [
        demo
    ]
    assert {e["episode_id"] for e in _ls_json(capsys, db_path, "--model", "scripted:*")} == {
        demo,
        custom,
    }


def test_ls_parent_filter_lists_the_forks_made_directly_of_an_episode(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    child = _fork_and_run(store, root, 3)
    fork_episode(store, child, turn=5)  # a grandchild: not a fork of root
    listed = _ls_json(capsys, db_path, "--parent", root[:20])
    assert [e["episode_id"] for e in listed] == [child]


def _nightly(store: TraceStore, tmp_path: Path, seeds: range) -> str:
    return run_batch(
        store,
        task_seed_pairs=[("demo-mean", s) for s in seeds],
        env_factory=lambda: WorkspaceEnv(snapshot_dir=tmp_path / "snapshots"),
        model_factory=lambda: get_model("scripted:demo"),
        concurrency=1,
        name="nightly",
    ).batch_id


def test_ls_batch_filter_keeps_only_that_batchs_episodes(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch_id = _nightly(store, tmp_path, range(2))
    _run(store, tmp_path)
    listed = _ls_json(capsys, db_path, "--batch", batch_id)
    members = {r[0] for r in store.raw_connection().execute("SELECT episode_id FROM batch_members")}
    assert {e["episode_id"] for e in listed} == members and len(listed) == 2


def test_ls_batch_filter_accepts_the_batch_name(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _nightly(store, tmp_path, range(2))
    _run(store, tmp_path)
    assert len(_ls_json(capsys, db_path, "--batch", "nightly")) == 2


def test_ls_of_an_unknown_batch_exits_2(
    store: TraceStore, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "ls", "--db", str(db_path), "--batch", "nope")
    assert code == 2 and "no batch 'nope'" in err


def test_ls_batches_lists_each_batch_with_pairs_completed_reward_and_cost(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch_id = _nightly(store, tmp_path, range(2))
    _, out, _ = _cli(capsys, "ls", "--db", str(db_path), "--batches", "--json")
    (batch,) = json.loads(out)
    assert batch == {
        "batch_id": batch_id,
        "name": "nightly",
        "model": "scripted:demo",
        "created_at": batch["created_at"],
        "pairs": 2,
        "episodes": 2,
        "completed": 2,
        "mean_reward": 1.0,
        "cost_usd": 0.0,
    }


def test_ls_batches_prints_a_row_per_batch(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch_id = _nightly(store, tmp_path, range(2))
    _, out, _ = _cli(capsys, "ls", "--db", str(db_path), "--batches")
    assert out.splitlines()[1].split()[:6] == [batch_id, "nightly", "scripted:demo", "2", "2", "2"]


# ---------------------------------------------------------------- 17: rm --tree


def test_rm_tree_removes_an_episode_and_every_fork_below_it(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    child = _fork_and_run(store, root, 3)
    fork_episode(store, child, turn=5)
    code, _, _ = _cli(capsys, "rm", root, "--tree", "--db", str(db_path))
    assert code == 0 and store.episode_ids() == []
    assert store.raw_connection().execute("SELECT count(*) FROM events").fetchone()[0] == 0


def test_rm_tree_json_lists_children_before_parents(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    child = _fork_and_run(store, root, 3)
    (grandchild,) = fork_episode(store, child, turn=5)
    _, out, _ = _cli(capsys, "rm", root, "--tree", "--json", "--db", str(db_path))
    removed = [r["episode_id"] for r in json.loads(out)["removed"]]
    assert removed == [grandchild, child, root]


def test_rm_tree_of_a_fork_leaves_its_parent_and_siblings(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    first, second = fork_episode(store, root, turn=3, n=2)
    fork_episode(store, first, turn=2)
    _cli(capsys, "rm", first, "--tree", "--db", str(db_path))
    assert store.episode_ids() == sorted([root, second])


def test_rm_tree_refuses_while_an_episode_in_it_runs_and_removes_nothing(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    (fork,) = fork_episode(store, root, turn=3)
    store.claim_writer(fork)  # this process is its writer: it runs
    try:
        code, _, err = _cli(capsys, "rm", root, "--tree", "--db", str(db_path))
    finally:
        store.release_writer(fork)
    assert code == 2 and "running" in err
    assert store.episode_ids() == sorted([root, fork])


def test_rm_tree_removes_the_fork_groups_made_at_its_episodes(
    store: TraceStore, db_path: Path, fanned: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _cli(capsys, "rm", fanned["root"], "--tree", "--db", str(db_path))
    assert store.raw_connection().execute("SELECT count(*) FROM fork_groups").fetchone()[0] == 0


def test_rm_of_a_parent_names_its_forks_by_full_id(
    store: TraceStore, db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(store, tmp_path)
    (fork,) = fork_episode(store, root, turn=3)
    code, _, err = _cli(capsys, "rm", root, "--db", str(db_path))
    assert code == 2 and fork in err and "rm --tree" in err
