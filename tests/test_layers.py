"""The import graph has layers and no circles (issue 24, design §2): a module imports only its own
layer or the ones beneath it, the project's modules import one another without a circle, and no
package reaches into another package's private (``_name``) modules.

Hand-written over ``ast`` (import-linter is not a dependency): an edge is any ``import`` or
``from ... import`` of a project module, at module level or inside a function (both run), and a
literal ``importlib.import_module("agentrunner....")``; an import under ``if TYPE_CHECKING:``
is not an edge, since it never runs. ``from package import name`` is an edge to the submodule
``package.name`` when there is one, else to the package.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK_DATA = "agentrunner.envs.data."  # the bundled tasks' own repositories, not agentrunner


def _ours(names: str) -> set[str]:
    return {f"agentrunner.{name}" for name in names.split()}


# Lowest first. A module belongs to the layer naming it or the nearest package above it; the
# package root ``agentrunner`` (a version and lazy re-exports that import nothing) is a value.
LAYERS: list[tuple[str, set[str]]] = [
    ("values", {"agentrunner", *_ours("values")}),
    ("providers", {"providers"}),
    ("environments", _ours("envs")),
    ("store", _ours("store")),
    # the runtime reads back the log it writes (the runner's pending calls, the recorder's
    # totals), so the log's readers sit beneath it
    ("readers", _ours("readers")),
    ("runtime", _ours("runtime")),
    ("lifecycle", _ours("lifecycle")),
    ("applications", _ours("verifiers export imports record report request_diff view serve")),
    ("front ends", _ours("cli tui")),
]  # fmt: skip

# Known debt: each edge, with why it stays. Remove an entry when its edge goes.
ALLOWED: dict[str, str] = {}

# Packages that must not import one another, whatever their layers.
FORBIDDEN = [("agentrunner.tui", "providers", "the TUI builds models through the lifecycle API")]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _files() -> dict[str, Path]:
    paths = [*ROOT.glob("agentrunner/**/*.py"), *ROOT.glob("providers/**/*.py")]
    named = {_module_name(p): p for p in paths}
    return {m: p for m, p in sorted(named.items()) if not m.startswith(TASK_DATA)}


def _resolve(name: str) -> str | None:
    while name and name not in _files():
        name = name.rpartition(".")[0]
    return name or None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module, self.found = module, set[str]()
        is_package = _files()[module].name == "__init__.py"
        self.package = module if is_package else module.rpartition(".")[0]

    def _add(self, name: str) -> None:
        target = _resolve(name)
        if target and target != self.module:
            self.found.add(target)

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
        for child in node.orelse if name == "TYPE_CHECKING" else [*node.body, *node.orelse]:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.package.rsplit(".", node.level - 1)[0]
            base = f"{package}.{base}" if base else package
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in _files() else base)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            self._add(str(node.args[0].value))
        self.generic_visit(node)


@cache
def _edges() -> frozenset[str]:
    edges = set()
    for module, path in _files().items():
        visitor = _Imports(module)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        edges |= {f"{module} -> {target}" for target in visitor.found}
    return frozenset(edges)


def _new_edges() -> list[tuple[str, str]]:
    pairs = (edge.partition(" -> ") for edge in sorted(_edges() - ALLOWED.keys()))
    return [(a, b) for a, _, b in pairs]


def _layer(module: str) -> int | None:
    """The layer of the longest name in ``LAYERS`` holding ``module`` (the root only itself)."""
    held = [
        (len(m), rank)
        for rank, (_, members) in enumerate(LAYERS)
        for m in members
        if module == m or (m != "agentrunner" and module.startswith(m + "."))
    ]
    return max(held)[1] if held else None


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_from_the_tree() -> None:
    assert "agentrunner.runtime.runner -> agentrunner.values.events" in _edges()


def test_every_module_belongs_to_a_layer() -> None:
    assert [m for m in _files() if _layer(m) is None] == []


def test_the_project_modules_import_one_another_without_a_circle() -> None:
    cycles = _cycles(_new_edges())
    edges = [f"{a} -> {b}" for a, b in _new_edges() for c in cycles if a in c and b in c]
    assert cycles == [], "import circles, by these edges:\n" + "\n".join(edges)


def test_no_module_imports_a_higher_layer() -> None:
    up = [
        f"{a} ({LAYERS[la][0]}) -> {b} ({LAYERS[lb][0]})"
        for a, b in _new_edges()
        if (la := _layer(a)) is not None and (lb := _layer(b)) is not None and lb > la
    ]
    assert up == [], "imports from a lower layer up to a higher one:\n" + "\n".join(up)


def test_no_package_reaches_into_another_package_private_module() -> None:
    def package(module: str) -> str:
        return module if _files()[module].name == "__init__.py" else module.rpartition(".")[0]

    private = [
        f"{a} -> {b}"
        for a, b in _new_edges()
        if b.rpartition(".")[2].startswith("_") and not _in(a, package(b))
    ]
    assert private == [], "imports of another package's private module:\n" + "\n".join(private)


def test_forbidden_packages_do_not_import_one_another() -> None:
    bad = [
        f"{a} -> {b} ({why})"
        for a, b in _new_edges()
        for low, high, why in FORBIDDEN
        if _in(a, low) and _in(b, high)
    ]
    assert bad == [], "forbidden imports:\n" + "\n".join(bad)


def test_every_known_debt_entry_still_names_an_edge() -> None:
    assert sorted(ALLOWED.keys() - _edges()) == [], "fixed: remove these from ALLOWED"
