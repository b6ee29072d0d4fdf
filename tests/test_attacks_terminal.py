"""Terminal injection: what a model wrote, what a command printed and what a task file says
reach the user's terminal as visible text, never as control sequences or Rich markup.

One scripted episode carries every sequence in its task prompt (from a ``--tasks`` file), its
reasoning, its text, its tool arguments and a bash command's output; ``run``, ``show``,
``show --events``, ``show --follow``, ``ls``, ``tasks``, ``report`` and the one-line error of
a failing command must print each one visibly (ESC as ``^[``, as ``less`` and ``cat -v`` do),
never emit the raw bytes, and print Rich markup (``[/]``, ``[link=...]``) as written.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import tty
from pathlib import Path

import pytest
from cli_process import AGENTRUNNER, run_cli
from pydantic import BaseModel
from rich.console import Console
from terminal_payloads import (
    ATTACKS,
    MARKUP,
    NO_COLOR,
    TASK_ID_SHOWN,
    Recorded,
    missing_visible,
    raw_controls,
    record_attack,
)

from agentrunner import TraceStore
from agentrunner.cli.render import EventRenderer
from agentrunner.values import events as ev
from agentrunner.values.events import ModelChunk, ToolResult
from agentrunner.values.safe_text import literal, one_line_visible, visible


@pytest.fixture(scope="module")
def attack(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """One recorded episode full of escapes, and the output of the ``run`` that made it."""
    return record_attack(tmp_path_factory.mktemp("terminal"))


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--db", str(db), env=NO_COLOR)


def _assert_safe(output: str) -> None:
    raw = raw_controls(output)
    assert not raw, f"raw control characters reached the terminal: {', '.join(raw)}"


def _assert_visible(output: str) -> None:
    missing = missing_visible(output)
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


def test_run_live_view_shows_every_sequence_visibly(attack: Recorded) -> None:
    stderr = attack.run.stderr
    _assert_safe(stderr)
    _assert_visible(stderr)


def test_run_live_view_shows_the_task_prompt_from_a_tasks_file_visibly(
    attack: Recorded,
) -> None:
    prompt_line = next(line for line in attack.run.stderr.splitlines() if "Fix it." in line)
    assert "^[]52;c;aGFja2Vk^G" in prompt_line and "^[[2J" in prompt_line


def test_show_prints_the_transcript_with_every_sequence_visible(attack: Recorded) -> None:
    shown = _cli(attack.db, "show", attack.episode_id)
    assert shown.returncode == 0, shown.stderr
    _assert_safe(shown.stdout)
    _assert_visible(shown.stdout)
    assert all(m in shown.stdout for m in MARKUP)


def test_show_events_prints_payload_markup_literally_with_exit_0(attack: Recorded) -> None:
    shown = _cli(attack.db, "show", attack.episode_id, "--events", "-v")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    _assert_safe(shown.stdout + shown.stderr)
    assert "[link=https://x]y[/link]" in shown.stdout and "[/]" in shown.stdout


def test_show_events_shows_c1_and_del_from_payloads_visibly(attack: Recorded) -> None:
    shown = _cli(attack.db, "show", attack.episode_id, "--events", "-v")
    assert "<U+009B>2J" in shown.stdout and "^?" in shown.stdout


def test_show_json_writes_c1_controls_and_del_as_json_escapes_of_the_same_value(
    attack: Recorded,
) -> None:
    shown = _cli(attack.db, "show", attack.episode_id, "--events", "--json")
    assert shown.returncode == 0, shown.stderr
    _assert_safe(shown.stdout)
    texts = [e["payload"].get("text", "") for e in json.loads(shown.stdout)["events"]]
    assert "\x9b2J ab\x08\x7f" in "".join(texts)


def test_show_follow_of_a_finished_episode_shows_every_sequence_visibly(
    attack: Recorded,
) -> None:
    shown = _cli(attack.db, "show", attack.episode_id, "--follow")
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


def test_tasks_lists_a_prompt_with_escapes_and_markup_visibly(attack: Recorded) -> None:
    listed = run_cli("tasks", "--tasks", str(attack.db.parent / "tasks.json"), "-v", env=NO_COLOR)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    _assert_safe(listed.stdout)
    assert "^[]52;c;aGFja2Vk^G" in listed.stdout and "[/]" in listed.stdout


def test_report_prints_a_task_id_with_escapes_and_markup_visibly(attack: Recorded) -> None:
    made = _cli(attack.db, "report", "--by", "task")
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr
    _assert_safe(made.stdout)
    assert TASK_ID_SHOWN in made.stdout


def test_batch_lists_a_task_id_with_escapes_and_markup_visibly(
    attack: Recorded, tmp_path: Path
) -> None:
    root = attack.db.parent
    made = run_cli(
        "batch",
        "--db",
        str(tmp_path / "traces.db"),
        "--tasks",
        str(root / "tasks.json"),
        "--seeds",
        "0",
        "--model",
        f"scripted:{root / 'script.json'}",
        "--sandbox",
        "process",
        "--max-turns",
        "3",
        env=NO_COLOR,
    )
    assert made.returncode == 0 and "Traceback" not in made.stderr, made.stderr
    _assert_safe(made.stdout)
    assert TASK_ID_SHOWN in made.stdout


def test_an_error_naming_a_file_with_escapes_shows_them_visibly(tmp_path: Path) -> None:
    named = tmp_path / "x\x1b]0;pwned\x07[b].jsonl"
    named.write_text("not a trace\n")
    imported = _cli(tmp_path / "traces.db", "import", str(named))
    assert imported.returncode == 2 and "Traceback" not in imported.stderr
    _assert_safe(imported.stderr)
    assert "x^[]0;pwned^G[b].jsonl" in imported.stderr


def _on_a_terminal(*args: str) -> bytes:
    """What a terminal receives from ``agentrunner ARGS`` run with its stdout on one (a
    pseudo-terminal in raw mode: no newline translation)."""
    try:
        master, slave = pty.openpty()
    except OSError as exc:
        pytest.skip(f"no pseudo-terminal: {exc}")
    tty.setraw(slave)
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTRUNNER_DB", "NO_COLOR")}
    env["TERM"] = "xterm-256color"  # Rich styles its output as on a user's terminal
    proc = subprocess.Popen([*AGENTRUNNER, *args], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    assert proc.wait(timeout=300) == 0
    return received


def test_diff_shows_escapes_visibly_on_a_terminal_and_pipes_the_patch_byte_for_byte(
    attack: Recorded,
) -> None:
    args = ("diff", attack.episode_id, "--db", str(attack.db))
    piped = subprocess.run([*AGENTRUNNER, *args], capture_output=True, timeout=300, check=True)
    shown = _on_a_terminal(*args)
    assert b"+++ b/notes.txt" in piped.stdout and b"\x1b]0;pwned\x07" in piped.stdout
    assert b"\x9b2J" in piped.stdout  # not UTF-8: kept as the byte it is
    assert b"+++ b/notes.txt" in shown and b"\x1b" not in shown and b"\x9b" not in shown
    assert b"^[]0;pwned^G" in shown and b"<9B>2J" in shown


def test_show_on_a_terminal_sends_no_escape_sequence_but_its_own_colours(
    attack: Recorded,
) -> None:
    shown = _on_a_terminal("show", attack.episode_id, "--db", str(attack.db)).decode()
    others = re.sub(r"\x1b\[[0-9;]*m", "", shown)  # Rich's own SGR colour codes
    assert "\x1b[" in shown and not raw_controls(others) and not missing_visible(others)


def _rendered(*payloads: BaseModel) -> str:
    out = io.StringIO()
    renderer = EventRenderer(Console(file=out, width=200, color_system=None))
    for seq, payload in enumerate(payloads, start=1):
        renderer(seq, 1, payload)
    return out.getvalue()


def test_a_tool_output_line_ending_in_a_backslash_is_printed_as_written() -> None:
    result = ToolResult(call_id="c", name="bash", observation="cd /x && \\\nmake", message_hash="h")
    assert "│ cd /x && \\\n" in _rendered(result)


def test_streamed_text_ending_in_a_backslash_is_printed_as_written() -> None:
    chunk = ModelChunk(call_id="m", channel="text", index=0, text="C:\\temp\\")
    assert "C:\\temp\\\n" in _rendered(
        chunk, ev.ModelResponse(call_id="m", message_hash="h", latency_s=0.1)
    )


def test_a_byte_that_is_not_utf8_is_shown_as_its_value_in_hex() -> None:
    assert visible("a\udc9bb") == "a<9B>b"
