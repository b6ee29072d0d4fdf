"""The store's contract, continued: one test (at least) for each protocol method the first
suite (``tests/test_store_contract.py``) does not name, on every backend; and a test that
fails when a method of :class:`~agentrunner.store.protocol.StoreBackend` has no test here or
there."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest
from test_store_contract import MakeStore, _chunk, _episode, _start, backend

from agentrunner.store.groups import DecisionOutcome, GroupMember
from agentrunner.store.leases import Leases
from agentrunner.store.postgres import PostgresStore
from agentrunner.store.protocol import StoreBackend
from agentrunner.store.records import EpisodeFilter
from agentrunner.store.store import TraceStore
from agentrunner.values.errors import StoreError, UsageError
from agentrunner.values.events import EpisodeEnd, Error
from agentrunner.values.types import Message

__all__ = ["backend"]  # the fixture, shared with the first suite

TESTS = Path(__file__).resolve().parent
PROTOCOL = TESTS.parent / "agentrunner" / "store" / "protocol.py"
SNAPSHOTS = TESTS.parent / "agentrunner" / "values" / "environment.py"


def _with_events(store: StoreBackend, n: int = 5) -> str:
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    for i in range(n):
        writer.append(1, _chunk(i))
    return ep


# ---------------------------------------------------------------- batches


def test_a_batch_is_recorded_once_and_lists_its_members(backend: MakeStore) -> None:
    store = backend()
    assert store.ensure_batch("B1", {"name": "nightly"}) is True
    assert store.ensure_batch("B1", {"name": "nightly"}) is False
    made = store.add_batch("B1", {"name": "nightly"}, [("t", 1, {"kind": "x"}, {})])
    assert store.batch_members("B1") == made and list(made) == [("t", 1)]
    assert store.batch_config(made[("t", 1)]) == {"name": "nightly"}
    assert store.batch_config(_episode(store)) is None


def test_batches_are_listed_counted_and_found_by_id_prefix_or_name(backend: MakeStore) -> None:
    store = backend()
    made = store.add_batch("BATCH-ONE", {"name": "nightly"}, [("t", 0, {"kind": "x"}, {})])
    store.add_batch("OTHER", {}, [])
    assert store.count_batches() == 2
    assert {b.batch_id for b in store.list_batches()} == {"BATCH-ONE", "OTHER"}
    assert store.resolve_batch("nightly") == "BATCH-ONE" == store.resolve_batch("BATCH-")
    with pytest.raises(UsageError, match="no batch"):
        store.resolve_batch("nothing-like-it")
    assert store.batches_of(made.values()) == ["BATCH-ONE"]


def test_a_listing_finds_the_episodes_served_in_one_session_newest_first(
    backend: MakeStore,
) -> None:
    store = backend()

    def served(session: str) -> str:
        env = {"kind": "workspace", "served": {"session_id": session, "transport": "http"}}
        return store.create_episode(task_id="t", seed=0, env=env, model={})

    first, other, second = served("ab12"), served("cd34"), served("ab12")
    _episode(store)  # not served at all
    mine = store.list_episodes(where=EpisodeFilter(served_session="ab12"))
    assert [e.episode_id for e in mine] == [second, first]
    assert store.count_episodes(EpisodeFilter(served_session="cd34")) == 1
    assert store.list_episodes(where=EpisodeFilter(served_session="cd34"))[0].episode_id == other
    assert store.list_episodes(where=EpisodeFilter(served_session="ab1%")) == []


# ---------------------------------------------------------------- fork groups and decisions


def test_fork_groups_keep_their_typed_config_members_and_decided_outcome(
    backend: MakeStore,
) -> None:
    store = backend()
    parent, first, second = _episode(store), _episode(store), _episode(store)
    fanout = {"actions": ["a", "b"], "k": None, "n": 1, "horizon": None, "model": None}
    group = store.create_fork_group(parent, 7, 2, fanout)
    store.add_group_member(group, GroupMember(second, 1, 0, "b"))
    store.add_group_member(group, GroupMember(first, 0, 0, "a"))
    store.create_fork_group(_episode(store), 3, 1, fanout)  # another parent's
    (found,) = store.fork_groups(parent)
    assert (found.group_id, found.fork_seq, found.turn, found.decision) == (group, 7, 2, None)
    assert [(m.episode_id, m.candidate, m.action) for m in found.members] == [
        (first, 0, "a"),
        (second, 1, "b"),
    ]
    assert len(store.fork_groups()) == 2
    assert store.decision_outcomes([group]) == {}
    decided = DecisionOutcome(adopted=1, candidates=[])
    store.record_outcome(group, decided)
    store.record_outcome(group, DecisionOutcome(adopted=0, candidates=[]))  # the first stands
    assert store.decision_outcomes([group, "no-such-group"]) == {group: decided}


def test_batch_memberships_and_rewarded_episodes_are_read_in_one_pass(
    backend: MakeStore,
) -> None:
    store = backend()
    made = store.add_batch("B1", {}, [("t", 0, {"kind": "x"}, {}), ("t", 1, {"kind": "x"}, {})])
    judged, unjudged = made[("t", 0)], made[("t", 1)]
    store.add_batch("B2", {}, [])
    assert store.batch_memberships() == {judged: ["B1"], unjudged: ["B1"]}
    for episode, reward in ((judged, 1.0), (unjudged, None)):
        writer = store.writer(episode)
        writer.append(0, _start())
        writer.append(1, EpisodeEnd(stop_reason="done", turns=1, total_reward=reward))
    assert store.rewarded_episodes() == {judged}


def test_a_store_says_whether_it_is_shared_and_lets_a_thread_go(backend: MakeStore) -> None:
    store = backend()
    assert store.shared is isinstance(store, PostgresStore)
    done: list[str] = []

    def in_a_thread() -> None:
        done.append(_episode(store))
        store.done_in_this_thread()  # its connection given back; the store stays usable

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert store.episode(done[0]).episode_id == done[0]


# ---------------------------------------------------------------- where the store is


def test_a_store_opened_at_its_location_is_the_same_data(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    with TraceStore(store.location) as again:
        assert again.identity == store.identity and again.episode_ids() == [ep]
    assert store.where and store.identity_problem() is None


# ---------------------------------------------------------------- reading the log


def test_the_tail_and_the_last_of_a_kind_come_from_the_episodes_own_rows(
    backend: MakeStore,
) -> None:
    store = backend()
    ep = _with_events(store)
    assert [r.seq for r in store.last_events(ep, 2)] == [5, 6]
    last = store.last_of_kind(ep, "model.chunk")
    assert last is not None and last.seq == 6
    assert store.last_of_kind(ep, "episode.end") is None
    assert store.has_own_event(ep, "episode.start") and not store.has_own_event(ep, "cancel")
    fork = _episode(store, parent_episode_id=ep, fork_seq=3)
    assert not store.has_own_event(fork, "episode.start")  # inherited, not its own


def test_the_last_event_of_a_turn_is_found_through_the_forks_history(backend: MakeStore) -> None:
    store = backend()
    ep = _with_events(store)
    fork = _episode(store, parent_episode_id=ep, fork_seq=4)
    store.writer(fork).append(2, _chunk(9))
    found = store.last_at_turn(fork, "model.chunk", 1)
    assert found is not None and (found.episode_id, found.seq) == (ep, 4)
    assert store.last_at_turn(fork, "model.chunk", 7) is None


def test_events_read_backwards_page_before_a_seq(backend: MakeStore) -> None:
    store = backend()
    ep = _with_events(store)
    assert [r.seq for r in store.events_before(ep, 5, limit=3)] == [4, 3, 2]
    assert [r.seq for r in store.events_before(ep, limit=2)] == [6, 5]


def test_the_index_of_a_history_skips_chunks_and_knows_its_last_seq(backend: MakeStore) -> None:
    store = backend()
    ep = _with_events(store)
    store.writer(ep).append(2, EpisodeEnd(stop_reason="done", turns=1, total_reward=1.0))
    segments = store.segments(ep)
    assert list(store.nonchunk_seqs(segments)) == [1, 7]
    assert store.last_seq(segments) == 7
    fork = _episode(store, parent_episode_id=ep, fork_seq=3)
    assert store.last_seq(store.segments(fork)) == 3  # nothing of its own: its fork point


def test_reads_inside_a_snapshot_see_one_state(backend: MakeStore) -> None:
    store = backend()
    ep = _with_events(store, 1)
    with store.read_snapshot():
        assert [r.seq for r in store.events(ep)] == [1, 2]


# ---------------------------------------------------------------- leases as objects


def test_a_lease_claimed_in_one_call_is_released_in_another_once(backend: MakeStore) -> None:
    mine, other = backend(), backend()
    ep = _episode(mine)
    lease = mine.lease(ep)
    lease.claim()
    assert lease.held and not other.claim_writer(ep)
    lease.release()
    lease.release()  # a second release does nothing
    assert not lease.held and other.claim_writer(ep)


def test_a_refused_lease_raises_the_error_its_holder_chose(backend: MakeStore) -> None:
    mine, other = backend(), backend()
    ep = _episode(mine, claim=True)
    with (
        pytest.raises(StoreError, match="busy elsewhere"),
        other.lease(ep, refused=StoreError("busy elsewhere")),
    ):
        pass


def test_leases_of_several_episodes_are_held_together_and_released_together(
    backend: MakeStore,
) -> None:
    mine, other = backend(), backend()
    first, second = _episode(mine), _episode(mine, claim=True)
    held = Leases(mine)
    held.hold(first)
    held.hold(second, claimed=True)
    held.hold(first)  # held already: nothing to do
    assert list(held) == [first, second] and first in held
    assert not other.claim_writer(first) and not other.claim_writer(second)
    held.release_all()
    assert list(held) == [] and other.claim_writer(first) and other.claim_writer(second)


# ---------------------------------------------------------------- lineage


def test_the_tree_lists_every_fork_depth_first_from_the_root(backend: MakeStore) -> None:
    store = backend()
    root = _with_events(store)
    child = _episode(store, parent_episode_id=root, fork_seq=2)
    grandchild = _episode(store, parent_episode_id=child, fork_seq=1)
    assert store.tree(grandchild) == [
        (root, None, None, 0),
        (child, root, 2, 1),
        (grandchild, child, 1, 2),
    ]
    assert sorted(store.forks()) == sorted([(child, root, 2), (grandchild, child, 1)])
    assert store.proposal_forks() == set()  # no fan-out proposed anything


def test_a_tree_is_removed_children_first(backend: MakeStore) -> None:
    store = backend()
    root = _with_events(store, 2)
    child = _episode(store, parent_episode_id=root, fork_seq=2)
    store.writer(child).append(1, _chunk(7))
    assert store.remove_tree(root) == [(child, 1), (root, 3)]
    assert store.episode_ids() == []


def test_a_sub_agent_names_its_parent_and_the_call_that_started_it(backend: MakeStore) -> None:
    store = backend()
    parent = _episode(store)
    link = {"episode_id": parent, "call_id": "call-1"}
    sub = store.create_episode(task_id="t", seed=0, env={"kind": "x", "spawned_by": link}, model={})
    assert store.spawned() == [(sub, parent, "call-1")]


# ---------------------------------------------------------------- messages


def test_a_message_knows_its_parent_in_the_chain(backend: MakeStore) -> None:
    store = backend()
    first = store.put_message(None, Message(role="user", content="hi"))
    second = store.put_message(first, Message(role="assistant", content="hello"))
    assert store.message_parent(second) == first and store.message_parent(first) is None
    assert set(store.messages([first, second, "0" * 64])) == {first, second}


def test_a_message_reads_back_as_its_json_object_unvalidated(backend: MakeStore) -> None:
    store = backend()
    said = Message(role="assistant", content="hé\x00", reasoning="why")
    digest = store.put_message(None, said)
    data = store.message_json(digest)
    assert data["content"] == "hé\x00" and data["reasoning"] == "why"
    assert Message.model_validate(data) == store.message(digest) == said
    with pytest.raises(StoreError, match="missing"):
        store.message_json("0" * 64)


# ---------------------------------------------------------------- side tables and space


def test_verifier_results_are_kept_newest_first_and_the_latest_per_verifier(
    backend: MakeStore,
) -> None:
    store = backend()
    ep = _episode(store)
    store.add_verification(ep, "tests", 0.0, False, {"run": 1})
    store.add_verification(ep, "tests", 1.0, True, {"run": 2})
    assert [v.details["run"] for v in store.verifications(ep)] == [2, 1]
    (latest,) = store.latest_verifications(details=True)
    assert (latest.passed, latest.details) == (True, {"run": 2})


def test_the_log_facts_name_an_episodes_errors(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    writer.append(1, Error(where="model", type="RateLimitError", message="slow", retryable=True))
    assert store.log_facts()[ep].errors == ["RateLimitError: slow"]


def test_space_is_measured_and_a_dry_run_collects_nothing(backend: MakeStore) -> None:
    store = backend()
    ep = _with_events(store)
    store.put_message(None, Message(role="user", content="nobody names me"))
    parts, total = store.space()
    assert parts["events"].rows == 6 and total > 0
    report = store.collect_garbage(dry_run=True)
    assert report.dry_run and store.events(ep)[-1].seq == 6


def test_workspace_blobs_are_stored_by_content_and_snapshots_chain_their_changes(
    backend: MakeStore,
) -> None:
    store = backend()
    digest = "a" * 64
    assert store.missing_blobs([digest]) == {digest}
    assert store.put_blobs([(digest, [b"con", b"tent"])]) == len(b"content")  # bytes stored
    assert store.missing_blobs([digest]) == set() and store.read_blob(digest) == b"content"
    store.put_snapshot("base", None, 0, '{"a.txt": 1}', 1, 7)
    store.put_snapshot("next", "base", 1, '{"b.txt": 2}', 2, 9)
    assert store.snapshot_changes("next") == ['{"a.txt": 1}', '{"b.txt": 2}']  # base first
    assert store.snapshot_changes("unknown") is None


# ---------------------------------------------------------------- every method has a test


def _protocol_methods() -> set[str]:
    names: set[str] = set()
    for path, cls in ((PROTOCOL, "StoreBackend"), (SNAPSHOTS, "SnapshotBackend")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
        names |= {n.name for n in body if isinstance(n, ast.FunctionDef)}
    dunders = {n for n in names if n.startswith("__")}  # every `with store:` calls them
    return names - {"bind_store"} - dunders  # bind_store: the environment's side


def test_every_protocol_method_has_a_contract_test() -> None:
    suites = "\n".join(p.read_text(encoding="utf-8") for p in TESTS.glob("test_store_contract*.py"))
    untested = sorted(m for m in _protocol_methods() if not re.search(rf"\.{m}\b", suites))
    assert not untested, f"no contract test calls these store methods: {untested}"


# ---------------------------------------------------------------- live views


def test_a_live_view_reads_every_episode_once_then_only_what_changed(backend: MakeStore) -> None:
    store = backend()
    first = _episode(store)
    whole = store.listing_changes()
    assert whole.whole and [e.episode_id for e in whole.episodes] == [first]
    assert store.listing_changes(whole.cursor).episodes == []
    second = _episode(store)
    assert [e.episode_id for e in store.listing_changes(whole.cursor).episodes] == [second]


def test_a_reachable_store_is_not_said_to_be_unreachable(backend: MakeStore) -> None:
    store = backend()
    _episode(store)
    assert store.unreachable() is None


def test_a_server_store_tells_a_listener_of_a_new_episode_and_a_file_sends_none(
    backend: MakeStore,
) -> None:
    store = backend()
    heard = threading.Event()
    listener = store.listen(heard.set)
    if not isinstance(store, PostgresStore):
        assert listener is None  # a file's views poll
        return
    assert listener is not None
    try:
        while listener.listens == 0:
            heard.wait(0.02)
        _episode(store)
        assert heard.wait(60)
    finally:
        listener.close()
