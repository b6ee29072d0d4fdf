"""The opencode importer, on the session database the real opencode writes (run offline against
a loopback upstream, with a data folder of the test's own): a run that starts a sub-agent with
its ``task`` tool imports as two episodes, the sub-agent's under the call that started it, with
the model calls, tool calls, results, tokens and raw parts a plain reading of the database
counts; a second import adds nothing; following the database while opencode adds to a session
imports what importing it whole does, an answer opencode has not finished waiting for its end,
and a change that is still only in the database's write-ahead log is seen."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from real_clients import client
from sse_replay import SSEReplayServer
from test_record_opencode import _sub_agents, project, script, title

from agentrunner import TraceStore
from agentrunner.imports import opencode
from agentrunner.imports.registry import Follower, detect
from tests.imports.conftest import head, kinds, payloads

pytestmark = pytest.mark.slow
CALL_PARTS = {"text", "reasoning", "tool", "step-start", "step-finish"}


def run_opencode(repo: Path, env: dict[str, str], prompt: str, *options: str) -> Path:
    """Run the real opencode once in ``repo``; its database, in the test's own data folder."""
    done = subprocess.run(
        [str(client("opencode")), "run", prompt, "--model", "local/m", *options],
        cwd=repo, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(env["XDG_DATA_HOME"]) / "opencode" / "opencode.db"


def opencode_project(tmp_path: Path, upstream: SSEReplayServer) -> tuple[Path, dict[str, str]]:
    """A repository whose config names ``upstream``, and an environment with a data folder
    of the test's own."""
    repo, env = project(tmp_path, upstream.url)
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), PWD=str(repo))
    return repo, env


def plain_reading(db: Path) -> dict[str, Counter[str]]:
    """Per session: its prompts, model calls (``step-finish`` parts), tool calls and finished
    results, token totals, and the parts no event stands for, read with plain SQL."""
    conn = sqlite3.connect(db)
    counts: dict[str, Counter[str]] = {}
    for (sid,) in conn.execute("SELECT id FROM session"):
        counts[sid] = Counter()
    query = "SELECT m.session_id, m.data, p.data FROM part p JOIN message m ON m.id = p.message_id"
    for sid, message, part in conn.execute(query):
        role, data = json.loads(message)["role"], json.loads(part)
        count = counts[sid]
        kind = data["type"]
        if role == "user":
            count["prompt" if kind == "text" else "raw"] += 1
        elif kind not in CALL_PARTS:
            count["raw"] += 1
        elif kind == "step-finish":
            count["call"] += 1
            tokens = data["tokens"]
            count["input"] += tokens["input"] + tokens["cache"]["read"] + tokens["cache"]["write"]
            count["output"] += tokens["output"] + tokens["reasoning"]
        elif kind == "tool":
            count["tool"] += 1
            count["result"] += data["state"]["status"] in ("completed", "error")
    conn.close()
    return counts


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_real_opencode_database_imports_each_session_with_what_it_holds(
    tmp_path: Path,
) -> None:
    with SSEReplayServer(aside=_sub_agents) as upstream:
        repo, env = opencode_project(tmp_path, upstream)
        database = run_opencode(repo, env, "Use a sub-agent to write sub.txt")
    counted = plain_reading(database)
    assert detect(database) == opencode.NAME and opencode.sniff(database, head(database))
    db = tmp_path / "t.db"
    first = cli(db, "import", "--json", str(database))
    assert first.returncode == 0, first.stderr
    [reports] = [f["sessions"] for f in json.loads(first.stdout)]
    assert len(reports) == len(counted) == 2
    with TraceStore(db) as store:
        for report in reports:
            count = counted[report["session_id"].split("@")[0]]
            episode = report["episode_id"]
            events = kinds(store, episode)
            usage = payloads(store, episode, "usage")
            prompts = [m for m in payloads(store, episode, "message") if m["reason"] == "prompt"]
            assert len(prompts) == count["prompt"] == 1
            assert events["model.request"] == events["model.response"] == count["call"] == 2
            assert events["tool.call"] == count["tool"] == 1
            assert events["tool.result"] == count["result"] == 1
            assert sum(u["input_tokens"] for u in usage) == count["input"] > 0
            assert sum(u["output_tokens"] for u in usage) == count["output"] > 0
            assert report["kept_raw"] == count["raw"]
        parent, child = (store.episode(r["episode_id"]) for r in reports)
        (task,) = payloads(store, parent.episode_id, "tool.call")
    assert task["name"] == "task"
    assert child.env["spawned_by"] == {"episode_id": parent.episode_id, "call_id": "call_m1"}

    again = cli(db, "import", "--json", str(database))
    assert again.returncode == 0, again.stderr
    [second] = [f["sessions"] for f in json.loads(again.stdout)]
    assert [(s["episode_id"], s["events_added"]) for s in second] == [
        (r["episode_id"], 0) for r in reports
    ]
    shown = cli(db, "show", parent.episode_id)
    assert shown.returncode == 0, shown.stderr
    assert "All done." in shown.stdout


def test_an_opencode_database_followed_while_a_session_grows_imports_as_it_does_whole(
    tmp_path: Path,
) -> None:
    with SSEReplayServer(*script(), *script(), aside=title) as upstream:
        repo, env = opencode_project(tmp_path, upstream)
        with TraceStore(tmp_path / "followed.db") as store:
            follower = Follower(store)
            database = run_opencode(repo, env, "copy the notes")
            first = follower.look([database])
            run_opencode(repo, env, "copy them again", "--continue")
            grown = follower.look([database])
            follower.finish()
            follower.close()
            followed = [kinds(store, e.episode_id) for e in store.list_episodes()]
    assert [len(r.sessions) for r in first] == [len(r.sessions) for r in grown] == [1]
    assert grown[0].sessions[0].events > 0  # the session's second prompt and calls
    whole = cli(tmp_path / "whole.db", "import", str(tmp_path / "data"))  # found in its folder
    assert whole.returncode == 0, whole.stderr
    with TraceStore(tmp_path / "whole.db") as store:
        [counted] = [kinds(store, e.episode_id) for e in store.list_episodes()]
    assert followed == [counted] and counted["model.request"] == 4


def completed(database: Path, message_id: str, at: int | None) -> None:
    """Set (or, with None, take away) when an answer of the database was completed."""
    conn = sqlite3.connect(database)
    (data,) = conn.execute("SELECT data FROM message WHERE id = ?", (message_id,)).fetchone()
    message = json.loads(data)
    if at is None:
        del message["time"]["completed"]
    else:
        message["time"]["completed"] = at
    conn.execute("UPDATE message SET data = ? WHERE id = ?", (json.dumps(message), message_id))
    conn.commit()
    conn.close()


def test_an_answer_opencode_has_not_finished_waits_while_followed_then_imports_whole(
    tmp_path: Path,
) -> None:
    with SSEReplayServer(*script(), aside=title) as upstream:
        repo, env = opencode_project(tmp_path, upstream)
        database = run_opencode(repo, env, "copy the notes")
    conn = sqlite3.connect(database)
    last, data = conn.execute("SELECT id, data FROM message ORDER BY id DESC LIMIT 1").fetchone()
    conn.close()
    done_at = json.loads(data)["time"]["completed"]
    running = sqlite3.connect(database)  # opencode's own connection: writes stay in the WAL
    running.execute("SELECT count(*) FROM message").fetchone()
    completed(database, last, None)  # as it is while opencode is still streaming it
    with TraceStore(tmp_path / "followed.db") as store:
        follower = Follower(store)
        follower.look([database])
        [episode] = [e.episode_id for e in store.list_episodes()]
        waiting = kinds(store, episode)
        completed(database, last, done_at)
        follower.look([database])
        finished = kinds(store, episode)  # seen in the WAL, before following stops
        follower.finish()
        follower.close()
        followed = kinds(store, episode)
    running.close()
    whole = cli(tmp_path / "whole.db", "import", str(database))
    assert whole.returncode == 0, whole.stderr
    with TraceStore(tmp_path / "whole.db") as store:
        [counted] = [kinds(store, e.episode_id) for e in store.list_episodes()]
    assert waiting["model.request"] == 1 and counted["model.request"] == 2
    assert finished == followed == counted
