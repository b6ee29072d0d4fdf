"""Decision points in the TUI: what marks them on a trace and what lists their forks (store
reads, run in thread workers; see :mod:`agentrunner.lifecycle.decisions`; the log's reading half,
:mod:`agentrunner.lifecycle.decision_log`, is all this needs).

A trace's decision points are those of every episode of its history (a fork of a main line
shows the main line's decision points up to its fork point), each marking one row: the
main line's ``adopted`` message or, while the decision is not finished, the main line's last
event before it. The mark is one line (candidates, values, the adopted one); the detail pane
and the decisions screen show every candidate with its action and its forks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.panel import Panel
from rich.text import Text

from agentrunner.lifecycle.decision_log import Decision, read_decisions
from agentrunner.store import EpisodeSummary, Segment
from agentrunner.tui.data import id_prefixes
from agentrunner.tui.format import action_line
from agentrunner.values.safe_text import one_line_visible, plain

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

ADOPTED = "★"


@dataclass(frozen=True)
class DecisionPoint:
    """A decision point of a trace's history and the row that marks it."""

    episode_id: str  # the main line it was made on
    decision: Decision
    row_seq: int

    @property
    def done(self) -> bool:
        return self.decision.adopted_seq is not None

    def mark(self) -> str:
        """One line: the mode, each candidate's value ± spread (n), the adopted one starred."""
        d = self.decision
        cells = []
        for c in d.candidates:
            star = ADOPTED if self.done and c.index == d.adopted else ""
            same = f"={c.duplicate_of}" if c.duplicate_of is not None else ""
            cells.append(f"{star}{c.index}{same}: {c.mean:.2f}±{c.spread:.2f} ({len(c.rewards)})")
        if not self.done:
            pending = f"{len(d.pending)} fork{'s' if len(d.pending) != 1 else ''} to finish"
            return " · ".join([f"decision T{d.turn} not finished", pending, *cells])
        return f"{d.adopt} of {len(d.candidates)} · " + " · ".join(cells)


def decision_points(store: StoreBackend, segments: Sequence[Segment]) -> list[DecisionPoint]:
    """The decision points of a history (oldest first), each with the row that marks it."""
    out = []
    for seg in segments:
        for d in read_decisions(store, seg.episode_id):
            row_seq = d.adopted_seq if d.adopted_seq is not None else d.seq
            if seg.start <= row_seq and (seg.end is None or row_seq <= seg.end):
                out.append(DecisionPoint(seg.episode_id, d, row_seq))
    return out


def _owner(segments: Sequence[Segment], seq: int) -> str | None:
    for seg in segments:
        if seg.start <= seq and (seg.end is None or seq <= seg.end):
            return seg.episode_id
    return None


def decision_panel(store: StoreBackend, segments: Sequence[Segment], seq: int) -> RenderableType:
    """The detail pane's view of the decision whose adopted message is at ``seq``."""
    owner = _owner(segments, seq)
    found = [d for d in read_decisions(store, owner) if d.adopted_seq == seq] if owner else []
    if not found:
        return Text("decision point: not recorded as a fork group", style="dim")
    d = found[0]
    ids = id_prefixes(store, [e for c in d.candidates for e in (c.proposal, *c.continuations)])
    body = Text()
    for c in d.candidates:
        adopted = c.index == d.adopted
        body.append(f"{ADOPTED} " if adopted else "  ", "bold green")
        body.append(f"candidate {c.index}", "bold")
        body.append(f" · value {c.mean:.3f} ± {c.spread:.3f} (n {len(c.rewards)})")
        if c.duplicate_of is not None:
            body.append(f" (= candidate {c.duplicate_of})", "dim")
        if adopted:
            body.append(" adopted", "bold green")
        body.append(f"\n    {action_line(c.message, 300)}\n")
        forks = " ".join(ids[e] for e in c.continuations) or "-"
        body.append(f"    proposal {ids[c.proposal]} · continuations {forks}\n", "dim")
    body.rstrip()
    title = plain(one_line_visible(f"decision point · {d.adopt} · adopted candidate {d.adopted}"))
    return Panel(body, title=title, subtitle="c: open its forks", border_style="green")


@dataclass(frozen=True)
class Fork:
    """One fork of a decision point: a candidate's proposal or one of its continuations."""

    summary: EpisodeSummary
    candidate: int
    sample: int  # PROPOSAL for the proposal
    short_id: str


@dataclass(frozen=True)
class PointForks:
    """A decision point with every fork it made (for the decisions screen)."""

    point: DecisionPoint
    forks: tuple[Fork, ...]


def point_forks(store: StoreBackend, segments: Sequence[Segment]) -> list[PointForks]:
    """The history's decision points, each with its forks' summaries (status, reward)."""
    out = []
    for point in decision_points(store, segments):
        (group,) = [
            g for g in store.fork_groups(point.episode_id) if g.group_id == point.decision.group_id
        ]
        members = group.members  # by candidate, its proposal (sample -1) first
        ids = id_prefixes(store, [m.episode_id for m in members])
        forks = tuple(
            Fork(store.episode(m.episode_id), m.candidate, m.sample, ids[m.episode_id])
            for m in members
        )
        out.append(PointForks(point, forks))
    return out
