"""``BranchesScreen``: an episode's lineage tree, with status, reward and cost per branch.

Re-read every second (running branches update). Enter opens a branch's trace, ``d`` diffs
the selected branch against its parent from the fork point.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from agentrunner.tui import actions, keys
from agentrunner.tui import format as fmt
from agentrunner.tui.lineage import Branch, lineage
from agentrunner.tui.widgets.styled import STATUS_CLASSES, status_text
from agentrunner.tui.work import ReaderScreen
from agentrunner.values.safe_text import one_line_visible


class LineageTree(Tree[str]):
    """The fork tree (node data: episode id), with its own keys."""

    COMPONENT_CLASSES: ClassVar[set[str]] = STATUS_CLASSES | {
        "lineage-tree--current",
        "lineage-tree--dim",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", id="branches.open"),
        Binding("j,down", "cursor_down", "Down", show=False, id="branches.down"),
        Binding("k,up", "cursor_up", "Up", show=False, id="branches.up"),
        Binding("g,home", "scroll_home", "First", show=False, id="branches.first"),
        Binding("G,end", "scroll_end", "Last", show=False, id="branches.last"),
    ]

    def __init__(self) -> None:
        super().__init__("lineage", id="lineage")
        self.show_root = False
        self.guide_depth = 3


@keys.listed("Branches", LineageTree)
class BranchesScreen(ReaderScreen):
    """The lineage tree of one episode."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "diff", "Diff vs parent", id="branches.diff"),
        Binding("R", "resume", "Resume", show=False, id="branches.resume"),
        Binding("x", "cancel", "Cancel run", show=False, id="branches.cancel"),
        Binding("escape", "back", "Back", id="branches.back"),
    ]

    branches: reactive[tuple[Branch, ...]] = reactive(())

    def __init__(self, episode_id: str) -> None:
        super().__init__()
        self.episode_id = episode_id

    def compose(self) -> ComposeResult:
        yield Static(f"branches of {self.ids(self.episode_id)}", id="branches-header")
        yield LineageTree()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(LineageTree).focus()
        self.reload()
        self.set_interval(self.runner_app.poll_s * 4, self.reload)

    def reload(self) -> None:
        self.read(lineage, self.episode_id, then=self._loaded, group="lineage", exclusive=True)

    def _loaded(self, branches: list[Branch]) -> None:
        if tuple(branches) != self.branches:
            self.branches = tuple(branches)

    def _label(self, tree: LineageTree, b: Branch) -> Text:
        e = b.summary
        style = "lineage-tree--current" if e.episode_id == self.episode_id else "lineage-tree--dim"
        label = Text(b.short_id, tree.get_component_rich_style(style, partial=True))
        label.append(" ")
        label.append_text(status_text(tree, e.status))
        label.append(
            f" · reward {fmt.reward(e.total_reward)} · {fmt.cost(e.cost_usd)}"
            f" · {fmt.plural(e.turns, 'turn')}"
            f" · {one_line_visible(e.model_spec.spec)}"
        )
        if b.fork_turn is not None:
            label.append(f" · fork at turn {b.fork_turn} (seq {e.fork_seq})")
        if b.spawned_by_call is not None:
            label.append(f" · sub-agent of call {one_line_visible(b.spawned_by_call)}")
        elif b.depth and b.parent is not None and b.parent != e.parent_episode_id:
            label.append(" · sub-agent")
        return label

    def watch_branches(self, branches: tuple[Branch, ...]) -> None:
        tree = self.query_one(LineageTree)
        selected = self.selected_id() or self.episode_id
        tree.clear()
        nodes: dict[str, TreeNode[str]] = {}
        cursor_node: TreeNode[str] | None = None
        for b in branches:
            e = b.summary
            parent = nodes.get(b.parent or "", tree.root)
            node = parent.add(self._label(tree, b), data=e.episode_id, expand=True)
            nodes[e.episode_id] = node
            if e.episode_id == selected:
                cursor_node = node
        for node in nodes.values():
            node.allow_expand = bool(node.children)
        root_count = sum(1 for b in branches if b.depth == 0)
        self.ids.update({b.summary.episode_id: b.short_id for b in branches})
        self.query_one("#branches-header", Static).update(
            f"lineage of {self.ids(self.episode_id)} · {len(branches)} episode(s)"
            f" in {root_count} tree · Enter opens, d diffs against the parent"
        )
        if cursor_node is not None:  # its line is known once the tree is laid out
            tree.call_after_refresh(tree.move_cursor, cursor_node, animate=False)

    def selected_id(self) -> str | None:
        node = self.query_one(LineageTree).cursor_node
        return node.data if node is not None else None

    def _selected(self) -> Branch | None:
        ep = self.selected_id()
        return next((b for b in self.branches if b.summary.episode_id == ep), None)

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        event.stop()
        if event.node.data:
            self.runner_app.open_episode(event.node.data)

    def action_diff(self) -> None:
        b = self._selected()
        if b is not None:
            actions.diff(self, b.summary)

    def action_resume(self) -> None:
        b = self._selected()
        if b is not None:
            actions.resume(self, b.summary)

    def action_cancel(self) -> None:
        b = self._selected()
        if b is not None:
            actions.cancel(self, b.summary)

    def action_back(self) -> None:
        self.dismiss()
