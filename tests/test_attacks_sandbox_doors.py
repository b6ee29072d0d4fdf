"""Doors out of the bubblewrap sandbox that its options opened, each driven as a model would.

``--network`` must give the outside world without the host's loopback or its abstract unix
sockets; ``/dev`` and ``/dev/shm`` are sized from the limits like ``/tmp``; a root runner's
commands run as an unprivileged user; a mounted virtualenv with agentrunner installed does
not show the bundled tasks' hidden tests. Every attack runs through the real runner, with a
scripted model, a real trace store and real bubblewrap.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pg
import pytest
from attack_helpers import (
    DEMO,
    CommandModel,
    act,
    bash,
    case,
    child_runner,
    kill_marked,
    loopback_listener,
    serving_token,
    wait_until,
    workspace,
)
from cli_process import run_cli
from pg import PostgresServer
from procs import all_gone, marker, processes_with

import agentrunner
from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.jail import Limits, SandboxConfig
from agentrunner.envs.network import slirp4netns_problem
from agentrunner.envs.workspace import WorkspaceEnv

PACKAGE = Path(agentrunner.__file__).resolve().parent
AS_ROOT = os.geteuid() == 0
needs_slirp = pytest.mark.skipif(
    slirp4netns_problem() is not None, reason=f"{slirp4netns_problem()}"
)
needs_root = pytest.mark.skipif(not AS_ROOT, reason="the runner is not root: commands run as it")


def observations(
    tmp_path: Path, commands: list[str], *, mode: str = "bwrap", **sandbox: object
) -> list[str]:
    """What each of ``commands`` showed the model, run by the runner in an episode."""
    config = SandboxConfig(mode=mode, **sandbox)  # type: ignore[arg-type]
    env = WorkspaceEnv(sandbox=config)
    with TraceStore(tmp_path / "traces.db") as store, env:
        episode = run_agent_episode(
            env=env, task_id=DEMO, model_fn=CommandModel(commands), store=store
        )
        results = store.events(episode.episode_id, kinds=["tool.result"])
    return [str(r.payload["observation"]) for r in results]


@pytest.fixture
def mounted_dir() -> Iterator[Path]:
    """A world-readable folder outside /tmp (the sandbox's /tmp is its own)."""
    if not os.access("/var/tmp", os.W_OK):
        pytest.skip("/var/tmp is not writable")
    folder = Path(tempfile.mkdtemp(prefix="agentrunner-doors-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# -- 1. --network: the outside, never the host's loopback --------------------------------------

CONNECT = (
    "python -c \"import socket; s = socket.create_connection(('{host}', {port}), timeout=10);"
    ' print(s.recv(100).decode())"'
)
CONNECT_ABSTRACT = (
    'python -c "import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(10);'
    " s.connect('\\0{name}'); print(s.recv(100).decode())\""
)


@needs_slirp
@pytest.mark.parametrize(("mode", "host"), [case("bwrap", "127.0.0.1"), case("bwrap", "10.0.2.2")])
def test_with_network_a_command_cannot_reach_a_listener_on_the_hosts_loopback(
    mode: str, host: str, tmp_path: Path
) -> None:
    with loopback_listener() as (port, token):
        (seen,) = observations(
            tmp_path, [CONNECT.format(host=host, port=port)], mode=mode, network=True
        )
    assert token not in seen


@pytest.fixture
def loopback_store() -> Iterator[tuple[int, str]]:
    """A real Postgres server that also listens on 127.0.0.1 (trust authentication, as
    ``initdb --auth=trust`` sets it up): (port, store URL)."""
    if (why := pg.why_not()) is not None:
        pytest.skip(why)
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed (the attack runs it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = PostgresServer(listen_addresses="'127.0.0.1'", port=port)
    try:
        yield port, f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        server.stop()


PSQL = "psql -h {host} -p {port} -U postgres -Atc \"SELECT 'PWNED-' || current_user\" postgres"


@needs_slirp
@pytest.mark.parametrize(("mode", "host"), [case("bwrap", "127.0.0.1"), case("bwrap", "10.0.2.2")])
def test_with_network_a_command_cannot_reach_a_postgres_store_on_the_hosts_loopback(
    mode: str, host: str, loopback_store: tuple[int, str]
) -> None:
    port, url = loopback_store
    model = CommandModel([PSQL.format(host=host, port=port)])
    env = WorkspaceEnv(sandbox=SandboxConfig(mode="bwrap", network=True))
    with TraceStore(url) as store, env:
        episode = run_agent_episode(env=env, task_id=DEMO, model_fn=model, store=store)
        (result,) = store.events(episode.episode_id, kinds=["tool.result"])
    assert "psql" in result.payload["observation"]  # it ran, and said why it failed
    assert "PWNED-postgres" not in result.payload["observation"]


@contextlib.contextmanager
def abstract_listener() -> Iterator[tuple[str, str]]:
    """An abstract unix socket that sends each client a unique token: (name, token)."""
    name, token = f"agentrunner-test-{uuid.uuid4().hex}", f"hello-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen()
    with serving_token(server, token):
        yield name, token


@needs_slirp
@pytest.mark.parametrize("mode", [case("bwrap")])
def test_with_network_a_command_cannot_reach_an_abstract_unix_socket_of_the_host(
    mode: str, tmp_path: Path
) -> None:
    with abstract_listener() as (name, token):
        (seen,) = observations(tmp_path, [CONNECT_ABSTRACT.format(name=name)], network=True)
    assert token not in seen


SERVE = """
import socket, sys
server = socket.create_server((sys.argv[1], 0))
print(server.getsockname()[1], flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(sys.argv[2].encode() + b"\\n")
    conn.close()
"""


@pytest.fixture
def outside_server() -> Iterator[tuple[str, int, str]]:
    """A TCP server in a network namespace this test makes, joined to the host by a veth
    pair on a /30 of its own: (address, port, token). Everything is removed afterwards."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) is not installed")
    tag = uuid.uuid4().hex[:6]
    ns, host_if, ns_if = f"agentrunner-{tag}", f"arh{tag}", f"arn{tag}"
    net = int(tag[:2], 16)
    host_ip, ns_ip = f"10.231.{net}.1", f"10.231.{net}.2"
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
    server: subprocess.Popen[str] | None = None
    try:
        for command in (
            ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
            ["ip", "link", "set", ns_if, "netns", ns],
            ["ip", "addr", "add", f"{host_ip}/30", "dev", host_if],
            ["ip", "link", "set", host_if, "up"],
            ["ip", "-n", ns, "addr", "add", f"{ns_ip}/30", "dev", ns_if],
            ["ip", "-n", ns, "link", "set", ns_if, "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
        ):
            subprocess.run(command, check=True, capture_output=True)
        token = f"outside-{uuid.uuid4().hex}"
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SERVE, ns_ip, token],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        port = int(server.stdout.readline())
        yield ns_ip, port, token
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@needs_slirp
@pytest.mark.parametrize("mode", [case("bwrap")])
def test_with_network_a_command_reaches_a_server_outside_the_host(
    mode: str, tmp_path: Path, outside_server: tuple[str, int, str]
) -> None:
    address, port, token = outside_server
    (seen,) = observations(tmp_path, [CONNECT.format(host=address, port=port)], network=True)
    assert token in seen


@pytest.mark.parametrize("mode", [case("bwrap")])
def test_without_network_a_command_cannot_reach_a_server_outside_the_host(
    mode: str, tmp_path: Path, outside_server: tuple[str, int, str]
) -> None:
    address, port, token = outside_server
    (seen,) = observations(tmp_path, [CONNECT.format(host=address, port=port)])
    assert token not in seen


@pytest.fixture
def word() -> Iterator[str]:
    """A marker for the processes a test starts; those still alive afterwards are killed."""
    w = marker()
    yield w
    kill_marked(w)


def _children_named(parents: list[int], name: str) -> list[int]:
    """Live processes called ``name`` whose parent is one of ``parents``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)
            comm = fields[0].split("(", 1)[1]
            state, ppid = fields[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue
        if comm == name and int(ppid) in parents and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@needs_slirp
@pytest.mark.parametrize("mode", [case("bwrap")])
def test_with_network_nothing_outlives_a_runner_killed_with_sigkill(mode: str, word: str) -> None:
    command = f"(exec -a {word} sleep 300) &\ntouch started\nsleep 300"
    runner = child_runner(mode, command, dict(os.environ), network=True)
    assert runner.stdout is not None
    ws = Path(runner.stdout.readline().strip())
    try:
        assert wait_until((ws / "started").exists)
        helpers = _children_named(processes_with(word), "slirp4netns")
        assert helpers  # the step's network helper runs
        runner.kill()
        runner.wait(timeout=60)
        assert all_gone(word, patience=3.0)
        assert wait_until(lambda: not [p for p in helpers if Path(f"/proc/{p}").exists()])
    finally:
        runner.kill()
        runner.wait(timeout=60)
        shutil.rmtree(ws.parent, ignore_errors=True)


@pytest.fixture
def path_without_slirp4netns(tmp_path: Path) -> str:
    """A PATH that has bubblewrap (with setpriv, and true for its probe) but no slirp4netns."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("bwrap", "setpriv", "true"):
        if (found := shutil.which(tool)) is not None:
            (folder / tool).symlink_to(found)
    return str(folder)


@pytest.mark.parametrize(("mode",), [case("bwrap"), case("process")])
def test_network_sharing_the_hosts_namespace_is_refused_while_loopback_has_a_listener(
    mode: str, tmp_path: Path, path_without_slirp4netns: str
) -> None:
    db = tmp_path / "t.db"
    with loopback_listener() as (port, _):
        proc = run_cli(
            *("run", "--db", str(db), "--sandbox", mode, "--network"),
            env={"PATH": path_without_slirp4netns, "AGENTRUNNER_SANDBOX": None},
        )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "--network" in line]
    assert f"127.0.0.1:{port}" in line
    assert ("slirp4netns is not installed" if mode == "bwrap" else "process mode") in line


# -- 2. /dev, /dev/shm and /tmp are sized from the limits --------------------------------------

FILL = (
    "n=0; for i in $(seq 1 8); do head -c 8000000 /dev/zero > {folder}/f$i && n=$((n+1));"
    " done; echo wrote $n"
)
"""Eight files of 8 MB, each under the 16 MB file-size limit: 64 MB in all."""


@pytest.mark.parametrize(("mode", "folder"), [case("bwrap", "/dev/shm"), case("bwrap", "/tmp")])
def test_a_command_cannot_write_more_than_the_file_size_limit_into_a_memory_folder(
    mode: str, folder: str
) -> None:
    with workspace(mode, limits=Limits(file_size_mb=16, memory_mb=256)) as env:
        observation = bash(env, FILL.format(folder=folder)).observation
    written = int(observation.split("wrote ")[1].split()[0])
    assert 8_000_000 * written <= 16 << 20


@pytest.mark.parametrize("mode", [case("bwrap")])
def test_a_command_cannot_write_files_into_dev(mode: str) -> None:
    with workspace(mode) as env:
        observation = bash(env, "echo x > /dev/agentrunner-file && echo WROTE").observation
    assert "WROTE" not in observation


# -- 3. a root runner's commands run as an unprivileged user -----------------------------------


@needs_root
@pytest.mark.parametrize("mode", [case("bwrap")])
def test_as_root_a_command_cannot_read_a_root_only_file_in_a_mounted_folder(
    mode: str, tmp_path: Path, mounted_dir: Path
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    private = mounted_dir / "private"
    private.write_text(secret + "\n")
    private.chmod(0o600)
    (seen,) = observations(tmp_path, [f"id; cat {private}"], mounts=(str(mounted_dir),))
    assert secret not in seen


@needs_root
@pytest.mark.parametrize("mode", [case("bwrap")])
def test_as_root_a_command_runs_with_a_uid_other_than_root(mode: str, tmp_path: Path) -> None:
    (seen,) = observations(tmp_path, ["id -u"])
    assert seen.splitlines()[0] != "0"


@pytest.mark.parametrize("mode", [case("bwrap")])
def test_a_command_changes_files_the_runner_wrote_and_the_runner_reads_what_it_made_private(
    mode: str,
) -> None:
    with workspace(mode) as env:
        act(env, "write_file", path="notes.txt", content="by the runner\n")
        changed = bash(env, "echo by the agent >> notes.txt && mkdir -m 700 p && echo s > p/f")
        bash(env, "chmod 600 p/f notes.txt")
        assert changed.info["exit_code"] == 0
        assert act(env, "read_file", path="p/f").observation.endswith("s\n")
        assert "by the agent" in act(env, "read_file", path="notes.txt").observation


# -- 4. the bundled tasks' hidden tests inside a mounted tree ----------------------------------

FIND_DATA = (
    "import importlib.util as u, pathlib as p; "
    "d = p.Path(u.find_spec('agentrunner').submodule_search_locations[0]) / 'envs/data/demo-mean'; "
    "[print(f.read_text()) for f in sorted(d.glob('*/*.py'))]"
)


def _hidden_test_line() -> str:
    """A line of demo-mean's hidden tests that its visible files do not hold."""
    task = PACKAGE / "envs" / "data" / DEMO
    visible = {
        line.strip() for f in (task / "repo").rglob("*.py") for line in f.read_text().split("\n")
    }
    lines = [
        line.strip()
        for f in sorted((task / "hidden").rglob("*.py"))
        for line in f.read_text().split("\n")
        if len(line.strip()) >= 12 and line.strip() not in visible
    ]
    return lines[0]


def _venv(folder: Path) -> Path:
    """A virtualenv made here by the runner's base Python, without pip."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = folder.glob("lib/python3*/site-packages")
    return site


def _install_copy(target: Path) -> None:
    """The agentrunner package copied to ``target`` (as a wheel install lays it out)."""
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))


@pytest.mark.parametrize(("mode", "how"), [case("bwrap", "installed"), case("bwrap", "editable")])
def test_a_mounted_virtualenv_with_agentrunner_does_not_show_the_hidden_tests(
    mode: str, how: str, tmp_path: Path, mounted_dir: Path
) -> None:
    venv = mounted_dir / "venv"
    site = _venv(venv)
    mounts = [str(venv)]
    if how == "installed":
        _install_copy(site / "agentrunner")
    else:  # a source checkout in another mounted folder, named by the venv's .pth file
        source = mounted_dir / "projects" / "checkout"
        _install_copy(source / "agentrunner")
        (site / "__editable__.agentrunner-0.pth").write_text(f"{source}\n")
        mounts.append(str(mounted_dir / "projects"))
    hidden = "*/demo-mean/hidden/*.py"
    commands = [
        f'{venv}/bin/python -c "{FIND_DATA}"',
        f"cat $(find {mounted_dir} -path '{hidden}')",
    ]
    seen = observations(tmp_path, commands, mounts=tuple(mounts))
    assert [o for o in seen if _hidden_test_line() in o] == []
