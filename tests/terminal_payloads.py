"""The escape sequences of the terminal-injection tests, and one recorded episode full of them.

The episode comes from a real ``agentrunner run`` (a subprocess): its task prompt from a
``--tasks`` file, the scripted model's reasoning, text, tool arguments (a valid call, one that
is not JSON, one to a tool that does not exist) and a bash command's output all carry every
sequence below.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cli_process import run_cli

from agentrunner import TraceStore

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
TASK_ID = "term-attack \x1b]0;pwned\x07[/]"
TASK_ID_SHOWN = "term-attack ^[]0;pwned^G[/]"
LINK = "[the docs](https://evil.example/docs)"  # Markdown: shown with its address in the TUI
GHOST_TOOL = "ghost[/]\x1b]0;pwned\x07"
# What the terminal must never receive from recorded text: ESC, BEL, a bare carriage return,
# backspace, DEL, C1 controls. (Rich adds no escapes of its own when writing to a pipe.)
RAW = re.compile("\x1b|\x07|\r|\x08|\x7f|[\x80-\x9f]")
NO_COLOR = {"FORCE_COLOR": None, "TTY_COMPATIBLE": None}


@dataclass(frozen=True)
class Recorded:
    db: Path
    episode_id: str
    run: subprocess.CompletedProcess[str]


def _command() -> str:
    """A bash command whose output, and the file ``notes.txt`` it writes, carry every sequence
    (``printf %b`` makes the bytes), and whose own text carries them raw too (in a quoted
    argument to ``:``)."""
    printed = PAYLOAD.encode("unicode_escape").decode("ascii").replace("'", "'\\''")
    raw = PAYLOAD.replace("'", "'\\''")
    return f"printf '%b\\n' '{printed}' | tee notes.txt; : '{raw}'"


def record_attack(root: Path) -> Recorded:
    """Run the attack episode into ``root/traces.db`` (process sandbox, no network)."""
    tasks = root / "tasks.json"
    task = {
        "task_id": TASK_ID,
        "prompt": f"Fix it. {PAYLOAD}",
        "files": {"README.md": "nothing here\n"},
    }
    tasks.write_text(json.dumps([task]), encoding="utf-8")
    turn = {
        "reasoning": f"thinking {PAYLOAD}",
        "text": f"saying {PAYLOAD} {LINK}",
        "tool_calls": [
            {"name": "bash", "arguments": {"command": _command()}},
            {"name": "bash", "arguments": f"not json {PAYLOAD}"},
            {"name": GHOST_TOOL, "arguments": {}},
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
        env=NO_COLOR,
    )
    assert run.returncode == 0, run.stderr
    with TraceStore(db) as store:
        (episode,) = store.list_episodes()
        results = store.events(episode.episode_id, kinds=["tool.result"])
    assert "\x1b]52;c;" in results[0].payload["observation"]  # the output holds the raw bytes
    return Recorded(db, episode.episode_id, run)


def raw_controls(output: str) -> list[str]:
    """The raw control characters in ``output`` (none may reach the terminal)."""
    return sorted({repr(m.group()) for m in RAW.finditer(output)})


def missing_visible(output: str) -> list[str]:
    """The attacks whose visible form ``output`` does not show."""
    return [name for name, (_, shown) in ATTACKS.items() if shown not in output]
