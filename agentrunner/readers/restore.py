"""Rebuilding an environment's state for resume, fork and replay.

From the workspace's snapshot when there is one (the last recorded step that has one, then
replaying any steps after it), or by resetting with the recorded task and seed and replaying
the recorded actions. Every replayed observation and reward is compared with the recorded
one; a mismatch is a divergence, reported with the step, the expected and the got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrunner.readers.history import EnvStep
from agentrunner.values.environment import Environment, ResetResult, Restorable, ToolAction
from agentrunner.values.errors import DivergenceError, EnvironmentFailure
from agentrunner.values.redaction import known_secrets, redact

EXCERPT = 300


@dataclass(frozen=True)
class StepCheck:
    """The outcome of replaying one recorded step."""

    step: int
    seq: int
    name: str
    matched: bool
    expected: str
    got: str
    expected_reward: float | None
    got_reward: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "seq": self.seq,
            "name": self.name,
            "matched": self.matched,
            "expected": _excerpt(self.expected, self.got) if not self.matched else None,
            "got": _excerpt(self.got, self.expected) if not self.matched else None,
            "expected_reward": self.expected_reward,
            "got_reward": self.got_reward,
        }


def _excerpt(text: str, other: str) -> str:
    """The part of ``text`` around its first difference with ``other``."""
    i = next((k for k, (a, b) in enumerate(zip(text, other, strict=False)) if a != b), None)
    if i is None:
        i = min(len(text), len(other))
    lo = max(0, i - EXCERPT // 2)
    return ("…" if lo else "") + text[lo : lo + EXCERPT] + ("…" if lo + EXCERPT < len(text) else "")


def replay_steps(
    env: Environment,
    steps: Sequence[EnvStep],
    *,
    on_step: Callable[[StepCheck], None] | None = None,
    stop_on_divergence: bool = True,
) -> list[StepCheck]:
    """Re-execute recorded steps in ``env`` (already reset) and compare each outcome."""
    secrets = known_secrets()
    checks: list[StepCheck] = []
    for step in steps:
        result = env.step(ToolAction(name=step.name, arguments=step.arguments))
        got = redact(result.observation, secrets)
        check = StepCheck(
            step=step.step,
            seq=step.seq,
            name=step.name,
            matched=got == step.observation and result.reward == step.reward,
            expected=step.observation,
            got=got,
            expected_reward=step.reward,
            got_reward=result.reward,
        )
        checks.append(check)
        if on_step is not None:
            on_step(check)
        if not check.matched and stop_on_divergence:
            break
    return checks


def divergence_message(check: StepCheck) -> str:
    d = check.to_dict()
    return (
        f"replay diverged at step {check.step} ({check.name}, seq {check.seq}): "
        f"expected reward {check.expected_reward}, got {check.got_reward}; "
        f"expected observation {d['expected']!r}, got {d['got']!r}"
    )


def restore_env(
    env: Environment,
    task_id: str,
    seed: int,
    steps: Sequence[EnvStep],
    *,
    accept_divergence: bool = False,
) -> tuple[ResetResult, str]:
    """Reset ``env`` and bring it to the state after ``steps``; say how it was done."""
    reset = env.reset(task_id, seed)
    if not steps:
        return reset, "reset with the recorded task and seed (no steps to restore)"
    last = max((i for i, s in enumerate(steps) if s.snapshot), default=None)
    how = ""
    rest = steps
    if isinstance(env, Restorable) and last is not None:
        snap = steps[last]
        assert snap.snapshot is not None
        try:
            env.restore(snap.snapshot, steps=snap.step)
            how = f"snapshot {snap.snapshot} (after step {snap.step})"
            rest = steps[last + 1 :]
        except EnvironmentFailure as exc:
            reset = env.reset(task_id, seed)
            how = f"snapshot unavailable ({exc}); "
    if not rest:
        return reset, how
    checks = replay_steps(env, rest, stop_on_divergence=not accept_divergence)
    diverged = [c for c in checks if not c.matched]
    how += f"replayed {len(checks)} recorded step(s)"
    if diverged and not accept_divergence:
        raise DivergenceError(
            divergence_message(diverged[0]), report=[c.to_dict() for c in diverged]
        )
    if diverged:
        how += f" with {len(diverged)} divergence(s) accepted"
    return reset, how
