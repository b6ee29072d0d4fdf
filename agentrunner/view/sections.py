"""The parts of an episode's section around its transcript: its facts, its lineage (parent,
forks, sub-agents, fan-out role, batches) and the files it changed with their diff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrunner.readers.changes import episode_change
from agentrunner.store import EpisodeSummary
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import UsageError
from agentrunner.values.formatting import diff_line_kind
from agentrunner.view.blocks import Link
from agentrunner.view.markup import esc, esc_line

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

MAX_PATCH_CHARS = 200_000
"""The most characters of a patch a page shows (``agentrunner diff EP`` prints it all)."""


def facts(e: EpisodeSummary) -> str:
    """The episode's summary, as ``show`` prints it."""
    stop = f" ({e.stop_reason})" if e.stop_reason else ""
    reward = "not judged" if e.total_reward is None else f"{e.total_reward:g}"
    rows = [
        ("task", f"{e.task_id} (seed {e.seed})"),
        ("model", e.model_spec.spec),
        ("env", e.env_spec.kind or "?"),
        ("status", f"{e.status}{stop}"),
        ("turns", f"{e.turns} · attempt {e.attempt} · {e.last_seq} events"),
        ("reward", reward),
        ("tokens", _spend(e.tokens, e.cost_usd)),
        ("started", e.created_at),
    ]
    if e.parent_episode_id:
        rows.append(("inherited", _spend(e.inherited_tokens, e.inherited_cost_usd)))
    cells = "".join(f"<tr><th>{k}</th><td>{esc_line(v)}</td></tr>" for k, v in rows)
    return f'<table class="facts">{cells}</table>'


def _spend(tokens: dict[str, int], cost: float | None) -> str:
    return (
        f"{tokens.get('input', 0):,} in · {tokens.get('cache_read', 0):,} cached · "
        f"{tokens.get('output', 0):,} out · {tokens.get('reasoning', 0):,} reasoning · "
        f"cost {fmt.cost(cost)}"
    )


def lineage(store: StoreBackend, e: EpisodeSummary, link: Link) -> str:
    """Where the episode sits: its parent and fork point, its forks, the agent that spawned
    it, its sub-agents, its fan-out role, its batches. Empty when it has none of them."""
    items = []
    if e.parent_episode_id:
        items.append(f"fork of {link(e.parent_episode_id)} at seq {e.fork_seq}")
    for child in store.children(e.episode_id):
        fork = store.episode(child)
        items.append(
            f"fork {link(child)} at seq {fork.fork_seq} · {esc_line(fork.status)} · "
            f"{fork.turns} turns · reward {esc_line(fmt.reward(fork.total_reward))}"
        )
    for child, parent, call in store.spawned():
        by = f" (call {esc_line(call)})" if call else ""
        if child == e.episode_id:
            items.append(f"sub-agent spawned by {link(parent)}{by}")
        elif parent == e.episode_id:
            items.append(f"spawned sub-agent {link(child)}{by}")
    group = e.fork_group
    if group is not None:
        role = (
            f"proposal of candidate {group.candidate}"
            if group.proposal
            else f"candidate {group.candidate}, continuation {group.sample}"
        )
        items.append(f"fan-out {esc_line(role)} · fork group {esc_line(group.group_id)}")
    items.extend(f"in batch {esc_line(b)}" for b in store.batches_of([e.episode_id]))
    if not items:
        return ""
    listed = "".join(f"<li>{item}</li>" for item in items)
    return f'<div class="blk lineage"><h3>Lineage</h3><ul>{listed}</ul></div>'


def workspace_change(store: StoreBackend, episode_id: str) -> str:
    """The files the episode changed and the patch (what ``agentrunner diff`` prints), or
    why there is none."""
    try:
        change = episode_change(store, episode_id)
    except UsageError as exc:
        return _changes(f'<p class="meta">{esc(exc)}</p>')
    left_out = change.left_out(store)
    patch = change.patch(store, left_out=left_out)
    if not patch:
        return _changes('<p class="meta">no change: the workspace matches its base</p>')
    stat = change.patch(store, stat=True, left_out=left_out)
    skipped = (
        f'<p class="meta">left out {len(left_out)} path(s) git ignores</p>' if left_out else ""
    )
    return _changes(f'<pre class="stat">{esc(stat)}</pre>{skipped}{_patch(patch, episode_id)}')


def _changes(body: str) -> str:
    return f'<div class="blk changes"><h3>Files changed</h3>{body}</div>'


def _patch(patch: str, episode_id: str) -> str:
    """The patch, each line marked as added, removed, a hunk or a file header."""
    shown, cut = patch[:MAX_PATCH_CHARS], len(patch) - MAX_PATCH_CHARS
    lines = []
    for line in shown.splitlines():
        kind = diff_line_kind(line)
        cls = "del" if kind == "remove" else kind
        lines.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    more = (
        f'\n<span class="cut">… {cut:,} more characters (agentrunner diff '
        f"{esc_line(episode_id)} prints them)</span>"
        if cut > 0
        else ""
    )
    return f'<pre class="diff">{chr(10).join(lines)}{more}</pre>'
