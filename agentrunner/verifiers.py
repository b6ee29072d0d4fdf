"""Verifiers: score a recorded episode after the fact and keep the result with it.

Three kinds, all reading the same :class:`Trajectory` (loaded once per episode):

- :class:`RuleVerifier`: conditions over the trajectory (tool calls made, files touched,
  commands run, final reward, stop reason, number of turns); see ``verifiers_rules``.
- :class:`JudgeVerifier`: an LLM judge (any provider) grades the transcript against a
  rubric; see ``verifiers_judge``.
- :class:`CompositeVerifier`: combines verifiers (all / any / weighted mean).

``verify_episode(store, ep, verifier)`` stores one row per call in the ``verifications``
side table (verifier name, score, passed, details with the verifier's spec and why); the
event log is never touched. ``agentrunner show`` lists an episode's results and
``agentrunner ls`` the latest per verifier.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Literal

from agentrunner.errors import UsageError
from agentrunner.store import TraceStore
from agentrunner.verifiers_base import (
    Trajectory,
    Verdict,
    VerificationResult,
    Verifier,
    load_trajectory,
)
from agentrunner.verifiers_judge import JudgeVerifier, parse_score, render_transcript
from agentrunner.verifiers_rules import (
    CommandRun,
    Compare,
    FileTouched,
    Not,
    RuleVerifier,
    StopReason,
    ToolCalled,
    parse_rule,
)

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
    store: TraceStore, episode_id: str, verifier: Verifier, *, save: bool = True
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


def save_result(store: TraceStore, result: VerificationResult) -> VerificationResult:
    """Append a result to the ``verifications`` table; return it with its id and time."""
    row_id, created = store.add_verification(
        result.episode_id, result.verifier, result.score, result.passed, result.details
    )
    return replace(result, id=row_id, created_at=created)


_COLS = "id, episode_id, verifier, score, passed, details, created_at"


def _result(row: tuple[Any, ...]) -> VerificationResult:
    return VerificationResult(
        id=row[0],
        episode_id=row[1],
        verifier=row[2],
        score=row[3],
        passed=bool(row[4]),
        details=json.loads(row[5]),
        created_at=row[6],
    )


def verifications(store: TraceStore, episode_id: str) -> list[VerificationResult]:
    """Every stored result for one episode, newest first."""
    rows = store.conn.execute(
        f"SELECT {_COLS} FROM verifications WHERE episode_id = ? ORDER BY id DESC",
        (store.resolve(episode_id),),
    ).fetchall()
    return [_result(r) for r in rows]


def latest_verifications(
    store: TraceStore, episode_ids: Iterable[str] | None = None, *, details: bool = False
) -> dict[str, list[VerificationResult]]:
    """The latest result of each verifier, per episode, in one query (for ``ls``).

    Without ``details`` the (possibly large) details are left out.
    """
    cols = _COLS if details else _COLS.replace("details", "'{}'")
    rows = store.conn.execute(
        f"SELECT {cols} FROM verifications WHERE id IN"
        " (SELECT max(id) FROM verifications GROUP BY episode_id, verifier)"
        " ORDER BY episode_id, verifier"
    ).fetchall()
    wanted = set(episode_ids) if episode_ids is not None else None
    out: dict[str, list[VerificationResult]] = {}
    for row in rows:
        if wanted is None or row[1] in wanted:
            out.setdefault(row[1], []).append(_result(row))
    return out


__all__ = [
    "CommandRun",
    "Compare",
    "CompositeVerifier",
    "FileTouched",
    "JudgeVerifier",
    "Not",
    "RuleVerifier",
    "StopReason",
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
