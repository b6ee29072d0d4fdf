"""Reads of the ``verifications`` side table: verifier results kept with their episodes
(written by ``TraceStore.add_verification``; the event log is never touched)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentrunner.store.base import StoreBase

_COLS = "id, episode_id, verifier, score, passed, details, created_at"
REWARD_VERIFIER = "reward"
"""The name the reward check's results are stored under (``agentrunner verify`` with no
verifier option): a result that did not pass means the recorded reward was not reproduced."""
DISPUTED_MARK = "!"
DISPUTED_NOTE = "the recorded reward was not reproduced by `agentrunner verify`"


class _Result(Protocol):
    @property
    def verifier(self) -> str: ...
    @property
    def passed(self) -> bool: ...


def reward_reproduced(results: Iterable[_Result]) -> bool | None:
    """Whether an episode's latest reward check reproduced its recorded reward (None: never
    checked), from its results newest first (or its latest per verifier)."""
    return next((r.passed for r in results if r.verifier == REWARD_VERIFIER), None)


@dataclass(frozen=True, slots=True)
class StoredVerification:
    """One row of the ``verifications`` table."""

    id: int
    episode_id: str
    verifier: str
    score: float | None
    passed: bool
    details: dict[str, Any]
    created_at: str


def _record(row: tuple[Any, ...]) -> StoredVerification:
    return StoredVerification(
        id=row[0],
        episode_id=row[1],
        verifier=row[2],
        score=row[3],
        passed=bool(row[4]),
        details=json.loads(row[5]),
        created_at=row[6],
    )


def for_episode(store: StoreBase, episode_id: str) -> list[StoredVerification]:
    """Every result stored for one episode, newest first."""
    rows = store._conn.execute(
        f"SELECT {_COLS} FROM verifications WHERE episode_id = ? ORDER BY id DESC",
        (episode_id,),
    ).fetchall()
    return [_record(r) for r in rows]


def latest(store: StoreBase, details: bool) -> list[StoredVerification]:
    """The latest result of each verifier for each episode, by episode and verifier, in one
    query; without ``details`` the (possibly large) details are left out (read as ``{}``)."""
    cols = _COLS if details else _COLS.replace("details", "'{}'")
    rows = store._conn.execute(
        f"SELECT {cols} FROM verifications WHERE id IN"
        " (SELECT max(id) FROM verifications GROUP BY episode_id, verifier)"
        " ORDER BY episode_id, verifier"
    ).fetchall()
    return [_record(r) for r in rows]
