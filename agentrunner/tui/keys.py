"""Where the TUI's key bindings live, screen by screen (for help and keymap checks).

Every binding has an id (``screen.action``), so a keymap (``tui --keymap FILE``, a JSON
object of binding id → keys) can change any key; an id that names no binding is refused
(Textual would ignore it silently). The footer lists the keys to get help and to quit
first, so a narrow terminal never hides them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from textual.binding import ActiveBinding, Binding, BindingType

from agentrunner.errors import UsageError

PINNED = ("app.help", "app.quit")  # shown first in every footer


def _owners() -> list[tuple[str, tuple[type, ...]]]:
    """(title, the classes whose bindings it lists: the screen first) in help's order."""
    from agentrunner.tui.app import AgentRunnerApp
    from agentrunner.tui.screens.branches import BranchesScreen, LineageTree
    from agentrunner.tui.screens.confirm import ConfirmScreen
    from agentrunner.tui.screens.decisions import DecisionsScreen, DecisionTree
    from agentrunner.tui.screens.diff import DiffScreen
    from agentrunner.tui.screens.episodes import EpisodesScreen, EpisodesTable
    from agentrunner.tui.screens.files import FilesScreen
    from agentrunner.tui.screens.fork import ForkScreen
    from agentrunner.tui.screens.help import HelpScreen
    from agentrunner.tui.screens.report import ReportScreen
    from agentrunner.tui.screens.request_diff import RequestDiffScreen
    from agentrunner.tui.screens.trace import TraceScreen

    return [
        (EVERYWHERE, (AgentRunnerApp,)),
        ("Episodes", (EpisodesScreen, EpisodesTable)),
        ("Trace", (TraceScreen,)),
        ("Files changed", (FilesScreen,)),
        ("Branches", (BranchesScreen, LineageTree)),
        ("Decision points", (DecisionsScreen, DecisionTree)),
        ("Diff", (DiffScreen,)),
        ("Request diff", (RequestDiffScreen,)),
        ("Report", (ReportScreen,)),
        ("Fork editor", (ForkScreen,)),
        ("Confirm", (ConfirmScreen,)),
        ("Help", (HelpScreen,)),
    ]


EVERYWHERE = "Everywhere"


def binding_sections() -> list[tuple[str, list[BindingType]]]:
    """(title, bindings) for the app and each screen, in the order help lists them."""
    return [
        (title, [b for owner in owners[::-1] for b in getattr(owner, "BINDINGS", [])])
        for title, owners in _owners()
    ]


def screen_section(screen: object) -> str | None:
    """The title of the section that lists ``screen``'s keys (None: a screen help does not
    know)."""
    return next((title for title, owners in _owners() if isinstance(screen, owners[0])), None)


def binding_ids() -> list[str]:
    """Every binding id, sorted."""
    return sorted(
        {
            b.id
            for _, bindings in binding_sections()
            for b in bindings
            if isinstance(b, Binding) and b.id
        }
    )


def check_keymap(keymap: Mapping[str, str]) -> None:
    """Refuse a keymap that names unknown binding ids (saying which, and the valid ones)."""
    valid = binding_ids()
    unknown = [key for key in keymap if key not in valid]
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, valid, n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise UsageError(
        f"unknown binding id{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; valid ids"
        f" (also listed by ? in the app): {', '.join(valid)}"
    )


def pinned_first(bindings: Mapping[str, ActiveBinding]) -> dict[str, ActiveBinding]:
    """``bindings`` (a screen's active bindings) with help and quit first."""
    first = {k: b for k, b in bindings.items() if b.binding.id in PINNED}
    return first | {k: b for k, b in bindings.items() if k not in first}
