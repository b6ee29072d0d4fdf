"""Where the TUI's key bindings live, screen by screen (for help and keymap checks).

Each screen declares the help section that lists its keys (:func:`listed`); this module
imports none of them, so the screens and the app can import it.

Every binding has an id (``screen.action``), so a keymap (``tui --keymap FILE``, a JSON
object of binding id → keys) can change any key; an id that names no binding is refused
(Textual would ignore it silently). The footer lists the keys to get help and to quit
first, so a narrow terminal never hides them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import TypeVar

from textual.binding import ActiveBinding, Binding, BindingType

from agentrunner.errors import UsageError

PINNED = ("app.help", "app.quit")  # shown first in every footer


SECTIONS = (
    "Everywhere",
    "Episodes",
    "Trace",
    "Files changed",
    "Branches",
    "Decision points",
    "Diff",
    "Request diff",
    "Report",
    "Fork editor",
    "Confirm",
    "Help",
)
"""Help's sections in its order; the app and each screen declare theirs (:func:`listed`)."""
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
    """(title, the classes whose bindings it lists: the screen first) in help's order."""
    missing = [title for title in SECTIONS if title not in _declared]
    if missing:  # a partial list would refuse good keymap ids: say so instead
        raise RuntimeError(
            f"the TUI's screens are not loaded (no {', '.join(missing)}):"
            " import agentrunner.tui.app first"
        )
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
