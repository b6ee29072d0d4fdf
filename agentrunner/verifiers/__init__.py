"""Verifiers: score a recorded episode after the fact and keep the result with it.

Three kinds, all reading the same :class:`Trajectory` (loaded once per episode):

- :class:`RuleVerifier`: conditions over the trajectory (tool calls made, files touched,
  commands run, final reward, stop reason, number of turns); see ``verifiers.rules``.
- :class:`JudgeVerifier`: an LLM judge (any provider) grades the transcript against a
  rubric; see ``verifiers.judge``.
- :class:`CompositeVerifier`: combines verifiers (all / any / weighted mean).

``verify_episode(store, ep, verifier)`` stores one row per call in the ``verifications``
side table (verifier name, score, passed, details with the verifier's spec and why); the
event log is never touched. ``agentrunner show`` lists an episode's results and
``agentrunner ls`` the latest per verifier.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.store.verifications import StoredVerification
from agentrunner.values.errors import UsageError
from agentrunner.verifiers.base import (
    Trajectory,
    Verdict,
    VerificationResult,
    Verifier,
    load_trajectory,
)
from agentrunner.verifiers.judge import JudgeVerifier, parse_score, render_transcript
from agentrunner.verifiers.rules import (
    CommandRun,
    Compare,
    FileTouched,
    Not,
    RuleVerifier,
    StoppedWith,
    ToolCalled,
    parse_rule,
)

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

CompositeMode = Literal["all", "any", "mean"]


class CompositeVerifier:
    """Combines verifiers.

    ``mode="all"``: passes when every verifier passes; score is the lowest score.
    ``mode="any"``: passes when one verifier passes; score is the highest score.
    ``mode="mean"``: score is the (``weights``-)weighted mean; passes at ``threshold``.
    A verifier without a score (a judge that gave none) counts as 0.
    """

    def __init__(
        self,
        verifiers: Sequence[Verifier],
        *,
        mode: CompositeMode = "all",
        weights: Sequence[float] | None = None,
        threshold: float = 0.5,
        name: str = "composite",
    ) -> None:
        if not verifiers:
            raise UsageError("a composite verifier needs at least one verifier")
        if mode not in ("all", "any", "mean"):
            raise UsageError(f"composite mode must be all, any or mean, not {mode!r}")
        if weights is not None and (
            len(weights) != len(verifiers) or any(w < 0 for w in weights) or sum(weights) <= 0
        ):
            raise UsageError("weights: one non-negative weight per verifier, not all zero")
        self.verifiers = list(verifiers)
        self.mode = mode
        self.weights = list(weights) if weights is not None else [1.0] * len(verifiers)
        self.threshold = threshold
        self.name = name

    def spec(self) -> dict[str, Any]:
        return {
            "kind": "composite",
            "mode": self.mode,
            "weights": self.weights,
            "threshold": self.threshold,
            "verifiers": [{"name": v.name, **v.spec()} for v in self.verifiers],
        }

    def verify(self, trajectory: Trajectory) -> Verdict:
        verdicts = [v.verify(trajectory) for v in self.verifiers]
        scores = [v.score if v.score is not None else 0.0 for v in verdicts]
        if self.mode == "all":
            score, passed = min(scores), all(v.passed for v in verdicts)
        elif self.mode == "any":
            score, passed = max(scores), any(v.passed for v in verdicts)
        else:
            score = sum(w * s for w, s in zip(self.weights, scores, strict=True)) / sum(
                self.weights
            )
            passed = score >= self.threshold
        children = [
            {"verifier": v.name, **verdict.to_dict()}
            for v, verdict in zip(self.verifiers, verdicts, strict=True)
        ]
        return Verdict(score, passed, {"spec": self.spec(), "children": children})


# ------------------------------------------------------------------ running and storing


def verify_episode(
    store: StoreBackend, episode_id: str, verifier: Verifier, *, save: bool = True
) -> VerificationResult:
    """Verify one episode; store the result (unless ``save=False``) and return it."""
    trajectory = load_trajectory(store, episode_id)
    verdict = verifier.verify(trajectory)
    details = {
        **verdict.details,
        "episode_status": trajectory.episode.status,
        "last_seq": trajectory.episode.last_seq,
    }
    result = VerificationResult(
        episode_id=trajectory.episode.episode_id,
        verifier=verifier.name,
        score=verdict.score,
        passed=verdict.passed,
        details=details,
    )
    return save_result(store, result) if save else result


def save_result(store: StoreBackend, result: VerificationResult) -> VerificationResult:
    """Append a result to the ``verifications`` table; return it with its id and time."""
    row_id, created = store.add_verification(
        result.episode_id, result.verifier, result.score, result.passed, result.details
    )
    return replace(result, id=row_id, created_at=created)


def _result(row: StoredVerification) -> VerificationResult:
    return VerificationResult(
        id=row.id,
        episode_id=row.episode_id,
        verifier=row.verifier,
        score=row.score,
        passed=row.passed,
        details=row.details,
        created_at=row.created_at,
    )


def verifications(store: StoreBackend, episode_id: str) -> list[VerificationResult]:
    """Every stored result for one episode, newest first."""
    return [_result(r) for r in store.verifications(store.resolve(episode_id))]


def latest_verifications(
    store: StoreBackend, episode_ids: Iterable[str] | None = None, *, details: bool = False
) -> dict[str, list[VerificationResult]]:
    """The latest result of each verifier, per episode, in one query (for ``ls``).

    Without ``details`` the (possibly large) details are left out.
    """
    wanted = set(episode_ids) if episode_ids is not None else None
    out: dict[str, list[VerificationResult]] = {}
    for row in store.latest_verifications(details=details):
        if wanted is None or row.episode_id in wanted:
            out.setdefault(row.episode_id, []).append(_result(row))
    return out


__all__ = [
    "CommandRun",
    "Compare",
    "CompositeVerifier",
    "FileTouched",
    "JudgeVerifier",
    "Not",
    "RuleVerifier",
    "StoppedWith",
    "ToolCalled",
    "Trajectory",
    "Verdict",
    "VerificationResult",
    "Verifier",
    "latest_verifications",
    "load_trajectory",
    "parse_rule",
    "parse_score",
    "render_transcript",
    "save_result",
    "verifications",
    "verify_episode",
]
