"""The aider chat-history importer, on the ``.aider.chat.history.md`` the real aider writes
beside the repository (two runs, offline against a loopback upstream: one answers with a
SEARCH/REPLACE edit, the other in prose to a prompt of two lines): each run is an episode with
the user inputs and answers a plain reading of the file counts, usage is unknown, aider's notes
are kept raw and counted, a second import adds nothing, and following the file as it grows
imports what importing it whole does."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from real_clients import agent_program, scratch_repo
from sse_replay import Reply, SSEReplayServer
from test_record_python_agents import EDIT, aider_home, chunk, commit_message, environment

from agentrunner import TraceStore
from agentrunner.imports import aider_chat
from agentrunner.imports.registry import Follower, detect
from tests.imports.conftest import head, kinds, payloads

pytestmark = pytest.mark.slow
PROSE = "It says hello world.\n\nNothing else is in it."
PROMPTS = ("say hello to the world", "what does greeting.txt say?\nanswer in prose")


def answer(text: str) -> Reply:
    return Reply(events=[chunk({"role": "assistant", "content": ""}), chunk({"content": text}),
                         chunk({}, "stop"), "data: [DONE]"])  # fmt: skip


def aider_chat_history(tmp_path: Path) -> Path:
    """The chat history two real aider runs in one repository write."""
    aider = agent_program("aider")
    repo = scratch_repo(tmp_path / "repo", {"greeting.txt": "hello\n"})
    aider_home(tmp_path / "home", aider.parent / "python")
    with SSEReplayServer(answer(EDIT), answer(PROSE), aside=commit_message) as upstream:
        env = environment(tmp_path / "home", OPENAI_API_KEY="sk-aider-chat-0123456789",
                          OPENAI_API_BASE=f"{upstream.url}/v1")  # fmt: skip
        for prompt in PROMPTS:
            done = subprocess.run(
                [str(aider), "--model", "openai/gpt-4o", "--yes-always", "--no-check-update",
                 "--no-show-release-notes", "--analytics-disable", "--no-pretty",
                 "--message", prompt, "greeting.txt"],
                cwd=repo, capture_output=True, text=True, timeout=600, env=env,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "greeting.txt").read_text() == "hello world\n"
    return repo / ".aider.chat.history.md"


def plain_reading(path: Path) -> list[dict[str, list[str]]]:
    """Each run of the file (from its ``# aider chat started`` line): its user inputs (runs of
    ``#### `` lines), its notes (runs of ``> `` lines; a note of several lines is ended by two
    spaces, its first line alone has the ``> ``) and its answers (the other lines between
    them), read plainly."""
    runs: list[dict[str, list[str]]] = []
    roles: list[str] = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        before = lines[number - 1] if number else ""
        if line.startswith("# aider chat started at "):
            roles.append("start")
        elif line.startswith("#### "):
            roles.append("user")
        elif line.startswith("> ") or (roles[-1:] == ["note"] and not before.endswith("  ")):
            roles.append("note" if line.strip() else "answer")
        else:
            roles.append("answer")
    for kind, group in itertools.groupby(zip(roles, lines, strict=True), lambda x: x[0]):
        texts = [line for _, line in group]
        if kind == "start":
            runs.extend({"user": [], "note": [], "answer": []} for _ in texts)
            continue
        text = "\n".join(line.removeprefix("#### ").rstrip() for line in texts).strip()
        if text:
            runs[-1][kind].append(text)
    return runs


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_real_aider_chat_history_imports_a_run_per_episode_with_what_the_file_holds(
    tmp_path: Path,
) -> None:
    history = aider_chat_history(tmp_path)
    runs = plain_reading(history)
    assert detect(history) == aider_chat.NAME and aider_chat.sniff(history, head(history))
    db = tmp_path / "t.db"
    first = cli(db, "import", "--json", str(history))
    assert first.returncode == 0, first.stderr
    [reports] = [f["sessions"] for f in json.loads(first.stdout)]
    assert len(reports) == len(runs) == 2
    with TraceStore(db) as store:
        for report, run in zip(reports, runs, strict=True):
            episode = report["episode_id"]
            counted = kinds(store, episode)
            said = [m for m in payloads(store, episode, "message") if m["reason"] == "prompt"]
            answers = [
                store.message(r["message_hash"]).content
                for r in payloads(store, episode, "model.response")
            ]
            usage = payloads(store, episode, "usage")
            assert [store.message(m["message_hash"]).content for m in said] == run["user"]
            assert counted["model.request"] == counted["model.response"] == len(run["answer"])
            assert answers == run["answer"]
            assert all(u["input_tokens"] is None and u["output_tokens"] is None for u in usage)
            assert report["kept_raw"] == len(run["note"]) > 0
    assert [r["user"] for r in runs] == [[p] for p in PROMPTS]
    assert [r["answer"] for r in runs] == [[EDIT.strip()], [PROSE]]

    again = cli(db, "import", "--json", str(history))
    assert again.returncode == 0, again.stderr
    [second] = [f["sessions"] for f in json.loads(again.stdout)]
    assert [(s["episode_id"], s["events_added"]) for s in second] == [
        (r["episode_id"], 0) for r in reports
    ]
    shown = cli(db, "show", reports[1]["episode_id"])
    assert shown.returncode == 0, shown.stderr
    assert "Nothing else is in it." in shown.stdout


def test_an_aider_chat_history_followed_line_by_line_imports_as_the_whole_file_does(
    tmp_path: Path,
) -> None:
    history = aider_chat_history(tmp_path)
    growing = tmp_path / "growing" / ".aider.chat.history.md"
    growing.parent.mkdir()
    growing.write_text("")

    def episodes(store: TraceStore) -> list[list[tuple[str, int]]]:
        return sorted(sorted(kinds(store, e.episode_id).items()) for e in store.list_episodes())

    with TraceStore(tmp_path / "followed.db") as store:
        follower = Follower(store)
        for line in history.read_text().splitlines(keepends=True):
            with growing.open("a") as f:
                f.write(line)
            follower.look([growing.parent])
        follower.finish()
        follower.close()
        followed = episodes(store)
    whole = cli(tmp_path / "whole.db", "import", str(history))
    assert whole.returncode == 0, whole.stderr
    with TraceStore(tmp_path / "whole.db") as store:
        assert followed == episodes(store) and len(followed) == 2
