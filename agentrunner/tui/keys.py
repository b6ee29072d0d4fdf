"""Where the TUI's key bindings live, screen by screen (for help and keymap checks).

Every binding has an id (``screen.action``), so a keymap (``tui --keymap FILE``, a JSON
object of binding id → keys) can change any key.
"""

from __future__ import annotations

from textual.binding import BindingType


def binding_sections() -> list[tuple[str, list[BindingType]]]:
    """(title, bindings) for the app and each screen, in the order help lists them."""
    from agentrunner.tui.app import AgentRunnerApp
    from agentrunner.tui.screens.branches import BranchesScreen, LineageTree
    from agentrunner.tui.screens.confirm import ConfirmScreen
    from agentrunner.tui.screens.diff import DiffScreen
    from agentrunner.tui.screens.episodes import EpisodesScreen, EpisodesTable
    from agentrunner.tui.screens.fork import ForkScreen
    from agentrunner.tui.screens.help import HelpScreen
    from agentrunner.tui.screens.trace import TraceScreen

    return [
        ("Everywhere", list(AgentRunnerApp.BINDINGS)),
        ("Episodes", [*EpisodesTable.BINDINGS, *EpisodesScreen.BINDINGS]),
        ("Trace", list(TraceScreen.BINDINGS)),
        ("Branches", [*LineageTree.BINDINGS, *BranchesScreen.BINDINGS]),
        ("Diff", list(DiffScreen.BINDINGS)),
        ("Fork editor", list(ForkScreen.BINDINGS)),
        ("Confirm", list(ConfirmScreen.BINDINGS)),
        ("Help", list(HelpScreen.BINDINGS)),
    ]
