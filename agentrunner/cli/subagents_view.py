"""The sub-agents an episode started (recorded or imported agents' ``env.spawned_by``), as a
tree for ``show`` and as nested objects for ``show --json``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from agentrunner.values.formatting import unique_prefixes
from agentrunner.values.safe_text import one_line_visible, plain

if TYPE_CHECKING:
    from rich.tree import Tree

    from agentrunner.store.protocol import StoreBackend


def children_of(store: StoreBackend) -> dict[str, list[tuple[str, str | None]]]:
    """Parent episode -> its sub-agents ``(episode_id, the call that started it)``."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    for child, parent, call in store.spawned():
        out.setdefault(parent, []).append((child, call))
    return out


def spawner(store: StoreBackend, episode_id: str) -> tuple[str, str | None] | None:
    """The episode (and call) that started ``episode_id``, if it is a sub-agent."""
    for child, parent, call in store.spawned():
        if child == episode_id:
            return parent, call
    return None


def tree_json(store: StoreBackend, episode_id: str) -> list[dict[str, Any]]:
    children = children_of(store)

    def node(child: str, call: str | None, seen: frozenset[str]) -> dict[str, Any]:
        below = [] if child in seen else children.get(child, [])
        return {
            "episode_id": child,
            "call_id": call,
            "subagents": [node(c, k, seen | {child}) for c, k in below],
        }

    return [node(c, k, frozenset({episode_id})) for c, k in children.get(episode_id, [])]


def tree_lines(store: StoreBackend, episode_id: str) -> Tree | None:
    """The tree of ``episode_id``'s sub-agents (None when it started none)."""
    children = children_of(store)
    if episode_id not in children:
        return None
    from rich.tree import Tree  # only here: an episode without sub-agents prints no tree

    short = unique_prefixes(store.episode_ids())
    root = Tree(Text("  sub-agents", "bold"), guide_style="dim")

    def grow(branch: Tree, parent: str, seen: frozenset[str]) -> None:
        for child, call in children.get(parent, []):
            summary = store.episode(child)
            label = plain(
                f"{short.get(child, child)}  {summary.status} · {summary.turns} turns"
                + (f" · started by call {one_line_visible(call)}" if call else "")
            )
            sub = branch.add(label)
            if child not in seen:
                grow(sub, child, seen | {child})

    grow(root, episode_id, frozenset({episode_id}))
    return root
