"""An episode's verifier results on the page: what ``agentrunner verify`` stored with it.

The latest result of each verifier (pass or fail, score, when, how many earlier ones), a
warning when the latest reward check did not reproduce the recorded reward, and each result's
details as the verifier wrote them. Details hold text from the episode and from judges (rule
evidence, a judge's answer, a test command's output), so they are shown as data: every key
and value escaped, never read as markup; a list of records (a rule verifier's checks, a
composite's children) as a table, anything else nested as indented JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentrunner.store.verifications import (
    DISPUTED_MARK,
    DISPUTED_NOTE,
    StoredVerification,
    reward_reproduced,
)
from agentrunner.view.markup import esc_line, folded, pre

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

SHORT_VALUE = 160
"""A text value up to this long, on one line, is shown in its cell; longer ones in a block."""
SPEC_KEY = "spec"
"""The details' copy of the verifier's configuration, folded (it says how, not what)."""


def verifications(store: StoreBackend, episode_id: str) -> str:
    """The episode's verification block, or empty when nothing verified it."""
    whole = f"agentrunner show {episode_id} --json"
    results = store.verifications(episode_id)  # newest first
    if not results:
        return ""
    latest: dict[str, StoredVerification] = {}
    for result in results:
        latest.setdefault(result.verifier, result)
    parts = ["<h3>Verification</h3>"]
    if reward_reproduced(results) is False:
        parts.append(f'<p class="error">{esc_line(f"{DISPUTED_MARK} {DISPUTED_NOTE}")}</p>')
    rows = []
    for name, result in sorted(latest.items()):
        earlier = sum(1 for r in results if r.verifier == name) - 1
        rows.append(_summary_row(result, earlier))
    head = "<tr><th>verifier</th><th>verdict</th><th>score</th><th>when</th><th>earlier</th></tr>"
    parts.append(f"<table>{head}{''.join(rows)}</table>")
    parts.extend(_details(result, whole) for _, result in sorted(latest.items()))
    return f'<div class="blk verify">{"".join(parts)}</div>'


def _summary_row(result: StoredVerification, earlier: int) -> str:
    verdict = (
        '<span class="end">✓ pass</span>' if result.passed else '<span class="error">✗ fail</span>'
    )
    score = "-" if result.score is None else f"{result.score:.2f}"
    when = result.created_at[:16].replace("T", " ")
    cells = [esc_line(result.verifier), verdict, score, esc_line(when), str(earlier or "-")]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _details(result: StoredVerification, whole: str) -> str:
    """One result's details, folded under its verifier's name."""
    details = result.details
    rows = [
        f"<tr><th>{esc_line(key)}</th><td>{_value(value, whole)}</td></tr>"
        for key, value in details.items()
        if key != SPEC_KEY
    ]
    body = f'<table class="facts">{"".join(rows)}</table>' if rows else ""
    if SPEC_KEY in details:
        spec = pre(_json(details[SPEC_KEY]), "args", whole=whole)
        body += folded("how it was configured", spec, "spec")
    summary = f"details of {esc_line(result.verifier)} ({esc_line(result.created_at)})"
    return folded(summary, body, "verdict")


def _value(value: Any, whole: str) -> str:
    """One value of the details as HTML: a short text inline, a long one in a block, a list
    of records as a table, anything else as JSON."""
    if isinstance(value, str):
        if "\n" in value or len(value) > SHORT_VALUE:
            return pre(value, "obs", whole=whole)
        return esc_line(value)
    if _records(value):
        return _table(value)
    if isinstance(value, Mapping | list):
        return pre(_json(value), "args", whole=whole)
    return esc_line(_json(value))


def _records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _table(records: Sequence[Mapping[str, Any]]) -> str:
    """Records as a table, one column per key any of them has (in the order first seen)."""
    columns = list(dict.fromkeys(key for record in records for key in record))
    head = "".join(f"<th>{esc_line(c)}</th>" for c in columns)
    rows = []
    for record in records:
        cells = []
        for column in columns:
            cell = record.get(column)
            shown = _mark(cell) if isinstance(cell, bool) else _text(cell)
            cells.append(f"<td>{esc_line(shown)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _mark(passed: bool) -> str:
    return "✓" if passed else "✗"


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)
