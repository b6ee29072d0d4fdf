"""Tests for copying a user's git repository (``agentrunner.envs.repo``).

Every repository is made at test time with real git; HOME points at an empty folder so the
machine's own git config plays no part.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from agentrunner.envs.repo import NO_PUSH_URL, RepoBase, copy_repository
from agentrunner.values.errors import UsageError

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def _own_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)


def git_bytes(cwd: Path, *args: str) -> bytes:
    cmd = ["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args]
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True).stdout


def git(cwd: Path, *args: str) -> str:
    return git_bytes(cwd, *args).decode()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        path.write_bytes(content)


def make_repo(path: Path, files: dict[str, str | bytes]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    write(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {"README.md": "hello\n", "src/app.py": "print('app')\n", "src/old.py": "old = 1\n"},
    )


def copy(
    repo: Path | str, dest: Path, *, rev: str | None = None, with_git: bool = False
) -> RepoBase:
    dest.mkdir()
    return copy_repository(repo, dest, rev=rev, with_git=with_git)


def listing(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if ".git" not in p.relative_to(root).parts and not p.is_dir()
    }


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``root`` (``.git`` included): kind, size, mtime_ns, mode, content."""
    entries: dict[str, tuple[object, ...]] = {".": ("dir", root.lstat().st_mtime_ns)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                entries[rel] = ("link", os.readlink(path), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                entries[rel] = ("dir", st.st_mtime_ns, st.st_mode)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                entries[rel] = ("file", st.st_size, st.st_mtime_ns, st.st_mode, digest)
    return entries


def make_dirty(repo: Path) -> None:
    """A modification, a staged new file, a deletion, untracked and ignored files, and a
    tracked file whose stat data no longer matches the index (git would refresh it)."""
    write(repo, {"README.md": "hello, changed\n", "src/new.py": "new = 1\n"})
    git(repo, "add", "src/new.py")
    (repo / "src" / "old.py").unlink()
    write(repo, {".gitignore": "*.log\n", "notes.txt": "untracked\n", "debug.log": "ignored\n"})
    os.utime(repo / "src" / "app.py", ns=(1_000_000_000, 1_000_000_000))


# --- content, byte for byte -------------------------------------------------------------------


def test_binary_file_is_copied_byte_for_byte(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 64 + b"\0\r\n\x00\xff"
    source = make_repo(tmp_path / "repo", {"data.bin": blob})
    copy(source, tmp_path / "dest")
    assert (tmp_path / "dest" / "data.bin").read_bytes() == blob


def test_five_megabyte_file_is_copied_byte_for_byte(tmp_path: Path) -> None:
    big = os.urandom(5 * 1024 * 1024)
    source = make_repo(tmp_path / "repo", {"big.bin": big})
    copy(source, tmp_path / "dest")
    assert (tmp_path / "dest" / "big.bin").read_bytes() == big


def test_symlink_inside_the_repository_is_kept_as_a_link(repo: Path, tmp_path: Path) -> None:
    (repo / "link.py").symlink_to("src/app.py")
    git(repo, "add", "link.py")
    copy(repo, tmp_path / "dest")
    link = tmp_path / "dest" / "link.py"
    assert link.is_symlink()
    assert os.readlink(link) == "src/app.py"


def test_symlink_pointing_outside_is_kept_verbatim_and_not_followed(
    repo: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    (repo / "abs").symlink_to(secret)
    (repo / "rel").symlink_to("../secret.txt")
    git(repo, "add", "abs", "rel")
    copy(repo, tmp_path / "dest")
    assert os.readlink(tmp_path / "dest" / "abs") == str(secret)
    assert os.readlink(tmp_path / "dest" / "rel") == "../secret.txt"


def test_executable_bit_is_kept(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "repo", {"run.sh": "#!/bin/sh\necho hi\n", "lib.sh": "x=1\n"})
    (source / "run.sh").chmod(0o755)
    git(source, "add", "run.sh")
    copy(source, tmp_path / "dest")
    assert os.access(tmp_path / "dest" / "run.sh", os.X_OK)


def test_plain_file_is_not_made_executable(repo: Path, tmp_path: Path) -> None:
    copy(repo, tmp_path / "dest")
    assert not os.stat(tmp_path / "dest" / "README.md").st_mode & 0o111


def test_exec_bit_is_kept_at_a_rev(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "repo", {"run.sh": "#!/bin/sh\n"})
    (source / "run.sh").chmod(0o755)
    git(source, "commit", "-q", "-a", "-m", "make it executable")
    copy(source, tmp_path / "dest", rev="HEAD")
    assert os.access(tmp_path / "dest" / "run.sh", os.X_OK)


def test_symlink_is_kept_verbatim_at_a_rev(repo: Path, tmp_path: Path) -> None:
    (repo / "link").symlink_to("/etc/hostname")
    git(repo, "add", "link")
    git(repo, "commit", "-q", "-m", "link")
    copy(repo, tmp_path / "dest", rev="HEAD")
    assert os.readlink(tmp_path / "dest" / "link") == "/etc/hostname"


def test_tracked_folder_replaced_by_a_symlink_is_not_followed(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, {"app.py": "SECRET\n"})
    for name in ("app.py", "old.py"):
        (repo / "src" / name).unlink()
    (repo / "src").rmdir()
    (repo / "src").symlink_to(elsewhere)
    copy(repo, tmp_path / "dest")
    assert listing(tmp_path / "dest") == {"README.md"}


def test_skip_worktree_file_is_taken_from_the_index(repo: Path, tmp_path: Path) -> None:
    git(repo, "update-index", "--skip-worktree", "src/old.py")
    (repo / "src" / "old.py").unlink()
    base = copy(repo, tmp_path / "dest")
    assert (tmp_path / "dest" / "src" / "old.py").read_text() == "old = 1\n"
    assert not base.dirty


# --- rev=None: the work tree as it is ---------------------------------------------------------


def test_uncommitted_modification_is_copied(repo: Path, tmp_path: Path) -> None:
    write(repo, {"README.md": "hello, edited\n"})
    base = copy(repo, tmp_path / "dest")
    assert (tmp_path / "dest" / "README.md").read_text() == "hello, edited\n"
    assert base.dirty


def test_staged_change_is_copied(repo: Path, tmp_path: Path) -> None:
    write(repo, {"src/app.py": "print('staged')\n", "src/added.py": "added = 1\n"})
    git(repo, "add", "src/app.py", "src/added.py")
    copy(repo, tmp_path / "dest")
    assert (tmp_path / "dest" / "src" / "app.py").read_text() == "print('staged')\n"
    assert (tmp_path / "dest" / "src" / "added.py").read_text() == "added = 1\n"


def test_deleted_tracked_file_is_absent_from_the_copy(repo: Path, tmp_path: Path) -> None:
    (repo / "src" / "old.py").unlink()
    copy(repo, tmp_path / "dest")
    assert not (tmp_path / "dest" / "src" / "old.py").exists()


def test_dirty_sha256_is_the_sha256_of_git_diff_binary_head(repo: Path, tmp_path: Path) -> None:
    make_dirty(repo)
    write(repo, {"src/blob.bin": b"\0\1\2binary"})
    git(repo, "add", "src/blob.bin")
    base = copy(repo, tmp_path / "dest")
    diff = git_bytes(repo, "diff", "--binary", "HEAD")
    assert base.dirty_sha256 == hashlib.sha256(diff).hexdigest()


def test_clean_work_tree_is_not_dirty(repo: Path, tmp_path: Path) -> None:
    base = copy(repo, tmp_path / "dest")
    assert (base.dirty, base.dirty_sha256) == (False, None)


def test_copy_holds_exactly_the_tracked_files_untracked_and_ignored_left_out(
    repo: Path, tmp_path: Path
) -> None:
    make_dirty(repo)
    copy(repo, tmp_path / "dest")
    assert listing(tmp_path / "dest") == {"README.md", "src/app.py", "src/new.py"}


def test_commit_is_the_full_id_of_head(repo: Path, tmp_path: Path) -> None:
    base = copy(repo, tmp_path / "dest")
    assert base.commit == git(repo, "rev-parse", "HEAD").strip()


# --- rev, URLs, bare repositories -------------------------------------------------------------


def test_rev_of_an_older_commit_gives_that_commits_tree(repo: Path, tmp_path: Path) -> None:
    older = git(repo, "rev-parse", "HEAD").strip()
    write(repo, {"src/app.py": "print('v2')\n", "later.txt": "later\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    make_dirty(repo)
    base = copy(repo, tmp_path / "dest", rev="HEAD~1")
    assert (base.commit, base.dirty) == (older, False)
    assert listing(tmp_path / "dest") == {"README.md", "src/app.py", "src/old.py"}
    assert (tmp_path / "dest" / "src" / "app.py").read_text() == "print('app')\n"


def test_file_url_is_accepted(repo: Path, tmp_path: Path) -> None:
    base = copy(repo.as_uri(), tmp_path / "dest")
    assert base.repo == str(repo.resolve())
    assert (tmp_path / "dest" / "README.md").read_text() == "hello\n"


def test_bare_repository_is_copied_at_an_explicit_rev(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    copy(bare, tmp_path / "dest", rev="main")
    assert listing(tmp_path / "dest") == {"README.md", "src/app.py", "src/old.py"}


def test_eol_attribute_is_applied_as_a_checkout_would(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "repo", {".gitattributes": "*.txt eol=crlf\n", "a.txt": "1\n2\n"})
    copy(source, tmp_path / "dest", rev="HEAD")
    assert (tmp_path / "dest" / "a.txt").read_bytes() == b"1\r\n2\r\n"


def test_attributes_come_from_the_commit_not_the_work_tree(tmp_path: Path) -> None:
    source = make_repo(tmp_path / "repo", {"a.txt": "1\n2\n"})
    write(source, {".gitattributes": "*.txt eol=crlf\n"})
    git(source, "add", ".gitattributes")
    git(source, "commit", "-q", "-m", "crlf from now on")
    copy(source, tmp_path / "dest", rev="HEAD~1")
    assert (tmp_path / "dest" / "a.txt").read_bytes() == b"1\n2\n"


def test_external_filter_drivers_are_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "filter-ran"
    source = make_repo(tmp_path / "repo", {".gitattributes": "*.dat filter=mark\n"})
    git(source, "config", "filter.mark.smudge", f"touch {marker}; cat")
    git(source, "config", "filter.mark.clean", f"touch {marker}; cat")
    write(source, {"x.dat": "stored\n"})
    git(source, "add", "x.dat")
    git(source, "commit", "-q", "-m", "filtered")
    marker.unlink()
    write(source, {"x.dat": "edited\n"})
    copy(source, tmp_path / "a")
    copy(source, tmp_path / "b", rev="HEAD")
    assert not marker.exists()
    assert (tmp_path / "b" / "x.dat").read_text() == "stored\n"


def test_submodule_is_skipped_and_listed(repo: Path, tmp_path: Path) -> None:
    lib = make_repo(tmp_path / "lib", {"lib.py": "lib = 1\n"})
    git(repo, "submodule", "add", "-q", str(lib), "vendor/lib")
    git(repo, "commit", "-q", "-m", "add submodule")
    base = copy(repo, tmp_path / "dest")
    assert base.skipped == ("vendor/lib (submodule)",)
    assert list((tmp_path / "dest" / "vendor" / "lib").iterdir()) == []


def test_submodule_is_skipped_at_a_rev_too(repo: Path, tmp_path: Path) -> None:
    lib = make_repo(tmp_path / "lib", {"lib.py": "lib = 1\n"})
    git(repo, "submodule", "add", "-q", str(lib), "vendor/lib")
    git(repo, "commit", "-q", "-m", "add submodule")
    base = copy(repo, tmp_path / "dest", rev="HEAD")
    assert base.skipped == ("vendor/lib (submodule)",)


def test_files_and_bytes_count_what_was_written(repo: Path, tmp_path: Path) -> None:
    (repo / "link").symlink_to("README.md")
    git(repo, "add", "link")
    base = copy(repo, tmp_path / "dest")
    assert (base.files, base.bytes) == (
        4,
        len("hello\n") + len("print('app')\n") + len("old = 1\n"),
    )


def test_to_dict_is_plain_json(repo: Path, tmp_path: Path) -> None:
    base = copy(repo, tmp_path / "dest")
    data = json.loads(json.dumps(base.to_dict()))
    assert data["skipped"] == [] and data["commit"] == base.commit and data["rev"] is None


# --- the source repository is never written ---------------------------------------------------


@pytest.mark.parametrize("rev", [None, "HEAD~1"])
@pytest.mark.parametrize("with_git", [False, True])
def test_source_repository_is_unchanged(
    repo: Path, tmp_path: Path, rev: str | None, with_git: bool
) -> None:
    write(repo, {"second.txt": "2\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    make_dirty(repo)
    before = snapshot(repo)
    copy(repo, tmp_path / "dest", rev=rev, with_git=with_git)
    assert snapshot(repo) == before


# --- with_git: a private history ---------------------------------------------------------------


def test_with_git_status_lists_exactly_the_uncommitted_changes(repo: Path, tmp_path: Path) -> None:
    make_dirty(repo)
    copy(repo, tmp_path / "dest", with_git=True)
    status = git(tmp_path / "dest", "status", "--porcelain").splitlines()
    assert sorted(status) == [" D src/old.py", " M README.md", "?? src/new.py"]


def test_with_git_status_is_clean_for_a_clean_copy_with_a_submodule(
    repo: Path, tmp_path: Path
) -> None:
    lib = make_repo(tmp_path / "lib", {"lib.py": "lib = 1\n"})
    git(repo, "submodule", "add", "-q", str(lib), "vendor/lib")
    git(repo, "commit", "-q", "-m", "add submodule")
    copy(repo, tmp_path / "dest", with_git=True)
    assert git(tmp_path / "dest", "status", "--porcelain") == ""


def test_with_git_head_is_detached_at_the_commit_with_its_history(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, {"second.txt": "2\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    base = copy(repo, tmp_path / "dest", rev="HEAD~1", with_git=True)
    dest = tmp_path / "dest"
    assert git(dest, "rev-parse", "HEAD").strip() == base.commit
    assert git(dest, "log", "--format=%s", "main").splitlines() == ["second", "first"]
    assert git(dest, "status", "--porcelain") == ""


def test_with_git_head_is_detached(repo: Path, tmp_path: Path) -> None:
    copy(repo, tmp_path / "dest", with_git=True)
    detached = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=tmp_path / "dest")
    assert detached.returncode == 1


def test_with_git_objects_are_not_hard_linked_to_the_source(repo: Path, tmp_path: Path) -> None:
    copy(repo, tmp_path / "dest", with_git=True)
    source_inodes = {p.stat().st_ino for p in (repo / ".git" / "objects").rglob("*") if p.is_file()}
    objects = [p for p in (tmp_path / "dest" / ".git" / "objects").rglob("*") if p.is_file()]
    assert objects
    assert all(p.stat().st_nlink == 1 for p in objects)
    assert not {p.stat().st_ino for p in objects} & source_inodes


def test_with_git_push_to_origin_cannot_reach_the_source(repo: Path, tmp_path: Path) -> None:
    copy(repo, tmp_path / "dest", with_git=True)
    assert git(tmp_path / "dest", "remote", "get-url", "--push", "origin").strip() == NO_PUSH_URL


def test_without_with_git_the_copy_has_no_git_folder(repo: Path, tmp_path: Path) -> None:
    copy(repo, tmp_path / "dest")
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["README.md", "src"]


# --- errors --------------------------------------------------------------------------------------


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"does not exist") as info:
        copy(tmp_path / "nowhere", tmp_path / "dest")
    assert str(tmp_path / "nowhere") in str(info.value)


def test_folder_that_is_not_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(UsageError, match=r"plain is not a git repository"):
        copy(tmp_path / "plain", tmp_path / "dest")


def test_subfolder_of_a_repository_is_not_taken_for_the_repository(
    repo: Path, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=r"src is not a git repository"):
        copy(repo / "src", tmp_path / "dest")


def test_unknown_revision_is_a_usage_error(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown revision 'no-such-branch' in .*repo"):
        copy(repo, tmp_path / "dest", rev="no-such-branch")


def test_repository_without_commits_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(UsageError, match=r"repository .*empty has no commits"):
        copy(empty, tmp_path / "dest")


def test_bare_repository_without_rev_is_a_usage_error(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    with pytest.raises(UsageError, match=r"bare\.git is a bare repository: give rev"):
        copy(bare, tmp_path / "dest")


def test_missing_git_is_a_usage_error(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(UsageError, match=r"git is not installed"):
        copy(repo, tmp_path / "dest")


def test_non_empty_destination_is_a_usage_error(repo: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine\n")
    with pytest.raises(UsageError, match=r"destination .*dest is not empty"):
        copy_repository(repo, dest)


def test_destination_inside_the_repository_is_a_usage_error(repo: Path) -> None:
    with pytest.raises(UsageError, match=r"lies inside the repository"):
        copy(repo, repo / "copy")


def test_remote_url_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"is not a local repository"):
        copy("https://example.com/repo.git", tmp_path / "dest")
