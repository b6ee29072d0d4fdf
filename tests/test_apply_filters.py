"""``agentrunner apply`` never runs programs the target repository's config names.

A checkout's ``.git/config`` can define filter drivers (``filter.<name>.clean``, ``smudge``,
``process``) that ``.gitattributes`` attaches to paths; plain ``git apply`` runs them on the
files it reads and writes. The target is the user's (or anyone's) checkout, so ``apply`` and
``apply --check`` switch every such driver off, as the repository copy does: here each driver
touches a marker file outside the checkout, and the marker must never appear.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_process import last_json, run_cli
from thirdparty_repo import git

from agentrunner.envs.jail import bwrap_problem

SANDBOX = "bwrap" if bwrap_problem() is None else "process"
ATTRIBUTES = "clean.txt filter=touchy\nproc.txt filter=lfsish\n"
FILES = {"clean.txt": "one\ntwo\n", "proc.txt": "alpha\nbeta\n"}
EDITED = {"clean.txt": "one\n2\n", "proc.txt": "alpha\nBETA\n"}


def arm_filters(checkout: Path, markers: Path) -> None:
    """Filter drivers in ``checkout``'s own config, each leaving a marker when it runs."""
    for key, marker in (
        ("filter.touchy.clean", "clean"),
        ("filter.touchy.smudge", "smudge"),
        ("filter.lfsish.process", "process"),
    ):
        git(checkout, "config", key, f"sh -c 'touch {markers / marker}; cat'")
    git(checkout, "config", "filter.lfsish.required", "true")


def make_checkout(dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / ".gitattributes").write_text(ATTRIBUTES)
    for name, text in FILES.items():
        (dest / name).write_text(text)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    return dest


def editing_script(script: Path) -> Path:
    calls = [
        {"name": "write_file", "arguments": {"path": p, "content": t}} for p, t in EDITED.items()
    ]
    turns = [{"tool_calls": calls}, {"tool_calls": [{"name": "submit", "arguments": {}}]}]
    script.write_text(json.dumps({"name": "edit", "episodes": [{"turns": turns}]}))
    return script


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder


@pytest.fixture
def episode(tmp_path: Path, markers: Path) -> tuple[Path, Path, str]:
    """An episode that edited both filtered files of an armed checkout: (db, checkout, id)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = make_checkout(tmp_path / "repo")
    db = tmp_path / "t.db"
    script = editing_script(tmp_path / "script.json")
    proc = run_cli(
        *("run", "--repo", str(repo), "--prompt", "edit both files"),
        *("--model", f"scripted:{script}", "--sandbox", SANDBOX, "--db", str(db), "--json"),
    )
    assert proc.returncode == 0, proc.stderr
    arm_filters(repo, markers)
    return db, repo, str(last_json(proc.stdout)["episode_id"])


def test_apply_check_runs_none_of_the_targets_filter_drivers(
    episode: tuple[Path, Path, str], markers: Path
) -> None:
    db, repo, episode_id = episode
    proc = run_cli("apply", episode_id, "--check", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in markers.iterdir()) == []
    assert {name: (repo / name).read_text() for name in FILES} == FILES


def test_apply_to_a_checkout_with_filter_drivers_applies_without_running_them(
    episode: tuple[Path, Path, str], markers: Path, tmp_path: Path
) -> None:
    db, repo, episode_id = episode
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    arm_filters(clone, markers)
    proc = run_cli("apply", episode_id, "--to", str(clone), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in markers.iterdir()) == []
    assert {name: (clone / name).read_text() for name in EDITED} == EDITED
