"""Small text formatters shared by the TUI's screens: ids, statuses, money, tokens, lineage."""

from __future__ import annotations

import re

from agentrunner.formatting import cost, reward, short_id, started, tokens
from agentrunner.store import EpisodeSummary

__all__ = [
    "RESUMABLE",
    "STATUSES",
    "cost",
    "lineage",
    "one_line",
    "reward",
    "short_id",
    "started",
    "tokens",
]

STATUSES = ("running", "completed", "cancelled", "interrupted", "failed")
RESUMABLE = ("cancelled", "interrupted")
_BLANKS = re.compile(r" {2,}")


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
