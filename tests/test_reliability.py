"""Faults found by an adversarial pass, replayed through the real CLI: model output that could
wedge an episode, racing resumers, kills between events that belong together, and a store
that is deleted, full or read-only under a run."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import TraceStore

AS_ROOT = os.geteuid() == 0


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, cwd=cwd)


class Run:
    """A CLI run in the background; its live view (stderr) goes to a file, since an unread
    pipe would fill and block it."""

    def __init__(self, *args: str, stderr: Path, pace: str = "0.02") -> None:
        env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": pace}
        self.stderr_path = stderr
        with stderr.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentrunner.cli.main", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )

    def finish(self) -> tuple[int, str, str]:
        out, _ = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, self.stderr_path.read_text()


def last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


def script(path: Path, turns: list[dict[str, Any]]) -> str:
    """A scripted model (the JSON may hold escapes Python reads as lone surrogates)."""
    path.write_text(json.dumps({"name": "t", "episodes": [{"match": "", "turns": turns}]}))
    return f"scripted:{path}"


def events(db: Path, episode: str, kind: str) -> list[dict[str, Any]]:
    with TraceStore(db, create=False) as store:
        return [r.payload for r in store.iter_events(episode) if r.kind == kind]


def wait_for_events(db: Path, count: int, run: Run) -> None:
    """Until the run has recorded ``count`` events (it must not have died before)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if run.proc.poll() is not None:
            raise AssertionError(f"the run ended early: {run.stderr_path.read_text()[-2000:]}")
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM events").fetchone()[0] >= count:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.01)
    raise AssertionError("the run recorded nothing")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "t.db"


# -- R1: any text a model or an environment produces is recordable ------------------------


def test_lone_surrogates_in_streamed_text_and_tool_arguments_are_recorded_replaced(
    db: Path, tmp_path: Path
) -> None:
    model = script(
        tmp_path / "s.json",
        [
            {
                "text": "half a pair: \ud800 here",
                "tool_calls": [{"name": "bash", "arguments": {"command": "echo '\udc80x'"}}],
            },
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ],
    )
    proc = cli("run", "--model", model, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    episode = last_json(proc.stdout)["episode_id"]
    chunks = [c for c in events(db, episode, "model.chunk") if "\ufffd" in c["text"]]
    assert chunks and all(c["replaced_chars"] >= 1 for c in chunks)
    (call, _) = events(db, episode, "tool.call")
    assert "\ufffd" in call["arguments"]
    assert events(db, episode, "model.response")[0]["replaced_chars"] == 2


def test_a_file_name_that_is_not_utf8_is_listed_escaped_and_the_run_goes_on(
    db: Path, tmp_path: Path
) -> None:
    model = script(
        tmp_path / "s.json",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "touch $'caf\\xe9.txt'"}}]},
            {"tool_calls": [{"name": "list_files", "arguments": {}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ],
    )
    proc = cli("run", "--model", model, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    episode = last_json(proc.stdout)["episode_id"]
    listing = events(db, episode, "tool.result")[1]["observation"]
    assert "caf\\xe9.txt" in listing.splitlines()


def test_a_command_too_long_for_the_os_is_an_error_the_model_reads(
    db: Path, tmp_path: Path
) -> None:
    long = "echo " + "x" * 200_000
    model = script(
        tmp_path / "s.json",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": long}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ],
    )
    proc = cli("run", "--model", model, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    episode = last_json(proc.stdout)["episode_id"]
    first = events(db, episode, "tool.result")[0]
    assert first["observation"].startswith("error: bash: the command is 200005 bytes")
    assert last_json(proc.stdout)["status"] == "completed"


# -- R6: what is recorded is capped -----------------------------------------------------------


def test_a_huge_path_in_a_tool_error_is_capped(db: Path, tmp_path: Path) -> None:
    model = script(
        tmp_path / "s.json",
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "a/" * 2_000_000}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ],
    )
    proc = cli("run", "--model", model, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    episode = last_json(proc.stdout)["episode_id"]
    result = events(db, episode, "tool.result")[0]
    assert len(result["observation"].encode()) < 110_000
    assert len((result["error"] or "").encode()) < 110_000


NOISE = "head -c 300000 /dev/zero; head -c 300000 /dev/urandom"


def test_binary_output_is_recorded_within_the_cap(db: Path, tmp_path: Path) -> None:
    model = script(
        tmp_path / "s.json",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": NOISE}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ],
    )  # fmt: skip
    proc = cli("run", "--model", model, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    episode = last_json(proc.stdout)["episode_id"]
    with sqlite3.connect(db) as conn:
        (size,) = conn.execute(
            "SELECT max(length(CAST(payload AS BLOB))) FROM events WHERE episode_id = ?"
            " AND kind = 'tool.result'",
            (episode,),
        ).fetchone()
    assert size < 110_000


# -- R5: no secret reaches the store, in any field or form ----------------------------------

SECRET = "sk-test-Zq8vN2xLp4RtY7wK9mB3cD5fG"
PEEK = "echo $OPENAI_API_KEY; cat k.txt | xxd -p"


def test_a_model_that_echoes_or_encodes_a_key_stores_none_of_its_forms(
    db: Path, tmp_path: Path
) -> None:
    encoded = base64.b64encode(SECRET.encode()).decode()
    model = script(
        tmp_path / "s.json",
        [
            {
                "reasoning": f"the key is {SECRET}",
                "text": f"reversed {SECRET[::-1]} and upper {SECRET.upper()}",
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "k.txt", "content": SECRET}},
                    {"name": "bash", "arguments": {"command": f"echo {encoded} | base64 -d"}},
                ],
            },
            {"tool_calls": [{"name": "bash", "arguments": {"command": PEEK}}]},
            {"tool_calls": [{"name": "submit", "arguments": {}}]},
        ],
    )  # fmt: skip
    proc = cli("run", "--model", model, "--db", str(db), "--json", env={"OPENAI_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in db.parent.glob("t.db-*"))
    forms = [SECRET, SECRET[::-1], SECRET.upper(), encoded, SECRET.encode().hex()]
    for form in forms:
        assert form.encode() not in raw, form
    assert b"[redacted:OPENAI_API_KEY]" in raw


def test_a_secret_split_across_streamed_chunks_is_redacted_in_each(
    db: Path, tmp_path: Path
) -> None:
    model = script(tmp_path / "s.json", [{"text": f"here: {SECRET} done"}])
    proc = cli(
        "run", "--model", model, "--db", str(db), "--max-turns", "1", "--json",
        env={"ANTHROPIC_API_KEY": SECRET},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    episode = last_json(proc.stdout)["episode_id"]
    chunks = [c["text"] for c in events(db, episode, "model.chunk")]
    assert len(chunks) > 2  # the scripted model streams in pieces of about 16 characters
    joined = "".join(chunks)
    assert SECRET[:6] not in joined and SECRET[-6:] not in joined


# -- R2: one resumer per episode --------------------------------------------------------------


def _episode_without_its_end(db: Path, tmp_path: Path) -> str:
    """An episode whose writer died right after its last step, before its episode.end."""
    child = f"""
import os, signal, sys
from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

def observer(seq, turn, payload):
    if payload.kind == "tool.result" and payload.done:
        print(f"EPISODE {{sys.argv[1]}}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

with TraceStore({str(db)!r}) as store, WorkspaceEnv() as env:
    run_agent_episode(env=env, task_id="demo-mean", model_fn=ScriptedModel("demo", pace=0),
                      store=store, observer=observer)
"""
    proc = subprocess.run([sys.executable, "-c", child, "x"], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with TraceStore(db) as store:
        (episode,) = store.list_episodes()
    assert episode.status == "interrupted"
    return episode.episode_id


def test_concurrent_resumes_of_one_episode_let_exactly_one_write(db: Path, tmp_path: Path) -> None:
    episode = _episode_without_its_end(db, tmp_path)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: cli("resume", episode, "--db", str(db)), range(4)))
    assert sorted(r.returncode for r in results) == [0, 2, 2, 2]
    with TraceStore(db) as store:
        kinds = [r.kind for r in store.iter_events(episode)]
    assert kinds.count("resume") == 1 and kinds.count("episode.end") == 1


# -- R3: a kill between events that belong together loses nothing --------------------------

KILL_AT = r"""
import os, signal, sys
from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

db, kind, nth, max_turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
seen = [0]

def observer(seq, turn, payload):
    if payload.kind == kind:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)

with TraceStore(db) as store, WorkspaceEnv() as env:
    run_agent_episode(env=env, task_id="demo-mean", model_fn=ScriptedModel("demo", pace=0),
                      store=store, observer=observer, max_turns=max_turns)
"""


def _killed(db: Path, kind: str, nth: int, max_turns: int = 100) -> str:
    argv = [sys.executable, "-c", KILL_AT, str(db), kind, str(nth), str(max_turns)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with TraceStore(db) as store:
        (episode,) = store.list_episodes()
    return episode.episode_id


def test_a_kill_right_after_a_response_keeps_its_usage(db: Path, tmp_path: Path) -> None:
    reference = tmp_path / "ref.db"
    ref = last_json(cli("run", "--db", str(reference), "--json").stdout)
    episode = _killed(db, "model.response", 3)
    usage = events(db, episode, "usage")
    assert len(usage) == len(events(db, episode, "model.response"))
    resumed = last_json(cli("resume", episode, "--db", str(db), "--json").stdout)
    assert resumed["tokens"]["input"] == ref["tokens"]["input"]


def test_a_kill_right_after_the_start_keeps_the_turn_limit(db: Path, tmp_path: Path) -> None:
    episode = _killed(db, "episode.start", 1, max_turns=3)
    resumed = last_json(cli("resume", episode, "--db", str(db), "--json").stdout)
    assert (resumed["stop_reason"], resumed["turns"]) == ("max_turns", 3)


# -- R4: the store fails under the run ------------------------------------------------------


def test_a_store_deleted_during_a_run_ends_it_with_a_clear_error(db: Path, tmp_path: Path) -> None:
    run = Run("run", "--db", str(db), "--json", stderr=tmp_path / "err.txt")
    wait_for_events(db, 5, run)
    for path in db.parent.glob("t.db*"):
        path.unlink()
    code, out, err = run.finish()
    assert code == 1 and "Traceback" not in err
    assert "was deleted while this run was writing to it" in err
    assert last_json(out)["exit_code"] == 1


@pytest.fixture
def small_mount(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs (root only)."""
    if not AS_ROOT or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_is_a_clear_error_and_the_episode_resumes_after(
    small_mount: Path, tmp_path: Path
) -> None:
    db = small_mount / "t.db"
    assert cli("run", "--db", str(db)).returncode == 0  # a store to fill
    ballast = small_mount / "ballast"
    run = Run("run", "--db", str(db), "--json", stderr=tmp_path / "err.txt", pace="0.01")
    wait_for_events(db, 150, run)
    # unbuffered: a buffered file would keep the bytes the full disk refused and raise again
    # when closed, outside pytest.raises
    with ballast.open("wb", buffering=0) as fh, pytest.raises(OSError):
        while True:
            fh.write(b"\0" * 65536)
    code, _, err = run.finish()
    assert code == 1 and "Traceback" not in err, err
    assert "full" in err
    ballast.unlink()
    episode = last_json(cli("ls", "--db", str(db), "--json").stdout)[0]["episode_id"]
    resumed = cli("resume", episode, "--db", str(db), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["status"] == "completed"


def test_a_read_only_store_is_a_clear_error_for_run(small_mount: Path) -> None:
    db = small_mount / "t.db"
    assert cli("run", "--db", str(db)).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_mount)], check=True)
    proc = cli("run", "--db", str(db))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "read-only" in proc.stderr or "readonly" in proc.stderr


def test_a_damaged_store_is_a_clear_error_for_every_read(db: Path) -> None:
    assert cli("run", "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    # Scribble over every page after the first three, cells included (a page's cells sit at
    # its end: damage in its free space alone is invisible to any reader).
    for offset in range(4096 * 3, len(data), 4096):
        data[offset + 100 : offset + 4096] = os.urandom(3996)
    db.write_bytes(bytes(data))
    for command in (["ls"], ["show", "01"], ["export", "--format", "sft"]):
        proc = cli(*command, "--db", str(db))
        assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, (command, proc.stderr)


# -- R7: a task whose verifier cannot start fails once, clearly -----------------------------


def test_a_missing_verifier_program_fails_the_episode_instead_of_interrupting_it(
    db: Path, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps(
            [
                {
                    "task_id": "t",
                    "prompt": "p",
                    "files": {"a.py": ""},
                    "verifier": ["no-such-program-x"],
                }
            ]
        )
    )
    model = script(tmp_path / "s.json", [{"tool_calls": [{"name": "submit", "arguments": {}}]}])
    proc = cli(
        "run", "--tasks", str(tasks), "--task", "t", "--model", model, "--db", str(db), "--json"
    )
    assert proc.returncode == 1 and "no-such-program-x" in proc.stderr + proc.stdout
    assert last_json(proc.stdout)["status"] == "failed"
    episode = last_json(proc.stdout)["episode_id"]
    again = cli("resume", episode, "--db", str(db))
    assert again.returncode == 2 and "non-retryable" in again.stderr


def test_the_resume_event_names_the_last_seq_of_any_kind(db: Path) -> None:
    episode = _killed(db, "model.chunk", 40)
    with TraceStore(db) as store:
        last = store.episode(episode).last_seq
    cli("resume", episode, "--db", str(db))
    (resume,) = events(db, episode, "resume")
    assert resume["from_seq"] == last
