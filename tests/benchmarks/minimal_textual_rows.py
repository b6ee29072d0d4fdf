"""The TUI benchmark's baseline: a minimal Textual app showing an episode's first 40 events,
read with plain ``sqlite3`` (no agentrunner import), one table row each (seq, kind, text).

Run as ``python minimal_textual_rows.py DB EPISODE_ID`` in a 40-line terminal: the rows fill
the screen (the table has no header); ``q`` quits.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

ROWS = 40


def first_rows(db: str, episode_id: str) -> list[tuple[str, str, str]]:
    """The episode's first ``ROWS`` events as (seq, kind, one line of text)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = conn.execute(
            "SELECT seq, kind, payload FROM events WHERE episode_id = ? ORDER BY seq LIMIT ?",
            (episode_id, ROWS),
        ).fetchall()
    finally:
        conn.close()
    rows = []
    for seq, kind, payload in found:
        body = json.loads(payload)
        text = body.get("text") if isinstance(body.get("text"), str) else json.dumps(body)
        rows.append((str(seq), kind, text[:80]))
    return rows


class RowsApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def __init__(self, db: str, episode_id: str) -> None:
        super().__init__()
        self.db, self.episode_id = db, episode_id

    def compose(self) -> ComposeResult:
        yield DataTable(show_header=False, cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("seq", "kind", "text")
        table.add_rows(first_rows(self.db, self.episode_id))


if __name__ == "__main__":
    RowsApp(sys.argv[1], sys.argv[2]).run()
