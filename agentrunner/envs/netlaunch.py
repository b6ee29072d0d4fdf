"""Start one sandboxed command with slirp4netns as its network (run as a script, on the host).

``python -I -S netlaunch.py SLIRP4NETNS RESOLV_DEST -- BWRAP [ARGS...] -- COMMAND...``:
bubblewrap starts with its own network namespace and waits (``--block-fd``) until
slirp4netns has joined that namespace and configured it (``--disable-host-loopback``: the
gateway does not lead to the host's 127.0.0.1); then the command runs, with a
``resolv.conf`` that names slirp4netns's DNS forwarder laid over ``RESOLV_DEST``. When the
command ends (or this launcher dies) slirp4netns ends too. The exit code is bubblewrap's.
Standard library only: it runs outside the sandbox, before anything else is imported.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

DNS = "10.0.2.3"
"""slirp4netns's DNS forwarder, inside the namespace."""
_PR_SET_PDEATHSIG = 1
_NS_GET_USERNS = 0xB701
_SLIRP_GRACE_S = 5.0
_SETUP_S = 60.0


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: netlaunch.py SLIRP4NETNS RESOLV_DEST -- BWRAP ARGS...", file=sys.stderr)
        return 2
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the runner died before the guard was set
        return 1
    slirp, resolv_dest, bwrap = argv[0], argv[1], argv[3:]
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    resolv_r, resolv_w = os.pipe()
    os.write(resolv_w, f"nameserver {DNS}\n".encode())
    os.close(resolv_w)
    at = bwrap.index("--")  # bubblewrap's own separator: its options never hold "--"
    extra = ["--info-fd", str(info_w), "--block-fd", str(block_r)]
    extra += ["--perms", "0644", "--ro-bind-data", str(resolv_r), resolv_dest]
    sandbox = subprocess.Popen(
        [*bwrap[:at], *extra, *bwrap[at:]], pass_fds=(info_w, block_r, resolv_r)
    )
    for fd in (info_w, block_r, resolv_r):
        os.close(fd)
    pid = _child_pid(info_r)
    os.close(info_r)
    if pid is None or not _loopback_up(pid, sandbox) or not _connect(slirp, pid, block_w, sandbox):
        if pid is not None:  # the sandbox's init: its whole PID namespace dies with it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        sandbox.kill()
        code = sandbox.wait()
        return code if pid is None and code > 0 else 1  # bubblewrap's failure, or the helper's
    code = sandbox.wait()
    return 128 - code if code < 0 else code


def _child_pid(info_r: int) -> int | None:
    """The sandbox's pid, from bubblewrap's ``--info-fd`` JSON (None if it failed to start)."""
    data = b""
    while True:
        chunk = os.read(info_r, 4096)
        if not chunk:
            break
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError):
            continue
    return None


def _loopback_up(pid: int, sandbox: subprocess.Popen[bytes]) -> bool:
    """Wait until bubblewrap has brought up the namespace's loopback (it would race with
    slirp4netns configuring the same namespace): 127.0.0.1 then has its local route."""
    deadline = time.monotonic() + _SETUP_S
    while time.monotonic() < deadline and sandbox.poll() is None:
        try:
            with open(f"/proc/{pid}/net/fib_trie", encoding="ascii", errors="replace") as trie:
                if "127.0.0.1" in trie.read():
                    return True
        except OSError:
            return False
        time.sleep(0.002)
    print("agentrunner: the sandbox's network namespace did not come up", file=sys.stderr)
    return False


def _netns_owner(pid: int) -> int:
    """An fd of the user namespace that owns ``pid``'s network namespace (NS_GET_USERNS)."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        return fcntl.ioctl(net, _NS_GET_USERNS)
    finally:
        os.close(net)


def _connect(slirp: str, pid: int, block_w: int, sandbox: subprocess.Popen[bytes]) -> bool:
    """Start slirp4netns on ``pid``'s namespace and let the command run once it is ready."""
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    argv = [slirp, "--configure", "--mtu", "65520", "--disable-host-loopback"]
    argv += ["--enable-sandbox", "--ready-fd", str(ready_w), "--exit-fd", str(exit_r)]
    fds = [ready_w, exit_r]
    if os.geteuid() != 0:  # join the user namespace that owns the network one (bubblewrap
        owner = _netns_owner(pid)  # nests another for the command, so not /proc/PID/ns/user)
        argv += ["--userns-path", f"/proc/self/fd/{owner}"]
        fds.append(owner)
    with tempfile.TemporaryFile() as log:
        helper = subprocess.Popen(
            [*argv, str(pid), "tap0"],
            pass_fds=fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        os.close(ready_w)
        os.close(exit_r)
        ready = os.read(ready_r, 1) == b"1"
        os.close(ready_r)
        if not ready:
            helper.wait()
            log.seek(0)
            why = log.read().decode("utf-8", "replace").strip().splitlines()
            detail = "; ".join(why)[-300:] if why else f"exit code {helper.returncode}"
            print(
                f"agentrunner: slirp4netns could not connect the sandbox: {detail}", file=sys.stderr
            )
            os.close(exit_w)
            return False
    os.write(block_w, b"1")
    os.close(block_w)
    sandbox.wait()
    os.close(exit_w)  # slirp4netns ends when this closes
    try:
        helper.wait(timeout=_SLIRP_GRACE_S)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
