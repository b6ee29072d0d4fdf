"""Codex CLI rollouts imported: counts checked against the raw files, idempotent, growing,
requests rebuilt, and told apart from the other formats' files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports import codex
from agentrunner.imports.importer import FINISH_PART, import_file
from agentrunner.store.records import EventRow
from agentrunner.values.types import AgentUsage, Message
from providers.usage import priced
from tests.imports.conftest import FIXTURES, fixture_files, needs

SAMPLES = fixture_files("codex", "*.jsonl")
OTHERS = sorted(p for p in FIXTURES.glob("*/*") if p.is_file() and p.parent.name != "codex")
OUTPUT_TYPES = {"reasoning", "function_call", "custom_tool_call", "local_shell_call"}
CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call"}
RESULT_TYPES = {"function_call_output", "custom_tool_call_output"}
TOKENS = {  # our name -> Codex's name of a token count
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cached_input_tokens",
    "reasoning": "reasoning_output_tokens",
}
COUNTS = {  # our name -> the usage event's field
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_tokens",
    "reasoning": "reasoning_tokens",
}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _is_user_item(line: dict[str, Any]) -> bool:
    return line["type"] == "response_item" and line["payload"].get("role") == "user"


def _with_prompts(path: Path) -> list[dict[str, Any]]:
    """The rollout's lines, where a user_message event with no user message item right
    before or after it (Codex 0.128's Desktop rollout writes the user's prompts only so)
    stands as the user message item the model read."""
    lines = _lines(path)
    out = []
    for i, line in enumerate(lines):
        beside = lines[max(i - 1, 0) : i] + lines[i + 1 : i + 2]
        payload = line["payload"]
        if payload.get("type") == "user_message" and not any(map(_is_user_item, beside)):
            content = [{"type": "input_text", "text": payload["message"]}]
            payload = {"type": "message", "role": "user", "content": content}
            line = {**line, "type": "response_item", "payload": payload}
        out.append(line)
    return out


def _is_output(payload: dict[str, Any]) -> bool:
    return payload["type"] in OUTPUT_TYPES or payload.get("role") == "assistant"


def _expected(path: Path) -> dict[str, Any]:
    """What the rollout holds, read directly: a model call is a run of output items that no
    input (a message from the user or developer, a tool output) interrupts; its tokens are
    the last token_count's totals, unknown (None) in a rollout that has none."""
    counts = Counter[str]()
    totals: dict[str, int | None] = dict.fromkeys(TOKENS.values())
    in_call = False
    for line in _with_prompts(path):
        payload = line["payload"]
        if line["type"] == "event_msg" and payload["type"] == "token_count" and payload["info"]:
            totals = payload["info"]["total_token_usage"]
        if line["type"] != "response_item":
            continue
        if _is_output(payload):
            counts["calls"] += not in_call
            in_call = True
        else:
            in_call = False
        counts["users"] += payload.get("role") == "user"
        counts["tool_calls"] += payload["type"] in CALL_TYPES
        counts["tool_results"] += payload["type"] in RESULT_TYPES
    return {**counts, **{ours: totals[theirs] for ours, theirs in TOKENS.items()}}


def _known_sum(usage: list[dict[str, Any]], key: str) -> int | None:
    """The sum of the counts the usage events know (None when none knows it)."""
    known = [u[key] for u in usage if u[key] is not None]
    return sum(known) if known else None


def _import(store: TraceStore, path: Path, *, live: bool = False) -> str:
    (report,) = import_file(store, path, codex, live=live)
    return report.episode_id


def _events(store: TraceStore, episode: str) -> list[EventRow]:
    return list(store.iter_events(episode))


@needs("codex")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name[:30])
def test_imported_counts_and_tokens_match_the_raw_rollout(store: TraceStore, path: Path) -> None:
    events = _events(store, _import(store, path))
    kinds = Counter(e.kind for e in events)
    usage = [e.payload for e in events if e.kind == "usage"]
    imported = {
        "users": sum(e.kind == "message" and e.payload["role"] == "user" for e in events),
        "calls": kinds["model.request"],
        "tool_calls": kinds["tool.call"],
        "tool_results": kinds["tool.result"],
        **{ours: _known_sum(usage, field) for ours, field in COUNTS.items()},
    }
    assert imported == _expected(path)
    assert kinds["model.response"] == kinds["model.request"]


def _first_model(path: Path) -> str | None:
    """The model of the rollout's first turn_context (None: it has none)."""
    contexts = (x["payload"] for x in _lines(path) if x["type"] == "turn_context")
    return next((str(c["model"]) for c in contexts), None)


def _counts_tokens(path: Path) -> bool:
    return any(
        x["type"] == "event_msg" and x["payload"]["type"] == "token_count" for x in _lines(path)
    )


NAMED = [p for p in SAMPLES if _first_model(p)]
UNNAMED = [p for p in SAMPLES if not _first_model(p)]  # Codex 0.128 (codemie-code)
UNCOUNTED = [p for p in SAMPLES if not _counts_tokens(p)]  # the same file


@needs("codex")
@pytest.mark.parametrize("path", NAMED, ids=lambda p: p.name[:30])
def test_the_episode_names_the_model_of_the_first_turn_context(
    store: TraceStore, path: Path
) -> None:
    start = _events(store, _import(store, path))[0]
    assert start.payload["model"] == {
        "spec": f"codex:{_first_model(path)}",
        "agent": "codex",
        "model": _first_model(path),
    }


@needs("codex")
@pytest.mark.parametrize("path", UNNAMED, ids=lambda p: p.name[:30])
def test_a_rollout_without_a_turn_context_names_no_model(store: TraceStore, path: Path) -> None:
    start = _events(store, _import(store, path))[0]
    assert start.payload["model"] == {"spec": "codex", "agent": "codex"}


@needs("codex")
@pytest.mark.parametrize("path", UNCOUNTED, ids=lambda p: p.name[:30])
def test_a_rollout_without_token_counts_records_its_usage_as_unknown_not_zero(
    store: TraceStore, path: Path
) -> None:
    usage = [e.payload for e in _events(store, _import(store, path)) if e.kind == "usage"]
    fields = [*COUNTS.values(), "cost_usd"]
    assert usage
    assert [{f: u[f] for f in fields} for u in usage] == [dict.fromkeys(fields)] * len(usage)


@needs("codex")
@pytest.mark.parametrize("path", NAMED, ids=lambda p: p.name[:30])
def test_usage_is_priced_at_openais_prices_for_that_model(store: TraceStore, path: Path) -> None:
    usage = [e.payload for e in _events(store, _import(store, path)) if e.kind == "usage"]
    counts = ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")
    costs = [
        priced(AgentUsage(**{k: u[k] for k in counts}), _first_model(path), provider_id="openai")
        for u in usage
    ]
    assert all(c.cost_usd for c in costs)
    assert [u["cost_usd"] for u in usage] == [c.cost_usd for c in costs]


@needs("codex")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name[:30])
def test_importing_the_same_rollout_twice_adds_nothing(store: TraceStore, path: Path) -> None:
    episode = _import(store, path)
    before = len(_events(store, episode))
    (again,) = import_file(store, path, codex)
    assert (again.episode_id, again.created, again.events) == (episode, False, 0)
    assert len(_events(store, episode)) == before


def _comparable(events: list[EventRow]) -> list[tuple[str, int, str, dict[str, Any]]]:
    """Events without their place in the source (and the start without what describes the
    import rather than the session: when it ran, and the file's path and digest then)."""
    out = []
    for e in events:
        payload = {k: v for k, v in e.payload.items() if k != "src"}
        ts = e.ts
        if e.kind == "episode.start":
            payload["env"] = {
                k: v for k, v in payload["env"].items() if k not in ("path", "sha256")
            }
            ts = ""
        out.append((e.kind, e.turn, ts, payload))
    return out


def _argument_names(arguments: str) -> set[str]:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return set()
    return set(parsed) if isinstance(parsed, dict) else set()


def _cuts(path: Path) -> list[int]:
    """Where to cut a rollout: a dozen lines after the first result of the last call that
    shows something new of a tool, its name or an argument name (the importer infers the
    tool set, names and argument names, from the answered calls it has seen, and a call
    without a token_count is answered only once a whole line after it arrives, so an
    earlier cut would record another tool set), which covers every kind of boundary between
    records."""
    seen: set[tuple[str, str]] = set()
    showing: list[str] = []  # the calls that showed something new
    results: dict[str, int] = {}
    for i, line in enumerate(_lines(path)):
        payload = line["payload"]
        if payload.get("type") in CALL_TYPES:
            name, raw = payload["name"], payload.get("arguments") or payload.get("input") or ""
            shown = {(name, "")} | {(name, a) for a in _argument_names(raw)}
            if shown - seen:
                showing.append(payload["call_id"])
            seen |= shown
        elif payload.get("type") in RESULT_TYPES:
            results.setdefault(payload["call_id"], i)
    first = max(results[call] for call in showing) + 1
    return list(range(first, first + 12))


@needs("codex")
@pytest.mark.parametrize(
    ("path", "cut"),
    [(p, cut) for p in SAMPLES for cut in _cuts(p)],
    ids=lambda v: v.name[:30] if isinstance(v, Path) else str(v),
)
def test_a_growing_rollout_ends_as_the_whole_rollout_imported_at_once(
    store: TraceStore, tmp_path: Path, path: Path, cut: int
) -> None:
    whole_store = TraceStore(tmp_path / "whole.db")
    whole = _comparable(_events(whole_store, _import(whole_store, path)))
    whole_store.close()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    half = lines[cut][: len(lines[cut]) // 2]  # the writer is in the middle of a line
    growing = tmp_path / path.name
    growing.write_text("".join(lines[:cut]) + half, encoding="utf-8")
    episode = _import(store, growing, live=True)
    with growing.open("a", encoding="utf-8") as f:
        f.write(lines[cut][len(half) :] + "".join(lines[cut + 1 :]))
    assert _import(store, growing) == episode
    assert _comparable(_events(store, episode)) == whole


@needs("codex")
@pytest.mark.parametrize(
    ("path", "cut"),
    [(p, cut) for p in SAMPLES for cut in (1, 5, 9, 20, 40)],
    ids=lambda v: v.name[:30] if isinstance(v, Path) else str(v),
)
def test_a_rollout_imported_as_finished_then_grown_gains_nothing_twice(
    store: TraceStore, tmp_path: Path, path: Path, cut: int
) -> None:
    """An import that took a rollout for finished wrote what its end closed (records held
    for the session's start, a call closed early); when the file grows, none of it is
    written again."""
    whole_store = TraceStore(tmp_path / "whole.db")
    whole = Counter(e.kind for e in _events(whole_store, _import(whole_store, path)))
    whole_store.close()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / path.name
    growing.write_text("".join(lines[:cut]), encoding="utf-8")
    episode = _import(store, growing)
    growing.write_text("".join(lines), encoding="utf-8")
    assert _import(store, growing) == episode
    events = _events(store, episode)
    got = Counter(e.kind for e in events)
    for kind in ("message", "model.chunk", "tool.call", "tool.result"):
        assert got[kind] == whole[kind], kind
    assert got["model.request"] - whole["model.request"] in (0, 1)  # a call closed early
    # a UI copy whose item had not come yet was kept raw when the file was closed: kept
    closing = [e for e in events if e.kind == "error" and e.payload["src"][1] >= FINISH_PART]
    assert got["error"] - whole["error"] in range(len(closing) + 1)


def _shape(m: Message) -> tuple[Any, ...]:
    encrypted = [p.data.get("encrypted_content") for p in m.opaque if p.type == "reasoning"]
    calls = [c.call_id for c in m.tool_calls]
    return (m.role, m.content, m.tool_call_id, calls, encrypted)


def _history_before_each_call(path: Path) -> list[list[tuple[Any, ...]]]:
    """For every model call of the rollout, the messages before it, read directly."""
    history: list[tuple[Any, ...]] = []
    before: list[list[tuple[Any, ...]]] = []
    answer: dict[str, Any] | None = None
    for line in _with_prompts(path):
        payload = line["payload"]
        if line["type"] == "session_meta":
            history.append(("system", payload["base_instructions"]["text"], None, [], []))
        if line["type"] != "response_item":
            continue
        if _is_output(payload):
            if answer is None:
                before.append(list(history))
                answer = {"text": "", "calls": [], "encrypted": []}
            if payload["type"] == "message":
                answer["text"] += "".join(p["text"] for p in payload["content"])
            elif payload["type"] == "reasoning":
                answer["encrypted"].append(payload["encrypted_content"])
            else:
                answer["calls"].append(payload["call_id"])
            continue
        if answer is not None:
            history.append(
                ("assistant", answer["text"], None, answer["calls"], answer["encrypted"])
            )
            answer = None
        if payload["type"] == "message":
            text = "\n".join(p["text"] for p in payload["content"])
            role = "user" if payload["role"] == "user" else "system"
            history.append((role, text, None, [], []))
        elif payload["type"] in RESULT_TYPES:
            history.append(("tool", payload["output"], payload["call_id"], [], []))
    return before


@needs("codex")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name[:30])
def test_every_request_rebuilds_as_the_messages_before_its_call(
    store: TraceStore, path: Path
) -> None:
    episode = _import(store, path)
    expected = _history_before_each_call(path)
    rebuilt = [
        [_shape(m) for m in store.reconstruct_request(episode, turn).messages]
        for turn in range(1, len(expected) + 1)
    ]
    assert rebuilt == expected


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: f"{p.parent.name}/{p.name[:30]}")
def test_other_formats_files_are_not_taken_for_rollouts(path: Path) -> None:
    head = path.read_bytes()[: 64 * 1024].decode("utf-8", errors="replace")
    assert not codex.sniff(path, head)


@needs("codex")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name[:30])
def test_rollouts_are_recognised_from_their_content(path: Path) -> None:
    head = path.read_bytes()[: 64 * 1024].decode("utf-8", errors="replace")
    assert codex.sniff(path, head)


def _rollout(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "rollout-2026-01-01T00-00-00-00000000-0000-0000-0000-000000000001.jsonl"
    header = {"id": "s1", "cwd": "/w", "cli_version": "0.1", "model_provider": "openai"}
    rows = [("session_meta", header), ("turn_context", {"turn_id": "t1", "model": "gpt-5"})]
    rows += [(line["type"], line["payload"]) for line in lines]
    path.write_text(
        "".join(
            json.dumps({"timestamp": f"2026-01-01T00:00:{i:02d}.000Z", "type": t, "payload": p})
            + "\n"
            for i, (t, p) in enumerate(rows)
        ),
        encoding="utf-8",
    )
    return path


def _item(**payload: Any) -> dict[str, Any]:
    return {"type": "response_item", "payload": payload}


def _event(**payload: Any) -> dict[str, Any]:
    return {"type": "event_msg", "payload": payload}


def _said(text: str) -> dict[str, Any]:
    return _item(type="message", role="assistant", content=[{"type": "output_text", "text": text}])


def test_a_ui_copy_of_an_items_text_is_not_kept_but_a_differing_one_is(
    store: TraceStore, tmp_path: Path
) -> None:
    path = _rollout(
        tmp_path,
        _event(type="agent_message", message="same"),
        _said("same"),
        _event(type="agent_message", message="not what the item says"),
        _said("other"),
    )
    kept = [e.payload for e in _events(store, _import(store, path)) if e.kind == "error"]
    assert [k["raw"]["payload"]["message"] for k in kept] == ["not what the item says"]


def test_a_call_without_a_completion_closes_as_incomplete_at_the_end_of_the_file(
    store: TraceStore, tmp_path: Path
) -> None:
    path = _rollout(tmp_path, _said("half an answer"))
    live = _events(store, _import(store, path, live=True))
    assert [e.kind for e in live][-2:] == ["model.request", "model.chunk"]
    events = _events(store, _import(store, path))
    (response,) = [e.payload for e in events if e.kind == "model.response"]
    assert response["stop_reason"] == "incomplete"


def test_a_ui_copy_after_its_item_is_not_kept(store: TraceStore, tmp_path: Path) -> None:
    prompt = [{"type": "input_text", "text": "fix the bug"}]
    path = _rollout(
        tmp_path,
        _item(type="message", role="user", content=prompt),
        _event(type="user_message", message="fix the bug", images=[], text_elements=[]),
        _said("done"),
    )
    kinds = Counter(e.kind for e in _events(store, _import(store, path)))
    assert kinds["error"] == 0


def _tokens(total: int, last: int) -> dict[str, Any]:
    def counts(n: int) -> dict[str, int]:
        return {"input_tokens": n, "cached_input_tokens": 0, "output_tokens": n}

    info = {"total_token_usage": counts(total), "last_token_usage": counts(last)}
    return _event(type="token_count", info=info, rate_limits={})


def test_a_token_count_repeating_the_totals_neither_closes_a_call_nor_counts_again(
    store: TraceStore, tmp_path: Path
) -> None:
    path = _rollout(
        tmp_path,
        _said("a"),
        _tokens(10, 10),
        _item(type="message", role="user", content=[{"type": "input_text", "text": "more"}]),
        _said("b"),
        _tokens(10, 10),
        _said("c"),
        _tokens(25, 15),
    )
    events = _events(store, _import(store, path))
    usage = [e.payload["input_tokens"] for e in events if e.kind == "usage"]
    answers = [
        store.message(e.payload["message_hash"]).content
        for e in events
        if e.kind == "model.response"
    ]
    assert (answers, usage) == (["a", "bc"], [10, 15])


def test_a_calls_latency_runs_from_its_request_to_its_completion(
    store: TraceStore, tmp_path: Path
) -> None:
    path = _rollout(tmp_path, _said("a"), _said("b"), _tokens(10, 10))  # at 0:02, 0:03, 0:04
    events = _events(store, _import(store, path))
    (response,) = [e.payload for e in events if e.kind == "model.response"]
    assert response["latency_s"] == 3.0  # from the turn_context at 0:01


def test_a_users_prompt_written_only_as_a_ui_event_is_the_users_message(
    store: TraceStore, tmp_path: Path
) -> None:
    prompt = [{"type": "input_text", "text": "fix the bug"}]
    path = _rollout(
        tmp_path,
        _item(type="message", role="user", content=prompt),
        _event(type="user_message", message="fix the bug", images=[]),  # a copy of the item
        _said("a"),
        _event(type="user_message", message="and the test", images=[]),  # no item: the prompt
        _said("b"),
    )
    events = _events(store, _import(store, path))
    users = [
        store.message(e.payload["message_hash"]).content
        for e in events
        if e.kind == "message" and e.payload["role"] == "user"
    ]
    assert (users, [e.kind for e in events].count("model.request")) == (
        ["fix the bug", "and the test"],
        2,
    )


def test_a_half_written_last_line_is_left_for_the_next_import(
    store: TraceStore, tmp_path: Path
) -> None:
    path = _rollout(tmp_path, _said("a"), _said("b"))
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 30])  # inside the last line
    episode = _import(store, path)
    path.write_bytes(data)
    _import(store, path)
    events = _events(store, episode)
    chunks = [e.payload["text"] for e in events if e.kind == "model.chunk"]
    assert (chunks, [e.kind for e in events].count("error")) == (["a", "b"], 0)
