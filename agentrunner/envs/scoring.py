"""Turning a verifier's or a test command's run into a reward and what the model reads.

Two sources of a score: a verifier's JSON verdict (``passed``, ``total``, ``failures`` and
maybe ``score``), scored by the task's reward mode: the bundled verifier's comes over a pipe
only its supervisor holds, a task's own verifier command prints it as its last JSON line; and
a task's own test command (``--test``), which passes on exit status 0 or, given a JUnit XML
report, earns the fraction of test cases that passed (an unreadable report earns 0).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from typing import Any

from agentrunner.envs.sandbox import CommandResult
from agentrunner.envs.tasks import Task
from agentrunner.values.environment import StepResult

MAX_REPORT_BYTES = 64 << 20
NOT_JUDGED = "no test command: not judged (give --test CMD to score the change)"


def judged(task: Task) -> bool:
    """Whether anything judges the task's outcome: a test command, a verifier command, or
    hidden tests for the bundled verifier."""
    return bool(task.test or task.verifier or task.hidden_files)


def not_judged() -> StepResult:
    """The final step of a task nothing judges: done, with no reward (unknown, never 0)."""
    return StepResult(
        observation=f"submitted: {NOT_JUDGED}", reward=None, done=True, info={"judged": False}
    )


def _last_json(output: str) -> dict[str, Any] | None:
    """The last JSON object line of ``output``."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _supervised(verdict: bytes) -> dict[str, Any] | str:
    """The bundled verifier's supervisor's verdict, or why it gave none worth scoring."""
    try:
        value = json.loads(verdict.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        value = None
    if not isinstance(value, dict):
        return "the verifier gave no verdict (the code under test crashed it or tampered with it)"
    if value.get("complete") is not True:
        failures = value.get("failures")
        why = failures[0] if isinstance(failures, list) and failures else "it did not finish"
        return f"the hidden tests did not run to the end: {why}"
    return value


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _clamped_score(value: Any) -> float | None:
    """A continuous verifier's ``score`` clamped to [0, 1] (None when absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return min(1.0, max(0.0, float(value)))


def score_verifier(
    task: Task, result: CommandResult, timeout: float, *, verdict: bytes | None = None
) -> StepResult:
    """The final step from a verifier's run: reward by the task's mode, and a summary.

    ``verdict`` is what the bundled verifier's supervisor wrote to its pipe (the output is
    then never read for a verdict); without it, the output's last JSON line is the verdict."""
    if result.timed_out or result.flooded:
        msg = f"the verifier timed out after {timeout:g} s"
        if result.flooded:
            msg = "the verifier flooded its output and was killed"
        return StepResult(
            observation=f"submitted: {msg}; reward 0", reward=0.0, done=True, error=msg
        )
    found = _last_json(result.text()) if verdict is None else _supervised(verdict)
    if isinstance(found, str):
        msg = found
        return StepResult(
            observation=f"submitted: {msg}; reward 0",
            reward=0.0,
            done=True,
            error=msg,
            info={"exit_code": result.exit_code},
        )
    outcome = found or {}
    passed, total = _count(outcome.get("passed")), _count(outcome.get("total"))
    info: dict[str, Any] = {"exit_code": result.exit_code}
    if passed is None or total is None:
        reward = 1.0 if result.exit_code == 0 else 0.0
        observation = (
            f"submitted: the verifier exited with code {result.exit_code} "
            f"(no test counts reported); reward {reward:g}"
        )
        return StepResult(observation=observation, reward=reward, done=True, info=info)
    score = _clamped_score(outcome.get("score"))
    if task.reward_mode == "binary":
        reward = 1.0 if total > 0 and passed == total else 0.0
    elif task.reward_mode == "continuous" and score is not None:
        reward = score
    else:
        reward = min(1.0, passed / total) if total > 0 else 0.0
    failures = outcome.get("failures")
    failing = sorted(str(f) for f in failures) if isinstance(failures, list) else []
    lines = [f"submitted: {passed}/{total} hidden tests passed; reward {reward:g}"]
    if failing:
        lines.append("failing: " + ", ".join(failing))
    info.update({"passed": passed, "total": total, "failures": failing})
    return StepResult(observation="\n".join(lines), reward=reward, done=True, info=info)


@dataclass(frozen=True)
class TestOutcome:
    """One run of a test command, scored."""

    command: str
    exit_code: int
    timed_out: bool
    reward: float
    passed: int | None = None
    failed: int | None = None
    skipped: int | None = None
    total: int | None = None
    failures: tuple[str, ...] = ()
    report: str | None = None
    report_problem: str | None = None
    output: str = ""

    @property
    def passed_all(self) -> bool:
        """Every test case passed (with a report), else the command exited with status 0
        (never when a report was asked for and none was read)."""
        if self.timed_out or self.report_problem is not None:
            return False
        if self.total is not None:
            return self.failed == 0 and self.total > 0
        return self.exit_code == 0

    def summary(self) -> str:
        if self.timed_out:
            head = "the test command timed out"
        else:
            head = f"the test command exited with code {self.exit_code}"
        if self.total is not None:
            head += f"; {self.passed}/{self.total} test cases passed"
        elif self.report_problem:
            head += f" ({self.report_problem})"
        return f"{head}; reward {self.reward:g}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["failures"] = list(self.failures)
        out["passed_all"] = self.passed_all
        return out


def score_test(
    command: str,
    result: CommandResult,
    report: str | None,
    report_data: bytes | str | None,
    *,
    output: str,
) -> TestOutcome:
    """Score a test command: its JUnit report when one was asked for (``report_data``: its
    bytes, or why it could not be read), else exit status 0."""
    binary = 1.0 if result.exit_code == 0 and not result.timed_out else 0.0
    base = TestOutcome(
        command=command,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        reward=binary,
        output=output,
    )
    if report is None:
        return base
    counts = report_data if isinstance(report_data, str) else read_junit(report_data or b"")
    if isinstance(counts, str):  # asked for a report and got none worth reading: no credit
        fields = {**asdict(base), "reward": 0.0, "report": report, "report_problem": counts}
        return TestOutcome(**fields)
    passed, failed, skipped, failures = counts
    total = passed + failed
    reward = 0.0 if result.timed_out or total == 0 else passed / total
    return TestOutcome(
        command=command,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        reward=reward,
        passed=passed,
        failed=failed,
        skipped=skipped,
        total=total,
        failures=tuple(failures[:50]),
        report=report,
        output=output,
    )


def read_junit(data: bytes) -> tuple[int, int, int, list[str]] | str:
    """(passed, failed, skipped, failing names) from a JUnit XML report, or why it cannot be read.

    Test cases are counted one by one: one with a ``failure`` or ``error`` child failed, one
    with ``skipped`` was skipped (and counts toward neither side)."""
    try:
        root = ET.fromstring(data)  # expat refuses entity-expansion bombs
    except ET.ParseError as exc:
        return f"the JUnit report is not readable XML ({exc})"
    passed = failed = skipped = 0
    failures: list[str] = []
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        name = ".".join(x for x in (case.get("classname"), case.get("name")) if x)
        if tags & {"failure", "error"}:
            failed += 1
            failures.append(name or "?")
        elif "skipped" in tags:
            skipped += 1
        else:
            passed += 1
    if passed + failed + skipped == 0:
        return "the JUnit report holds no test cases"
    return passed, failed, skipped, failures
