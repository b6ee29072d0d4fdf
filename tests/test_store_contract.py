"""The store's contract, for every backend: what ``agentrunner`` relies on from a trace store.

Each test takes the ``backend`` fixture, parametrized by backend name: a SQLite file in a temp
dir, and a real Postgres server the tests start (``tests/pg.py``; a schema per test).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentrunner.store import TraceStore
from agentrunner.store.control import HEARTBEAT_STALE_S, LeaseLostError
from agentrunner.store.protocol import StoreBackend
from agentrunner.values.errors import EpisodeNotFoundError, StoreError, UsageError
from agentrunner.values.events import (
    EpisodeEnd,
    EpisodeStart,
    Error,
    MessageEvent,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    Status,
    ToolCall,
    ToolResult,
    Usage,
)
from agentrunner.values.types import Message, ToolSpec

MakeStore = Callable[[], StoreBackend]
BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A maker of stores of one backend, all on the same data (two makes: two 'processes'
    sharing a store, as far as one test process can)."""
    opened: list[TraceStore] = []
    location = str(tmp_path / "contract.db")
    if request.param == "postgres":
        location = request.getfixturevalue("pg_url")

    def make() -> StoreBackend:
        store = TraceStore(location)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _start() -> EpisodeStart:
    return EpisodeStart(task_id="t", seed=0, env={"kind": "x"}, model={}, config={}, version="0")


def _episode(store: StoreBackend, **kw: object) -> str:
    return store.create_episode(task_id="t", seed=0, env={"kind": "x"}, model={}, **kw)  # type: ignore[arg-type]


def _chunk(i: int) -> ModelChunk:
    return ModelChunk(call_id="c", channel="text", index=i, text=f"piece {i}")


def test_a_new_episode_is_found_by_its_id_and_a_unique_prefix(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    assert store.resolve(ep) == ep and store.resolve(ep[:14].lower()) == ep
    assert store.episode(ep).episode_id == ep


def test_an_unknown_id_is_an_episode_not_found_error(backend: MakeStore) -> None:
    with pytest.raises(EpisodeNotFoundError):
        backend().resolve("0000NOSUCH")


def test_appends_get_dense_seqs_from_one(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    seqs = [writer.append(0, _start()), *(writer.append(1, _chunk(i)) for i in range(3))]
    assert seqs == [1, 2, 3, 4]
    assert [r.seq for r in store.events(ep)] == [1, 2, 3, 4]


def test_events_that_belong_together_are_appended_together(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    response = ModelResponse(call_id="c", message_hash="h", latency_s=0.1)
    usage = Usage(call_id="c", input_tokens=10, output_tokens=2)
    assert writer.append_together(1, [response, usage]) == [2, 3]
    assert [r.kind for r in store.events(ep)] == ["episode.start", "model.response", "usage"]


def test_events_page_by_seq_and_filter_by_kind(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    for i in range(10):
        writer.append(1, _chunk(i))
    page = store.events(ep, after_seq=3, limit=4)
    assert [r.seq for r in page] == [4, 5, 6, 7]
    assert [r.seq for r in store.events(ep, kinds=["episode.start"])] == [1]
    assert len(list(store.iter_events(ep, page=3))) == 11


def test_typed_events_read_back_as_written(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    store.writer(ep).append(0, _start())
    (row,) = store.events(ep)
    assert row.typed() == _start()


def test_a_fork_reads_its_parents_prefix_then_its_own_events(backend: MakeStore) -> None:
    store = backend()
    root = _episode(store)
    writer = store.writer(root)
    for i in range(6):
        writer.append(0, _chunk(i))
    child = _episode(store, parent_episode_id=root, fork_seq=4)
    store.writer(child).append(1, _chunk(100))
    grandchild = _episode(store, parent_episode_id=child, fork_seq=2)  # before child's point
    store.writer(grandchild).append(1, _chunk(200))
    assert [(r.episode_id, r.seq) for r in store.events(child)] == [
        *((root, s) for s in range(1, 5)),
        (child, 5),
    ]
    assert [(r.episode_id, r.seq) for r in store.events(grandchild)] == [
        (root, 1),
        (root, 2),
        (grandchild, 3),
    ]
    assert store.ancestors(grandchild) == [child, root]
    assert store.children(root) == [child]


def test_messages_are_stored_once_by_content_and_chained(backend: MakeStore) -> None:
    store = backend()
    first = store.put_message(None, Message(role="user", content="hi"))
    again = store.put_message(None, Message(role="user", content="hi"))
    second = store.put_message(first, Message(role="assistant", content="hello"))
    assert first == again
    assert [m.content for m in store.message_chain(second)] == ["hi", "hello"]
    assert store.message(first).content == "hi"


def test_tool_sets_are_stored_by_content(backend: MakeStore) -> None:
    store = backend()
    tools = [ToolSpec(name="bash", description="run")]
    digest = store.put_tools(tools)
    assert digest == store.put_tools(tools) and store.tools(digest) == tools


def test_the_exact_request_of_a_turn_is_rebuilt(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    tip = store.put_message(None, Message(role="user", content="task"))
    tools = store.put_tools([ToolSpec(name="bash", description="run")])
    writer = store.writer(ep)
    writer.append(0, _start())
    writer.append(0, MessageEvent(role="user", message_hash=tip))
    request = ModelRequest(
        call_id="c", tip_hash=tip, tools_hash=tools, provider="p", model="m", params={"t": 1}
    )
    writer.append(1, request)
    rebuilt = store.reconstruct_request(ep, 1)
    assert [m.content for m in rebuilt.messages] == ["task"] and rebuilt.params == {"t": 1}


def test_one_writer_at_a_time_and_the_lease_is_released_after(backend: MakeStore) -> None:
    first, second = backend(), backend()
    ep = _episode(first)
    with first.lease(ep), pytest.raises(UsageError, match="being written"), second.lease(ep):
        pass
    with second.lease(ep):
        assert second.episode(ep).status == Status.RUNNING


def test_a_cancel_request_reaches_the_writers_heartbeat(backend: MakeStore) -> None:
    writer_side, other = backend(), backend()
    ep = _episode(writer_side)
    with writer_side.lease(ep):
        assert writer_side.heartbeat(ep) is None
        other.request_cancel(ep, "stop please")
        assert writer_side.heartbeat(ep) == "stop please"


def _machine_goes_silent(store: StoreBackend, episode_id: str) -> None:
    """The lease now looks like one held on another host whose heartbeat stopped long ago
    (what a writer on a dead or cut-off machine leaves behind)."""
    store.raw_connection().execute(  # type: ignore[attr-defined]
        "UPDATE control SET writer_host = 'a-host-gone-silent', heartbeat_at = ?"
        " WHERE episode_id = ?",
        (time.time() - HEARTBEAT_STALE_S - 1, episode_id),
    )


def test_a_writer_on_a_silent_machine_leaves_an_interrupted_episode(backend: MakeStore) -> None:
    first, other = backend(), backend()
    ep = _episode(first, claim=True)
    first.writer(ep).append(0, _start())
    assert other.episode(ep).status == Status.RUNNING
    _machine_goes_silent(first, ep)
    assert other.episode(ep).status == Status.INTERRUPTED


def test_a_writer_whose_lease_was_taken_over_stops_and_writes_nothing_more(
    backend: MakeStore,
) -> None:
    first, second = backend(), backend()
    ep = _episode(first, claim=True)
    old = first.writer(ep)
    old.append(0, _start())
    _machine_goes_silent(first, ep)
    assert second.claim_writer(ep)
    new = second.writer(ep)
    new.append(0, MessageEvent(role="user", message_hash="h"))
    with pytest.raises(LeaseLostError, match="taken over"):
        old.append(0, _chunk(0))
    with pytest.raises(StoreError):
        old.append_together(0, [_chunk(1), _chunk(2)])
    with pytest.raises(LeaseLostError):
        first.heartbeat(ep)
    first.release_writer(ep)  # gives up nothing: the lease is the second writer's
    assert [e.kind for e in second.events(ep)] == ["episode.start", "message"]
    assert second.episode(ep).status == Status.RUNNING
    new.append(1, EpisodeEnd(stop_reason="done", turns=1, total_reward=1.0))
    assert [e.seq for e in second.events(ep)] == [1, 2, 3]


def test_a_group_append_is_fenced_too(backend: MakeStore) -> None:
    first, second = backend(), backend()
    ep = _episode(first, claim=True)
    old = first.writer(ep)
    _machine_goes_silent(first, ep)
    assert second.claim_writer(ep)
    with pytest.raises(LeaseLostError):
        old.append_together(0, [_start(), _chunk(0)])
    assert second.events(ep) == []


def test_status_is_derived_from_the_log_and_the_lease(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    assert store.episode(ep).status == Status.INTERRUPTED  # no writer
    writer.append(1, EpisodeEnd(stop_reason="done", turns=1, total_reward=1.0))
    summary = store.episode(ep)
    assert (summary.status, summary.stop_reason, summary.total_reward) == (
        Status.COMPLETED,
        "done",
        1.0,
    )


def test_an_episode_no_fork_depends_on_can_be_removed(backend: MakeStore) -> None:
    store = backend()
    root = _episode(store)
    store.writer(root).append(0, _start())
    child = _episode(store, parent_episode_id=root, fork_seq=1)
    with pytest.raises(UsageError, match="depend on it"):
        store.remove_episode(root)
    assert store.remove_episode(child) == 0
    assert store.remove_episode(root) == 1
    assert store.episode_ids() == []


def test_an_imported_session_is_found_by_its_key_and_has_one_episode(backend: MakeStore) -> None:
    store, other = backend(), backend()
    env = {"kind": "import"}
    ep = store.create_episode(task_id="t", seed=0, env=env, model={}, import_key="fmt:s1")
    assert other.imported_episode("fmt:s1") == ep
    assert other.imported_episode("fmt:s2") is None
    with pytest.raises(StoreError, match="imported by another process"):
        other.create_episode(task_id="t", seed=0, env=env, model={}, import_key="fmt:s1")
    assert store.episode_ids() == [ep]
    store.remove_episode(ep)
    assert store.imported_episode("fmt:s1") is None


def test_an_imported_session_without_a_writer_is_completed(backend: MakeStore) -> None:
    store = backend()
    ep = store.create_episode(task_id="t", seed=0, env={"kind": "import"}, model={})
    store.writer(ep).append(0, _start())
    summary = store.episode(ep)
    assert (summary.status, summary.stop_reason) == (Status.COMPLETED, "imported")
    with store.lease(ep):
        assert store.episode(ep).status == Status.RUNNING  # being imported (or followed)


def test_workspace_blobs_and_snapshots_round_trip(backend: MakeStore) -> None:
    store = backend()
    assert store.missing_blobs(["a" * 64]) == {"a" * 64}
    store.put_blobs([("a" * 64, [b"part one, ", b"part two"])])
    assert store.missing_blobs(["a" * 64]) == set()
    assert store.read_blob("a" * 64) == b"part one, part two"
    store.put_snapshot("s1", None, 0, '{"f": ["f", 420, "x", 1]}', 1, 1)
    store.put_snapshot("s2", "s1", 1, '{"g": null}', 0, 0)
    assert store.snapshot_changes("s2") == ['{"f": ["f", 420, "x", 1]}', '{"g": null}']
    assert store.snapshot_changes("nope") is None


def test_verifications_are_kept_with_the_episode(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    row_id, created = store.add_verification(ep, "rules", 0.5, False, {"why": "x"})
    assert row_id > 0 and created


def test_listings_are_newest_first_and_filterable(backend: MakeStore) -> None:
    store = backend()
    first = _episode(store)
    second = store.create_episode(task_id="other", seed=1, env={"kind": "x"}, model={})
    assert [e.episode_id for e in store.list_episodes()] == [second, first]
    assert store.count_episodes() == 2
    assert sorted(store.episode_ids()) == sorted([first, second])


def test_writes_inside_atomic_are_all_kept_or_none(backend: MakeStore) -> None:
    store = backend()
    with store.atomic():
        kept = [_episode(store), _episode(store, claim=True)]
    with pytest.raises(RuntimeError), store.atomic():
        _episode(store)
        store.put_tools([ToolSpec(name="gone", description="d", parameters={})])
        raise RuntimeError("a failure halfway")
    assert sorted(store.episode_ids()) == sorted(kept)


def test_a_nul_in_recorded_text_keeps_every_read_working(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    writer.append(1, ModelChunk(call_id="c", channel="text", index=0, text="bin\x00ary"))
    writer.append(
        1,
        ToolResult(
            call_id="t", name="bash", observation="out\x00put", reward=1.0, message_hash="h"
        ),
    )
    assert store.episode(ep).total_reward == 1.0
    assert [e.episode_id for e in store.list_episodes()] == [ep]
    assert store.count_chunks(ep, "c") == 1
    assert store.find(store.segments(ep), "put", 0, forward=True) == 3
    assert store.events(ep)[2].typed().observation == "out\x00put"  # type: ignore[union-attr]


def test_log_facts_count_calls_latencies_and_errors_of_each_episode(backend: MakeStore) -> None:
    store = backend()
    ep = _episode(store)
    writer = store.writer(ep)
    writer.append(0, _start())
    writer.append(1, ModelResponse(call_id="c", message_hash="m", latency_s=0.25))
    writer.append(1, ToolCall(call_id="t1", name="bash", arguments="{}"))
    writer.append(1, ToolCall(call_id="t2", name="bash", arguments="{}"))
    writer.append(1, Error(where="tool", type="Boom", message="it broke\nand more"))
    facts = store.log_facts()[ep]
    assert (facts.tool_calls, facts.latencies, facts.errors) == (2, [0.25], ["Boom: it broke"])
