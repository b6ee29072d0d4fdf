"""The environment of an imported session: there is none, and it says so.

An episode imported from another agent's trace (``agentrunner import``) has no environment
the runner can rebuild: its tools ran on someone else's machine. A fork of it can still
re-sample a model turn from the exact recorded input, with any model; the tool calls that
answer makes are recorded and answered with a "not run" error, which ends the fork.
"""

from __future__ import annotations

from typing import Any

from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.types import ToolSpec

KIND = "import"


class ImportedSession:
    """Offers the imported session's tools; runs none of them."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._spec = dict(spec)
        self.tools = tuple(ToolSpec.model_validate(t) for t in spec.get("tools") or ())

    def spec(self) -> dict[str, Any]:
        return self._spec

    def reset(self, task_id: str, seed: int) -> ResetResult:
        return ResetResult(prompt="", tools=self.tools)

    def step(self, action: ToolAction) -> StepResult:
        where = self._spec.get("agent") or "another agent"
        return StepResult(
            observation=f"not run: this session was imported from {where}; "
            "it has no environment to run tools in",
            error="no environment",
            done=True,
        )

    def close(self) -> None:
        pass


def why_not_runnable(spec: dict[str, Any]) -> str:
    """What to tell someone who asks to resume or replay an imported episode."""
    source = spec.get("path") or spec.get("session_id") or "its source"
    return (
        f"it was imported from a {spec.get('format', 'foreign')} trace ({source}): there is no "
        "environment to run its tools in; fork it at a turn with --model to re-sample that turn"
    )
