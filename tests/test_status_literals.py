"""Statuses and stop reasons are compared as ``Status`` and ``StopReason`` members, never as
string literals, outside ``agentrunner/values/events.py`` where they are defined (issue 24): a
renamed member then breaks the type checker, not a comparison that silently stops matching.

A comparison is flagged when one side is a string literal spelling a member's value
(``status == "completed"``, ``stop in ("done", "max_turns")``). Not flagged: a literal
tested as a key (``"error" in details``), and a comparison whose other side is named for
something else these words also spell (an event's ``kind`` or an action's ``error``, a tool's
``name``, a reply's ``type``, a row's ``tone``). Modules that parse other programs' JSON
compare that JSON's own words and are left out, by name. ``DEBT`` names the modules (or a
package, ``/``-ended) whose comparisons are still to convert (reshaped in other work of issue
24); an entry goes once they have none (a test then fails until it is removed).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from agentrunner.values.events import Status, StopReason

ROOT = Path(__file__).resolve().parent.parent
DEFINED_IN = ROOT / "agentrunner" / "values" / "events.py"
VALUES = {str(m) for m in Status} | {str(m) for m in StopReason}
OTHER_MEANINGS = {"kind", "name", "action", "type", "tone"}
FOREIGN = {
    "agentrunner/envs/data/": "the bundled tasks' own repositories, not agentrunner",
    "agentrunner/record/dialects/": "the providers' wire formats (their own `error` keys)",
    "agentrunner/imports/responses.py": "OpenAI's response `status` (`incomplete`)",
    "agentrunner/imports/opencode.py": "opencode's tool-part `status` (`completed`, `error`)",
}


DEBT: dict[str, str] = {}


def _literals(node: ast.expr) -> Iterator[str]:
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            yield item.value


def _named(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):  # `reply.get("type")`: named by its key
        key = node.args[0] if node.args else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
        return _named(node.func)
    return None


def _key_test(node: ast.Compare) -> bool:
    """``"error" in details``: a literal looked up as a key, not compared."""
    return isinstance(node.left, ast.Constant) and isinstance(node.ops[0], ast.In | ast.NotIn)


def comparisons(path: Path) -> Iterator[tuple[int, str]]:
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Compare) or _key_test(node):
            continue
        sides = [node.left, *node.comparators]
        if any(_named(side) in OTHER_MEANINGS for side in sides):
            continue
        if any(value in VALUES for side in sides for value in _literals(side)):
            yield node.lineno, ast.get_source_segment(text, node) or ""


@cache
def places() -> list[str]:
    out = []
    for path in sorted((ROOT / "agentrunner").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if path != DEFINED_IN and not any(relative.startswith(p) for p in FOREIGN):
            out += [f"{relative}:{line}: {source}" for line, source in comparisons(path)]
    return out


def _in_debt(place: str) -> bool:
    return any(place.startswith(module) for module in DEBT)


def test_statuses_and_stop_reasons_are_compared_as_members() -> None:
    found = [p for p in places() if not _in_debt(p)]
    assert found == [], "\n".join(found)


def test_each_module_in_debt_still_compares_a_literal() -> None:
    found = places()
    paid = [module for module in DEBT if not any(p.startswith(module) for p in found)]
    assert paid == [], f"no literal comparisons left in {paid}: remove them from DEBT"


if __name__ == "__main__":
    print(*places(), sep="\n")
