"""Manifest changes as git patches: render the change between two manifests, apply it to a checkout.

``render_diff`` writes only the paths that differ into a throwaway bare repository (one
``git fast-import`` stream: the old side and the new side as two root commits, blobs streamed
one at a time) and lets ``git diff-tree`` print the patch exactly as ``git diff --binary
--full-index`` would: ``a/``/``b/`` prefixes, GIT binary patches, mode changes, symlinks as mode
120000, file<->symlink changes as a deletion plus an addition, names quoted the git way
(``core.quotePath=true``). Rename detection is off, so every patch applies with a plain
``git apply``. Folders are not part of a diff (git does not track them), and neither are
permission bits other than the executable bit.

``apply_to`` applies that patch to a checkout's working tree (never its index) after checking
that the checkout is where the change started and that no path the change touches holds local
edits; ``git apply --check`` runs first and ``git apply`` is atomic, so a refused change leaves
the target untouched.

Every git run is isolated from the user's configuration, and in the target no program its own
config names runs (no filter driver, no hook): see :mod:`agentrunner.envs.patch_git`. Patches
are returned as ``str`` decoded with ``surrogateescape``: ``patch.encode("utf-8",
"surrogateescape")`` gives git's bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agentrunner.envs.manifest import Entry, FileEntry, LinkEntry
from agentrunner.envs.patch_git import checked, first_line, git, inert_config, spawn_git
from agentrunner.values.errors import ApplyRefused, EnvironmentFailure, UsageError
from agentrunner.values.hashing import file_sha256

BlobReader = Callable[[str], bytes]
PathFilter = Callable[[str], bool]

_Tracked = FileEntry | LinkEntry
_Key = tuple[str, str]
"""What git sees of a path: (mode, sha256 of a file's bytes or a symlink's target)."""

_FOLDER: _Key = ("040000", "")
_OTHER: _Key = ("other", "")
_SHORT = 7
_MAX_NAMED = 5
_CHUNK = 1 << 20
_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")
_DIFF = ("-r", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv")
_PREFIXES = ("--src-prefix=a/", "--dst-prefix=b/")
_COMMITTER = b"committer agentrunner <agentrunner> 0 +0000\n"


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply_to`` applied (with ``check_only``: would apply), counted by path."""

    files: int
    added: int
    modified: int
    deleted: int
    patch: str


@dataclass(frozen=True)
class _Change:
    """The tracked entries on each side, restricted to the paths whose git view differs."""

    old: dict[str, _Tracked]
    new: dict[str, _Tracked]

    @property
    def paths(self) -> list[str]:
        return sorted(self.old.keys() | self.new.keys())


def render_diff(
    old: Mapping[str, Entry],
    new: Mapping[str, Entry],
    read_blob: BlobReader,
    *,
    stat: bool = False,
    exclude: PathFilter | None = None,
) -> str:
    """The change from ``old`` to ``new`` as ``git diff --binary --full-index`` prints it.

    With ``stat``, what ``git diff --stat`` prints instead (per-file lines and the summary
    line). Paths for which ``exclude`` is true are left out; no change gives ``""``.
    """
    change = _change(old, new, exclude)
    if not change.paths:
        return ""
    return _render(change, read_blob, stat=stat).decode("utf-8", "surrogateescape")


def changed_paths(
    old: Mapping[str, Entry], new: Mapping[str, Entry], exclude: PathFilter | None = None
) -> list[str]:
    """The paths whose git view (mode and content, or link target) differs, sorted: what
    :func:`render_diff` with the same ``exclude`` writes a patch for."""
    return _change(old, new, exclude).paths


def apply_to(
    target: Path,
    old: Mapping[str, Entry],
    new: Mapping[str, Entry],
    read_blob: BlobReader,
    *,
    base_commit: str | None,
    exclude: PathFilter | None = None,
    check_only: bool = False,
) -> ApplyResult:
    """Apply the change from ``old`` to ``new`` to the working tree at ``target``.

    ``target`` is the top folder of a git checkout whose HEAD is ``base_commit``, or any
    folder when ``base_commit`` is None. Refuses (ApplyRefused, target untouched) when the
    target is missing or has moved, when a path the change touches has local edits, or when
    ``git apply --check`` fails. With ``check_only`` nothing is written.
    """
    if not target.is_dir():
        raise ApplyRefused(f"target {target} does not exist or is not a folder; pass a checkout")
    if base_commit is not None:
        _require_base(target, base_commit)
    change = _change(old, new, exclude)
    _refuse_conflicts(target, change)
    patch = _render(change, read_blob, stat=False) if change.paths else b""
    if patch:
        config = inert_config(target)
        _git_apply(target, patch, config, check=True)
        if not check_only:
            _git_apply(target, patch, config, check=False)
    added, deleted = change.new.keys() - change.old.keys(), change.old.keys() - change.new.keys()
    return ApplyResult(
        files=len(change.paths),
        added=len(added),
        modified=len(change.paths) - len(added) - len(deleted),
        deleted=len(deleted),
        patch=patch.decode("utf-8", "surrogateescape"),
    )


# -- the change ----------------------------------------------------------------------------


def _change(
    old: Mapping[str, Entry], new: Mapping[str, Entry], exclude: PathFilter | None
) -> _Change:
    before, after = _tracked(old, exclude), _tracked(new, exclude)
    paths = {p for p in before.keys() | after.keys() if _key(before.get(p)) != _key(after.get(p))}
    for path in paths:
        _check_path(path)
    return _Change(
        old={p: before[p] for p in paths if p in before},
        new={p: after[p] for p in paths if p in after},
    )


def _tracked(manifest: Mapping[str, Entry], exclude: PathFilter | None) -> dict[str, _Tracked]:
    return {
        path: entry
        for path, entry in manifest.items()
        if isinstance(entry, FileEntry | LinkEntry) and not (exclude and exclude(path))
    }


def _key(entry: _Tracked | None) -> _Key | None:
    if isinstance(entry, FileEntry):
        return (entry.git_mode, entry.sha256)
    if isinstance(entry, LinkEntry):
        return (entry.git_mode, entry.target)
    return None


def _check_path(path: str) -> None:
    parts = path.split("/")
    if "\0" in path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UsageError(f"manifest path {_shown(path)} is not a plain relative path")


def _shown(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# -- rendering: a throwaway repository fed by one fast-import stream -------------------------


def _render(change: _Change, read_blob: BlobReader, *, stat: bool) -> bytes:
    """Both sides as two commits in a throwaway bare repository, and git's diff of them."""
    try:
        with tempfile.TemporaryDirectory(prefix="agentrunner-patch-") as scratch:
            repo = Path(scratch) / "repo.git"
            checked(git(["init", "-q", "--bare", "--template=", str(repo)]), "git init")
            _fast_import(repo, change, read_blob)
            shape = ["--stat"] if stat else ["-p", "--binary", "--full-index"]
            args = ["diff-tree", *_DIFF, *_PREFIXES, *shape, "refs/heads/old", "refs/heads/new"]
            return checked(git(args, git_dir=repo), "git diff-tree").stdout
    except OSError as exc:  # the temporary folder or fast-import's pipe (read_blob's are not)
        raise EnvironmentFailure(f"cannot use a temporary git repository: {exc}") from exc


def _fast_import(repo: Path, change: _Change, read_blob: BlobReader) -> None:
    args = ["fast-import", "--quiet", "--done", "--date-format=raw"]
    with tempfile.TemporaryFile() as errors:
        proc = spawn_git(args, git_dir=repo, stderr=errors)
        try:
            assert proc.stdin is not None
            with proc.stdin as sink:
                _write_stream(sink, change, read_blob)
        except BrokenPipeError:
            pass  # fast-import stopped early; its exit status and stderr say why
        finally:
            code = proc.wait()
        if code != 0:
            errors.seek(0)
            raise EnvironmentFailure(f"git fast-import failed: {first_line(errors.read())}")


def _write_stream(sink: IO[bytes], change: _Change, read_blob: BlobReader) -> None:
    """Both sides as fast-import commands: each distinct blob once, then two root commits."""
    marks: dict[_Key, int] = {}
    for entry in (*change.old.values(), *change.new.values()):
        content = _content_id(entry)
        if content not in marks:
            marks[content] = len(marks) + 1
            data = _blob(entry, read_blob)
            sink.write(b"blob\nmark :%d\ndata %d\n" % (marks[content], len(data)))
            sink.write(data)
            sink.write(b"\n")
    for ref, side in ((b"old", change.old), (b"new", change.new)):
        sink.write(b"commit refs/heads/%s\n%sdata 0\n" % (ref, _COMMITTER))
        for path, entry in sorted(side.items()):
            mode = entry.git_mode.encode()
            sink.write(b"M %s :%d %s\n" % (mode, marks[_content_id(entry)], _c_quoted(path)))
        sink.write(b"\n")
    sink.write(b"done\n")


def _content_id(entry: _Tracked) -> _Key:
    return ("f", entry.sha256) if isinstance(entry, FileEntry) else ("l", entry.target)


def _blob(entry: _Tracked, read_blob: BlobReader) -> bytes:
    if isinstance(entry, LinkEntry):
        return os.fsencode(entry.target)
    try:
        data = read_blob(entry.sha256)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read blob {entry.sha256[:12]}: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        raise EnvironmentFailure(f"blob {entry.sha256[:12]} does not match its sha256")
    return data


def _c_quoted(path: str) -> bytes:
    """``path`` as a C-style quoted string, which fast-import accepts for any name."""
    out = bytearray(b'"')
    for byte in os.fsencode(path):
        if byte in b'"\\':
            out += b"\\%c" % byte
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    out += b'"'
    return bytes(out)


# -- applying -------------------------------------------------------------------------------


def _require_base(target: Path, base_commit: str) -> None:
    if not _COMMIT_ID.fullmatch(base_commit):
        raise UsageError(f"base commit {base_commit!r} is not a commit id (hex digits)")
    top = git(["rev-parse", "--show-toplevel"], cwd=target)
    if top.returncode != 0 or not os.path.samefile(os.fsdecode(top.stdout.strip()), target):
        raise ApplyRefused(
            f"target {target} is not the top folder of a git checkout; pass the checkout's"
            " top folder, or no base commit to patch a plain folder"
        )
    head = git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], cwd=target).stdout.strip()
    if not head.decode().startswith(base_commit.lower()):
        base = base_commit.lower()[:_SHORT]
        raise ApplyRefused(
            f"the target has moved: its HEAD is {head.decode()[:_SHORT] or 'unborn'}, the change"
            f" was made on {base}; check out {base} first, or run"
            " `agentrunner diff <episode> | git apply -3` in the target"
        )


def _refuse_conflicts(target: Path, change: _Change) -> None:
    found = _conflicts(target, change)
    if found:
        named = ", ".join(_shown(p) for p in found[:_MAX_NAMED])
        more = f" and {len(found) - _MAX_NAMED} more" if len(found) > _MAX_NAMED else ""
        raise ApplyRefused(
            f"conflicting local changes in {len(found)} path(s) the change touches: {named}{more};"
            " commit, stash or discard them first, or apply to a clean checkout"
        )


def _conflicts(target: Path, change: _Change) -> list[str]:
    """Paths whose content in ``target`` is not what ``old`` says, or would block a creation."""
    gone = change.old.keys() - change.new.keys()
    found = {p for p in change.paths if not _as_old(target, p, change.old.get(p), gone)}
    for parent in _parents(change.new):
        if parent not in change.old and _local_key(target / parent) not in (None, _FOLDER):
            found.add(parent)
    return sorted(found)


def _as_old(target: Path, path: str, expected: _Tracked | None, gone: set[str]) -> bool:
    local = _local_key(target / path)
    if expected is not None or local != _FOLDER:
        return local == _key(expected)
    return _only_gone(target / path, path, gone)


def _only_gone(folder: Path, rel: str, gone: set[str]) -> bool:
    """Whether deleting ``gone`` removes everything under ``folder`` (git then prunes it)."""
    for name in _listdir(folder):
        path, child = f"{rel}/{name}", folder / name
        if _is_folder(child):
            if not _listdir(child) or not _only_gone(child, path, gone):
                return False
        elif path not in gone:
            return False
    return True


def _parents(paths: Mapping[str, object]) -> set[str]:
    return {path.rsplit("/", depth)[0] for path in paths for depth in range(1, path.count("/") + 1)}


def _local_key(path: Path) -> _Key | None:
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return ("120000", os.readlink(path))
        if stat.S_ISREG(st.st_mode):
            return ("100755" if st.st_mode & 0o111 else "100644", file_sha256(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ApplyRefused(f"cannot read {path} in the target: {exc.strerror}") from exc
    return _FOLDER if stat.S_ISDIR(st.st_mode) else _OTHER


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError as exc:
        raise ApplyRefused(f"cannot read {path} in the target: {exc.strerror}") from exc


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError as exc:
        raise ApplyRefused(f"cannot read {folder} in the target: {exc.strerror}") from exc


def _git_apply(target: Path, patch: bytes, config: Mapping[str, str], *, check: bool) -> None:
    args = ["apply", "--binary", "--whitespace=nowarn", *(["--check"] if check else []), "-"]
    result = git(args, cwd=target, stdin=patch, config=config)
    if result.returncode == 0:
        return
    why = first_line(result.stderr)
    if check:
        raise ApplyRefused(
            f"the change does not apply to {target}: {why}; apply it to a clean checkout"
            " of the episode's base commit instead"
        )
    raise EnvironmentFailure(f"git apply failed in {target} after its check passed: {why}")
