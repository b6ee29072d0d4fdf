"""The README's module map is the tree: every module of ``agentrunner/`` and ``providers/``,
each with the first sentence of its docstring, between the ``module-map`` markers.

To regenerate it after adding or moving a module:
``.venv/bin/python tests/test_module_map.py > /tmp/map.md`` and paste it between the markers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agentrunner", "providers")
SKIPPED = ("agentrunner/envs/data/",)
LIMIT = 160  # the bundled tasks' own files, not modules of ours


def modules() -> list[Path]:
    found = [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(path.relative_to(ROOT).as_posix().startswith(s) for s in SKIPPED)
    ]
    return sorted(found, key=lambda p: p.relative_to(ROOT).as_posix())


def summary(path: Path) -> str:
    """The first line of the module's docstring (markdown table safe)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.strip().split("\n\n", 1)[0].split())
    sentence = re.split(r"(?<=[.])\s", first, maxsplit=1)[0]
    if len(sentence) > LIMIT:
        sentence = sentence[: LIMIT - 1].rsplit(" ", 1)[0] + " …"
    return sentence.replace("|", "\\|")


def table() -> str:
    rows = ["| module | what it is |", "|---|---|"]
    rows += [f"| `{p.relative_to(ROOT).as_posix()}` | {summary(p)} |" for p in modules()]
    return "\n".join(rows) + "\n"


def readme_map() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- module-map -->\n(.*?)<!-- /module-map -->", text, re.S)
    assert found, "README.md has no <!-- module-map --> section"
    return found.group(1)


def test_every_module_has_a_docstring_that_names_what_it_is() -> None:
    missing = [p.relative_to(ROOT).as_posix() for p in modules() if not summary(p)]
    assert missing == []


def test_the_readmes_module_map_lists_every_module_as_the_tree_has_it() -> None:
    assert readme_map() == table(), "regenerate it: python tests/test_module_map.py"


if __name__ == "__main__":
    print(table(), end="")
