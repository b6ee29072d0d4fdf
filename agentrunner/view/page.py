"""One self-contained HTML page of one or more episodes: an index when there are several,
then a section per episode (its facts, lineage, transcript and the files it changed).

The page loads nothing (its style and its find-as-you-type script are inline, allowed by
hash in its Content-Security-Policy), so it opens offline and can be sent as one file.
Links go only to sections of the same page; an episode that is not in it is named by its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.store import EpisodeSummary
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import UsageError
from agentrunner.view import assets
from agentrunner.view.blocks import BlockWriter
from agentrunner.view.markup import anchor, esc_line
from agentrunner.view.sections import facts, lineage, workspace_change
from agentrunner.view.transcript import read_transcript
from agentrunner.view.verdicts import verifications

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

INDEX_COLUMNS = (
    "episode",
    "parent",
    "task",
    "seed",
    "model",
    "status",
    "turns",
    "reward",
    "tokens",
    "cost",
)


class _Links:
    """Episode ids as links to their sections (those in the page) or as their short ids."""

    def __init__(self, store: StoreBackend, in_page: Sequence[str]) -> None:
        self.in_page = set(in_page)
        self.short = fmt.unique_prefixes(store.episode_ids(), minimum=8)

    def __call__(self, episode_id: str) -> str:
        shown = esc_line(self.short.get(episode_id, episode_id))
        if episode_id in self.in_page:
            return f'<a href="#{anchor(episode_id)}"><code>{shown}</code></a>'
        return f'<code title="not in this page">{shown}</code>'


def render_page(store: StoreBackend, episode_ids: Sequence[str], *, title: str) -> str:
    """The page of ``episode_ids`` (full ids or unique prefixes, in the order given; each
    once), with an index when there are several; ``title`` heads it."""
    summaries = _summaries(store, episode_ids)
    links = _Links(store, [s.episode_id for s in summaries])
    index = _index(summaries, links) if len(summaries) > 1 else ""
    sections = "".join(_section(store, s, links) for s in summaries)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{assets.policy()}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc_line(title)}</title><style>{assets.STYLE}</style></head><body>"
        f'<header class="top"><h1>{esc_line(title)}</h1>'
        '<input id="find" type="search" placeholder="find (filters the blocks)" '
        'aria-label="find" autocomplete="off"><span id="found" class="meta"></span></header>'
        f"<main>{index}{sections}</main><script>{assets.SCRIPT}</script></body></html>\n"
    )


def write_page(store: StoreBackend, episode_ids: Sequence[str], path: Path, *, title: str) -> int:
    """Write :func:`render_page`'s page to ``path``; its size in bytes."""
    data = render_page(store, episode_ids, title=title).encode("utf-8", "replace")
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write the page to {path}: {exc.strerror or exc}") from None
    return len(data)


def _summaries(store: StoreBackend, episode_ids: Sequence[str]) -> list[EpisodeSummary]:
    seen: dict[str, EpisodeSummary] = {}
    for ref in episode_ids:
        summary = store.episode(ref)
        seen.setdefault(summary.episode_id, summary)
    return list(seen.values())


def _index(summaries: Sequence[EpisodeSummary], link: _Links) -> str:
    head = "".join(f"<th>{h}</th>" for h in INDEX_COLUMNS)
    rows = []
    for e in summaries:
        parent = link(e.parent_episode_id) if e.parent_episode_id else "-"
        cells = [
            link(e.episode_id),
            parent,
            esc_line(e.task_id),
            str(e.seed),
            esc_line(e.model_spec.spec),
            esc_line(e.status),
            str(e.turns),
            esc_line(fmt.reward(e.total_reward)),
            esc_line(fmt.tokens(e.tokens)),
            esc_line(fmt.cost(e.cost_usd)),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    table = f"<table><tr>{head}</tr>{''.join(rows)}</table>"
    return f'<nav class="index"><h2>{len(summaries)} episodes</h2>{table}</nav>'


def _section(store: StoreBackend, e: EpisodeSummary, link: _Links) -> str:
    transcript = read_transcript(store, e.episode_id)
    writer = BlockWriter(e.episode_id, link)
    parent = e.parent_episode_id if e.parent_episode_id in link.in_page else None
    forks = [(store.episode(c).fork_seq or 0, c) for c in store.children(e.episode_id)]
    return (
        f'<section class="episode" id="{anchor(e.episode_id)}">'
        f"<h2>episode <code>{esc_line(e.episode_id)}</code></h2>{facts(e)}"
        f"{verifications(store, e.episode_id)}"
        f"{lineage(store, e, link)}"
        f"<h3>Transcript</h3>{writer.transcript(transcript, parent=parent, forks=forks)}"
        f"{workspace_change(store, e.episode_id)}</section>"
    )
