"""A script of one's own for the scripted model: the README's example runs, a script given
by a relative path resumes from any folder, and a script that matches no prompt says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_process import last_json, run_cli

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLE = re.compile(r"<!-- scripted-example -->(.*?)<!-- /scripted-example -->", re.S)

FIX_MEAN = {
    "episodes": [
        {
            "match": "`mean()` in stats.py",
            "turns": [
                {
                    "text": "Fixing the divisor.",
                    "tool_calls": [
                        {
                            "name": "str_replace",
                            "arguments": {
                                "path": "stats.py",
                                "old_str": "return total / (len(values) - 1)",
                                "new_str": "return total / len(values)",
                            },
                        }
                    ],
                },
                {"tool_calls": [{"name": "submit", "arguments": {}}]},
            ],
        }
    ]
}


def _readme_example() -> tuple[str, list[str]]:
    """The README's example script (its ``json`` block) and the command that runs it."""
    found = EXAMPLE.search(README.read_text(encoding="utf-8"))
    if found is None:
        pytest.skip("README.md has no <!-- scripted-example --> section yet")
    section = found.group(1)
    script = re.search(r"```json\n(.*?)```", section, re.S)
    command = re.search(r"`agentrunner (run [^`]*)`", section)
    assert script and command, "the example needs a ```json block and an `agentrunner run` line"
    return script.group(1), command.group(1).split()


def test_the_readme_example_script_fixes_its_task(tmp_path: Path) -> None:
    script, command = _readme_example()
    path = next(a.removeprefix("scripted:") for a in command if a.startswith("scripted:"))
    (tmp_path / path).write_text(script, encoding="utf-8")
    result = run_cli(*command, "--db", str(tmp_path / "traces.db"), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout)["total_reward"] == 1


def test_a_script_given_by_a_relative_path_resumes_from_another_folder(tmp_path: Path) -> None:
    db = str(tmp_path / "traces.db")
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "fix.json").write_text(json.dumps(FIX_MEAN), encoding="utf-8")
    ran = run_cli(
        "run", "--task", "demo-mean", "--model", "scripted:fix.json", "--db", db, "--json",
        cwd=tmp_path / "here",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    fork = run_cli("fork", last_json(ran.stdout)["episode_id"], "--turn", "1", "--db", db, "--json")
    (fork_id,) = last_json(fork.stdout)["forks"]
    resumed = run_cli("resume", fork_id, "--db", db, "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["total_reward"] == 1


def test_a_script_whose_match_is_in_no_prompt_warns_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(
        json.dumps({"episodes": [{"match": "a task that is not this one", "turns": []}]}),
        encoding="utf-8",
    )
    result = run_cli(
        "run", "--task", "demo-mean", "--model", "scripted:other.json",
        "--db", str(tmp_path / "traces.db"), cwd=tmp_path,
    )  # fmt: skip
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "a task that is not this one" in warnings[0]
