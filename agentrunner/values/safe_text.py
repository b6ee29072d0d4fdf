"""Recorded text made safe to show: control and escape characters visible, never interpreted.

What a model wrote, what a command printed and what a task file says reach a terminal (the
live view of ``run``, ``show``, ``ls``, the TUI). A terminal acts on control characters: an
ESC starts a sequence that can set the clipboard (OSC 52), the window title, open links
(OSC 8), clear the screen or erase lines above; ``\\r`` and backspace overwrite what is
shown. So every recorded text is shown the way ``less`` and ``cat -v`` show it: C0 controls
in caret notation (ESC as ``^[``, ``\\r`` as ``^M``, BEL as ``^G``), DEL as ``^?``, C1
controls and the bidirectional overrides that reorder a line as ``<U+009B>``, bytes that are
not UTF-8 (read with ``surrogateescape``) as ``<9B>``. Newline and tab are kept where layout
needs them (:func:`visible`); one-line forms replace them too (:func:`one_line_visible`).

Rich parses strings as markup (``[/]`` fails, ``[link=...]`` is live): :func:`plain` and
:func:`line` build ``rich.text.Text`` that is never parsed; :func:`literal` is the text for a
markup string (followed by a tag: Rich's escape doubles a trailing backslash). JSON printed
for a terminal goes through :func:`json_safe` (``--json``, the fork editor).

One pass of one precompiled character class does it (``re.sub``: a C-speed scan that returns
clean text as it is, a table look-up per control character found; ``str.translate`` with
multi-character replacements is ten times slower on anything but clean ASCII).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Rich: imported by what builds markup or Text (``ls --json`` does not)
    from rich.style import Style
    from rich.text import Text

__all__ = ["Part", "json_safe", "line", "literal", "one_line_visible", "plain", "visible"]

Part = str | tuple[str, str]
"""A piece of a :func:`line`: text, or (text, style)."""

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))


_SHOWN = {chr(c): f"^{chr(c + 0x40)}" for c in range(0x20)}
_SHOWN["\x7f"] = "^?"
_SHOWN.update({chr(c): f"<U+{c:04X}>" for c in (*range(0x80, 0xA0), *_BIDI)})
_SHOWN.update({chr(c): f"<{c - 0xDC00:02X}>" for c in range(0xDC80, 0xDD00)})
_OTHERS = "\x7f-\x9f\u202a-\u202e\u2066-\u2069\udc80-\udcff"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")
_ANY_CONTROL = re.compile(f"[\x00-\x1f{_OTHERS}]")
_RAW_IN_JSON = re.compile(f"[{_OTHERS}]")  # JSON escapes C0 itself


def _shown(match: re.Match[str]) -> str:
    return _SHOWN[match.group()]


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab shown visibly (``^[``,
    ``^M``, ``^?``, ``<U+009B>``); text without any is returned as it is."""
    return _CONTROL.sub(_shown, text)


def one_line_visible(text: str) -> str:
    """As :func:`visible`, newline and tab included (``^J``, ``^I``): for one-line cells."""
    return _ANY_CONTROL.sub(_shown, text)


def literal(value: object) -> str:
    """``value`` as text for a Rich markup string: shown as written, never as markup."""
    from rich.markup import escape

    return escape(visible(str(value)))


def plain(value: object, style: str | Style = "") -> Text:
    """``value`` as a Rich ``Text`` (never parsed as markup), control characters visible."""
    from rich.text import Text

    return Text(visible(str(value)), style=style)


def line(*parts: Part) -> Text:
    """Words and recorded values, each ``text`` or ``(text, style)``, as one ``Text``: never
    read as markup, control characters visible."""
    from rich.text import Text

    return Text.assemble(
        *(visible(p) if isinstance(p, str) else (visible(p[0]), p[1]) for p in parts)
    )


def json_safe(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with what a terminal would act on
    and JSON leaves raw (DEL, C1 controls, bidi overrides, bytes that are not UTF-8) written as
    ``\\u`` escapes: the same JSON value, shown instead of obeyed."""
    return _RAW_IN_JSON.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"
