"""Contest leaderboard.

Ordering rules (from the contest handbook):

1. higher score first;
2. equal scores: the earlier submission (smaller ``submitted_at``) first;
3. entries equal on both keep the order in which they were given.

Ranks use standard competition ranking ("1224"): entries with the same *score* share a
rank, and the next distinct score gets the rank equal to its 1-based position in the
ordered list (scores 100, 90, 90, 80 -> ranks 1, 2, 2, 4).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    player: str
    score: int
    submitted_at: float  # seconds since the contest started


def order(entries):
    """The entries in leaderboard order (a new list)."""
    return sorted(entries, key=lambda e: (e.score, e.submitted_at), reverse=True)


def rank(entries):
    """[(rank, entry), ...] in leaderboard order."""
    ranked = []
    current = 0
    previous_score = None
    for entry in order(entries):
        if entry.score != previous_score:
            current += 1
            previous_score = entry.score
        ranked.append((current, entry))
    return ranked


def top(entries, n):
    """Everyone ranked n or better (ties at the cut-off are all included)."""
    return [(r, e) for r, e in rank(entries) if r <= n]


def podium(entries):
    """{"gold": [...], "silver": [...], "bronze": [...]}: player names ranked 1, 2 and 3.

    With competition ranking a medal can be skipped (two golds -> no silver).
    """
    medals = {1: "gold", 2: "silver", 3: "bronze"}
    result = {name: [] for name in medals.values()}
    for r, entry in top(entries, 3):
        result[medals[r]].append(entry.player)
    return result
