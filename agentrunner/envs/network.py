"""What ``--network`` opens: the outside world, never the host's loopback.

In bwrap mode a command always has a network namespace of its own. With ``--network``,
slirp4netns connects it to the outside as rootless Podman does (started for each command by
:mod:`agentrunner.envs.netlaunch`, with ``--disable-host-loopback``), so the host's
127.0.0.1 and its abstract unix sockets (which belong to a network namespace) stay out of
reach; DNS goes through slirp4netns's forwarder. Without slirp4netns, and in process mode
(which has no namespaces), a command with the network shares the host's: ``--network`` is
then refused while anything listens on the host's loopback, on any address, or on an
abstract unix socket.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import sys
from pathlib import Path

from agentrunner.values.errors import UsageError

LAUNCHER = Path(__file__).resolve().with_name("netlaunch.py")
_TCP_LISTEN = "0A"
_UDP_UNCONNECTED = "07"
_SHOWN = 4


def slirp4netns_problem() -> str | None:
    """Why slirp4netns cannot give the sandbox a network here (None when it can)."""
    if shutil.which("slirp4netns") is None:
        return "slirp4netns is not installed (Debian/Ubuntu: apt-get install slirp4netns)"
    if os.geteuid() != 0 and not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        return "slirp4netns cannot open /dev/net/tun as your user"
    return None


def launcher(bwrap_argv: list[str]) -> list[str]:
    """``bwrap_argv`` run with slirp4netns as its network (see :mod:`netlaunch`)."""
    resolv = os.path.realpath("/etc/resolv.conf")  # a stub resolver's file may lie in /run
    exe = shutil.which("slirp4netns") or "slirp4netns"
    return [sys.executable, "-I", "-S", str(LAUNCHER), exe, resolv, "--", *bwrap_argv]


def check_shared_network(mode: str) -> None:
    """Refuse a network shared with the host while a service listens on its loopback."""
    services = loopback_services()
    if not services:
        return
    why = "process mode has no network namespace" if mode == "process" else slirp4netns_problem()
    shown = ", ".join(services[:_SHOWN]) + (" ..." if len(services) > _SHOWN else "")
    raise UsageError(
        f"`network` would share the host's network with commands ({why}) and these listen"
        f" on its loopback: {shown}; run without `network`, or in bwrap mode with slirp4netns",
        param="network",
    )


def loopback_services() -> list[str]:
    """Sockets a command sharing this network namespace could reach on the host itself:
    TCP listeners and bound UDP sockets on a loopback or wildcard address, and abstract
    unix sockets."""
    found: list[str] = []
    for proto, state in (("tcp", _TCP_LISTEN), ("udp", _UDP_UNCONNECTED)):
        for version in ("", "6"):
            for address, port in _inet_sockets(Path(f"/proc/net/{proto}{version}"), state):
                if address.is_loopback or address.is_unspecified:
                    found.append(f"{proto} {address}:{port}")
    found += sorted({f"unix {name}" for name in _abstract_sockets()})
    return list(dict.fromkeys(found))


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _inet_sockets(table: Path, state: str) -> list[tuple[Address, int]]:
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[3] != state:
            continue
        hex_address, _, hex_port = fields[1].partition(":")
        out.append((_address(hex_address), int(hex_port, 16)))
    return out


def _address(hex_address: str) -> Address:
    """An address as ``/proc/net/tcp*`` writes it (host-order 32-bit words, in hex)."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if sys.byteorder == "big":
        words = raw
    if len(words) == 4:
        return ipaddress.IPv4Address(words)
    v6 = ipaddress.IPv6Address(words)
    return v6.ipv4_mapped or v6


def _abstract_sockets() -> list[str]:
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return []
    return [f[7] for line in lines if len(f := line.split()) >= 8 and f[7].startswith("@")]
