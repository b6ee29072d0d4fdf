"""Terminal injection: what a model wrote, what a command printed and what a task file says
reach the user's terminal as visible text, never as control sequences or Rich markup.

One scripted episode carries every sequence in its task prompt (from a ``--tasks`` file), its
reasoning, its text, its tool arguments and a bash command's output; ``run``, ``show``,
``show --events``, ``show --follow`` and ``ls`` must print each one visibly (ESC as ``^[``,
as ``less`` and ``cat -v`` do) and never emit the raw bytes.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import TraceStore
from agentrunner.safe_text import literal, one_line_visible, visible

ATTACKS = {
    "clipboard (OSC 52)": ("\x1b]52;c;aGFja2Vk\x07", "^[]52;c;aGFja2Vk^G"),
    "window title (OSC 0)": ("\x1b]0;pwned\x07", "^[]0;pwned^G"),
    "clear screen": ("\x1b[2J", "^[[2J"),
    "erase the line above": ("\x1b[1A\x1b[2K", "^[[1A^[[2K"),
    "carriage return": ("hidden\roverwrite", "hidden^Moverwrite"),
    "hyperlink (OSC 8)": (
        "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
        "^[]8;;https://evil.example/^[\\click^[]8;;^[\\",
    ),
    "C1 CSI": ("\x9b2J", "<U+009B>2J"),
    "backspace and DEL": ("ab\x08\x7f", "ab^H^?"),
}
MARKUP = ("[/]", "[link=https://x]y[/link]", "[bold]not bold[/bold]")
PAYLOAD = " ".join(raw for raw, _ in ATTACKS.values()) + " " + " ".join(MARKUP)
TASK_ID = "term-attack"
# What the terminal must never receive from recorded text: the raw sequences, BEL, a bare
# carriage return, C1 controls. (Rich adds no escapes of its own when writing to a pipe.)
RAW = re.compile("\x1b|\x07|\r|[\x80-\x9f]|\x08|\x7f")


def _command() -> str:
    """A bash command whose output carries every sequence (printf makes the bytes) and whose
    own text carries them raw too (in a quoted argument to ``:``)."""
    printed = PAYLOAD.encode("unicode_escape").decode("ascii").replace("'", "'\\''")
    raw = PAYLOAD.replace("'", "'\\''")
    return f"printf '%b\\n' '{printed}'; : '{raw}'"


@pytest.fixture(scope="module")
def attack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One recorded episode full of escapes, and the output of the ``run`` that made it."""
    root = tmp_path_factory.mktemp("terminal")
    tasks = root / "tasks.json"
    task = {
        "task_id": TASK_ID,
        "prompt": f"Fix it. {PAYLOAD}",
        "files": {"README.md": "nothing here\n"},
    }
    tasks.write_text(json.dumps([task]), encoding="utf-8")
    turn = {
        "reasoning": f"thinking {PAYLOAD}",
        "text": f"saying {PAYLOAD}",
        "tool_calls": [
            {"name": "bash", "arguments": {"command": _command()}},
            {"name": "bash", "arguments": f"not json {PAYLOAD}"},
        ],
    }
    script = root / "script.json"
    script.write_text(json.dumps({"episodes": [{"match": "", "turns": [turn]}]}))
    db = root / "traces.db"
    run = run_cli(
        "run",
        "--db",
        str(db),
        "--tasks",
        str(tasks),
        "--task",
        TASK_ID,
        "--model",
        f"scripted:{script}",
        "--sandbox",
        "process",
        "--max-turns",
        "3",
        env={"FORCE_COLOR": None, "TTY_COMPATIBLE": None},
    )
    assert run.returncode == 0, run.stderr
    with TraceStore(db) as store:
        (episode,) = store.list_episodes()
        observations = [
            e.payload["observation"]
            for e in store.events(episode.episode_id)
            if e.kind == "tool.result"
        ]
    assert "\x1b]52;c;" in observations[0]  # the command's output holds the raw bytes
    return {"db": db, "run": run, "episode": episode.episode_id}


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--db", str(db), env={"FORCE_COLOR": None, "TTY_COMPATIBLE": None})


def _assert_safe(output: str) -> None:
    raw = sorted({repr(m.group()) for m in RAW.finditer(output)})
    assert not raw, f"raw control characters reached the terminal: {', '.join(raw)}"


def _assert_visible(output: str) -> None:
    missing = [name for name, (_, shown) in ATTACKS.items() if shown not in output]
    assert not missing, f"not shown visibly: {missing}"


@pytest.mark.parametrize(("name", "raw", "shown"), [(k, *v) for k, v in ATTACKS.items()])
def test_every_control_sequence_is_shown_in_caret_notation(name: str, raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_newline_and_tab_are_kept_for_layout_and_one_line_forms_show_them() -> None:
    assert visible("a\n\tb") == "a\n\tb"
    assert one_line_visible("a\n\tb") == "a^J^Ib"


def test_markup_in_recorded_text_is_escaped_for_rich() -> None:
    from rich.console import Console

    console = Console(record=True, width=200, color_system=None)
    console.print(literal(" ".join(MARKUP)))
    assert console.export_text().strip() == " ".join(MARKUP)


def test_run_live_view_shows_every_sequence_visibly(attack: dict[str, Any]) -> None:
    stderr = attack["run"].stderr
    _assert_safe(stderr)
    _assert_visible(stderr)


def test_run_live_view_shows_the_task_prompt_from_a_tasks_file_visibly(
    attack: dict[str, Any],
) -> None:
    prompt_line = next(line for line in attack["run"].stderr.splitlines() if "Fix it." in line)
    assert "^[]52;c;aGFja2Vk^G" in prompt_line and "^[[2J" in prompt_line


def test_show_prints_the_transcript_with_every_sequence_visible(attack: dict[str, Any]) -> None:
    shown = _cli(attack["db"], "show", attack["episode"])
    assert shown.returncode == 0, shown.stderr
    _assert_safe(shown.stdout)
    _assert_visible(shown.stdout)
    assert all(m in shown.stdout for m in MARKUP)


def test_show_events_prints_payload_markup_literally_with_exit_0(attack: dict[str, Any]) -> None:
    shown = _cli(attack["db"], "show", attack["episode"], "--events", "-v")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    _assert_safe(shown.stdout + shown.stderr)
    assert "[link=https://x]y[/link]" in shown.stdout and "[/]" in shown.stdout


def test_show_events_shows_c1_and_del_from_payloads_visibly(attack: dict[str, Any]) -> None:
    shown = _cli(attack["db"], "show", attack["episode"], "--events", "-v")
    assert "<U+009B>2J" in shown.stdout and "^?" in shown.stdout


def test_show_follow_of_a_finished_episode_shows_every_sequence_visibly(
    attack: dict[str, Any],
) -> None:
    shown = _cli(attack["db"], "show", attack["episode"], "--follow")
    assert shown.returncode == 0, shown.stderr
    _assert_safe(shown.stdout)
    _assert_visible(shown.stdout)


def test_ls_prints_a_task_id_with_escapes_visibly_on_one_line(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    task_id = "t\x1b]0;pwned\x07[/]\nx"
    with TraceStore(db) as store:
        store.create_episode(task_id=task_id, seed=0, env={"kind": "workspace"}, model={})
    listed = _cli(db, "ls")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    _assert_safe(listed.stdout)
    assert "t^[]0;pwned^G[/]^Jx" in listed.stdout
