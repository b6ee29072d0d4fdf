"""Which store events each row of the trace list stands for (the list's virtual layout).

A trace is shown one row per event. Streamed chunks (``model.chunk``) of one model call can
be *folded*: a run of consecutive chunks becomes one summary row. The index keeps the start
seq of every folded row in a compact ``array`` (built from the store's ``(episode_id, kind,
seq)`` index without reading payloads), so mapping a row to its seqs and back is a lookup or
a bisection, even for a million events. Unfolded, row ``r`` is simply seq ``r + 1``.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable

CHUNK = "model.chunk"


class RowIndex:
    """Rows ↔ seq spans for one episode's full history (seqs are dense from 1)."""

    def __init__(self, nonchunk_seqs: Iterable[int], last_seq: int, *, folded: bool = True):
        self.folded = folded
        self.last_seq = 0
        self._starts = array("q")
        self._tail_chunk = False  # the last event is a chunk (a folded run may grow)
        prev = 0
        for seq in nonchunk_seqs:
            if seq > last_seq:
                break
            if seq > prev + 1:
                self._starts.append(prev + 1)
            self._starts.append(seq)
            prev = seq
        if last_seq > prev:
            self._starts.append(prev + 1)
            self._tail_chunk = True
        self.last_seq = last_seq

    def __len__(self) -> int:
        return len(self._starts) if self.folded else self.last_seq

    def span(self, row: int) -> tuple[int, int]:
        """The seqs ``(lo, hi)`` row ``row`` covers (``lo == hi`` unless a folded run)."""
        if not self.folded:
            return row + 1, row + 1
        lo = self._starts[row]
        hi = self._starts[row + 1] - 1 if row + 1 < len(self._starts) else self.last_seq
        return lo, hi

    def row_of(self, seq: int) -> int:
        """The row showing ``seq``."""
        seq = max(1, min(seq, self.last_seq))
        if not self.folded:
            return seq - 1
        return max(0, bisect_right(self._starts, seq) - 1)

    def extend(self, events: Iterable[tuple[int, str]]) -> int:
        """Add live events ``(seq, kind)`` (in seq order, after the last one); return how
        many rows were added in the current mode."""
        before = len(self)
        for seq, kind in events:
            if seq <= self.last_seq:
                continue
            is_chunk = kind == CHUNK
            if not (is_chunk and self._tail_chunk and seq == self.last_seq + 1):
                self._starts.append(seq)
            self._tail_chunk = is_chunk
            self.last_seq = seq
        return len(self) - before
