"""Status words drawn with the styles of the app's ``.tcss`` (component classes)."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from agentrunner.tui.format import STATUSES

STATUS_CLASSES = {f"status--{s}" for s in STATUSES}


def status_text(node: Widget, status: str) -> Text:
    """``status`` as a word, styled by the ``status--STATUS`` component class of ``node``."""
    name = f"status--{status}"
    style = node.get_component_rich_style(name, partial=True) if name in STATUS_CLASSES else None
    return Text(status, style=style or "")
