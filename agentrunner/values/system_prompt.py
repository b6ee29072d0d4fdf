"""A user's addition to the system prompt: an environment wrapper that appends it.

The environment's own system prompt says what the tools are and how an episode ends, so the
user's text is added after it (a blank line between), never put in its place; with no
system prompt of its own, the text becomes the system prompt. The runner records the result
as the episode's system message (a ``message`` event with role ``system``), so a resume
or a fork, which rebuild the history from the store, keep it.
"""

from __future__ import annotations

from typing import Any

from agentrunner.values.environment import (
    Environment,
    ResetResult,
    Restorable,
    SnapshotBackend,
    StepResult,
    ToolAction,
    UsesStore,
)


def add_to_system_prompt(system: str | None, addition: str) -> str:
    """``system`` with ``addition`` after it (or ``addition`` alone)."""
    return f"{system.rstrip()}\n\n{addition.strip()}" if system else addition.strip()


class _WithSystemPrompt:
    """The environment ``env``, with ``addition`` appended to its system prompt."""

    def __init__(self, env: Environment, addition: str) -> None:
        self.env = env
        self.addition = addition

    def spec(self) -> dict[str, Any]:
        return self.env.spec()

    def reset(self, task_id: str, seed: int) -> ResetResult:
        result = self.env.reset(task_id, seed)
        system = add_to_system_prompt(result.system, self.addition)
        return result.model_copy(update={"system": system})

    def step(self, action: ToolAction) -> StepResult:
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()


class _StoringWithSystemPrompt(_WithSystemPrompt):
    def bind_store(self, store: SnapshotBackend) -> None:
        assert isinstance(self.env, UsesStore)
        self.env.bind_store(store)


class _RestorableWithSystemPrompt(_WithSystemPrompt):
    def restore(self, snapshot_id: str, *, steps: int | None = None) -> None:
        assert isinstance(self.env, Restorable)
        self.env.restore(snapshot_id, steps=steps)


class _StoringRestorableWithSystemPrompt(_StoringWithSystemPrompt, _RestorableWithSystemPrompt):
    pass


def with_system_prompt(env: Environment, addition: str | None) -> Environment:
    """``env`` whose system prompt has ``addition`` appended (``env`` itself when there is
    none). The wrapper keeps what the runner and resume look for: snapshots in the store
    (``bind_store``) and restoring them (``restore``), exactly when ``env`` has them."""
    if not addition or not addition.strip():
        return env
    stores, restores = isinstance(env, UsesStore), isinstance(env, Restorable)
    cls: type[_WithSystemPrompt] = {
        (False, False): _WithSystemPrompt,
        (True, False): _StoringWithSystemPrompt,
        (False, True): _RestorableWithSystemPrompt,
        (True, True): _StoringRestorableWithSystemPrompt,
    }[(stores, restores)]
    return cls(env, addition)
