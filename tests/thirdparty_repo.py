"""A git repository made at test time from third-party source that is already installed.

Pygments (a pure-Python package Textual depends on) is copied from site-packages into a temp
folder with a planted bug: ``get_bool_opt`` matches option values case-sensitively, so
``"ON"`` is refused. A small test file of ours exercises it. Nothing third-party is committed
to this project; the copy exists only under the test's temp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pygments

BUGGY = "elif string in ('1', 'yes', 'true', 'on'):"
FIXED = "elif string.lower() in ('1', 'yes', 'true', 'on'):"
TEST_CMD = "python -m unittest tests.test_opts 2>/dev/null"
"""Quiet (unittest reports on stderr, with timings that would make replays diverge)."""
PROMPT = "get_bool_opt in pygments/util.py rejects upper-case option values such as ON; fix it"
TESTS = """import unittest

from pygments.util import get_bool_opt


class BoolOpt(unittest.TestCase):
    def test_upper_case_on(self):
        self.assertIs(get_bool_opt({"a": "ON"}, "a"), True)

    def test_lower_case_yes(self):
        self.assertIs(get_bool_opt({"a": "yes"}, "a"), True)
"""
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def make_repo(dest: Path) -> Path:
    """A committed git repository of Pygments' source with the planted bug."""
    source = Path(pygments.__file__).parent
    shutil.copytree(source, dest / "pygments", ignore=shutil.ignore_patterns("__pycache__"))
    util = dest / "pygments" / "util.py"
    text = util.read_text(encoding="utf-8")
    assert FIXED in text, "pygments changed: the planted bug needs a new place"
    util.write_text(text.replace(FIXED, BUGGY), encoding="utf-8")
    (dest / "tests").mkdir()
    (dest / "tests" / "test_opts.py").write_text(TESTS, encoding="utf-8")
    (dest / "logo.bin").write_bytes(bytes(range(256)) * 64)  # a binary file
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "pygments with a planted bug")
    return dest


def fixing_script(path: Path, *, extra_turns: list[dict[str, Any]] | None = None) -> Path:
    """A scripted model that finds the bug with the tests and fixes it, then submits."""
    turns: list[dict[str, Any]] = [
        {
            "text": "Running the tests first.",
            "tool_calls": [
                {"name": "bash", "arguments": {"command": f"{TEST_CMD} || echo failed"}}
            ],
        },
        {
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {"command": "grep -n \"'yes', 'true'\" pygments/util.py"},
                }
            ]
        },
        {
            "reasoning": "The True branch compares without lower(); the False branch lowers.",
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {"path": "pygments/util.py", "old_str": BUGGY, "new_str": FIXED},
                }
            ],
        },
        *(extra_turns or []),
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"{TEST_CMD} && echo passed"}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    script = {"name": "fix-bool-opt", "episodes": [{"match": "get_bool_opt", "turns": turns}]}
    path.write_text(json.dumps(script), encoding="utf-8")
    return path
