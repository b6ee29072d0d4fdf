"""Store reads behind the branches and diff screens (run in thread workers).

``lineage`` is an episode's whole fork tree with each branch's status, reward and cost;
``diff`` compares a fork with its parent from the fork point, as transcripts (messages,
assistant text, tool calls and results, cancels, errors, the end) in unified diff form.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.store import EpisodeSummary, EventRow
from agentrunner.tui.data import id_prefixes
from agentrunner.tui.format import reward
from agentrunner.tui.rows import typed
from agentrunner.values.errors import StoreError, UsageError
from agentrunner.values.events import (
    Cancel,
    EpisodeEnd,
    Error,
    MessageEvent,
    ModelResponse,
    Resume,
    ToolCall,
    ToolResult,
)
from agentrunner.values.formatting import plural

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

TRANSCRIPT_KINDS = (
    "message",
    "model.response",
    "tool.call",
    "tool.result",
    "cancel",
    "error",
    "resume",
    "episode.end",
)
MAX_EVENTS = 5000  # events per side compared
MAX_OBS_LINES = 12


@dataclass(frozen=True)
class Branch:
    """One episode of a lineage tree."""

    summary: EpisodeSummary
    depth: int
    fork_turn: int | None  # the parent's model turn this fork branches at
    short_id: str  # its shortest id prefix unique in the store (at least 8 characters)
    parent: str | None = None
    """The episode it hangs under: the one it was forked from, or the one that spawned it."""
    spawned_by_call: str | None = None
    """For a sub-agent (a recorded or imported agent's): the parent's call that started it."""


def fork_turn(store: StoreBackend, parent_id: str, fork_seq: int) -> int:
    """The model turn a fork at ``fork_seq`` re-does (just after the event at fork_seq)."""
    rows = store.events(parent_id, after_seq=fork_seq - 1, limit=1)
    return rows[0].turn + 1 if rows else 1


def lineage(store: StoreBackend, episode_id: str) -> list[Branch]:
    """The tree ``episode_id`` belongs to, root first, depth-first: its forks, and the
    sub-agents any of them spawned (each with its own forks and sub-agents) under the
    episode that spawned it."""
    spawned = store.spawned()
    spawner = {child: parent for child, parent, _ in spawned}
    kids: dict[str, list[tuple[str, str | None]]] = {}
    for child, parent, call in spawned:
        kids.setdefault(parent, []).append((child, call))
    top, seen = store.tree(store.resolve(episode_id))[0][0], set()
    while top in spawner and top not in seen:  # up to the agent that spawned it all
        seen.add(top)
        top = store.tree(spawner[top])[0][0]
    rows: list[tuple[str, int, int | None, str | None, str | None]] = []

    def walk(root: str, base: int, under: str | None, call: str | None) -> None:
        for ep, parent, fork_seq, depth in store.tree(root):
            turn = fork_turn(store, parent, fork_seq) if parent and fork_seq is not None else None
            rows.append(
                (ep, base + depth, turn, parent if depth else under, call if not depth else None)
            )
            for child, child_call in kids.get(ep, []):
                if all(child != r[0] for r in rows):
                    walk(child, base + depth + 1, ep, child_call)

    walk(top, 0, None, None)
    prefixes = id_prefixes(store, [r[0] for r in rows])
    return [
        Branch(store.episode(ep), depth, turn, prefixes[ep], parent, call)
        for ep, depth, turn, parent, call in rows
    ]


def _content(store: StoreBackend, digest: str) -> str:
    try:
        return store.message(digest).content
    except StoreError as exc:
        return f"[{exc}]"


def _indented(text: str) -> list[str]:
    return ["    " + line for line in text.splitlines()]


def _lines(store: StoreBackend, row: EventRow) -> list[str]:
    head = f"T{row.turn} "
    event = typed(row)
    match event:
        case MessageEvent():
            text = _content(store, event.message_hash)
            return [f"{head}{event.role} ({event.reason}):", *_indented(text)]
        case ModelResponse():
            text = _content(store, event.message_hash)
            return [f"{head}assistant:", *_indented(text)]
        case ToolCall():
            return [f"{head}call {event.name} {event.arguments}"]
        case ToolResult():
            obs = event.observation.splitlines()
            extra = f" reward {reward(event.reward)}" if event.reward is not None else ""
            lines = [f"{head}result {event.name}{extra}{' done' if event.done else ''}:"]
            lines += ["    " + line for line in obs[:MAX_OBS_LINES]]
            if len(obs) > MAX_OBS_LINES:
                lines.append(f"    … {len(obs) - MAX_OBS_LINES} more lines")
            return lines
        case Cancel():
            return [f"{head}CANCELLED during {event.where}: {event.reason}"]
        case Error():
            return [f"{head}ERROR {event.where}: {event.type}: {event.message}"]
        case Resume():
            return [f"{head}{event.reason} run from seq {event.from_seq}"]
        case EpisodeEnd():
            return [
                f"{head}end: {event.stop_reason} after {plural(event.turns, 'turn')},"
                f" reward {reward(event.total_reward)}"
            ]
    return []


def transcript(store: StoreBackend, episode_id: str, after_seq: int) -> tuple[list[str], bool]:
    """The episode's transcript after ``after_seq``; whether it was cut at MAX_EVENTS."""
    rows = store.events(
        episode_id, after_seq=after_seq, limit=MAX_EVENTS + 1, kinds=TRANSCRIPT_KINDS
    )
    lines: list[str] = []
    for row in rows[:MAX_EVENTS]:
        lines += _lines(store, row)
    return lines, len(rows) > MAX_EVENTS


@dataclass(frozen=True)
class DiffResult:
    """A fork compared with its parent from the fork point."""

    fork: EpisodeSummary
    parent: EpisodeSummary
    fork_seq: int
    fork_turn: int
    lines: list[str]  # unified diff lines (" ", "-", "+", "@@")
    truncated: bool
    prefixes: dict[str, str]  # short ids of the fork and its parent


def diff(store: StoreBackend, fork_id: str) -> DiffResult:
    fork = store.episode(fork_id)
    if fork.parent_episode_id is None or fork.fork_seq is None:
        raise UsageError(f"episode {fork.episode_id} is not a fork")
    parent = store.episode(fork.parent_episode_id)
    a, cut_a = transcript(store, parent.episode_id, fork.fork_seq)
    b, cut_b = transcript(store, fork.episode_id, fork.fork_seq)
    prefixes = id_prefixes(store, [parent.episode_id, fork.episode_id])
    lines = list(
        difflib.unified_diff(
            a,
            b,
            f"parent {prefixes[parent.episode_id]}",
            f"fork {prefixes[fork.episode_id]}",
            lineterm="",
        )
    )
    return DiffResult(
        fork,
        parent,
        fork.fork_seq,
        fork_turn(store, parent.episode_id, fork.fork_seq),
        lines,
        cut_a or cut_b,
        prefixes,
    )
