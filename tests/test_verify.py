"""The default hidden-test verifier, run as the workspace runs it (a plain script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentrunner.envs.workspace import VERIFY_SCRIPT


def _verify(tmp_path: Path, test_source: str) -> dict[str, object]:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_hidden_x.py").write_text(test_source)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "mod.py").write_text("VALUE = 2\n")
    read_end, write_end = os.pipe()  # the verdict comes over a pipe, never the output
    with os.fdopen(read_end, "rb") as verdict:
        subprocess.run(
            [sys.executable, "-P", "-s", str(VERIFY_SCRIPT), str(hidden), str(write_end)],
            cwd=workspace,
            capture_output=True,
            pass_fds=(write_end,),
            check=True,
        )
        os.close(write_end)
        result: dict[str, object] = json.loads(verdict.read())
    return result


def test_verifier_counts_passed_and_total_tests(tmp_path: Path) -> None:
    source = (
        "import unittest\nfrom mod import VALUE\n"
        "class T(unittest.TestCase):\n"
        "    def test_ok(self): self.assertEqual(VALUE, 2)\n"
        "    def test_bad(self): self.assertEqual(VALUE, 3)\n"
    )
    assert _verify(tmp_path, source) == {
        "passed": 1,
        "total": 2,
        "failures": ["test_hidden_x.T.test_bad"],
        "complete": True,
    }


def test_a_test_with_several_failing_subtests_counts_once(tmp_path: Path) -> None:
    source = (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_many(self):\n"
        "        for i in range(3):\n"
        "            with self.subTest(i=i): self.assertEqual(i, 99)\n"
    )
    result = _verify(tmp_path, source)
    assert (result["passed"], result["total"]) == (0, 1)
