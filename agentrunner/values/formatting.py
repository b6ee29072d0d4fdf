"""Short text forms of ids, money, token counts, rewards and times (CLI and TUI alike)."""

from __future__ import annotations

from collections.abc import Iterable


def unique_prefixes(ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
    """For each id, its shortest prefix (at least ``minimum`` characters) that no other of
    ``ids`` shares, so any of them can be typed back (``show PREFIX``). The one rule for an
    episode id on screen: every command and the TUI show ``unique_prefixes(store ids)[id]``
    (a command printed to be copied, ``agentrunner resume ID``, names the full id: it stays
    unambiguous as the store grows).
    Ids made in the same millisecond share their first 10 characters; those get a few more."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, current in enumerate(ordered):
        need = minimum
        for other in (
            ordered[i - 1] if i else None,
            ordered[i + 1] if i + 1 < len(ordered) else None,
        ):
            if other is not None:
                need = max(need, _common(current, other) + 1)
        out[current] = current[:need]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def plural(n: int, word: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def tokens(counts: dict[str, int]) -> str:
    """Input plus output tokens, abbreviated (12k, 1.2M)."""
    total = counts.get("input", 0) + counts.get("output", 0)
    if total >= 1_000_000:
        return f"{total / 1_000_000:.1f}M"
    if total >= 10_000:
        return f"{total / 1000:.0f}k"
    return str(total)


def count(value: int | None) -> str:
    """A token count, or ``?`` when its source did not say (unknown is not 0)."""
    return "?" if value is None else str(value)


def reward(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def started(created_at: str) -> str:
    """``MM-DD HH:MM`` from an ISO timestamp."""
    return created_at[5:16].replace("T", " ")


def diff_line_kind(line: str) -> str:
    """What a line of a unified diff is: ``file`` (a file's header), ``hunk``, ``add``,
    ``remove``, or ``""`` (a line both sides hold), for every place that colours a diff."""
    if line.startswith(("+++", "---", "diff --git")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "remove"
    return ""


MESSAGE_LABELS = {
    "system": "system prompt",
    "prompt": "task",
    "continue": "continue",
    "fork": "injected message",
    "edit": "edited turn",
    "adopted": "adopted action",
    "compaction": "after compaction",
}
"""How a transcript (``show``, the view page) names a message by the reason it was added."""
KEPT_RAW = ("import", "unmapped")
"""(where, type) of the ``error`` event an import writes for a record it kept raw."""
GAVE_UP = "(gave up after "
"""How a provider's error that was retried until it gave up ends (``providers/_retry.py``)."""
