"""Copying a user's git repository into a private folder, never writing to the repository.

:func:`copy_repository` gives a coding agent its starting tree: the tracked files as they are
in the work tree (``rev=None``: ``HEAD`` plus uncommitted changes), or the tree of one commit,
optionally with a private, independent ``.git`` holding the history (``with_git=True``).

The source repository is only ever read. Every git command runs with optional locks off,
hooks off (``core.hooksPath=/dev/null``), no system config, no fsmonitor, no auto-gc, no split
index, and with any index it needs in scratch space of our own (a copy of the user's index,
taken with its mtime so git's racy-entry check still works), so not even an index refresh or a
lock file lands in the repository.

Filters: built-in conversions from ``.gitattributes`` and config (``text``/``eol``/
``core.autocrlf``, ``ident``, ``working-tree-encoding``) apply as in a normal checkout; for
``rev="X"`` the attributes are those of commit X. External filter drivers
(``filter.<name>.clean/smudge/process``, e.g. git-lfs) are switched off, because they are
programs that may write into ``.git``: under ``rev="X"`` such files are written as stored in
the commit (as ``GIT_LFS_SKIP_SMUDGE=1`` would), while ``rev=None`` copies the work tree's bytes
whatever filters made them. ``git archive`` is not used: ``export-ignore``/``export-subst``
would change the tree.

Submodules (gitlinks) become empty folders, as in a clone without ``--recurse-submodules``,
and are listed in :attr:`RepoBase.skipped`. With ``with_git`` the ``origin`` remote points at
the source for fetching; its push URL is a path that cannot exist, so a ``git push`` from the
copy fails instead of writing to the user's repository.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from agentrunner.envs.sandbox import force_rmtree
from agentrunner.values.errors import UsageError

GITLINK = "160000"
NO_PUSH_URL = "/dev/null/agentrunner-push-disabled"
# Config under which git cannot write to the repository it reads (given to every command).
SAFE_CONFIG: Mapping[str, str] = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.splitIndex": "false",
    "index.sparse": "false",
    "core.untrackedCache": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "checkout.workers": "0",
}
_FILTER_OFF = {"clean": "", "smudge": "", "process": "", "required": "false"}
_DIFF = ("diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules")
_LOCAL_CONFIG = ("core.autocrlf", "core.eol")
_SENDFILE_MAX = 1 << 30


@dataclass(frozen=True)
class RepoBase:
    """What :func:`copy_repository` copied, and from where."""

    repo: str
    rev: str | None
    commit: str
    dirty: bool
    dirty_sha256: str | None
    files: int
    bytes: int
    skipped: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["skipped"] = list(self.skipped)
        return data


def copy_repository(
    repo: str | Path, dest: Path, *, rev: str | None = None, with_git: bool = False
) -> RepoBase:
    """Copy ``repo`` (a path or ``file://`` URL) into the empty folder ``dest``.

    ``rev=None`` copies the tracked files as they are in the work tree; ``rev`` copies that
    commit's tree. ``with_git`` adds a private ``.git`` whose HEAD is detached at the commit
    and whose index is the commit's tree, so ``git status`` in ``dest`` shows the changes
    that were copied. On failure ``dest`` is emptied again and a :class:`UsageError` raised.
    """
    source = _open_source(_local_path(repo), rev=rev)
    dest = _empty_folder(Path(dest), source)
    commit = _resolve(source, rev)
    try:
        return _fill(source, dest, rev, commit, with_git)
    except BaseException:
        _empty_again(dest)
        raise


def enclosing_work_tree(repo: str | Path) -> tuple[str, str]:
    """The top of the work tree holding the folder ``repo`` names (a path or ``file://``
    URL), and that folder relative to it (``""``: the top itself), as ``git rev-parse
    --show-toplevel`` finds it: a subfolder of a repository names that repository. Anything
    else (a URL of another kind, no repository, a bare one) comes back as given, for
    :func:`copy_repository` to judge."""
    text = os.fspath(repo)
    try:
        path = _local_path(text)
    except UsageError:
        return text, ""
    env = _environment(SAFE_CONFIG)
    try:
        proc = _run(["git", "rev-parse", "--show-toplevel"], env=env, cwd=path)
    except UsageError:
        return text, ""
    if proc.returncode != 0:
        return text, ""
    top = Path(os.fsdecode(proc.stdout).strip()).resolve()
    inside = path.relative_to(top).as_posix() if path.is_relative_to(top) else ""
    if not inside or inside == ".":
        return text, ""
    return str(top), inside


@dataclass(frozen=True)
class _Git:
    """git run against one repository, in the safe environment."""

    env: Mapping[str, str]
    git_dir: Path
    root: Path | None  # the work tree; None for a bare repository
    name: Path  # the repository as the user named it (for messages and cloning)

    def command(self, args: Sequence[str], work_tree: Path | None) -> list[str]:
        where = ["--git-dir", str(self.git_dir)]
        if work_tree is not None:
            where += ["--work-tree", str(work_tree)]
        return ["git", *where, *args]

    def run(
        self,
        *args: str,
        index: Path | None = None,
        work_tree: Path | None = None,
        stdin: bytes | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        tree = work_tree or self.root
        env = self.env if index is None else {**self.env, "GIT_INDEX_FILE": str(index)}
        proc = _run(self.command(args, tree), env=env, cwd=tree or self.git_dir, stdin=stdin)
        if check and proc.returncode != 0:
            raise UsageError(f"git {args[0]} failed on {self.name}: {_last_line(proc.stderr)}")
        return proc

    def out(self, *args: str, index: Path | None = None) -> bytes:
        return self.run(*args, index=index).stdout


@dataclass
class _Tally:
    files: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)

    def count(self, path: str) -> None:
        st = os.lstat(path)
        self.files += 1
        if stat.S_ISREG(st.st_mode):
            self.bytes += st.st_size


@dataclass(frozen=True)
class _Entry:
    path: str
    mode: str
    sparse: bool  # skip-worktree bit: the file is absent from the work tree on purpose


# --- finding the source -------------------------------------------------------------------


def _local_path(repo: str | Path) -> Path:
    text = os.fspath(repo)
    if "://" in text:
        url = urlsplit(text)
        if url.scheme != "file" or url.netloc not in ("", "localhost"):
            raise UsageError(f"{text} is not a local repository (give a path or a file:// URL)")
        text = url2pathname(url.path)
    path = Path(os.path.abspath(text))
    if not path.exists():
        raise UsageError(f"repository {path} does not exist")
    if not path.is_dir():
        raise UsageError(f"repository {path} is not a folder")
    return path.resolve()


def _open_source(path: Path, *, rev: str | None) -> _Git:
    env = _environment(SAFE_CONFIG)
    if shutil.which("git", path=env.get("PATH")) is None:
        raise UsageError("git is not installed (no 'git' on PATH)")
    # The ceiling keeps git from finding a repository that merely encloses ``path``.
    probe = {**env, "GIT_CEILING_DIRECTORIES": str(path.parent)}
    args = ["git", "rev-parse", "--is-bare-repository", "--is-inside-git-dir", "--absolute-git-dir"]
    proc = _run(args, env=probe, cwd=path)
    if proc.returncode != 0:
        if b"not a git repository" in proc.stderr:
            raise UsageError(f"{path} is not a git repository")
        raise UsageError(f"cannot read git repository {path}: {_last_line(proc.stderr)}")
    bare, in_git_dir, git_dir = os.fsdecode(proc.stdout).split("\n")[:3]
    if bare == "true" and rev is None:
        raise UsageError(f"{path} is a bare repository: give rev to say which commit to copy")
    if bare != "true" and in_git_dir == "true":
        raise UsageError(f"{path} is a .git folder: give the work tree that holds it")
    source = _Git(env, Path(git_dir), None if bare == "true" else path, path)
    return dataclasses.replace(source, env=_environment({**SAFE_CONFIG, **_filters_off(source)}))


def _filters_off(source: _Git) -> dict[str, str]:
    """Config that switches off every external filter driver the config defines."""
    proc = source.run("config", "--name-only", "--get-regexp", r"^filter\.", check=False)
    drivers = {key[len("filter.") : key.rindex(".")] for key in proc.stdout.decode().split()}
    return {f"filter.{d}.{k}": v for d in sorted(drivers) for k, v in _FILTER_OFF.items()}


def _empty_folder(dest: Path, source: _Git) -> Path:
    if not dest.is_dir():
        raise UsageError(f"destination {dest} is not an existing folder")
    with os.scandir(dest) as entries:
        if next(entries, None) is not None:
            raise UsageError(f"destination {dest} is not empty")
    real = dest.resolve()
    if any(real.is_relative_to(p) for p in (source.root, source.git_dir) if p is not None):
        raise UsageError(f"destination {dest} lies inside the repository {source.name}")
    return real


def _resolve(source: _Git, rev: str | None) -> str:
    name = "HEAD" if rev is None else rev
    if name and not name.startswith("-"):
        proc = source.run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
        if proc.returncode == 0:
            return proc.stdout.decode().strip()
    if not source.out("for-each-ref", "--count=1").strip():
        raise UsageError(f"repository {source.name} has no commits")
    if rev is None:
        raise UsageError(f"HEAD of {source.name} does not name a commit")
    raise UsageError(f"unknown revision {rev!r} in {source.name}")


# --- filling dest ---------------------------------------------------------------------------


def _fill(source: _Git, dest: Path, rev: str | None, commit: str, with_git: bool) -> RepoBase:
    scratch = Path(tempfile.mkdtemp(prefix=".agentrunner-", dir=dest))
    try:
        copy = _clone_history(source, dest, commit, scratch) if with_git else None
        digest: str | None = None
        if rev is None:
            index = _copy_of_index(source, scratch)
            tally = _copy_work_tree(source, dest, index)
            digest = _diff_sha256(source, commit, index)
        else:
            tally = _checkout(source, dest, commit, scratch / "index")
        if copy is not None:  # stat data is left for the copy's first `git status` to fill
            copy.out("read-tree", commit)
    finally:
        shutil.rmtree(scratch)
    return RepoBase(
        repo=str(source.name),
        rev=rev,
        commit=commit,
        dirty=digest is not None,
        dirty_sha256=digest,
        files=tally.files,
        bytes=tally.bytes,
        skipped=tuple(tally.skipped),
    )


def _diff_sha256(source: _Git, commit: str, index: Path) -> str | None:
    """sha256 of ``git diff --binary <commit>`` (submodules ignored); None when empty."""
    diff = index.with_name("diff")
    source.run(*_DIFF, f"--output={diff}", commit, "--", index=index)
    if not diff.stat().st_size:
        return None
    with diff.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _copy_of_index(source: _Git, scratch: Path) -> Path:
    index = scratch / "index"
    user_index = Path(os.fsdecode(source.out("rev-parse", "--git-path", "index").strip()))
    if not user_index.is_absolute():
        user_index = (source.root or source.git_dir) / user_index
    if user_index.exists():
        shutil.copy2(user_index, index)  # the mtime too: git compares it with files' mtimes
    return index


def _entries(source: _Git, index: Path) -> list[_Entry]:
    entries: list[_Entry] = []
    for record in source.out("ls-files", "--stage", "-t", "-z", index=index).split(b"\0"):
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        tag, mode = meta.split(b" ")[:2]
        path = os.fsdecode(raw)
        if not entries or entries[-1].path != path:  # conflicted paths have several stages
            entries.append(_Entry(path, mode.decode(), tag == b"S"))
    return entries


def _checkout(source: _Git, dest: Path, commit: str, index: Path) -> _Tally:
    """Check ``commit``'s tree out into ``dest`` through a scratch index."""
    source.run("read-tree", commit, index=index)
    source.run("checkout-index", "--all", "--force", index=index, work_tree=dest)
    tally = _Tally()
    for entry in _entries(source, index):
        if entry.mode == GITLINK:
            tally.skipped.append(f"{entry.path} (submodule)")
        else:
            tally.count(os.path.join(dest, entry.path))
    return tally


def _copy_work_tree(source: _Git, dest: Path, index: Path) -> _Tally:
    """Copy every tracked path as it is in the work tree; deleted ones stay absent."""
    assert source.root is not None
    tally, folders = _Tally(), _Folders(str(source.root), str(dest))
    sparse: list[str] = []
    for entry in _entries(source, index):
        if entry.mode == GITLINK:
            tally.skipped.append(f"{entry.path} (submodule)")
            folders.make(entry.path)
        elif not _safe(entry.path):
            tally.skipped.append(f"{entry.path} (unsafe path)")
        elif entry.sparse:
            sparse.append(entry.path)
        else:
            try:
                _copy_path(folders, entry.path, tally)
            except OSError as exc:
                raise UsageError(f"cannot copy {entry.path} from {source.name}: {exc}") from None
    if sparse:  # not in the work tree by design (sparse checkout): take them from the index
        paths = b"\0".join(os.fsencode(p) for p in sparse)
        args = ("checkout-index", "--ignore-skip-worktree-bits", "--force", "-z", "--stdin")
        source.run(*args, index=index, work_tree=dest, stdin=paths)
        for path in sparse:
            tally.count(os.path.join(dest, path))
    return tally


def _copy_path(folders: _Folders, rel: str, tally: _Tally) -> None:
    src, dst = os.path.join(folders.src, rel), os.path.join(folders.dest, rel)
    parent = rel.rpartition("/")[0]
    if not folders.real(parent):  # its folder was deleted or replaced by a symlink
        return
    try:
        st = os.lstat(src)
    except (FileNotFoundError, NotADirectoryError):  # deleted in the work tree
        return
    if stat.S_ISDIR(st.st_mode):  # a folder where git tracks a file: deleted, to git
        return
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        tally.skipped.append(f"{rel} (not a file or symlink)")
        return
    folders.make(parent)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    else:
        _copy_file(src, dst, executable=bool(st.st_mode & stat.S_IXUSR))
        tally.bytes += st.st_size
    tally.files += 1


def _copy_file(src: str, dst: str, *, executable: bool) -> None:
    """Copy in the kernel; created with mode 777/666 less the umask, as git checks out."""
    fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fout = os.open(dst, flags, 0o777 if executable else 0o666)
        try:
            if sys.platform == "linux":
                while os.sendfile(fout, fin, None, _SENDFILE_MAX):
                    pass
            else:
                with open(fin, "rb", closefd=False) as r, open(fout, "wb", closefd=False) as w:
                    shutil.copyfileobj(r, w)
        finally:
            os.close(fout)
    finally:
        os.close(fin)


class _Folders:
    """Which folders of the source are real folders, and which ``dest`` folders exist yet."""

    def __init__(self, src: str, dest: str) -> None:
        self.src, self.dest = src, dest
        self._real: dict[str, bool] = {"": True}
        self._made = {""}

    def real(self, rel: str) -> bool:
        known = self._real.get(rel)
        if known is None:
            try:
                mode = os.lstat(os.path.join(self.src, rel)).st_mode
            except OSError:
                mode = 0
            known = self.real(rel.rpartition("/")[0]) and stat.S_ISDIR(mode)
            self._real[rel] = known
        return known

    def make(self, rel: str) -> None:
        if rel in self._made:
            return
        os.makedirs(os.path.join(self.dest, rel), exist_ok=True)
        while rel not in self._made:
            self._made.add(rel)
            rel = rel.rpartition("/")[0]


def _safe(rel: str) -> bool:
    parts = rel.split("/")
    return not any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)


# --- the private .git -----------------------------------------------------------------------


def _clone_history(source: _Git, dest: Path, commit: str, scratch: Path) -> _Git:
    """Clone the source's history into ``dest/.git`` (copied objects, no hard links)."""
    clone = scratch / "clone"
    args = ["clone", "--quiet", "--no-hardlinks", "--no-checkout", "--dissociate"]
    proc = _run(["git", *args, "--", str(source.name), str(clone)], env=source.env, cwd=scratch)
    if proc.returncode != 0:
        raise UsageError(f"git clone failed on {source.name}: {_last_line(proc.stderr)}")
    os.rename(clone / ".git", dest / ".git")
    copy = _Git(source.env, dest / ".git", dest, dest)
    if copy.run("update-ref", "--no-deref", "HEAD", commit, check=False).returncode != 0:
        raise UsageError(f"commit {commit} of {source.name} is not reachable from its refs")
    copy.out("config", "remote.origin.pushurl", NO_PUSH_URL)
    for key in _LOCAL_CONFIG:
        value = source.run("config", "--local", "--get", key, check=False).stdout.strip()
        if value:
            copy.out("config", key, value.decode())
    return copy


# --- running git ----------------------------------------------------------------------------


def _environment(config: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k == "GIT_EXEC_PATH"}
    env.update(
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_PAGER="cat",
        LC_ALL="C",
        GIT_CONFIG_COUNT=str(len(config)),
    )
    for i, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _run(
    args: Sequence[str], *, env: Mapping[str, str], cwd: Path, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(args, cwd=cwd, env=env, input=stdin, capture_output=True, check=False)
    except OSError as exc:
        raise UsageError(f"cannot run git: {exc.strerror}") from None


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()]
    last = next((line for line in reversed(lines) if line), "no message")
    return last.removeprefix("fatal: ").removeprefix("error: ")


def _empty_again(dest: Path) -> None:
    for child in dest.iterdir():
        force_rmtree(child)
