"""``batch --ray`` and ``fanout --ray`` on the command line: help, and Ray missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import run_cli

WITHOUT_RAY = (
    "import sys; sys.modules['ray'] = None; "  # `import ray` now fails as if not installed
    "from agentrunner.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def _without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", ["batch", "fanout"])
def test_help_of_batch_and_fanout_describes_the_ray_option(command: str) -> None:
    done = run_cli(command, "--help")
    assert done.returncode == 0
    assert "--ray [ADDRESS]" in done.stdout and "Ray cluster" in done.stdout


def test_batch_ray_without_ray_installed_exits_2_with_the_install_hint(tmp_path: Path) -> None:
    done = _without_ray("batch", "--seeds", "0", "--ray", "--db", str(tmp_path / "t.db"))
    assert done.returncode == 2
    assert "Ray is not installed: pip install 'agentrunner[ray]'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "t.db").exists()


def test_fanout_ray_without_ray_installed_exits_2_with_the_install_hint(tmp_path: Path) -> None:
    done = _without_ray(
        "fanout", "EP", "--turn", "1", "-k", "2", "--ray", "--db", str(tmp_path / "t.db")
    )
    assert done.returncode == 2
    assert "Ray is not installed: pip install 'agentrunner[ray]'" in done.stderr
