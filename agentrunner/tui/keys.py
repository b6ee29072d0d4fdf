"""Where the TUI's key bindings live, screen by screen (for help and keymap checks).

Each screen declares the help section that lists its keys (:func:`listed`); this module
imports none of them when it loads, so the screens and the app can import it. The app loads
a screen's module when the screen is first opened; help and keymap checks load the modules
not loaded yet (:data:`DECLARED_IN`).

Every binding has an id (``screen.action``), so a keymap (``tui --keymap FILE``, a JSON
object of binding id → keys) can change any key; an id that names no binding is refused
(Textual would ignore it silently). The footer lists the keys to get help and to quit
first, so a narrow terminal never hides them.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from typing import TypeVar

from textual.binding import ActiveBinding, Binding, BindingType

from agentrunner.values.errors import UsageError

PINNED = ("app.help", "app.quit")  # shown first in every footer


DECLARED_IN = {
    "Everywhere": "agentrunner.tui.app",
    "Episodes": "agentrunner.tui.screens.episodes",
    "Trace": "agentrunner.tui.screens.trace",
    "Files changed": "agentrunner.tui.screens.files",
    "Branches": "agentrunner.tui.screens.branches",
    "Decision points": "agentrunner.tui.screens.decisions",
    "Diff": "agentrunner.tui.screens.diff",
    "Request diff": "agentrunner.tui.screens.request_diff",
    "Compaction history": "agentrunner.tui.screens.compaction",
    "Report": "agentrunner.tui.screens.report",
    "Fork editor": "agentrunner.tui.screens.fork",
    "Confirm": "agentrunner.tui.screens.confirm",
    "Help": "agentrunner.tui.screens.help",
}
"""Help's sections in its order, each with the module whose screen (or the app) declares it
(:func:`listed`)."""
SECTIONS = tuple(DECLARED_IN)
EVERYWHERE = SECTIONS[0]
_declared: dict[str, tuple[type, ...]] = {}
_C = TypeVar("_C", bound=type)


def listed(title: str, *parts: type) -> Callable[[_C], _C]:
    """Class decorator: help lists the keys of this screen (or the app) under ``title``, with
    those of ``parts`` (its widgets that hold bindings of their own). Declared on the screens,
    so that this module imports none of them."""
    if title not in SECTIONS:
        raise ValueError(f"{title!r} is not one of help's sections {SECTIONS}")

    def declare(owner: _C) -> _C:
        _declared[title] = (owner, *parts)
        return owner

    return declare


def _owners() -> list[tuple[str, tuple[type, ...]]]:
    """(title, the classes whose bindings it lists: the screen first) in help's order
    (the screens not opened yet are loaded: a partial list would refuse good keymap ids)."""
    for title in SECTIONS:
        if title not in _declared:
            importlib.import_module(DECLARED_IN[title])
    return [(title, _declared[title]) for title in SECTIONS]


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
