"""Short text forms of ids, money, token counts, rewards and times (CLI and TUI alike)."""

from __future__ import annotations


def short_id(episode_id: str | None, width: int = 10) -> str:
    """The first ``width`` characters of an id (at least 8 are always shown)."""
    return episode_id[: max(width, 8)] if episode_id else "-"


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


def reward(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def started(created_at: str) -> str:
    """``MM-DD HH:MM`` from an ISO timestamp."""
    return created_at[5:16].replace("T", " ")
