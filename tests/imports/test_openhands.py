"""The OpenHands importer, on conversations the real OpenHands SDK persists (run offline against
a loopback upstream, twice in one conversation: an answer with two tool calls, one of a tool the
agent does not have, then a finish; after a pause, a plain answer whose server sent no usage):
the conversation imports as one episode with the prompts, model calls, tool calls, results,
tokens and raw events a plain reading of its files counts, the answer without usage has unknown
usage, a second import (or one naming an event file) adds nothing; following the conversation
while it grows by event files imports what importing it whole does, and an answer whose usage
OpenHands has not saved yet waits for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from sse_replay import SSEReplayServer

from agentrunner import TraceStore
from agentrunner.imports import openhands
from agentrunner.imports.registry import Follower, detect
from tests.imports.conftest import head, kinds, payloads
from tests.imports.openhands_support import first_run, run_openhands, second_run

pytestmark = pytest.mark.slow
PROMPTS = ("copy the notes", "copy them again")
RESULTS = {"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"}


def conversation(tmp_path: Path) -> Path:
    """A conversation of two real runs of the SDK (the second resumes it); its state."""
    with SSEReplayServer(*first_run(), *second_run()) as upstream:
        conversation_id = uuid.uuid4()
        run_openhands(tmp_path, upstream.url, conversation_id, PROMPTS[0], pause=True)
        return run_openhands(tmp_path, upstream.url, conversation_id, PROMPTS[1])


def plain_reading(state: Path) -> Counter[str]:
    """The conversation's prompts, model answers (distinct ``llm_response_id``), tool calls,
    results, the tokens of its state's metrics, and the events no event kind stands for, read
    plainly from its files."""
    count: Counter[str] = Counter()
    answers = set()
    for path in sorted((state.parent / "events").glob("event-*.json")):
        event = json.loads(path.read_text())
        kind = event["kind"]
        if kind == "MessageEvent" and event["source"] == "user":
            count["prompt"] += 1
        elif kind == "MessageEvent" or kind == "ActionEvent":
            answers.add(event["llm_response_id"])
            count["tool"] += kind == "ActionEvent"
        elif kind in RESULTS:
            count["result"] += 1
            count["failed"] += kind != "ObservationEvent" or event["observation"]["is_error"]
        elif kind != "SystemPromptEvent":
            count["raw"] += 1
    count["call"] = len(answers)
    (metrics,) = json.loads(state.read_text())["stats"]["usage_to_metrics"].values()
    count["input"] = sum(u["prompt_tokens"] for u in metrics["token_usages"])
    count["output"] = sum(u["completion_tokens"] for u in metrics["token_usages"])
    count["priced"] = len(metrics["token_usages"])
    return count


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_real_openhands_conversation_imports_with_what_its_files_hold(tmp_path: Path) -> None:
    state = conversation(tmp_path)
    counted = plain_reading(state)
    event_file = min((state.parent / "events").glob("event-*.json"))
    assert detect(state) == detect(event_file) == openhands.NAME
    assert openhands.sniff(state, head(state))
    db = tmp_path / "t.db"
    first = cli(db, "import", "--json", str(tmp_path / "conversations"))
    assert first.returncode == 0, first.stderr
    [[report]] = [f["sessions"] for f in json.loads(first.stdout)]
    episode = report["episode_id"]
    with TraceStore(db) as store:
        events = kinds(store, episode)
        messages = payloads(store, episode, "message")
        usage = payloads(store, episode, "usage")
        results = payloads(store, episode, "tool.result")
    reasons = Counter(m["reason"] for m in messages)
    assert reasons == {"system": 1, "prompt": counted["prompt"]} and counted["prompt"] == 2
    assert events["model.request"] == events["model.response"] == counted["call"] == 3
    assert events["tool.call"] == counted["tool"] == 3
    assert len(results) == counted["result"] == 3
    assert sum(r["error"] is not None for r in results) == counted["failed"] == 1
    assert sum(u["input_tokens"] or 0 for u in usage) == counted["input"] > 0
    assert sum(u["output_tokens"] or 0 for u in usage) == counted["output"] > 0
    assert counted["priced"] == 2 and usage[-1]["input_tokens"] is None  # no usage sent
    assert report["kept_raw"] == counted["raw"] == 1  # the pause

    again = cli(db, "import", "--json", str(tmp_path / "conversations"), str(event_file))
    assert again.returncode == 0, again.stderr
    assert [s["events_added"] for f in json.loads(again.stdout) for s in f["sessions"]] == [0]
    shown = cli(db, "show", episode)
    assert shown.returncode == 0, shown.stderr
    assert all(text in shown.stdout for text in (*PROMPTS, "Copied again.", "'nope' not found"))


def whole_import(tmp_path: Path, state: Path, name: str) -> Counter[str]:
    done = cli(tmp_path / name, "import", str(state))
    assert done.returncode == 0, done.stderr
    with TraceStore(tmp_path / name) as store:
        [counted] = [kinds(store, e.episode_id) for e in store.list_episodes()]
    return counted


def test_an_openhands_conversation_followed_while_it_grows_imports_as_it_does_whole(
    tmp_path: Path,
) -> None:
    conversation_id = uuid.uuid4()
    with (
        SSEReplayServer(*first_run(), *second_run()) as upstream,
        TraceStore(tmp_path / "followed.db") as store,
    ):
        follower = Follower(store)
        state = run_openhands(tmp_path, upstream.url, conversation_id, PROMPTS[0])
        first = follower.look([state.parent])
        saved_then = state.read_text()
        run_openhands(tmp_path, upstream.url, conversation_id, PROMPTS[1])
        grown = follower.look([state.parent])
        follower.finish()
        follower.close()
        [followed] = [kinds(store, e.episode_id) for e in store.list_episodes()]
    assert [len(r.sessions) for r in first] == [len(r.sessions) for r in grown] == [1]
    assert grown[0].sessions[0].events > 0  # the second prompt and answer
    counted = whole_import(tmp_path, state, "whole.db")
    assert followed == counted and counted["model.request"] == 3

    # the same events appearing one file at a time, the state as the first run left it until
    # the last: the answer it has no metrics for waits, and is imported once they are saved
    copy = tmp_path / "copy" / state.parent.name
    (copy / "events").mkdir(parents=True)
    (copy / "base_state.json").write_text(saved_then)
    with TraceStore(tmp_path / "replayed.db") as store:
        follower = Follower(store)
        for event in sorted((state.parent / "events").glob("event-*.json")):
            shutil.copy(event, copy / "events" / event.name)
            follower.look([copy])
        [episode] = [e.episode_id for e in store.list_episodes()]
        waiting = kinds(store, episode)
        shutil.copy(state, copy / "base_state.json")
        follower.look([copy])
        replayed = kinds(store, episode)
        follower.finish()
        follower.close()
    assert waiting["model.request"] == 2 and replayed == counted
