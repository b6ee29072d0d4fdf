"""Tests for manifest changes as git patches (``agentrunner.envs.patch``).

Manifests come from real folders (a small walker below) and contents from a dict blob store;
patches are checked against real git: ``git apply`` in a fresh clone, and ``git diff`` of the
same two trees committed in a real repository.
"""

from __future__ import annotations

import hashlib
import os
import random
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrunner.envs.manifest import DirEntry, FileEntry, LinkEntry, Manifest
from agentrunner.envs.patch import ApplyResult, apply_to, render_diff
from agentrunner.values.errors import UsageError

NON_UTF8 = os.fsdecode(b"caf\xe9.txt")
BIG = random.Random(0).randbytes(1 << 20)
BIG_EDITED = BIG[:300_000] + random.Random(1).randbytes(4096) + BIG[304_096:]


@dataclass(frozen=True)
class Link:
    target: str


@dataclass(frozen=True)
class Exec:
    content: bytes


Spec = dict[str, bytes | Link | Exec]

OLD: Spec = {
    "edit.txt": b"one\ntwo\nthree\n",
    "gone.txt": b"bye\n",
    "nul.bin": b"\x00\x01binary\x00\xff",
    "big.bin": BIG,
    "run.sh": b"#!/bin/sh\necho hi\n",
    "link": Link("edit.txt"),
    "becomes_link.txt": b"text\n",
    "with space.txt": b"a\n",
    NON_UTF8: b"x\n",
    "keep/same.txt": b"unchanged\n",
}
NEW: Spec = {
    "edit.txt": b"one\n2\nthree\n",
    "nul.bin": b"\x00\x02binary\x00\xfe and more",
    "big.bin": BIG_EDITED,
    "run.sh": Exec(b"#!/bin/sh\necho hi\n"),
    "link": Link("nul.bin"),
    "becomes_link.txt": Link("edit.txt"),
    "with space.txt": b"b\n",
    NON_UTF8: b"y\n",
    "keep/same.txt": b"unchanged\n",
    "new link": Link("keep/same.txt"),
    "ünïcode.txt": b"hello\n",
    "empty.txt": b"",
    "deep/er/new.txt": b"new\n",
}


def build(root: Path, spec: Spec) -> Path:
    """Write ``spec`` under ``root``: bytes as files, ``Exec`` as executable files, ``Link``s."""
    for path, item in spec.items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(item, Link):
            full.symlink_to(item.target)
        elif isinstance(item, Exec):
            full.write_bytes(item.content)
            full.chmod(full.stat().st_mode | 0o111)
        else:
            full.write_bytes(item)
    return root


def scan(root: Path, blobs: dict[str, bytes]) -> Manifest:
    """The manifest of ``root`` (``.git`` left out), storing file contents in ``blobs``."""
    out: Manifest = {}

    def walk(folder: Path, prefix: str) -> None:
        for name in sorted(os.listdir(folder)):
            if not prefix and name == ".git":
                continue
            path, full = prefix + name, folder / name
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[path] = LinkEntry(os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[path] = DirEntry(stat.S_IMODE(st.st_mode))
                walk(full, path + "/")
            else:
                data = full.read_bytes()
                sha = hashlib.sha256(data).hexdigest()
                blobs[sha] = data
                out[path] = FileEntry(stat.S_IMODE(st.st_mode), sha, len(data))

    walk(root, "")
    return out


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "COLUMNS"}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    command = ["git", *identity, "-c", "init.defaultBranch=main", *args]
    done = subprocess.run(command, cwd=cwd, env=env, input=stdin, capture_output=True, check=True)
    return done.stdout


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").decode().strip()


@dataclass
class Sides:
    old: Manifest
    new: Manifest
    blobs: dict[str, bytes]
    repo: Path  # a git repository whose HEAD holds ``old``
    base: str

    def read_blob(self, sha256: str) -> bytes:
        return self.blobs[sha256]

    def clone(self, where: Path) -> Path:
        git(self.repo.parent, "clone", "-q", str(self.repo), str(where))
        return where

    def diff(self, *, stat: bool = False, exclude: Callable[[str], bool] | None = None) -> str:
        return render_diff(self.old, self.new, self.read_blob, stat=stat, exclude=exclude)

    def apply(self, target: Path, *, plain: bool = False, check_only: bool = False) -> ApplyResult:
        base = None if plain else self.base
        return apply_to(
            target, self.old, self.new, self.read_blob, base_commit=base, check_only=check_only
        )


def make_sides(tmp_path: Path, old: Spec, new: Spec) -> Sides:
    blobs: dict[str, bytes] = {}
    repo = build(tmp_path / "repo", old)
    git(repo, "init", "-q")
    base = commit_all(repo, "old")
    return Sides(scan(repo, blobs), scan(build(tmp_path / "new", new), blobs), blobs, repo, base)


def with_new_committed(sides: Sides, where: Path) -> Path:
    """A clone of ``sides.repo`` with ``NEW`` committed on top of ``OLD``."""
    clone = sides.clone(where)
    git(clone, "rm", "-rq", ".")
    build(clone, NEW)
    commit_all(clone, "new")
    return clone


@pytest.fixture
def sides(tmp_path: Path) -> Sides:
    return make_sides(tmp_path, OLD, NEW)


# -- render_diff ----------------------------------------------------------------------------


def test_git_apply_of_the_diff_in_a_fresh_clone_reproduces_the_new_tree(
    sides: Sides, tmp_path: Path
) -> None:
    clone = sides.clone(tmp_path / "clone")
    git(clone, "apply", stdin=sides.diff().encode("utf-8", "surrogateescape"))
    assert scan(clone, {}) == sides.new


def test_diff_is_what_git_diff_prints_for_the_same_two_commits(
    sides: Sides, tmp_path: Path
) -> None:
    clone = with_new_committed(sides, tmp_path / "clone")
    expected = git(clone, "diff", "--binary", "--full-index", "--no-renames", "HEAD~", "HEAD")
    assert sides.diff().encode("utf-8", "surrogateescape") == expected


def test_stat_is_what_git_diff_stat_prints_for_the_same_two_commits(
    sides: Sides, tmp_path: Path
) -> None:
    clone = with_new_committed(sides, tmp_path / "clone")
    expected = git(clone, "diff", "--stat", "--no-renames", "HEAD~", "HEAD")
    assert sides.diff(stat=True).encode("utf-8", "surrogateescape") == expected


def test_diff_shows_binary_files_as_git_binary_patches(sides: Sides) -> None:
    assert sides.diff().count("GIT binary patch") == 2


def test_diff_shows_an_exec_bit_flip_as_a_mode_change(sides: Sides) -> None:
    assert "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n" in sides.diff()


def test_diff_shows_a_file_replaced_by_a_symlink_as_a_deletion_and_a_120000_addition(
    sides: Sides,
) -> None:
    diff = sides.diff()
    assert "deleted file mode 100644" in diff.split("a/becomes_link.txt b/becomes_link.txt")[1]
    assert "new file mode 120000" in diff.split("a/becomes_link.txt b/becomes_link.txt")[2]


def test_diff_quotes_non_ascii_names_the_way_git_does(sides: Sides) -> None:
    diff = sides.diff()
    assert 'diff --git "a/caf\\351.txt" "b/caf\\351.txt"' in diff
    assert '"b/\\303\\274n\\303\\257code.txt"' in diff


def test_stat_lists_each_changed_file_and_the_summary_line(sides: Sides) -> None:
    lines = sides.diff(stat=True).splitlines()
    names = [line.split("|")[0].strip() for line in lines[:-1]]
    assert sorted(names) == sorted(
        [
            '"\\303\\274n\\303\\257code.txt"',
            '"caf\\351.txt"',
            "becomes_link.txt",
            "big.bin",
            "deep/er/new.txt",
            "edit.txt",
            "empty.txt",
            "gone.txt",
            "link",
            "new link",
            "nul.bin",
            "run.sh",
            "with space.txt",
        ]
    )
    assert lines[-1].startswith(" 13 files changed, ")


def test_no_change_gives_an_empty_string(sides: Sides) -> None:
    assert render_diff(sides.old, dict(sides.old), sides.read_blob) == ""


def test_folders_alone_make_no_diff(sides: Sides) -> None:
    new = {**sides.old, "keep": DirEntry(0o700), "empty-folder": DirEntry(0o755)}
    assert render_diff(sides.old, new, sides.read_blob) == ""


def test_exclude_drops_the_paths_it_matches(sides: Sides) -> None:
    diff = sides.diff(exclude=lambda path: path.startswith("deep/") or path == "edit.txt")
    assert "deep/er/new.txt" not in diff
    assert "a/edit.txt" not in diff
    assert "a/gone.txt" in diff


# -- apply_to -------------------------------------------------------------------------------


def test_apply_to_a_clean_checkout_reproduces_the_new_tree(sides: Sides, tmp_path: Path) -> None:
    clone = sides.clone(tmp_path / "clone")
    sides.apply(clone)
    assert scan(clone, {}) == sides.new


def test_apply_to_counts_added_modified_and_deleted_paths(sides: Sides, tmp_path: Path) -> None:
    result = sides.apply(sides.clone(tmp_path / "clone"))
    assert (result.files, result.added, result.modified, result.deleted) == (13, 4, 8, 1)
    assert result.patch == sides.diff()


def test_apply_to_leaves_the_index_alone(sides: Sides, tmp_path: Path) -> None:
    clone = sides.clone(tmp_path / "clone")
    sides.apply(clone)
    assert git(clone, "diff", "--cached", "--name-only") == b""


def test_apply_to_patches_a_plain_folder_without_a_base_commit(
    sides: Sides, tmp_path: Path
) -> None:
    folder = build(tmp_path / "plain", OLD)
    sides.apply(folder, plain=True)
    assert scan(folder, {}) == sides.new


def test_apply_to_treats_an_untracked_folder_inside_a_repository_as_a_plain_folder(
    sides: Sides, tmp_path: Path
) -> None:
    folder = build(sides.repo / "untracked", OLD)
    sides.apply(folder, plain=True)
    assert scan(folder, {}) == sides.new


def test_apply_to_turns_a_folder_into_a_file_and_a_file_into_a_folder(tmp_path: Path) -> None:
    sides = make_sides(tmp_path, {"d/x": b"x\n", "f": b"f\n"}, {"d": b"d\n", "f/y": b"y\n"})
    clone = sides.clone(tmp_path / "clone")
    sides.apply(clone)
    assert scan(clone, {}) == sides.new


def test_apply_to_with_check_only_changes_nothing(sides: Sides, tmp_path: Path) -> None:
    clone = sides.clone(tmp_path / "clone")
    result = sides.apply(clone, check_only=True)
    assert scan(clone, {}) == sides.old
    assert result.files == 13


def test_apply_to_with_no_change_returns_an_empty_patch(sides: Sides, tmp_path: Path) -> None:
    clone = sides.clone(tmp_path / "clone")
    result = apply_to(clone, sides.old, sides.old, sides.read_blob, base_commit=sides.base)
    assert result == ApplyResult(files=0, added=0, modified=0, deleted=0, patch="")


def test_apply_to_refuses_a_missing_target(sides: Sides, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        sides.apply(tmp_path / "nowhere")


def test_apply_to_refuses_a_plain_folder_when_a_base_commit_is_given(
    sides: Sides, tmp_path: Path
) -> None:
    folder = build(tmp_path / "plain", OLD)
    with pytest.raises(UsageError, match="not the top folder of a git checkout"):
        sides.apply(folder)
    assert scan(folder, {}) == sides.old


def test_apply_to_refuses_a_target_whose_head_has_moved(sides: Sides, tmp_path: Path) -> None:
    clone = sides.clone(tmp_path / "clone")
    moved = commit_all(clone, "moved on")
    with pytest.raises(UsageError, match="the target has moved") as refused:
        sides.apply(clone)
    assert moved[:7] in str(refused.value)
    assert sides.base[:7] in str(refused.value)
    assert scan(clone, {}) == sides.old


@pytest.mark.parametrize(
    ("path", "local_change"),
    [
        ("edit.txt", lambda p: p.write_text("mine\n")),
        ("gone.txt", lambda p: p.unlink()),
        ("empty.txt", lambda p: p.write_text("")),
        ("run.sh", lambda p: p.chmod(0o755)),
    ],
    ids=["modified", "deleted", "added", "mode"],
)
def test_apply_to_refuses_conflicting_local_changes_naming_the_path(
    sides: Sides, tmp_path: Path, path: str, local_change: Callable[[Path], object]
) -> None:
    clone = sides.clone(tmp_path / "clone")
    local_change(clone / path)
    before = scan(clone, {})
    with pytest.raises(UsageError, match=f"conflicting local changes in 1 path.*: {path};"):
        sides.apply(clone)
    assert scan(clone, {}) == before


def test_apply_to_names_five_conflicting_paths_and_counts_the_rest(
    sides: Sides, tmp_path: Path
) -> None:
    clone = sides.clone(tmp_path / "clone")
    for name in ["edit.txt", "gone.txt", "nul.bin", "big.bin", "run.sh", "with space.txt"]:
        (clone / name).write_text("mine\n")
    (clone / "empty.txt").write_text("mine\n")
    with pytest.raises(UsageError) as refused:
        sides.apply(clone)
    assert "in 7 path(s)" in str(refused.value)
    assert ": big.bin, edit.txt, empty.txt, gone.txt, nul.bin and 2 more;" in str(refused.value)


def test_apply_to_refuses_a_local_file_where_the_change_needs_a_folder(
    sides: Sides, tmp_path: Path
) -> None:
    clone = sides.clone(tmp_path / "clone")
    (clone / "deep").write_text("in the way\n")
    with pytest.raises(UsageError, match=r"conflicting local changes in 1 path.*: deep;"):
        sides.apply(clone)
    assert (clone / "deep").read_text() == "in the way\n"


def test_apply_to_refuses_what_git_apply_check_rejects_quoting_git(tmp_path: Path) -> None:
    data = b"#!/bin/sh\n"
    sha = hashlib.sha256(data).hexdigest()
    hook: Manifest = {".git/hooks/post-checkout": FileEntry(0o755, sha, len(data))}
    folder = build(tmp_path / "plain", {"a.txt": b"a\n"})
    with pytest.raises(UsageError, match=r"does not apply .*: error: invalid path '\.git/hooks"):
        apply_to(folder, {}, hook, {sha: data}.__getitem__, base_commit=None)
    assert sorted(os.listdir(folder)) == ["a.txt"]
