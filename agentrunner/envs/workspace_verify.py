"""The coding workspace, verification: the task's hidden verifier or its test command run in a
sandbox of its own on a clean copy of the recorded change (the base with the change applied,
never the agent's workspace), and scored (:mod:`agentrunner.envs.scoring`). ``submit`` and
``check`` come here; :class:`agentrunner.envs.workspace.WorkspaceEnv` supplies the episode's
snapshots and the sandboxed runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentrunner.envs import paths, sandbox
from agentrunner.envs.clean_copy import materialize
from agentrunner.envs.jail import HIDDEN, VERIFIER, Jail
from agentrunner.envs.layout import lay_out
from agentrunner.envs.report_pipe import ReportPipe
from agentrunner.envs.sandbox import ToolError
from agentrunner.envs.scoring import (
    MAX_REPORT_BYTES,
    TestOutcome,
    judged,
    not_judged,
    score_test,
    score_verifier,
)
from agentrunner.envs.snapshotter import Snapshotter
from agentrunner.envs.tasks import Task
from agentrunner.envs.tools import WorkspaceTools
from agentrunner.values.environment import StepResult

VERIFY_SCRIPT = Path(__file__).resolve().parent / "verify.py"
"""The default verifier, run as a plain script: it needs only the standard library."""
WORKSPACE_PREFIX = "agentrunner-ws-"
"""Workspaces are temp folders named ``agentrunner-ws-<pid>-<random>``."""
_TEST_OUTPUT_CAP = 20_000


class WorkspaceVerification(WorkspaceTools):
    """Scoring the workspace's recorded change, over what the environment provides."""

    verify_timeout: float
    _base: dict[str, Any] | None
    _jail: Jail | None

    def snapshot(self) -> str:
        raise NotImplementedError

    def _snapshotter(self) -> Snapshotter:
        raise NotImplementedError

    def _require(self) -> Task:
        raise NotImplementedError

    def _run(
        self,
        argv: list[str],
        *,
        timeout: float,
        extra_ro: tuple[tuple[Path, str], ...] = (),
        network: bool | None = None,
        root: Path | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> sandbox.CommandResult:
        raise NotImplementedError

    def run_test(
        self, command: str, *, report: str | None = None, hidden: dict[str, str] | None = None
    ) -> TestOutcome:
        """Run a test command in the sandbox on a clean copy of the recorded change (``hidden``
        files laid over it), and score it; the agent's workspace is not touched. The JUnit
        ``report`` is taken through a pipe as it is written (see ``report_pipe``)."""
        with self._clean_copy() as (root, mask):
            copy = root / "workspace"
            try:
                for rel, content in sorted((hidden or {}).items()):
                    paths.plant_bytes(copy, rel, content.encode("utf-8"))
                pipe = ReportPipe(copy, report, MAX_REPORT_BYTES) if report is not None else None
            except (ToolError, OSError) as exc:
                problem = f"the workspace stands in the way of the test run: {mask(str(exc))}"
                return TestOutcome(command=command, exit_code=-1, timed_out=False, reward=0.0,
                                   report_problem=problem)  # fmt: skip
            with pipe or contextlib.nullcontext():
                argv = self.shell(command)
                result = self._run(argv, timeout=self.verify_timeout, network=False, root=root)
                data = pipe.finish() if pipe is not None else None
            output = sandbox.cap_text(result.text(mask), _TEST_OUTPUT_CAP)
            return score_test(command, result, report, data, output=output)

    @contextlib.contextmanager
    def _clean_copy(self) -> Iterator[tuple[Path, Callable[[str], str]]]:
        """A private root whose ``workspace`` is the base with the recorded change applied
        (what ``diff`` shows: no ``__pycache__``, no ignored file, nothing the snapshot leaves
        out), and the
        mask that shows it as ``/``; removed afterwards."""
        assert self._base is not None
        after = self.snapshot()
        root = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-")).resolve()
        try:
            for name in ("workspace", "tmp"):
                (root / name).mkdir()
            backend = self._snapshotter().backend
            base, repo = str(self._base["snapshot"]), self._base.get("repo")
            materialize(backend, base, after, root / "workspace", repo=repo)
            masker = sandbox.PathMasker(root)
            yield root, lambda text: masker(self._mask(text))
        finally:
            sandbox.force_rmtree(root)

    def check(self) -> StepResult:
        """What ``submit`` would score now (the task's verifier or test command, on a clean
        copy of the recorded change), without ending the episode or counting a step."""
        return self._submit()

    def _submit(self) -> StepResult:
        task = self._require()
        if task.test:
            outcome = self.run_test(task.test, report=task.test_report, hidden=task.hidden_files)
            body = outcome.output.rstrip("\n")
            observation = f"submitted: {outcome.summary()}" + (f"\n{body}" if body else "")
            info = {"exit_code": outcome.exit_code, "test": outcome.to_dict()}
            if outcome.total is not None:
                info.update(passed=outcome.passed, total=outcome.total)
            return StepResult(observation=observation, reward=outcome.reward, done=True, info=info)
        return self._verify(task) if judged(task) else not_judged()

    def _verify(self, task: Task) -> StepResult:
        """The task's hidden verifier on a clean copy of the recorded change, with the hidden
        files beside it; the bundled one reports over a pipe only its supervisor holds."""
        assert self._jail is not None
        inside = self._jail.mode == "bwrap"
        script = f"{VERIFIER}/verify.py" if inside else str(VERIFY_SCRIPT)
        with self._clean_copy() as (root, _):
            hidden, tools = root / "hidden", root / "verifier"  # beside the copy's workspace
            shown = HIDDEN if inside else str(hidden)
            lay_out(task, task.hidden_files, hidden)
            tools.mkdir()
            shutil.copyfile(VERIFY_SCRIPT, tools / "verify.py")
            for folder in (hidden, tools):  # readable by the sandbox's user, writable by none
                folder.chmod(0o755)
            binds = ((hidden, HIDDEN), (tools, VERIFIER))
            run = functools.partial(
                self._run, timeout=self.verify_timeout, extra_ro=binds, network=False, root=root
            )
            if task.verifier:
                result = run([arg.replace("{hidden}", shown) for arg in task.verifier])
                return score_verifier(task, result, self.verify_timeout)
            read_end, write_end = os.pipe()
            try:
                # -P: the script's folder is not put on sys.path (it would shadow task modules)
                argv = [str(self._jail.python), "-P", "-s", script, shown, str(write_end)]
                result = run(argv, pass_fds=(write_end,))
                os.close(write_end)
                write_end = -1
                verdict = _read_available(read_end, 1 << 20)
            finally:
                for fd in (read_end, write_end):
                    if fd >= 0:
                        os.close(fd)
        return score_verifier(task, result, self.verify_timeout, verdict=verdict)


def _read_available(fd: int, limit: int) -> bytes:
    """What a pipe holds now (its writers are gone or done), up to ``limit`` bytes."""
    os.set_blocking(fd, False)
    data = b""
    while len(data) <= limit:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return data[: limit + 1]
