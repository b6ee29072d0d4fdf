"""The LLM judge: any model grades an episode's transcript against a rubric.

The judge gets one system message (how to grade) and one user message (the rubric and the
episode's transcript, long tool outputs clipped), through the same ``model_fn(context)``
interface the runner uses, so any provider works: ``get_model("openai:gpt-5")``, or the
offline scripted model with a script whose turn answers ``SCORE: 0.8``. The last
``SCORE: x`` in its answer (x in [0, 1], or ``x/10``, or ``x%``) is the score.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agentrunner.values.errors import UsageError
from agentrunner.values.model import AgentContext, Model, as_model
from agentrunner.values.types import AgentTurn, Message
from agentrunner.verifiers.base import Trajectory, Verdict
from providers import get_model  # imports its SDK only when a model is built

JUDGE_SYSTEM = (
    "You are a careful, strict evaluator of an AI agent's recorded episode. You read the "
    "rubric and the transcript (the task, the agent's messages and tool calls, and what "
    "the tools returned), reason briefly about how well the agent met the rubric, and end "
    "your answer with one line `SCORE: x`, where x is a number from 0 (fails the rubric "
    "entirely) to 1 (meets it fully)."
)
DEFAULT_MAX_CHARS = 60_000
DEFAULT_TOOL_OUTPUT_CHARS = 2_000
_SCORE = re.compile(
    r"score\**\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)\s*(%|/\s*(\d+(?:\.\d+)?))?", re.IGNORECASE
)


def parse_score(answer: str) -> float | None:
    """The last ``SCORE: x`` in ``answer`` as a number in [0, 1]; None if there is none."""
    matches = list(_SCORE.finditer(answer))
    if not matches:
        return None
    value_s, suffix, denominator = matches[-1].groups()
    value = float(value_s)
    if suffix == "%":
        value /= 100
    elif denominator is not None:
        if float(denominator) == 0:
            return None
        value /= float(denominator)
    return value if 0.0 <= value <= 1.0 else None


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def render_transcript(
    trajectory: Trajectory,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    tool_output_chars: int = DEFAULT_TOOL_OUTPUT_CHARS,
) -> str:
    """The episode as plain text for a judge: every message, long outputs clipped."""
    parts: list[str] = []
    for message in trajectory.messages:
        if message.role == "tool":
            name = message.name or "tool"
            parts.append(f"## tool result ({name})\n{_clip(message.content, tool_output_chars)}")
            continue
        body = []
        if message.reasoning:
            body.append(f"(reasoning) {_clip(message.reasoning, tool_output_chars)}")
        if message.content:
            body.append(_clip(message.content, tool_output_chars * 4))
        if message.refusal:
            body.append(f"(refusal) {message.refusal}")
        for call in message.tool_calls:
            body.append(f"-> {call.name}({_clip(call.arguments, tool_output_chars)})")
        parts.append(f"## {message.role}\n" + "\n".join(body))
    ep = trajectory.episode
    parts.append(
        f"## outcome\nstop reason: {ep.stop_reason or 'not ended'}; model turns: {ep.turns}; "
        f"tool calls: {len(trajectory.tool_uses)}"
    )
    text = "\n\n".join(parts)
    if len(text) > max_chars:  # keep the task (the head) and how it ended (the tail)
        head = "\n\n".join(parts[:2])[: max_chars // 4]
        tail = text[-(max_chars - len(head)) :]
        text = (
            f"{head}\n\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n\n{tail}"
        )
    return text


class JudgeVerifier:
    """Asks ``model`` (a spec like ``openai:gpt-5``, a model or a ``model_fn``) to grade an
    episode against ``rubric``.

    Passes when the score is at least ``threshold``. An answer without a readable score is
    a failure whose details say so (the answer is kept).
    """

    def __init__(
        self,
        model: str | Model | Callable[[AgentContext], AgentTurn],
        rubric: str,
        *,
        threshold: float = 0.5,
        name: str | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        tool_output_chars: int = DEFAULT_TOOL_OUTPUT_CHARS,
        model_options: dict[str, Any] | None = None,
    ) -> None:
        if not rubric.strip():
            raise UsageError("the judge needs a rubric (what a good episode does)")
        if not 0.0 <= threshold <= 1.0:
            raise UsageError(f"the judge's threshold must be in [0, 1], not {threshold}")
        self._model: Model | None = None if isinstance(model, str) else as_model(model)
        self._spec = model if isinstance(model, str) else _model_spec(as_model(model))
        self._options = dict(model_options or {})
        self.rubric = rubric.strip()
        self.threshold = threshold
        self.max_chars = max_chars
        self.tool_output_chars = tool_output_chars
        self.name = name or f"judge:{self._spec}"

    def _get_model(self) -> Model:
        if self._model is None:
            self._model = get_model(self._spec, **self._options)
        return self._model

    def spec(self) -> dict[str, Any]:
        return {
            "kind": "judge",
            "model": self._spec,
            "rubric": self.rubric,
            "threshold": self.threshold,
        }

    def context(self, trajectory: Trajectory) -> AgentContext:
        """What the judge model is asked (one system and one user message, no tools)."""
        transcript = render_transcript(
            trajectory, max_chars=self.max_chars, tool_output_chars=self.tool_output_chars
        )
        prompt = (
            f"# Rubric\n\n{self.rubric}\n\n# Episode {trajectory.episode.episode_id} "
            f"(task {trajectory.episode.task_id})\n\n{transcript}\n\n"
            "Grade the episode against the rubric. End with one line `SCORE: x` (0 to 1)."
        )
        return AgentContext(
            messages=[
                Message(role="system", content=JUDGE_SYSTEM),
                Message(role="user", content=prompt),
            ],
            tools=[],
            turn=1,
            task_id=trajectory.episode.task_id,
            seed=trajectory.episode.seed,
        )

    def verify(self, trajectory: Trajectory) -> Verdict:
        turn = self._get_model()(self.context(trajectory))
        answer = turn.message.strip()
        score = parse_score(answer)
        details: dict[str, Any] = {
            "spec": self.spec(),
            "answer": _clip(answer, 4000),
            "judged_by": f"{turn.provider or '?'}:{turn.model or '?'}",
            "usage": turn.usage.model_dump(),
        }
        if score is None:
            details["error"] = "the judge's answer has no `SCORE: x` with x in [0, 1]"
            return Verdict(score=None, passed=False, details=details)
        return Verdict(score=score, passed=score >= self.threshold, details=details)


def _model_spec(model: Model) -> str:
    spec = getattr(model, "spec", None)
    if callable(spec):
        return str(spec().get("spec", f"{model.provider}:{model.model}"))
    return f"{getattr(model, 'provider', 'custom')}:{getattr(model, 'model', 'model')}"
