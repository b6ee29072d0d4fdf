"""A provider key planted in a workspace file never reaches the store, raw or encoded.

The key is in the runner's environment (``OPENAI_API_KEY``), never in the sandbox's: the
attacker (a scripted model) reads it from a ``.env`` file the test planted in a repository
or a task's files, and prints it encoded in the ways an attacker tries. Each test reads the
store file's raw bytes (the WAL too) and every snapshot blob.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import sqlite3
import string
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from cli_process import last_json, run_cli
from thirdparty_repo import git

from agentrunner.envs.jail import bwrap_problem

SANDBOX = "bwrap" if bwrap_problem() is None else "process"
MARKER = "[redacted:OPENAI_API_KEY]"
READ_KEY = "k=$(sed -n 's/^OPENAI_API_KEY=//p' .env); "
"""The attacker's first step: the key from the planted file, into a shell variable."""
ROT13_FROM = string.ascii_uppercase + string.ascii_lowercase
ROT13_TO = ROT13_FROM[13:26] + ROT13_FROM[:13] + ROT13_FROM[39:] + ROT13_FROM[26:39]


@pytest.fixture
def key() -> str:
    alphabet = string.ascii_letters + string.digits
    return "sk-test-" + "".join(secrets.choice(alphabet) for _ in range(40))


def script(path: Path, commands: list[str]) -> str:
    """A scripted model that runs ``commands`` (one bash call a turn), then stops."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands
    ]
    turns.append({"text": "done"})
    path.write_text(json.dumps({"name": "t", "episodes": [{"match": "", "turns": turns}]}))
    return f"scripted:{path}"


def run_task(tmp_path: Path, key: str, commands: list[str]) -> tuple[Path, str]:
    """A run on a task whose files hold ``.env`` with the key: (the store, the episode)."""
    tasks = tmp_path / "tasks" / "tasks.json"
    tasks.parent.mkdir()
    files = {".env": f"OPENAI_API_KEY={key}\nDEBUG=1\n", "README.md": "a task\n"}
    tasks.write_text(json.dumps([{"task_id": "t", "prompt": "look around", "files": files}]))
    db = tmp_path / "traces" / "t.db"
    model = script(tmp_path / "script.json", commands)
    proc = run_cli(
        "run", "--tasks", str(tasks), "--task", "t", "--model", model, "--sandbox", SANDBOX,
        "--max-turns", str(len(commands) + 1), "--db", str(db), "--json",
        env={"OPENAI_API_KEY": key},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return db, last_json(proc.stdout)["episode_id"]


def make_repo(folder: Path, key: str) -> Path:
    """A committed git repository whose tracked ``.env`` holds the key."""
    folder.mkdir()
    (folder / ".env").write_text(f"OPENAI_API_KEY={key}\nDEBUG=1\n")
    (folder / "app.py").write_text("print('hello')\n")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "init")
    return folder


def run_repo(tmp_path: Path, key: str, commands: list[str]) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "repo", key)
    db = tmp_path / "traces" / "t.db"
    model = script(tmp_path / "script.json", commands)
    proc = run_cli(
        "run", "--repo", str(repo), "--prompt", "look around", "--model", model,
        "--sandbox", SANDBOX, "--db", str(db), "--json", env={"OPENAI_API_KEY": key},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return db, last_json(proc.stdout)["episode_id"]


def store_bytes(db: Path) -> bytes:
    """The store file's bytes and its WAL's (what any reader of the file can see)."""
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


def blobs(db: Path) -> list[bytes]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT data FROM blobs")]


def observations(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT payload FROM events WHERE kind = 'tool.result' ORDER BY seq")
        return [json.loads(r[0])["observation"] for r in rows]


def assert_no_key(db: Path, key: str) -> None:
    raw = store_bytes(db)
    assert key.encode() not in raw
    assert key[8:].encode() not in raw  # the random part, whatever precedes it
    for blob in blobs(db):
        assert key[8:].encode() not in blob


def diff(db: Path, episode: str) -> str:
    proc = run_cli("diff", episode, "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# -- the key in a workspace file ---------------------------------------------------------------


def test_a_tracked_env_file_in_a_repository_reaches_neither_the_store_nor_diff(
    tmp_path: Path, key: str
) -> None:
    db, episode = run_repo(tmp_path, key, [READ_KEY + "echo ok >> app.py"])
    assert_no_key(db, key)
    patch = diff(db, episode)
    assert "app.py" in patch and key[8:] not in patch


def test_a_task_files_env_in_the_workspace_never_reaches_the_store(
    tmp_path: Path, key: str
) -> None:
    db, episode = run_task(tmp_path, key, [READ_KEY + "echo ok >> README.md"])
    assert_no_key(db, key)
    assert key[8:] not in diff(db, episode)


def test_redacting_an_untouched_env_file_is_no_change_in_diff(tmp_path: Path, key: str) -> None:
    db, episode = run_repo(tmp_path, key, ["echo ok >> app.py"])
    patch = diff(db, episode)
    assert ".env" not in patch and MARKER not in patch
    assert_no_key(db, key)


def test_the_agents_edit_to_a_file_holding_the_key_shows_the_key_as_a_marker(
    tmp_path: Path, key: str
) -> None:
    db, episode = run_repo(tmp_path, key, ["echo EXTRA=1 >> .env"])
    patch = diff(db, episode)
    assert "+EXTRA=1" in patch and f" OPENAI_API_KEY={MARKER}" in patch
    assert key[8:] not in patch


def test_apply_refuses_an_edit_to_a_file_holding_the_key_and_says_why(
    tmp_path: Path, key: str
) -> None:
    db, episode = run_repo(tmp_path, key, ["echo EXTRA=1 >> .env"])
    repo = tmp_path / "repo"
    proc = run_cli("apply", episode, "--to", str(repo), "--db", str(db))
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert ".env, which held a known secret" in proc.stderr
    assert (repo / ".env").read_text() == f"OPENAI_API_KEY={key}\nDEBUG=1\n"


def test_a_copy_of_the_key_into_a_new_file_is_stored_redacted(tmp_path: Path, key: str) -> None:
    db, episode = run_task(tmp_path, key, [READ_KEY + 'printf "%s\\n" "$k" > copy.txt'])
    assert_no_key(db, key)
    assert f"+{MARKER}" in diff(db, episode)


def test_episode_start_says_snapshots_store_secrets_redacted(tmp_path: Path, key: str) -> None:
    db, _ = run_task(tmp_path, key, ["true"])
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT payload FROM events WHERE kind = 'episode.start'").fetchone()
    assert json.loads(row[0])["config"]["snapshot_secrets"] == "redacted"


# -- the key printed encoded ------------------------------------------------------------------

ENCODINGS = {
    "rot13": "tr 'A-Za-z' 'N-ZA-Mn-za-m'",
    "base32": "base32",
    "od-hex-bytes": "od -An -tx1",
    "od-decimal-bytes": "od -An -tu1",
    "gzip-base64": "gzip -n | base64",
    "rev-base64": "rev | base64",
    "a-dot-between-each-pair": "sed 's/./&./g'",
    "percent-encoded": "od -An -tx1 -v | tr -d ' \\n' | sed 's/../%&/g'",
    "xxd": "xxd",
    "hexdump-C": "hexdump -C",
}


def printed(key: str, pipeline: str) -> str:
    """The first line ``pipeline`` prints for ``key``, computed on the host with the same
    tools: what the store must not hold."""
    out = subprocess.run(
        ["bash", "-c", pipeline], input=key, capture_output=True, text=True, check=True
    ).stdout
    line = out.strip().splitlines()[0].strip()
    assert len(line) >= 40, line  # long enough to tell the key apart
    return line


@pytest.mark.parametrize("how", list(ENCODINGS))
def test_a_key_printed_encoded_is_redacted_in_the_tool_result(
    tmp_path: Path, key: str, how: str
) -> None:
    tool = ENCODINGS[how].split()[0]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    db, _ = run_task(tmp_path, key, [f'{READ_KEY}printf %s "$k" | {ENCODINGS[how]}'])
    assert MARKER in observations(db)[0]
    assert printed(key, ENCODINGS[how]).encode() not in store_bytes(db)
    assert_no_key(db, key)


def test_a_key_printed_encoded_into_a_file_is_redacted_in_the_snapshot(
    tmp_path: Path, key: str
) -> None:
    db, _ = run_task(tmp_path, key, [f'{READ_KEY}printf %s "$k" | od -An -tx1 > dump.txt'])
    assert printed(key, "od -An -tx1").encode() not in store_bytes(db)
    assert any(blob.strip() == MARKER.encode() for blob in blobs(db))


def test_a_gzip_file_of_the_key_is_stored_as_a_marker(tmp_path: Path, key: str) -> None:
    db, _ = run_task(tmp_path, key, ["gzip -nk .env"])
    assert not [blob for blob in blobs(db) if blob.startswith(b"\x1f\x8b")]
    assert MARKER.encode() in blobs(db)  # the .env.gz file, stored as the marker alone


# -- the key cut across two tool results -----------------------------------------------------


@pytest.mark.parametrize("cut", [24, 40])
def test_a_key_cut_across_two_tool_results_is_redacted_in_both(
    tmp_path: Path, key: str, cut: int
) -> None:
    first = f'{READ_KEY}printf %s "$k" | head -c {cut}'
    second = f'{READ_KEY}printf %s "$k" | tail -c +{cut + 1}'
    db, _ = run_task(tmp_path, key, [first, second])
    one, two = observations(db)
    assert key[8:cut] not in one and key[cut:] not in two
    assert MARKER in one and MARKER in two


# -- exports ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["sft", "atif"])
def test_an_export_clears_a_key_the_recording_run_did_not_know(
    tmp_path: Path, key: str, fmt: str
) -> None:
    rot13 = key.translate(str.maketrans(ROT13_FROM, ROT13_TO))
    path = tmp_path / "script.json"
    turns = [{"text": f"the key in rot13: {rot13}"}]
    path.write_text(json.dumps({"name": "t", "episodes": [{"match": "", "turns": turns}]}))
    db, out = tmp_path / "t.db", tmp_path / "out.jsonl"
    proc = run_cli(
        "run", "--model", f"scripted:{path}", "--max-turns", "1", "--db", str(db), "--json",
        env={"OPENAI_API_KEY": None},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert rot13.encode() in store_bytes(db)  # recorded where the key was not known
    proc = run_cli(
        "export", "--format", fmt, "-o", str(out), "--db", str(db), "--json",
        env={"OPENAI_API_KEY": key},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert rot13 not in out.read_text() and MARKER in out.read_text()


# -- the agent's private .git (--with-git): the key compressed in git objects ---------------


def uncompressed(blob: bytes, scratch: Path) -> bytes:
    """What git reads from a stored ``.git`` file: a pack's objects (by git itself) or a
    loose object's zlib stream; other files as they are."""
    if blob.startswith(b"PACK"):
        repo = scratch / f"unpack-{secrets.token_hex(4)}.git"
        git(scratch, "init", "-q", "--bare", str(repo))
        pack = repo / "objects" / "pack" / "p.pack"
        pack.write_bytes(blob)
        git(repo, "index-pack", str(pack))
        listed = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
            capture_output=True,
            check=True,
        )
        return listed.stdout
    with contextlib.suppress(zlib.error):
        return zlib.decompress(blob)
    return blob


@pytest.mark.parametrize("packed", [False, True], ids=["loose-objects", "packed"])
def test_the_key_in_the_agents_private_git_objects_never_reaches_the_store(
    tmp_path: Path, key: str, packed: bool
) -> None:
    repo = make_repo(tmp_path / "repo", key)
    if packed:
        git(repo, "gc", "-q")
    db = tmp_path / "traces" / "t.db"
    proc = run_cli(
        "run", "--repo", str(repo), "--with-git", "--prompt", "look", "--model",
        script(tmp_path / "script.json", ["git log --oneline"]), "--sandbox", SANDBOX,
        "--db", str(db), "--json", env={"OPENAI_API_KEY": key},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for blob in blobs(db):
        assert key[8:].encode() not in uncompressed(blob, tmp_path)
