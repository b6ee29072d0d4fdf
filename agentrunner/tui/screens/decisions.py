"""``DecisionsScreen``: a trace's decision points, their candidates and every fork they made.

A tree: each decision point (turn, mode, the adopted candidate), under it each candidate
(value ± spread over n, its action in one line, duplicates, ★ for the adopted one), under
that its proposal and continuations with status and reward. Enter opens the selected fork's
trace (on a candidate, its proposal), ``d`` diffs it against the main line from the
decision point. Re-read every second while any fork runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from agentrunner.lifecycle.decisions import PROPOSAL, Candidate
from agentrunner.store import Segment
from agentrunner.tui import actions, keys
from agentrunner.tui import format as fmt
from agentrunner.tui.decisions import ADOPTED, Fork, PointForks, point_forks
from agentrunner.tui.widgets.styled import STATUS_CLASSES, status_text
from agentrunner.tui.work import ReaderScreen
from agentrunner.values.safe_text import one_line_visible, plain


class DecisionTree(Tree[str]):
    """Decision points → candidates → forks (node data: a fork's episode id, or "")."""

    COMPONENT_CLASSES: ClassVar[set[str]] = STATUS_CLASSES | {"decision-tree--adopted"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", id="decisions.open"),
        Binding("j,down", "cursor_down", "Down", show=False, id="decisions.down"),
        Binding("k,up", "cursor_up", "Up", show=False, id="decisions.up"),
        Binding("g,home", "scroll_home", "First", show=False, id="decisions.first"),
        Binding("G,end", "scroll_end", "Last", show=False, id="decisions.last"),
    ]

    def __init__(self) -> None:
        super().__init__("decisions", id="decision-tree")
        self.show_root = False
        self.guide_depth = 3
        self.auto_expand = False


@keys.listed("Decision points", DecisionTree)
class DecisionsScreen(ReaderScreen):
    """The decision points of one trace's history, opened at ``group_id``'s."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "diff", "Diff vs main line", id="decisions.diff"),
        Binding("escape", "back", "Back", id="decisions.back"),
    ]

    points: reactive[tuple[PointForks, ...]] = reactive(())

    def __init__(self, episode_id: str, segments: Sequence[Segment], group_id: str) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.segments = list(segments)
        self.group_id = group_id
        self._placed = False  # the cursor starts on group_id's decision point, once

    def compose(self) -> ComposeResult:
        yield Static(f"decision points of {self.ids(self.episode_id)}", id="decisions-header")
        yield DecisionTree()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DecisionTree).focus()
        self.reload()
        self.set_interval(self.runner_app.poll_s * 4, self._reload_while_running)

    def reload(self) -> None:
        self.read(point_forks, self.segments, then=self._loaded, group="decisions", exclusive=True)

    def _reload_while_running(self) -> None:
        if any(not p.point.done for p in self.points):
            self.reload()

    def _loaded(self, points: list[PointForks]) -> None:
        if tuple(points) != self.points:
            self.points = tuple(points)

    def _candidate_label(self, tree: DecisionTree, c: Candidate, adopted: bool) -> Text:
        label = Text()
        if adopted:
            label.append(f"{ADOPTED} ", tree.get_component_rich_style("decision-tree--adopted"))
        label.append(
            f"candidate {c.index} · value {c.mean:.3f} ± {c.spread:.3f} (n {len(c.rewards)})"
        )
        if c.duplicate_of is not None:
            label.append(f" (= candidate {c.duplicate_of})")
        if adopted:
            label.append(" adopted", tree.get_component_rich_style("decision-tree--adopted"))
        label.append(f" · {fmt.action_line(c.message, 100)}")
        return label

    def _fork_label(self, tree: DecisionTree, fork: Fork) -> Text:
        e = fork.summary
        role = "proposal" if fork.sample == PROPOSAL else f"continuation {fork.sample}"
        label = Text(f"{role} {fork.short_id} ")
        label.append_text(status_text(tree, e.status))
        label.append(f" · reward {fmt.reward(e.total_reward)} · {fmt.plural(e.turns, 'turn')}")
        return label

    def watch_points(self, points: tuple[PointForks, ...]) -> None:
        tree = self.query_one(DecisionTree)
        selected = tree.cursor_node.data if tree.cursor_node is not None else None
        tree.clear()
        cursor: TreeNode[str] | None = None
        for pf in points:
            d = pf.point.decision
            chosen = f"adopted candidate {d.adopted}" if pf.point.done else "not finished"
            head = tree.root.add(
                plain(
                    one_line_visible(
                        f"turn {d.turn} · decision point at seq {d.seq} · {d.adopt} · {chosen}"
                        f" · {fmt.plural(len(pf.forks), 'fork')}"
                    )
                ),
                data="",
                expand=True,
            )
            if not self._placed and d.group_id == self.group_id:
                cursor = head
            by_index = {c.index: c for c in d.candidates}
            parents: dict[int, TreeNode[str]] = {}
            for fork in pf.forks:
                parent = parents.get(fork.candidate)
                if parent is None:
                    c = by_index.get(fork.candidate)
                    adopted = pf.point.done and fork.candidate == d.adopted
                    label = (
                        self._candidate_label(tree, c, adopted)
                        if c is not None
                        else Text(f"candidate {fork.candidate} · not proposed yet")
                    )
                    parent = head.add(label, data=fork.summary.episode_id, expand=True)
                    parents[fork.candidate] = parent
                node = parent.add_leaf(self._fork_label(tree, fork), data=fork.summary.episode_id)
                if self._placed and fork.summary.episode_id == selected:
                    cursor = node
        self.ids.update({f.summary.episode_id: f.short_id for pf in points for f in pf.forks})
        self.query_one("#decisions-header", Static).update(
            f"{fmt.plural(len(points), 'decision point')} in the history of"
            f" {self.ids(self.episode_id)} · Enter opens a fork (on a candidate: its proposal),"
            " d diffs it against the main line"
        )
        self._placed = self._placed or bool(points)
        if cursor is not None:
            tree.call_after_refresh(tree.move_cursor, cursor, animate=False)

    def selected_id(self) -> str | None:
        node = self.query_one(DecisionTree).cursor_node
        if node is None or not node.data:
            return None
        return node.data

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        event.stop()
        if event.node.data:
            self.runner_app.open_episode(event.node.data)
        else:
            event.node.toggle()

    def action_diff(self) -> None:
        ep = self.selected_id()
        fork = next((f for pf in self.points for f in pf.forks if f.summary.episode_id == ep), None)
        if fork is not None:
            actions.diff(self, fork.summary)

    def action_back(self) -> None:
        self.dismiss()
