"""Where other copies of agentrunner's bundled task data (hidden tests, solutions) may lie.

The runner's own package is never bound into the sandbox, but a folder that is (``--mount``
of a virtualenv, a project folder, ``/usr`` with a system-wide install) can hold another
installation of agentrunner, or name an editable one's source folder in a ``.pth`` file or
an ``__editable__`` finder. :func:`task_data_copies` finds those ``envs/data`` folders
without walking whole trees: the package's place in a source tree or a site-packages folder,
site-packages folders at the places virtualenvs and Python prefixes keep them, and the
folders their path files name. The jail covers each one that lies inside a bound folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "agentrunner"
DATA = Path("envs") / "data"
_SITE_GLOBS = (
    "lib/python3*/site-packages",
    "lib/python3*/dist-packages",
    "lib/python3/dist-packages",
    "lib64/python3*/site-packages",
    "local/lib/python3*/dist-packages",
    "local/lib/python3*/site-packages",
)
_SOURCE_PLACES = ("src", "*", "*/src")
"""Where a package folder sits in a checkout below the root (``src/agentrunner``, ...)."""
_QUOTED_PATH = re.compile(r"""['"](/[^'"\n]+)['"]""")


def task_data_copies(roots: Iterable[Path]) -> list[Path]:
    """Existing ``agentrunner/envs/data`` folders under ``roots`` or named from there."""
    found: set[Path] = set()
    for root in roots:
        if not root.is_dir():
            continue
        found.add(root / PACKAGE / DATA)
        if root.name == PACKAGE:
            found.add(root / DATA)
        for place in _SOURCE_PLACES:
            found.update(p / PACKAGE / DATA for p in root.glob(place))
        for site in _site_folders(root):
            found.add(site / PACKAGE / DATA)
            for named in _named_folders(site):
                found.update((named / DATA, named / PACKAGE / DATA))
    return sorted(p.resolve() for p in found if _holds_tasks(p))


def _site_folders(root: Path) -> list[Path]:
    """site-packages folders of ``root`` as a prefix, or of a virtualenv one level below."""
    if root.name in ("site-packages", "dist-packages"):
        return [root]
    folders: list[Path] = []
    for pattern in _SITE_GLOBS:
        folders += root.glob(pattern)
        folders += root.glob(f"*/{pattern}")
    return folders


def _named_folders(site: Path) -> list[Path]:
    """Folders a site-packages folder puts on ``sys.path`` or maps a package to: the plain
    lines of its ``.pth`` files, and quoted absolute paths in its ``__editable__`` finders."""
    named: list[Path] = []
    for pth in site.glob("*.pth"):
        for line in _lines(pth):
            if line.startswith("/"):
                named.append(Path(line))
            elif line and not line.startswith(("#", "import ", "import\t")):
                named.append(site / line)
    for finder in site.glob("__editable__*.py"):
        named += (Path(m) for m in _QUOTED_PATH.findall("\n".join(_lines(finder))))
    return named


def _lines(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return []


def _holds_tasks(data: Path) -> bool:
    try:
        return data.is_dir()
    except OSError:
        return False
