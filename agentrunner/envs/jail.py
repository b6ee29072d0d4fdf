"""The workspace sandbox policy: bubblewrap when it works, plain process confinement when not.

A :class:`Jail` turns a command into what actually runs. In ``bwrap`` mode that is a
bubblewrap command line: new user (for a root runner: commands run as ``nobody`` instead,
see :mod:`sandbox_user`), PID, IPC, UTS, cgroup and network namespaces (``network``
connects the last through slirp4netns, see :mod:`network`), every capability dropped, the
system folders read-only, ``/dev`` read-only, ``/tmp`` and ``/dev/shm`` as tmpfs sized from
the limits, ``/proc`` of the sandbox only, the workspace at ``/workspace`` as the only
writable path, and ``--die-with-parent`` so nothing outlives the runner. What the sandbox
must never see (the trace store and its folder, the runner's installation and virtualenv,
the tasks' hidden files, other installations' task data, ``$HOME``, the user's repository)
is never bound in, and is covered by an empty tmpfs where it lies below a folder that is.
``process`` mode runs the command as the runner's user in its own process group (the
confinement of earlier versions).

Both modes set the resource limits of :class:`Limits` (CPU time, memory, file size as
rlimits; processes through a cgroup when one can be made, else ``RLIMIT_NPROC``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import agentrunner
import providers
from agentrunner.envs import network as net
from agentrunner.envs.cgroups import StepCgroup
from agentrunner.envs.sandbox_user import (
    SANDBOX_UID,
    SETPRIV_CAPS,
    drops_to_sandbox_user,
    hand_over,
    setpriv_prefix,
    setpriv_problem,
)
from agentrunner.envs.task_data import task_data_copies
from agentrunner.values.errors import UsageError

Mode = Literal["bwrap", "process"]
WORKSPACE = "/workspace"
HIDDEN = "/hidden"
VERIFIER = "/verifier"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "ssh", "ssl/private")
_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
PROCESS_MODE_WARNING = (
    "{reason}: commands run with process-group confinement only; they can read and change any"
    " file your user can (the trace store, $HOME, the runner's installation, the hidden tests"
    " while they run), see other processes and their environment, reach the network, and"
    " background processes started with setsid (or any, if the runner is killed) may outlive"
    " a step; as root the process limit is not enforced"
)


@dataclass(frozen=True)
class Limits:
    """Per-command resource limits (each process gets the CPU, memory and file-size caps)."""

    cpu_seconds: int = 600
    memory_mb: int = 8192
    processes: int = 512
    file_size_mb: int = 2048
    workspace_mb: int = 1024
    """The most bytes of files a workspace snapshot may hold (a step past it is undone)."""

    def __post_init__(self) -> None:
        for name, value in self.to_dict().items():
            if not isinstance(value, int) or value < 1:
                raise UsageError(f"sandbox limit {name} must be a positive integer, not {value!r}")

    def to_dict(self) -> dict[str, int]:
        return {
            "cpu_seconds": self.cpu_seconds,
            "memory_mb": self.memory_mb,
            "processes": self.processes,
            "file_size_mb": self.file_size_mb,
            "workspace_mb": self.workspace_mb,
        }


@dataclass(frozen=True)
class SandboxConfig:
    """How workspace commands are confined (recorded in ``episode.start``)."""

    mode: Mode | Literal["auto"] = "auto"
    network: bool = False
    mounts: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "network": self.network,
            "mounts": list(self.mounts),
            "limits": self.limits.to_dict(),
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any] | None) -> SandboxConfig:
        if not value:
            return cls(mode="process")  # episodes recorded before the sandbox existed
        return cls(
            mode=value.get("mode", "auto"),
            network=bool(value.get("network", False)),
            mounts=tuple(value.get("mounts") or ()),
            limits=Limits(**(value.get("limits") or {})),
        )


@functools.cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox commands here (None when it can)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if (problem := setpriv_problem()) is not None:
        return problem
    probe = [exe, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    probe += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        result = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run: {exc}"
    if result.returncode != 0:
        detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap cannot create namespaces here: {detail[-1] if detail else result.returncode}"
    return None


def resolve_mode(requested: str) -> tuple[Mode, str | None]:
    """The mode to use for ``requested`` (auto/bwrap/process), and a warning for the user."""
    if requested not in ("auto", "bwrap", "process"):
        raise UsageError(
            f"`sandbox` must be bwrap, process or auto, not {requested!r}", param="sandbox"
        )
    if requested == "process":
        return "process", PROCESS_MODE_WARNING.format(reason="--sandbox process")
    problem = bwrap_problem()
    if problem is None:
        return "bwrap", None
    if requested == "bwrap":
        raise UsageError(f"`sandbox` bwrap cannot be used: {problem}", param="sandbox")
    return "process", PROCESS_MODE_WARNING.format(reason=f"bubblewrap is not available ({problem})")


def sandbox_python() -> Path:
    """The interpreter commands see as ``python``: the runner's base Python, never its venv."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(base))


def runner_paths() -> list[Path]:
    """The runner's own installation: its packages, its virtualenv, and its source tree."""
    paths = [Path(agentrunner.__file__).resolve().parent, Path(providers.__file__).resolve().parent]
    if sys.prefix != sys.base_prefix:
        paths.append(Path(sys.prefix).resolve())
    return paths


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _venv_home(mount: Path) -> Path | None:
    """The base interpreter's prefix of a mounted virtualenv (from its ``pyvenv.cfg``)."""
    cfg = mount / "pyvenv.cfg"
    try:
        lines = cfg.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip()).resolve().parent
    return None


def _check_mount(mount: Path, mode: Mode) -> None:
    """Refuse a mount that does not exist, or that the sandbox user could not read."""
    try:
        st = mount.stat()
    except OSError:
        raise UsageError(f"`mount` {mount}: no such file or folder", param="mount") from None
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
    if mode == "bwrap" and drops_to_sandbox_user() and st.st_mode & need != need:
        raise UsageError(
            f"`mount` {mount}: commands run as uid {SANDBOX_UID} (the runner is root), which"
            f" cannot read it (mode {stat.S_IMODE(st.st_mode):04o}); make it readable by"
            " others (chmod o+rX)",
            param="mount",
        )


class Jail:
    """Wraps workspace commands in the configured sandbox."""

    def __init__(
        self,
        config: SandboxConfig,
        mode: Mode,
        *,
        hidden: Iterable[Path] = (),
    ) -> None:
        self.config = config
        self.mode: Mode = mode
        self.python = sandbox_python()
        self.mounts = [Path(m).resolve() for m in config.mounts]
        for mount in self.mounts:
            _check_mount(mount, mode)
        homes = [h for m in self.mounts if (h := _venv_home(m)) is not None]
        copies = task_data_copies([Path("/usr"), self.python.parent.parent, *self.mounts, *homes])
        covered = [*hidden, *runner_paths(), *copies]
        self.hidden = sorted({Path(os.path.abspath(p)) for p in covered})
        self.network_via: str | None = None
        if config.network:
            usable = mode == "bwrap" and net.slirp4netns_problem() is None
            self.network_via = "slirp4netns" if usable else "host"
            if self.network_via == "host":
                net.check_shared_network(mode)

    def describe(self) -> dict[str, Any]:
        """What ``episode.start`` records about the sandbox that ran."""
        out = self.config.to_dict()
        out["mode"] = self.mode
        out["processes_enforced_by"] = self._process_limit_mechanism()
        out["network_via"] = self.network_via
        as_nobody = self.mode == "bwrap" and drops_to_sandbox_user()
        out["uid"] = SANDBOX_UID if as_nobody else os.geteuid()
        return out

    def _process_limit_mechanism(self) -> str:
        if self.mode == "bwrap" and StepCgroup.available():
            return "cgroup"
        if os.geteuid() == 0:
            return "none (root is exempt from RLIMIT_NPROC, and only bwrap mode uses a cgroup)"
        return "rlimit"

    # -- the environment inside ----------------------------------------------------------

    def path_env(self) -> str:
        """PATH inside: mounted virtualenvs first, then the base interpreter, then the system."""
        entries = [str(m / "bin") for m in self.mounts if (m / "pyvenv.cfg").exists()]
        entries.append(str(self.python.parent))
        entries += SYSTEM_PATH.split(":")
        return ":".join(dict.fromkeys(entries))

    # -- building the command line ---------------------------------------------------------

    def command(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        tmp: Path,
        extra_ro: Sequence[tuple[Path, str]] = (),
        writable: bool = True,
        network: bool | None = None,
    ) -> list[str]:
        """The argv that runs ``argv`` confined (unchanged in process mode).

        ``extra_ro`` binds more read-only paths (host path, path inside) for this command
        only: the hidden tests and the verifier script of a ``submit``. ``network`` overrides
        the configuration (the verifier never gets one: it could send the hidden tests out).
        """
        if self.mode == "process":
            return list(argv)
        exe = shutil.which("bwrap") or "bwrap"
        args = [exe, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        as_root = drops_to_sandbox_user()
        args += SETPRIV_CAPS if as_root else ["--unshare-user"]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        args += ["--unshare-cgroup-try", "--hostname", "sandbox"]
        online = self.config.network if network is None else network
        slirp = online and self.network_via == "slirp4netns"
        if not online or slirp:
            args.append("--unshare-net")
        args += ["--proc", "/proc", "--dev", "/dev"]
        limits = self.config.limits
        shm = min(limits.file_size_mb, limits.memory_mb) << 20
        args += ["--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/dev"]  # device nodes stay usable; no files in its tmpfs
        args += ["--perms", "1777", "--size", str(limits.file_size_mb << 20), "--tmpfs", "/tmp"]
        bound = self._system_binds(args)  # after /tmp, so a --mount under /tmp shows
        args += ["--bind" if writable else "--ro-bind", str(workspace), WORKSPACE]
        for host, inside in extra_ro:
            args += ["--ro-bind", str(host), inside]
        self._hide(args, bound)
        args += ["--chdir", WORKSPACE, "--"]
        if as_root:
            hand_over(workspace)
            args += setpriv_prefix()
        return net.launcher(args + list(argv)) if slirp else args + list(argv)

    def _system_binds(self, args: list[str]) -> list[Path]:
        bound: list[Path] = [Path("/usr"), Path("/etc")]
        args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for name in _TOP_LEVEL:
            top = Path("/") / name
            if top.is_symlink():
                args += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                args += ["--ro-bind", str(top), str(top)]
                bound.append(top)
        for secret in _ETC_SECRETS:
            path = Path("/etc") / secret
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        extra = [self.python.parent.parent, *self.mounts]
        extra += [h for m in self.mounts if (h := _venv_home(m)) is not None]
        made: set[Path] = set()
        for path in extra:
            if path.exists() and not any(_under(path, b) for b in bound):
                for parent in reversed(path.parents[:-1]):  # not copied from a 0700 $HOME
                    if parent not in made and not any(_under(parent, b) for b in bound):
                        args += ["--perms", "0755", "--dir", str(parent)]
                        made.add(parent)
                args += ["--ro-bind", str(path), str(path)]
                bound.append(path)
        return bound

    def _hide(self, args: list[str], bound: list[Path]) -> None:
        """Cover what must stay invisible wherever it lies inside a bound folder."""
        for path in self.hidden:
            if not any(_under(path, b) for b in bound) or not path.exists():
                continue
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            else:
                args += ["--ro-bind", "/dev/null", str(path)]

    # -- limits ----------------------------------------------------------------------------

    def preexec(self, cgroup: StepCgroup | None) -> Callable[[], None]:
        """What the child runs before exec: join the step's cgroup, set the rlimits."""
        limits = self.config.limits
        nproc = None if cgroup is not None else _nproc_limit(limits.processes, self.mode)
        orphan_guard = self.mode == "process"

        def setup() -> None:
            if orphan_guard:  # bwrap has --die-with-parent; here only the shell itself dies
                _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if cgroup is not None:
                cgroup.join()
            cpu = limits.cpu_seconds
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            size = limits.file_size_mb << 20
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
            memory = limits.memory_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

        return setup


def _nproc_limit(processes: int, mode: Mode) -> int | None:
    """RLIMIT_NPROC for a command (None where it cannot help: root is exempt from it).

    Inside bwrap's new user namespace the count starts from zero; in process mode it
    counts every process of the user, so the user's current count is added.
    """
    if os.geteuid() == 0:
        return None
    if mode == "bwrap":
        return processes
    uid = os.getuid()
    mine = 0  # RLIMIT_NPROC counts threads: count the tasks of each of the user's processes
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    mine += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return mine + processes
