"""The README's "Scaling out" commands, run as printed against a default Postgres server and a
Ray cluster started with ``ray start --head --block`` and token auth: a database made with
``initdb``/``pg_ctl``/``createdb``, a head and a second node, a batch of 64 at concurrency 64
(more than Postgres' default ``max_connections`` would take at two per episode), a fan-out,
the listings, stopping the head and the node by their PIDs, and ``copy`` both ways.

The block is read from the README, so the test fails when the README drifts from what runs.
What it changes, each named in :data:`EDITS` and checked to be there: the model (the offline
scripted one instead of an API's), the Postgres binaries' folder and version, the server's
port and socket folder (free ones, so no server of the machine is touched), the head's host,
the token (generated as the README's section "Ray's doors" says), and the ids the README
leaves to the reader. ``agentrunner tui`` is started headless in-process instead (a terminal
app). As root, the server's commands run as the ``postgres`` user (Postgres refuses root).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pg
import pytest

from agentrunner import TraceStore
from agentrunner.envs.tasks import get_task
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.episodes import EpisodesTable

pytest.importorskip("ray", reason="Ray is not installed (pip install 'agentrunner[ray]')")
pytestmark = [pytest.mark.slow, pytest.mark.anyio]

README = Path(__file__).resolve().parents[1] / "README.md"
SEEDS = 64


def _block() -> str:
    text = README.read_text()
    section = text[text.index("## Scaling out") :]
    start = section.index("```\n") + 4
    return section[start : section.index("```", start)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _edits(home: Path, as_postgres: str) -> list[tuple[str, str]]:
    pg_bin = pg.binaries()
    assert pg_bin is not None
    return [
        ("/usr/lib/postgresql/15/bin/initdb", f"{as_postgres}{pg_bin}/initdb"),
        (
            "/usr/lib/postgresql/15/bin/pg_ctl -D ~/agentrunner-pg -l ~/agentrunner-pg.log start",
            f"{as_postgres}{pg_bin}/pg_ctl -D ~/agentrunner-pg -l ~/agentrunner-pg.log -w"
            f' -o "-k {home}" start',
        ),
        ("RAY_AUTH_TOKEN=...", "RAY_AUTH_TOKEN=$(ray get-auth-token --generate | tail -n 1)"),
        (
            "echo $! > ~/ray-head.pid\n",
            "echo $! > ~/ray-head.pid\n"
            "until ray status --address 127.0.0.1:6379 >/dev/null 2>&1; do sleep 1; done\n",
        ),
        ("HEAD_HOST:6379", "127.0.0.1:6379"),
        (
            "--seeds 0-63 --concurrency 64 --model openai:gpt-5-mini --ray auto",
            f"--seeds 0-{SEEDS - 1} --concurrency 64 --model scripted:demo --ray auto\n"
            "EP=$(agentrunner ls --json | python -c"
            " 'import json, sys; print(json.load(sys.stdin)[0][\"episode_id\"])')",
        ),
        ("agentrunner fanout EP ", 'agentrunner fanout "$EP" --model scripted:demo '),
        ("agentrunner tui\n", ""),
        (
            'kill "$(cat ~/ray-head.pid)"\n',
            'kill "$(cat ~/ray-head.pid)"\nkill "$(cat ~/ray-node.pid)"\n'
            'while kill -0 "$(cat ~/ray-head.pid)" 2>/dev/null; do sleep 0.2; done\n',
        ),
        (
            "agentrunner copy --from ~/.local/share",
            "agentrunner run --db ~/.local/share/agentrunner/traces.db >/dev/null\n"
            "agentrunner copy --from ~/.local/share",
        ),
        ("traces/mine.db 01J...", 'traces/mine.db "$EP"'),
    ]


def test_the_scaling_out_commands_run_as_printed(tmp_path: Path) -> None:
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(f"no Postgres server: {reason}")
    home = Path(tempfile.mkdtemp(prefix="agentrunner-readme-"))  # the server's user enters it
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PGPORT": str(_free_port()),  # the server's port and the clients' (libpq reads it)
        "PGHOST": "localhost",  # createdb: over TCP, as the README's URL (the socket moved)
        "AGENTRUNNER_SCRIPTED_PACE": "0.002",
    }
    for name in ("AGENTRUNNER_DB", "XDG_DATA_HOME", "RAY_ADDRESS"):
        env.pop(name, None)  # the README's defaults, not the test session's
    as_postgres = ""
    if os.geteuid() == 0:  # Postgres refuses root: its commands run as its own user
        entry = pwd.getpwnam("postgres")
        os.chown(home, entry.pw_uid, entry.pw_gid)
        home.chmod(0o777)
        as_postgres = "runuser -u postgres -- "
        env["USER"] = env["PGUSER"] = "postgres"
    else:
        env["PGUSER"] = env.get("USER") or pwd.getpwuid(os.getuid()).pw_name
    script = _block()
    assert script.startswith("pip install -e '.[postgres,ray]'")
    script = script.split("\n", 1)[1]  # installed already: the extras are checked below
    for old, new in _edits(home, as_postgres):
        assert old in script, f"the README's Scaling-out block no longer says {old!r}"
        script = script.replace(old, new)
    work = tmp_path / "work"
    work.mkdir()
    (work / "tasks.jsonl").write_text(get_task("demo-mean").model_dump_json() + "\n")
    runner = subprocess.run(
        ["bash", "-euxo", "pipefail", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    try:
        log = home / "agentrunner-pg.log"
        server_log = log.read_text()[-2000:] if log.exists() else ""
        assert runner.returncode == 0, (runner.stdout[-4000:], runner.stderr[-6000:], server_log)
        out = runner.stdout
        assert f"{SEEDS}/{SEEDS} completed" in out, out[-3000:]
        assert re.search(r"fork group \S+ at turn 4 of", out), out[-3000:]
        assert len(re.findall(r"^ *\d+\. candidate ", out, re.MULTILINE)) == 3  # -k 3
        url = f"postgresql://{env['PGUSER']}@localhost:{env['PGPORT']}/agentrunner"
        with TraceStore(url) as store:
            episodes = store.list_episodes()
            batches = store.list_batches()
        batch = next(b for b in batches if b.pairs == SEEDS)
        assert batch.episodes == SEEDS
        assert sum(e.status == "completed" for e in episodes) >= SEEDS + 1  # and the local run
        with TraceStore(work / "traces" / "mine.db") as mine:
            assert len(mine.list_episodes()) >= 1
        for pid_file in ("ray-head.pid", "ray-node.pid"):  # each stopped by its own PID
            _gone(int((home / pid_file).read_text()))
    finally:
        pg_ctl = pg.binaries()
        data = home / "agentrunner-pg"
        if pg_ctl is not None and (data / "postmaster.pid").exists():
            command = [str(pg_ctl / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
            subprocess.run(
                (["runuser", "-u", "postgres", "--"] if as_postgres else []) + command,
                capture_output=True,
                check=False,
            )
        shutil.rmtree(home, ignore_errors=True)


def _job_line() -> str:
    text = README.read_text()
    section = text[text.index("- **A driver that outlives the shell.**") :]
    block = section[section.index("```\n") + 4 :]
    line = block.splitlines()[0].strip()
    assert line.startswith("ray job submit "), line
    return line


def test_the_driver_runs_as_a_ray_job_as_printed(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    dashboard = _free_port()
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "AGENTRUNNER_DB": pg_url,  # exported before `ray start`: the job inherits it
        "AGENTRUNNER_SCRIPTED_PACE": "0.002",
        "RAY_AUTH_MODE": "token",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.pop("RAY_ADDRESS", None)
    token = subprocess.run(
        ["ray", "get-auth-token", "--generate"], env=env, capture_output=True, text=True
    )
    env["RAY_AUTH_TOKEN"] = token.stdout.strip().splitlines()[-1]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(get_task("demo-mean").model_dump_json() + "\n")
    line = _job_line()
    for old, new in [
        ("http://HEAD_HOST:8265", f"http://127.0.0.1:{dashboard}"),
        ("/shared/tasks.jsonl", str(tasks)),
        ("--seeds 0-63 --concurrency 64", "--seeds 0-7 --concurrency 8 --model scripted:demo"),
    ]:
        assert old in line, f"the README's job line no longer says {old!r}"
        line = line.replace(old, new)
    head = subprocess.Popen(
        ["ray", "start", "--head", "--port", str(_free_port()), "--dashboard-host", "127.0.0.1",
         "--dashboard-port", str(dashboard), "--block"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        listing = ["ray", "job", "list", "--address", f"http://127.0.0.1:{dashboard}"]
        while subprocess.run(listing, env=env, capture_output=True).returncode != 0:
            assert head.poll() is None, "the head stopped"
            time.sleep(1)
        job = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert job.returncode == 0, (job.stdout[-3000:], job.stderr[-3000:])
        assert "8/8 completed" in job.stdout + job.stderr
        assert "succeeded" in job.stdout + job.stderr
    finally:
        head.terminate()
        head.wait(120)
    with TraceStore(pg_url) as store:
        episodes = store.list_episodes()
    assert len(episodes) == 8 and all(e.status == "completed" for e in episodes)


def _gone(pid: int) -> None:
    """Wait until ``pid`` has exited (the deadline only bounds a failing test)."""
    deadline = time.monotonic() + 120
    while Path(f"/proc/{pid}").exists():
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rindex(")") + 2] in "ZX":
            return
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.2)


async def test_the_tui_step_lists_a_team_store(pg_url: str) -> None:
    """Step 4's ``agentrunner tui`` on a Postgres store, headless."""
    with TraceStore(pg_url) as store:
        store.create_episode(task_id="demo-mean", seed=0, env={}, model={})
    app = AgentRunnerApp(pg_url)
    async with app.run_test(size=(120, 30)) as pilot:
        while app.screen.query(EpisodesTable).first().row_count != 1:
            await pilot.pause(0.05)
