"""A run into a trace store whose tool leaves a mark outside the store, for crash tests.

``python tests/crash_writer.py STORE MARKS N``: the scripted model (its script written beside
``MARKS``) calls the tool ``mark`` with ``{"n": 1}`` .. ``{"n": N}``, one call a turn. Each
step first writes the file ``MARKS/<n>`` (the tool has run: the runner acted on its
``tool.call``); the last step then blocks until the process is killed, so the crash comes
while nothing else is written.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from agentrunner import TraceStore, run_agent_episode
from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.types import ToolSpec
from providers.scripted import ScriptedModel


class MarkingEnv:
    """One tool, ``mark(n)``: writes ``marks/<n>``; the ``last`` call then never returns."""

    def __init__(self, marks: Path, last: int) -> None:
        self.marks = marks
        self.last = last

    def spec(self) -> dict[str, Any]:
        return {"kind": "marking"}

    def reset(self, task_id: str, seed: int) -> ResetResult:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        tool = ToolSpec(name="mark", description="leave mark n", parameters=schema)
        return ResetResult(prompt="Leave the marks.", tools=(tool,))

    def step(self, action: ToolAction) -> StepResult:
        n = int(action.arguments["n"])
        (self.marks / str(n)).write_text("ran\n")
        if n == self.last:
            threading.Event().wait()  # until killed
        return StepResult(observation=f"mark {n} left")

    def close(self) -> None:
        pass


def main(store_url: str, marks: Path, count: int) -> None:
    turns = [{"tool_calls": [{"name": "mark", "arguments": {"n": n}}]} for n in range(1, count + 1)]
    script = marks.parent / "marks-script.json"
    script.write_text(json.dumps({"name": "marks", "episodes": [{"turns": turns}]}))
    run_agent_episode(
        env=MarkingEnv(marks, count),
        task_id="marks",
        model_fn=ScriptedModel(str(script), pace=0),
        store=TraceStore(store_url),
        max_turns=count + 1,
    )


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
