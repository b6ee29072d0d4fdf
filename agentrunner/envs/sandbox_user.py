"""The unprivileged user that sandboxed commands run as when the runner is root.

Inside bubblewrap's user namespace the sandbox's uid maps to the runner's own uid; for a
runner that is root that is host root, which owns (and so may read) every 0600 file under
a bound folder. A root runner therefore starts bubblewrap without a user namespace and runs
each command through ``setpriv`` as :data:`SANDBOX_UID` (``nobody``), with no capabilities,
no supplementary groups and ``no_new_privs`` (so setuid programs cannot raise it again).
Before each command the workspace is handed over to that user, so the agent can change the
files the runner wrote there (root reads whatever the agent writes back).
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from pathlib import Path

SETPRIV_CAPS = ("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")
"""What bubblewrap keeps for ``setpriv`` alone: it gives them up before the command starts."""


def _nobody() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return 65534


SANDBOX_UID = _nobody()


def drops_to_sandbox_user() -> bool:
    """Whether commands are run as :data:`SANDBOX_UID` (the runner is root)."""
    return os.geteuid() == 0


def setpriv_problem() -> str | None:
    """Why a root runner cannot drop to the sandbox user here (None when it can)."""
    if drops_to_sandbox_user() and shutil.which("setpriv") is None:
        return (
            "as root, bwrap mode runs commands as an unprivileged user through setpriv, which"
            " is not installed (Debian/Ubuntu: apt-get install util-linux)"
        )
    return None


def setpriv_prefix() -> list[str]:
    """The argv prefix (inside the sandbox) that drops to the sandbox user for good."""
    exe = shutil.which("setpriv") or "setpriv"
    ids = str(SANDBOX_UID)
    drop = ["--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    return [exe, "--reuid", ids, "--regid", ids, *drop, "--"]


def hand_over(workspace: Path) -> None:
    """Make the workspace and everything in it the sandbox user's (no command runs meanwhile).

    Symlinks are changed themselves, never followed; a file with more than one hard link
    that the runner made is left alone (its other name could lie outside).
    """
    uid = SANDBOX_UID
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _own(root, None, uid, os.fstat(root))
        for _, dirnames, filenames, fd in os.fwalk(".", dir_fd=root):
            for name in dirnames + filenames:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                _own(fd, name, uid, st)
    finally:
        os.close(root)


def _own(dir_fd: int, name: str | None, uid: int, st: os.stat_result) -> None:
    if st.st_uid == uid and st.st_gid == uid:
        return
    if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
        return
    if name is None:
        os.fchown(dir_fd, uid, uid)
    else:
        os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
