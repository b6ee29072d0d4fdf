"""The SWE-agent importer: the sample trajectories (steps only their ``trajectory`` holds
included), and trajectories derived from them here for what they do not have (run totals,
thought-action parsing, demonstrations, attempts, a run saved part-way)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports import swe_agent
from agentrunner.imports.importer import import_file, positioned
from tests.imports.conftest import (
    FIXTURES,
    fixture_files,
    head,
    kinds,
    needs,
    only_episode,
    payloads,
)

SAMPLES = fixture_files("swe-agent", "*.traj")
OTHERS = [
    path
    for folder in (sorted(FIXTURES.iterdir()) if FIXTURES.is_dir() else [])
    if folder.is_dir() and folder.name != "swe-agent"
    for path in fixture_files(folder.name)
]
STATS = {"instance_cost": 0.75, "tokens_sent": 12_000, "tokens_received": 345, "api_calls": 6}


def sample() -> Path:
    return next(p for p in SAMPLES if p.name == "function_calling_simple.traj")


def doc_of(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def write(tmp_path: Path, doc: dict[str, Any], name: str = "t.traj") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def finished(doc: dict[str, Any], stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sample as a finished run writes it: with its info and totals."""
    info = {"exit_status": "submitted", "submission": "diff", "model_stats": stats or STATS}
    return {**copy.deepcopy(doc), "info": info}


def only(store: TraceStore, path: Path) -> str:
    return only_episode(store, path, swe_agent)


def log(store: TraceStore, episode: str) -> list[tuple[str, dict[str, Any]]]:
    """An episode's events without the import's bookkeeping (positions, the source's
    digest and info, which differ between a file and the same run saved later)."""
    out = []
    for row in store.iter_events(episode):
        payload = {k: v for k, v in row.payload.items() if k not in ("src", "tools_hash")}
        if row.kind == "episode.start":
            continue
        out.append((row.kind, payload))
    return out


# -- the sample


@needs("swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_has_the_messages_calls_and_results_its_json_has(
    store: TraceStore, path: Path
) -> None:
    doc = doc_of(path)
    history, steps = doc["history"], doc.get("trajectory") or []
    episode = only(store, path)
    roles = Counter(m["role"] for m in payloads(store, episode, "message"))
    counts = kinds(store, episode)
    answers = sum(e["role"] == "assistant" for e in history)
    if any(e.get("tool_calls") for e in history):
        users = sum(e["role"] == "user" for e in history)
        calls = sum(len(e.get("tool_calls") or []) for e in history)
        results = sum(e["role"] == "tool" for e in history)
    else:  # thought-action: an answer's action is its call, the user entry after it the result
        first = next(i for i, e in enumerate(history) if e["role"] == "assistant")
        users = sum(e["role"] == "user" for e in history[:first])
        calls = sum(bool(e.get("action")) for e in history)
        results = sum(e["role"] == "user" for e in history[first:])
    if steps:  # one step per executed action, each a model output and its result
        answers = calls = results = len(steps)
    assert roles == {"system": 1, "user": users}
    assert counts["model.request"] == answers
    assert counts["tool.call"] == calls
    assert counts["tool.result"] == results
    assert counts["error"] == 0  # every entry of the sample is mapped


@needs("swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_has_the_token_totals_its_info_has(store: TraceStore, path: Path) -> None:
    stats = doc_of(path).get("info", {}).get("model_stats", {})
    episode = store.episode(only(store, path))
    assert episode.tokens["input"] == stats.get("tokens_sent", 0)
    assert episode.tokens["output"] == stats.get("tokens_received", 0)


@needs("swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_importing_a_sample_twice_adds_nothing(store: TraceStore, path: Path) -> None:
    episode = only(store, path)
    before = sum(kinds(store, episode).values())
    [again] = import_file(store, path, swe_agent)
    assert (again.episode_id, again.created, again.events) == (episode, False, 0)
    assert sum(kinds(store, episode).values()) == before


@needs("swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_request_of_a_middle_turn_is_the_history_before_its_call(
    store: TraceStore, path: Path
) -> None:
    history = doc_of(path)["history"]
    calls = [i for i, e in enumerate(history) if e["role"] == "assistant"]
    middle = len(calls) // 2
    request = store.reconstruct_request(only(store, path), middle + 1)
    got = [
        (
            m.role,
            m.content,
            m.tool_call_id,
            tuple((c.call_id, c.name, json.loads(c.arguments)) for c in m.tool_calls),
        )
        for m in request.messages
    ]
    if any(e.get("tool_calls") for e in history):
        want = [
            (
                e["role"],
                e["content"],
                (e.get("tool_call_ids") or [None])[0],
                tuple(
                    (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                    for c in e.get("tool_calls") or []
                ),
            )
            for e in history[: calls[middle]]
        ]
    else:  # thought-action: an answer's action is a bash call, the user entry after it the
        # call's result (the call ids are the importer's own: taken in order from the request,
        # so what is checked is that each result answers the call just before it)
        ids = iter(c.call_id for m in request.messages for c in m.tool_calls)
        want: list[tuple[Any, ...]] = []
        call = None
        for e in history[: calls[middle]]:
            if e["role"] == "assistant":
                call = next(ids, None)
                command = {"command": e["action"]}
                want.append(("assistant", e["content"], None, ((call, "bash", command),)))
            elif e["role"] == "user" and call is not None:
                want.append(("tool", e["content"], call, ()))
            else:
                want.append((e["role"], e["content"], None, ()))
    assert got == want


@needs("swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_parser_gives_the_same_items_for_the_same_records(path: Path) -> None:
    records = swe_agent.records(path, live=False)
    first = positioned(records, swe_agent.parser(path), finish=True)
    assert first == positioned(records, swe_agent.parser(path), finish=True)


STEPPED = [p for p in SAMPLES if doc_of(p).get("trajectory")]
TEXT_STEPPED = [p for p in STEPPED if not any(e.get("tool_calls") for e in doc_of(p)["history"])]


@needs("swe-agent")
@pytest.mark.parametrize("path", STEPPED, ids=lambda p: p.name)
def test_a_samples_last_executed_step_gives_its_last_result(store: TraceStore, path: Path) -> None:
    last = doc_of(path)["trajectory"][-1]
    episode = only(store, path)
    made, results = payloads(store, episode, "tool.call"), payloads(store, episode, "tool.result")
    assert results[-1]["observation"] == last["observation"]
    assert results[-1]["call_id"] == made[-1]["call_id"]


@needs("swe-agent")
@pytest.mark.parametrize("path", TEXT_STEPPED, ids=lambda p: p.name)
def test_every_executed_step_is_one_call_in_the_order_it_ran(store: TraceStore, path: Path) -> None:
    steps = doc_of(path)["trajectory"]
    made = payloads(store, only(store, path), "tool.call")
    assert [c["parsed"] for c in made] == [{"command": s["action"]} for s in steps]


@needs("swe-agent")
@pytest.mark.parametrize("path", TEXT_STEPPED, ids=lambda p: p.name)
def test_a_run_saved_just_after_a_step_its_history_lacks_continues_as_one_import(
    store: TraceStore, path: Path, tmp_path: Path
) -> None:
    whole = doc_of(path)
    steps, history = whole["trajectory"], whole["history"]
    answers = [i for i, e in enumerate(history) if e["role"] == "assistant"]
    lacked = next(n for n, s in enumerate(steps) if s["action"] != history[answers[n]]["action"])
    going = {**whole, "trajectory": steps[: lacked + 1], "history": history[: answers[lacked]]}
    saved = write(tmp_path, {**going, "info": {}})
    episode = only(store, saved)
    write(tmp_path, whole)
    import_file(store, saved, swe_agent)
    with TraceStore(tmp_path / "reference.db") as reference:
        once = only(reference, write(tmp_path, whole, "once.traj"))
        assert log(store, episode) == log(reference, once)


@needs("swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sniff_knows_a_sample_from_its_head(path: Path) -> None:
    assert swe_agent.sniff(path, head(path))
    assert swe_agent.sniff(path, head(path)[:600])


@needs("swe-agent")
@pytest.mark.parametrize("path", OTHERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_says_no_to_other_formats_and_to_the_schema(path: Path) -> None:
    assert not swe_agent.sniff(path, head(path))


@needs("swe-agent")
def test_a_file_cut_short_is_a_clear_error(tmp_path: Path) -> None:
    cut = tmp_path / "cut.traj"
    cut.write_bytes(sample().read_bytes()[:4000])
    with pytest.raises(ValueError, match="not complete JSON"):
        swe_agent.records(cut, live=False)


# -- derived from the sample


@needs("swe-agent")
def test_a_finished_runs_totals_are_its_last_answers_usage(
    store: TraceStore, tmp_path: Path
) -> None:
    episode = only(store, write(tmp_path, finished(doc_of(sample()))))
    usage = payloads(store, episode, "usage")
    assert [u["input_tokens"] for u in usage] == [0] * (len(usage) - 1) + [STATS["tokens_sent"]]
    summary = store.episode(episode)
    assert summary.tokens["input"] == STATS["tokens_sent"]
    assert summary.tokens["output"] == STATS["tokens_received"]
    assert summary.cost_usd == STATS["instance_cost"]
    assert summary.env["extra"]["info"]["model_stats"] == STATS


@needs("swe-agent")
def test_totals_without_a_cost_are_priced_from_the_model(store: TraceStore, tmp_path: Path) -> None:
    doc = finished(doc_of(sample()), {**STATS, "instance_cost": 0})
    doc["replay_config"] = json.dumps({"agent": {"model": {"name": "openai/gpt-4o"}}})
    episode = only(store, write(tmp_path, doc))
    summary = store.episode(episode)
    assert summary.cost_usd is not None and summary.cost_usd > 0
    [used] = [u for u in payloads(store, episode, "usage") if u["cost_usd"]]
    assert "openai/gpt-4o" in used["price_source"]


@needs("swe-agent")
def test_a_run_still_going_has_no_usage_until_it_ends(store: TraceStore, tmp_path: Path) -> None:
    whole = finished(doc_of(sample()))
    going = {**whole, "history": whole["history"][:7], "info": {"model_stats": STATS}}
    path = write(tmp_path, going)
    episode = only(store, path)
    assert store.episode(episode).tokens["input"] == 0
    write(tmp_path, whole)
    [report] = import_file(store, path, swe_agent)
    assert (report.episode_id, report.created) == (episode, False)
    with TraceStore(tmp_path / "reference.db") as reference:
        once = only(reference, write(tmp_path, whole, "once.traj"))
        assert log(store, episode) == log(reference, once)


@needs("swe-agent")
def test_without_function_calling_the_action_is_a_bash_call(
    store: TraceStore, tmp_path: Path
) -> None:
    doc = doc_of(sample())
    for entry in doc["history"]:
        entry.pop("tool_calls", None)
        if entry.pop("tool_call_ids", None):
            entry["role"] = "user"
    episode = only(store, write(tmp_path, doc))
    actions = [e["action"] for e in doc["history"] if e["role"] == "assistant"]
    made = payloads(store, episode, "tool.call")
    results = payloads(store, episode, "tool.result")
    assert [(c["name"], c["parsed"]) for c in made] == [("bash", {"command": a}) for a in actions]
    assert [r["call_id"] for r in results] == [c["call_id"] for c in made]
    users = [m for m in payloads(store, episode, "message") if m["role"] == "user"]
    assert len(users) == 1


@needs("swe-agent")
def test_a_demonstrations_answers_are_kept_raw(store: TraceStore, tmp_path: Path) -> None:
    doc = doc_of(sample())
    demo = [{**copy.deepcopy(e), "is_demo": True} for e in doc["history"][1:4]]
    doc["history"] = [doc["history"][0], *demo, *doc["history"][1:]]
    episode = only(store, write(tmp_path, doc))
    kept = [p["raw"] for p in payloads(store, episode, "error") if p["type"] == "unmapped"]
    assert [k["role"] for k in kept] == ["assistant", "tool"]
    users = [m for m in payloads(store, episode, "message") if m["role"] == "user"]
    assert len(users) == 2  # the demonstration's prompt, and the run's


@needs("swe-agent")
def test_each_attempt_of_a_retry_run_is_its_own_session(store: TraceStore, tmp_path: Path) -> None:
    attempt = finished(doc_of(sample()))
    doc = {"attempts": [attempt, attempt], **attempt, "info": {"best_attempt_idx": 1}}
    reports = import_file(store, write(tmp_path, doc), swe_agent)
    assert [r.source.title for r in reports] == [
        "t/attempt-0",
        "t/attempt-1",
    ]
    for report in reports:
        assert kinds(store, report.episode_id)["model.request"] == 5
        assert store.episode(report.episode_id).tokens["input"] == STATS["tokens_sent"]
    assert reports[0].source.extra["retry_info"] == {"best_attempt_idx": 1}
