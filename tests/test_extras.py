"""The base install (no extras) runs and looks; each optional feature names its extra.

SLOW (marked ``install`` and ``slow``): the package is installed without extras into a fresh
virtualenv of its own (no system site-packages) from a copy of this checkout, once for the
module (about a minute; the pip index the machine is configured with must answer, else the
tests skip with pip's reason). Then the offline demo runs there and is looked at, and each
command that needs an extra says which, in one line, with the exact pip command (exit 2).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = [pytest.mark.install, pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[1]
NOT_PACKAGED = (".git", ".venv", ".ci", "tests", "build", "*.egg-info", "__pycache__", ".*cache")
INSTALL_TIMEOUT_S = 1000
HINT = re.compile(r"pip install 'agentrunner\[(\w+)\]'")
EXTRAS_ONLY = ("pyarrow", "ray", "psycopg", "plotly", "mypy", "pytest", "opentelemetry.proto")


class Base:
    """A virtualenv holding the package without extras, and a folder to run it in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "venv" / "bin" / "python"
        self.db = root / "work" / "traces.db"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``agentrunner ARGS`` of this install, in its own folder and data home."""
        return self._run(str(self.root / "venv" / "bin" / "agentrunner"), *args)

    def probe(self, code: str) -> str:
        """What ``code`` prints, run by this install's Python (never this checkout's)."""
        done = self._run(str(self.python), "-c", code)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTRUNNER_", "PYTHON"))}
        env.update(AGENTRUNNER_SCRIPTED_PACE="0", XDG_DATA_HOME=str(self.root / "data"))
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.db.parent,
            timeout=300,
        )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    root = tmp_path_factory.mktemp("base-install")
    source = root / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_PACKAGED))
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(root / "venv")
    made = Base(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        pip = subprocess.run(
            [str(made.python), "-m", "pip", "install", "--quiet", str(source)],
            capture_output=True,
            text=True,
            env=env,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"installing the base dependencies took over {INSTALL_TIMEOUT_S} s")
    if pip.returncode != 0:
        last = (pip.stderr.strip().splitlines() or ["(no output)"])[-1]
        pytest.skip(f"cannot install the base dependencies here (no package index?): {last}")
    made.db.parent.mkdir()
    demo = made.run("run", "--db", str(made.db), "--json")
    assert demo.returncode == 0, demo.stderr
    return made


def _episode(base: Base) -> str:
    listed = base.run("ls", "--db", str(base.db), "--json")
    assert listed.returncode == 0, listed.stderr
    (episode,) = json.loads(listed.stdout.strip().splitlines()[-1])
    return str(episode["episode_id"])


def test_the_base_install_has_none_of_the_extras(base: Base) -> None:
    probe = f"import importlib.util as u; print([m for m in {EXTRAS_ONLY!r} if u.find_spec(m)])"
    assert base.probe(probe).strip() == "[]"


def test_the_base_install_runs_the_demo_and_lists_and_shows_it(base: Base) -> None:
    shown = base.run("show", _episode(base)[:8], "--db", str(base.db))
    assert shown.returncode == 0, shown.stderr
    assert "completed" in shown.stdout


def test_the_base_install_exports_sft_rows(base: Base) -> None:
    exported = base.run("export", "--format", "sft", "--db", str(base.db))
    assert exported.returncode == 0, exported.stderr
    (row,) = [json.loads(line) for line in exported.stdout.splitlines() if line.startswith("{")]
    assert row["messages"]


def test_the_base_install_writes_the_html_report(base: Base) -> None:
    page = base.db.parent / "report.html"
    made = base.run("report", "--db", str(base.db), "--html", str(page))
    assert made.returncode == 0, made.stderr
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")


@pytest.mark.parametrize(
    ("extra", "args"),
    [
        ("parquet", ["export", "--format", "sft", "--parquet", "-o", "rows.parquet"]),
        ("otlp", ["export", "--format", "otlp", "-o", "traces.jsonl"]),
        ("ray", ["batch", "--ray", "--task", "demo-mean", "--seeds", "1"]),
        ("postgres", ["ls", "--db", "postgresql://nobody@127.0.0.1:1/none"]),
    ],
)
def test_a_command_that_needs_an_extra_names_it_in_one_line_and_exits_2(
    base: Base, extra: str, args: list[str]
) -> None:
    done = base.run(*args) if "--db" in args else base.run(*args, "--db", str(base.db))
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and HINT.findall(line) == [extra]


def test_every_extra_a_hint_names_is_one_the_package_declares(base: Base) -> None:
    probe = (
        "import importlib.metadata as m, json;"
        "print(json.dumps(m.metadata('agentrunner').get_all('Provides-Extra')))"
    )
    assert {"parquet", "ray", "postgres", "otlp", "dev"} <= set(json.loads(base.probe(probe)))
