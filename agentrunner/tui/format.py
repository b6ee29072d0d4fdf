"""Small text formatters shared by the TUI's screens: ids, statuses, money, tokens, lineage."""

from __future__ import annotations

import re

from agentrunner.store import EpisodeSummary

STATUSES = ("running", "completed", "cancelled", "interrupted", "failed")
RESUMABLE = ("cancelled", "interrupted")
_BLANKS = re.compile(r" {2,}")


def short_id(episode_id: str | None, width: int = 10) -> str:
    """The first ``width`` characters of an id (at least 8 are always shown)."""
    return episode_id[: max(width, 8)] if episode_id else "-"


def cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def tokens(counts: dict[str, int]) -> str:
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


def lineage(episode: EpisodeSummary, forks: int = 0) -> str:
    """Parent and fork point (``↳ PARENT@SEQ``), and how many forks branch off this one."""
    parts = []
    if episode.parent_episode_id:
        parts.append(f"↳ {short_id(episode.parent_episode_id, 8)}@{episode.fork_seq}")
    if forks:
        parts.append(f"{forks} fork{'s' if forks > 1 else ''}")
    return " · ".join(parts) or "-"


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (newlines shown as ⏎, runs of blanks as one), cut at ``limit``."""
    flat = text.replace("\r", "").replace("\n", " ⏎ ").replace("\t", " ")
    flat = _BLANKS.sub(" ", flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
