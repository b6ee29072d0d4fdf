"""Our own payloads and records are read by attribute, not by string key (issue 24's bar:
fewer than 10 such reads outside the store's row mapping).

A read by string key is a subscript or a ``.get(...)`` whose key is a string literal, on an
attribute named ``payload``, ``model``, ``env``, ``config`` or ``params`` (``e.model["spec"]``,
``start.env.get("kind")``), or on a name bound from the store's fork groups or decision
outcomes (``group["turn"]``, ``outcomes(...)[gid]["adopted"]``). ``agentrunner/store/`` maps
rows to records and is left out, as are the modules below, which parse other programs' JSON.
Run this file as a script to list the places.

``DEBT`` names the modules whose reads are still to convert (each is being reshaped in other
work of issue 24): they are counted and printed, and the bar holds for the rest until each
entry goes (an entry whose module no longer reads by key fails, so it is removed then).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentrunner"
LIMIT = 10  # the bar: fewer than this

RECORD_ATTRIBUTES = {"payload", "model", "env", "config", "params"}
GROUP_READERS = {"fork_groups", "outcomes"}
LEFT_OUT = {
    "agentrunner/store": "the store maps its rows to the records (the one place keys are read)",
    "agentrunner/envs/data": "the bundled tasks' own repositories, not agentrunner",
    "agentrunner/imports/codex.py": "Codex's session JSON: its records have a field `payload`",
    "agentrunner/imports/codex_fields.py": "Codex's session JSON (its `payload` records)",
}


DEBT: dict[str, str] = {}


def _left_out(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == p or relative.startswith(f"{p}/") for p in LEFT_OUT)


def _calls_group_reader(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in GROUP_READERS:
                return True
    return False


def _bound_names(target: ast.AST) -> Iterator[str]:
    for sub in ast.walk(target):
        if isinstance(sub, ast.Name):
            yield sub.id


def _group_names(tree: ast.AST) -> set[str]:
    """Names bound from a fork-group or outcome reader, or from iterating one of those."""
    names: set[str] = set()
    grew = True
    while grew:
        before = len(names)
        for node in ast.walk(tree):
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(node, ast.Assign):
                pairs = [(t, node.value) for t in node.targets]
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                pairs = [(node.target, node.value)]
            elif isinstance(node, ast.For | ast.comprehension):
                pairs = [(node.target, node.iter)]
            for target, value in pairs:
                uses = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                if _calls_group_reader(value) or uses & names:
                    names.update(_bound_names(target))
        grew = len(names) > before
    return names


def _base(node: ast.expr) -> ast.expr:
    """What a chain of subscripts is taken of (``x`` in ``x[a]["b"]``)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node


def _on_record(node: ast.expr, groups: set[str]) -> bool:
    base = _base(node)
    if isinstance(base, ast.Attribute):
        return base.attr in RECORD_ATTRIBUTES
    if isinstance(base, ast.Name):
        return base.id in groups
    return isinstance(base, ast.Call) and _calls_group_reader(base)


def _string(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def reads(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, source)`` of each read by string key in one module."""
    text = path.read_text()
    tree = ast.parse(text)
    groups = _group_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _string(node.slice):
            found = _on_record(node.value, groups)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and _string(node.args[0])
        ):
            found = _on_record(node.func.value, groups)
        else:
            continue
        if found:
            yield node.lineno, ast.get_source_segment(text, node) or ""


@cache
def places() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _left_out(path):
            relative = path.relative_to(ROOT).as_posix()
            out += [f"{relative}:{line}: {source}" for line, source in reads(path)]
    return out


def _in_debt(place: str) -> bool:
    return any(place.startswith(module) for module in DEBT)


def test_payloads_and_records_are_read_by_attribute() -> None:
    found = places()
    print(f"{len(found)} reads by string key", *found, sep="\n")
    rest = [p for p in found if not _in_debt(p)]
    assert len(rest) < LIMIT, "\n".join(rest)


def test_each_module_in_debt_still_reads_by_key() -> None:
    found = places()
    paid = [module for module in DEBT if not any(p.startswith(module) for p in found)]
    assert paid == [], f"no reads by key left in {paid}: remove them from DEBT"


if __name__ == "__main__":
    listed = places()
    print(*listed, f"{len(listed)} reads by string key", sep="\n")
