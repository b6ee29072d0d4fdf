"""The default hidden-test verifier: runs a task's hidden ``unittest`` tests under a supervisor.

Run as ``python -P -s verify.py HIDDEN_DIR VERDICT_FD`` (a plain script: standard library
only, the package is not imported) with the workspace as the working directory; without
``VERDICT_FD`` (by hand) the verdict is the last line of the output, which the runner never
reads. It is two processes:

- the *supervisor* (this invocation) never imports the workspace's code. It makes itself
  non-dumpable (so no other process of the sandbox can open its file descriptors or memory
  through ``/proc``), starts the test runner as its child with ``VERDICT_FD`` closed, and
  writes one JSON verdict ``{"passed": P, "total": T, "failures": [...], "complete": C}``
  to ``VERDICT_FD`` (a pipe only it holds; the runner reads nothing else);
- the *test runner* (``verify.py --child HIDDEN_DIR REPORT_FD``) imports the workspace's
  code, runs every ``test*.py`` in ``HIDDEN_DIR`` with the standard library's unittest (so no
  test framework has to be installed in the sandbox) and writes its counts to ``REPORT_FD``.

The supervisor counts a run as complete only when the runner wrote exactly one report and
then exited with status 0; a runner that dies, is killed or leaves early (``os._exit`` while
its modules import) gives an incomplete verdict, which scores 0. What the runner prints goes
to the output the model reads, never to the verdict.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
from typing import Any

_PR_SET_DUMPABLE = 4
_MAX_REPORT = 1 << 20


def run(hidden_dir: str, workspace: str) -> dict[str, object]:
    import unittest  # the test runner's alone: the supervisor starts without it

    sys.path.insert(0, workspace)
    loader = unittest.TestLoader()
    suite = loader.discover(hidden_dir, pattern="test*.py", top_level_dir=hidden_dir)
    result = unittest.TestResult()
    suite.run(result)
    # A test with failing subtests is reported once per subtest: count tests, not reports.
    failures = sorted({_test_id(test) for test, _ in result.failures + result.errors})
    total = result.testsRun
    return {"passed": max(0, total - len(failures)), "total": total, "failures": failures[:20]}


def _test_id(test: Any) -> str:
    parent = getattr(test, "test_case", None)  # a _SubTest wraps its test case
    return str(parent.id() if parent is not None else test.id())


def child(hidden_dir: str, report_fd: int) -> int:
    """The test runner: run the tests, write the counts to ``report_fd``, exit at once."""
    outcome = run(hidden_dir, os.getcwd())
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(report_fd, json.dumps(outcome, sort_keys=True).encode() + b"\n")
    os._exit(0)  # no exit handler of the code under test runs after the report


def supervise(hidden_dir: str, verdict_fd: int) -> int:
    """Run the test runner as a child and write the verdict on its run to ``verdict_fd``."""
    os.set_inheritable(verdict_fd, False)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    read_end, write_end = os.pipe()
    argv = [sys.executable, "-P", "-s", os.path.abspath(__file__), "--child", hidden_dir]
    try:
        proc = subprocess.Popen([*argv, str(write_end)], pass_fds=(write_end,), close_fds=True)
    finally:
        os.close(write_end)
    data = b""
    with os.fdopen(read_end, "rb") as reports:
        while chunk := reports.read(65536):
            data = (data + chunk)[: _MAX_REPORT + 1]
    code = proc.wait()
    verdict = _verdict(data, code)
    os.write(verdict_fd, json.dumps(verdict, sort_keys=True).encode() + b"\n")
    os.close(verdict_fd)
    return 0


def _verdict(data: bytes, code: int) -> dict[str, object]:
    """What the supervisor reports: the runner's counts when its run was complete."""
    lines = data.splitlines()
    report = None
    if len(lines) == 1 and len(data) <= _MAX_REPORT:
        try:
            report = json.loads(lines[0])
        except ValueError:
            report = None
    if code != 0 or not isinstance(report, dict):
        why = f"exit code {code}" if code != 0 else "no single report"
        reason = f"the test run did not finish ({why})"
        return {"passed": 0, "total": 0, "failures": [reason], "complete": False}
    failures = report.get("failures")
    return {
        "passed": report.get("passed"),
        "total": report.get("total"),
        "failures": [str(f)[:300] for f in failures[:20]] if isinstance(failures, list) else [],
        "complete": True,
    }


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "--child" and argv[2].isdigit():
        return child(argv[1], int(argv[2]))
    if len(argv) == 1:  # by hand: the verdict is the last line of the output
        sys.stdout.write("\n")
        sys.stdout.flush()
        return supervise(argv[0], os.dup(1))
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -P -s verify.py HIDDEN_DIR [VERDICT_FD]", file=sys.stderr)
        return 2
    return supervise(argv[0], int(argv[1]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
