"""``EventList``: the trace as a virtualized list, one row per event (Line API).

Only the rows on screen are drawn. Rows come from a page cache filled by the screen: when a
row is missing the list posts :class:`EventList.PagesWanted` and draws a placeholder; the
screen reads the pages in a worker and hands them back with :meth:`EventList.put_pages`.
A new layout asks at once for every page its first screen needs (folded runs included).
A :class:`~agentrunner.tui.rowindex.RowIndex` maps rows to seqs (folded runs of chunks
included). Data comes down as reactives (``cursor``, ``folded``, ``limit``, ``term``);
``marks`` (row seq → a decision point's one-line mark) come down the same way; cursor
moves go up as :class:`EventList.CursorMoved`.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agentrunner.tui.data import PAGE
from agentrunner.tui.rowindex import RowIndex
from agentrunner.tui.rows import RowInfo, RunInfo, fold, render_row

RUN_SCAN = 256  # chunks of a folded run read to summarise it (its first ones)
_TONES = (
    "meta",
    "turn",
    "model",
    "usage",
    "env",
    "error",
    "cancel",
    "resume",
    "end",
    "decision",
    "compaction",
)
_STYLE_NAMES = (
    "cursor",
    "decision",
    "seq",
    "dim",
    "turn-a",
    "turn-b",
    "match",
    "row-error",
    "row-cancel",
    *(f"label-{tone}" for tone in _TONES),
    *(f"text-{tone}" for tone in _TONES),
)


class EventList(ScrollView, can_focus=True, inherit_bindings=False):
    """The virtualized list of a trace's events."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"event-list--{name}" for name in _STYLE_NAMES}

    cursor: reactive[int] = reactive(0, init=False, always_update=True)
    folded: reactive[bool] = reactive(True, init=False)
    limit: reactive[int | None] = reactive(None, init=False)  # replay: rows revealed
    term: reactive[str] = reactive("", init=False)
    marks: reactive[dict[int, str]] = reactive(dict, init=False)

    class CursorMoved(Message):
        """The cursor is on a new row, covering seqs ``lo..hi``."""

        def __init__(self, row: int, lo: int, hi: int) -> None:
            super().__init__()
            self.row, self.lo, self.hi = row, lo, hi

    class PagesWanted(Message):
        """Rows on screen need these pages (``PAGE`` seqs each) read from the store."""

        def __init__(self, pages: frozenset[int]) -> None:
            super().__init__()
            self.pages = pages

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = RowIndex((), 0)
        self._pages: LRUCache[int, list[RowInfo]] = LRUCache(160)
        self._runs: LRUCache[tuple[int, int], RunInfo] = LRUCache(512)
        self._pending: set[int] = set()
        self._wanted: set[int] = set()
        self._styles: dict[str, Style] | None = None
        self._flush_scheduled = False

    # ------------------------------------------------------------------ data in

    def set_index(self, index: RowIndex, *, at_end: bool = False) -> None:
        """A new layout, shown from its first row (``at_end``: its last)."""
        self.index = index
        index.folded = self.folded
        self._pages.clear()
        self._runs.clear()
        self._pending.clear()
        self._relayout()
        self.move(self.row_count - 1 if at_end else 0)
        self._want_rows(self.visible_rows())

    def _want_rows(self, rows: range) -> None:
        """Ask at once for every page ``rows`` need, the first chunks of folded runs
        included (drawing asks for a run's chunks only once its first one is in: a second
        read before the screen is complete)."""
        for row in rows:
            lo, hi = self.span(row)
            last = min(hi, lo + RUN_SCAN - 1)
            self._wanted.update(range((lo - 1) // PAGE, (last - 1) // PAGE + 1))
        self._flush_wanted()  # now: the read overlaps the first drawing

    def put_pages(self, pages: dict[int, list[RowInfo]]) -> None:
        for p, rows in pages.items():
            self._pending.discard(p)
            if rows:
                self._pages[p] = rows
        self.refresh()

    def forget_pending(self) -> None:
        self._pending.clear()

    def append(self, rows: list[RowInfo]) -> int:
        """Live events after the last one; returns how many rows were added."""
        for row in rows:
            p = (row.seq - 1) // PAGE
            page = self._pages.get(p)
            if page is not None and page[-1].seq == row.seq - 1:
                page.append(row)
            elif page is None and (row.seq - 1) % PAGE == 0:
                self._pages[p] = [row]
            elif page is not None:
                self._pages.discard(p)
        was_at_bottom = self.at_bottom
        added = self.index.extend((r.seq, r.kind) for r in rows)
        self._relayout()
        if added and was_at_bottom and self.limit is None:
            self.cursor = self.row_count - 1
        self.refresh()
        return added

    # ------------------------------------------------------------------ geometry

    @property
    def row_count(self) -> int:
        n = len(self.index)
        return n if self.limit is None else min(n, self.limit)

    @property
    def at_bottom(self) -> bool:
        return self.cursor >= self.row_count - 1

    def visible_rows(self) -> range:
        """The rows on screen."""
        top = round(self.scroll_y)
        return range(top, min(self.row_count, top + self._page_height()))

    def span(self, row: int) -> tuple[int, int]:
        return self.index.span(row)

    def _relayout(self) -> None:
        self.virtual_size = Size(self.size.width, self.row_count)
        if self.cursor >= self.row_count:
            self.cursor = max(0, self.row_count - 1)
        self._scroll_to_cursor()
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, self.row_count)
        self._scroll_to_cursor()

    def _page_height(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def _scroll_to_cursor(self) -> None:
        # ``force``: the list may have just outgrown the screen, before its scrollbar is
        # shown (Textual refuses to scroll a widget without one until the next layout).
        height = self._page_height()
        top = round(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True, force=True)
        elif self.cursor >= top + height:
            y = self.cursor - height + 1
            self.scroll_to(y=y, animate=False, immediate=True, force=True)

    # ------------------------------------------------------------------ reactives

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.row_count - 1))

    def watch_cursor(self, old: int, new: int) -> None:
        top = round(self.scroll_y)
        self._scroll_to_cursor()
        if round(self.scroll_y) == top:  # no scroll: redraw the two rows only
            self.refresh_lines(old)
            self.refresh_lines(new)
        if self.row_count:
            lo, hi = self.span(new)
            self.post_message(self.CursorMoved(new, lo, hi))

    def watch_folded(self, old: bool, new: bool) -> None:
        seq = self.span(self.cursor)[0] if self.row_count else 1
        self.index.folded = new
        self._relayout()
        if self.row_count:
            row = self.index.row_of(seq)
            if row == self.cursor:
                self.watch_cursor(row, row)
            self.cursor = row

    def watch_limit(self) -> None:
        self._relayout()

    def watch_term(self) -> None:
        self.refresh()

    def watch_marks(self) -> None:
        self.refresh()

    def move(self, row: int) -> None:
        self.cursor = row

    def move_by(self, delta: int) -> None:
        self.cursor = self.cursor + delta

    def page_rows(self) -> int:
        return self._page_height()

    # ------------------------------------------------------------------ rows

    def _row(self, seq: int) -> RowInfo | None:
        p = (seq - 1) // PAGE
        page = self._pages.get(p)
        idx = seq - 1 - p * PAGE
        if page is None or idx >= len(page):
            if p not in self._pending:
                self._wanted.add(p)
            return None
        return page[idx]

    def info(self, row: int) -> tuple[RowInfo | RunInfo | None, bool]:
        """The row's data (None while loading) and whether it is a folded run."""
        lo, hi = self.span(row)
        first = self._row(lo)
        if first is None or first.kind != "model.chunk" or not self.index.folded:
            return first, False
        run = self._runs.get((lo, hi))
        if run is not None:
            return run, True
        chunks: list[RowInfo] = []
        for seq in range(lo, min(hi, lo + RUN_SCAN - 1) + 1):
            chunk = self._row(seq)
            if chunk is None:
                return None, True
            chunks.append(chunk)
        run = fold(lo, hi, chunks)
        self._runs[(lo, hi)] = run
        return run, True

    def ensure(self, row: int) -> tuple[RowInfo | RunInfo | None, bool]:
        """``info(row)``, asking for its pages now if they are missing (rows off screen)."""
        found = self.info(row)
        if self._wanted and not self._flush_scheduled:
            self._flush_scheduled = True
            self.call_later(self._flush_wanted)
        return found

    def visible_loaded(self) -> bool:
        """Whether there are rows and every row on screen has its data (for tests and the
        benchmark)."""
        top = round(self.scroll_y)
        end = min(self.row_count, top + self._page_height())
        return self.row_count > 0 and all(self.info(r)[0] is not None for r in range(top, end))

    # ------------------------------------------------------------------ drawing

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _style_map(self) -> dict[str, Style]:
        if self._styles is None:
            self._styles = {
                name: self.get_component_rich_style(f"event-list--{name}", partial=True)
                for name in _STYLE_NAMES
            }
        return self._styles

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.size.width
        base = self.rich_style
        if row >= self.row_count:
            return Strip.blank(width, base)
        styles = self._style_map()
        info, is_run = self.info(row)
        lo = self.span(row)[0]
        mark = self.marks.get(lo, "")
        text = render_row(info, lo, styles, folded_run=is_run, term=self.term, mark=mark)
        style = base + styles["cursor"] if row == self.cursor else base
        text.stylize_before(base)
        if row == self.cursor:
            text.stylize(styles["cursor"])
        strip = Strip(text.render(self.app.console), text.cell_len)
        strip = strip.crop_extend(scroll_x, scroll_x + width, style)
        if self._wanted and not self._flush_scheduled:
            self._flush_scheduled = True
            self.call_later(self._flush_wanted)
        return strip

    def _flush_wanted(self) -> None:
        self._flush_scheduled = False
        wanted = frozenset(self._wanted - self._pending)
        self._wanted.clear()
        if wanted:
            self._pending |= wanted
            self.post_message(self.PagesWanted(wanted))

    def on_click(self, event: events.Click) -> None:
        row = round(self.scroll_y) + event.y
        if 0 <= row < self.row_count:
            self.cursor = row
