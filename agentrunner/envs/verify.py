"""The default hidden-test verifier: runs a task's hidden ``unittest`` tests.

Run as ``python -P verify.py HIDDEN_DIR [NONCE]`` (a plain script: standard library only, the
package is not imported) with the workspace as the working directory. It imports the
workspace's code, runs every ``test*.py`` in ``HIDDEN_DIR`` with the standard library's
unittest (so no test framework has to be installed in the sandbox), and prints one JSON line
``{"passed": P, "total": T, "failures": [...], "nonce": NONCE}`` as its very last output: it
then leaves at once (``os._exit``), so no exit handler of the code under test can print a
forged verdict after it, and the runner only believes a line carrying this run's nonce.
"""

from __future__ import annotations

import json
import os
import sys
import unittest


def run(hidden_dir: str, workspace: str) -> dict[str, object]:
    sys.path.insert(0, workspace)
    loader = unittest.TestLoader()
    suite = loader.discover(hidden_dir, pattern="test*.py", top_level_dir=hidden_dir)
    result = unittest.TestResult()
    suite.run(result)
    # A test with failing subtests is reported once per subtest: count tests, not reports.
    failures = sorted({_test_id(test) for test, _ in result.failures + result.errors})
    total = result.testsRun
    return {"passed": max(0, total - len(failures)), "total": total, "failures": failures[:20]}


def _test_id(test: unittest.TestCase) -> str:
    parent = getattr(test, "test_case", None)  # a _SubTest wraps its test case
    return str(parent.id() if parent is not None else test.id())


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -P verify.py HIDDEN_DIR [NONCE]", file=sys.stderr)
        return 2
    outcome = run(argv[0], os.getcwd())
    if len(argv) == 2:
        outcome["nonce"] = argv[1]
    sys.stderr.flush()
    sys.stdout.write("\n" + json.dumps(outcome, sort_keys=True) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
