"""The trace list's row layout: folded runs of chunks, row ↔ seq mapping, live growth."""

from __future__ import annotations

from agentrunner.tui.rowindex import RowIndex

# seqs 1-3 and 9-10 are events, 4-8 a run of chunks, 11-12 trailing chunks
NONCHUNK = [1, 2, 3, 9, 10]


def test_folded_run_of_chunks_is_one_row() -> None:
    index = RowIndex(NONCHUNK, 12)
    assert [index.span(r) for r in range(len(index))] == [
        (1, 1),
        (2, 2),
        (3, 3),
        (4, 8),
        (9, 9),
        (10, 10),
        (11, 12),
    ]


def test_unfolded_rows_are_one_per_seq() -> None:
    index = RowIndex(NONCHUNK, 12, folded=False)
    assert len(index) == 12 and index.span(5) == (6, 6) and index.row_of(6) == 5


def test_row_of_a_chunk_is_its_run() -> None:
    index = RowIndex(NONCHUNK, 12)
    assert [index.row_of(s) for s in (4, 6, 8, 9, 12)] == [3, 3, 3, 4, 6]


def test_live_chunks_extend_the_trailing_run_and_events_add_rows() -> None:
    index = RowIndex(NONCHUNK, 12)
    added = index.extend([(13, "model.chunk"), (14, "model.response"), (15, "model.chunk")])
    assert added == 2 and index.span(6) == (11, 13) and index.span(7) == (14, 14)
    assert index.span(8) == (15, 15) and index.last_seq == 15


def test_extend_ignores_events_already_known() -> None:
    index = RowIndex(NONCHUNK, 12)
    assert index.extend([(12, "model.chunk"), (10, "usage")]) == 0 and len(index) == 7
