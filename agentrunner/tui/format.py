"""Small text formatters shared by the TUI's screens: ids, statuses, money, tokens, lineage."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from agentrunner.store import EpisodeSummary
from agentrunner.values.events import Status
from agentrunner.values.formatting import cost, plural, reward, started, tokens
from agentrunner.values.safe_text import visible
from agentrunner.values.types import Message

__all__ = [
    "STATUSES",
    "IdPrefixes",
    "action_line",
    "cost",
    "lineage",
    "one_line",
    "plural",
    "reward",
    "started",
    "tokens",
]

STATUSES = tuple(Status)
_BLANKS = re.compile(r" {2,}")


class IdPrefixes:
    """Episode ids shown as their shortest prefix unique in the store (at least 8
    characters), as last read; an id not read yet is shown whole (never ambiguous)."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def update(self, prefixes: Mapping[str, str]) -> None:
        self._known.update(prefixes)

    def __call__(self, episode_id: str | None) -> str:
        if not episode_id:
            return "-"
        return self._known.get(episode_id, episode_id)


def lineage(episode: EpisodeSummary, forks: int, ids: IdPrefixes) -> str:
    """Parent and fork point (``↳ PARENT@SEQ``), and how many forks branch off this one."""
    parts = []
    if episode.parent_episode_id:
        parts.append(f"↳ {ids(episode.parent_episode_id)}@{episode.fork_seq}")
    if forks:
        parts.append(f"{forks} fork{'s' if forks > 1 else ''}")
    return " · ".join(parts) or "-"


def action_line(message: Message, limit: int = 160) -> str:
    """An assistant message as one line: its tool calls, then its text."""
    parts = []
    for call in message.tool_calls:
        try:
            args = call.parsed_arguments()
            shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
        except ValueError:
            shown = call.arguments
        parts.append(f"{call.name}({shown})")
    if message.content.strip():
        parts.append(json.dumps(one_line(message.content, limit), ensure_ascii=False))
    return one_line(" · ".join(parts), limit) if parts else "(empty message)"


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (newlines shown as ⏎, runs of blanks as one, other control
    characters visible: ``^[``, ``^M``), cut at ``limit``."""
    flat = visible(text.replace("\r\n", "\n").replace("\n", " ⏎ ").replace("\t", " "))
    flat = _BLANKS.sub(" ", flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
