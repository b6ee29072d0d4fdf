"""Real Inspect AI ``.eval`` logs for the importer's tests, written at test time by the real
``inspect_ai`` running a tiny task offline against its built-in ``mockllm/model``.

Inspect is not a dependency of agentrunner, so it lives in a venv of its own outside the
repository, ``$AGENTRUNNER_INSPECT_VENV`` (default ``~/.cache/agentrunner-inspect/venv``), built
when missing (``.ci/run`` builds it first); a test that needs it is skipped with the reason when
it cannot be had (no package index).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INSPECT_VENV = Path(
    os.environ.get("AGENTRUNNER_INSPECT_VENV")
    or Path.home() / ".cache" / "agentrunner-inspect" / "venv"
)
INSPECT = "inspect-ai==0.3.285"

TASK = '''
import sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, solver, system_message, use_tools
from inspect_ai.tool import tool


@tool
def add():
    async def execute(x: int, y: int):
        """Add two numbers.

        Args:
            x: The first number.
            y: The second number.
        """
        return str(x + y)

    return execute


@solver
def break_three():
    async def solve(state, generate):
        if state.sample_id == "three":
            raise RuntimeError("sample three breaks")
        return state

    return solve


def used(output, input_tokens, output_tokens):
    # given, so that mockllm does not count tokens with tiktoken (which downloads its tables)
    output.usage = ModelUsage(
        input_tokens=input_tokens, output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
    return output


outputs = [
    used(ModelOutput.for_tool_call("mockllm/model", "add", {"x": 1, "y": 1}), 11, 3),
    used(ModelOutput.from_content("mockllm/model", "The answer is 2"), 17, 5),
    used(ModelOutput.for_tool_call("mockllm/model", "add", {"x": 2, "y": 2}), 13, 4),
    used(ModelOutput.from_content("mockllm/model", "The answer is 5"), 19, 6),
]
task = Task(
    name="arith",
    dataset=[
        Sample(input="What is 1+1?", target="2", id="one"),
        Sample(input="What is 2+2?", target="4", id="two"),
        Sample(input="What is 3+3?", target="6", id="three"),
    ],
    solver=[system_message("You add numbers."), break_three(), use_tools(add()), generate()],
    scorer=includes(),
)
model = get_model("mockllm/model", custom_outputs=outputs)
[log] = eval(
    task, model=model, log_dir=sys.argv[1], display="none", max_samples=1, fail_on_error=False,
)
assert log.status == "success", log.status
'''


@functools.cache  # one build attempt per run: a failed install is not retried for every test
def prepare_inspect() -> str | None:
    """Builds Inspect's venv when it is missing; why it cannot be had, or None."""
    path = str(INSPECT_VENV)
    python = INSPECT_VENV / "bin" / "python"
    if not (INSPECT_VENV / "bin" / "inspect").exists():
        try:
            for command in (
                [sys.executable, "-m", "venv", path],
                [str(python), "-m", "pip", "install", "-q", INSPECT],
            ):
                subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(path, ignore_errors=True)
            return f"cannot build Inspect's venv at {path}: {exc.stderr.strip()[-300:]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(path, ignore_errors=True)
            return f"cannot build Inspect's venv at {path}: {exc}"
    return None


def eval_log(folder: Path) -> Path:
    """The ``.eval`` log of a real Inspect run of a three-sample task whose mock model calls a
    tool and answers (one answer right, one wrong; the third sample's solver fails before
    the model is asked); skip when Inspect cannot be had."""
    problem = prepare_inspect()
    if problem is not None:
        pytest.skip(problem)
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "arith_task.py"
    script.write_text(TASK)
    env = {**os.environ, "INSPECT_LOG_DIR": str(folder / "logs"), "NO_PROXY": "*"}
    done = subprocess.run(
        [str(INSPECT_VENV / "bin" / "python"), str(script), str(folder / "logs")],
        capture_output=True, text=True, timeout=600, env=env, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (log,) = (folder / "logs").glob("*.eval")
    return log
