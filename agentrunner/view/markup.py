"""Recorded text as HTML that is never markup: escaped, with control characters visible.

Everything the store holds (model text, tool output, task prompts, ids, error messages) is
data. It goes through :mod:`agentrunner.values.safe_text` first, so ANSI and OSC sequences show as
``^[[31m`` and ``^[]8;;...^G`` instead of acting, then through :func:`html.escape`, so
``<script>`` is text. Very long texts are cut (the page stays small) with a note naming the
command that shows them whole.
"""

from __future__ import annotations

import html

from agentrunner.values.safe_text import one_line_visible, visible

MAX_CHARS = 40_000
"""The most characters of one recorded text a page shows."""


def esc(value: object) -> str:
    """``value`` as HTML text (newlines and tabs kept, for ``<pre>``)."""
    return html.escape(visible(str(value)), quote=True)


def esc_line(value: object) -> str:
    """``value`` as one line of HTML text (newlines shown as ``^J``)."""
    return html.escape(one_line_visible(str(value)), quote=True)


def anchor(episode_id: str, seq: int | None = None) -> str:
    """The ``id`` of an episode's section (or of one of its blocks) in the page."""
    name = f"ep-{esc_line(episode_id)}"
    return name if seq is None else f"{name}-{seq}"


def pre(text: str, cls: str, *, whole: str, limit: int = MAX_CHARS) -> str:
    """``text`` in a ``<pre>`` (cut at ``limit`` characters; ``whole`` is the command that
    shows all of it)."""
    if len(text) <= limit:
        return f'<pre class="{cls}">{esc(text)}</pre>'
    more = len(text) - limit
    note = f"… {more:,} more characters ({whole} shows them)"
    return f'<pre class="{cls}">{esc(text[:limit])}<span class="cut">{esc(note)}</span></pre>'


def folded(summary: str, body: str, cls: str, *, open_: bool = False) -> str:
    """A ``<details>`` block; ``summary`` is HTML already."""
    opened = " open" if open_ else ""
    return f'<details class="{cls}"{opened}><summary>{summary}</summary>{body}</details>'
