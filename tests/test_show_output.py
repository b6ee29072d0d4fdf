"""``show EP`` prints its transcript in batches; the text is the live view's, event for event.

``show --follow`` (the live tail) prints each event as it arrives, one at a time; ``show``
gathers the same pieces and prints them in batches. For the demo episode, a fork of it and
an imported Claude Code session, an episode of hostile text (markup, escapes, tabs, long
lines) and one of odd rows (values its typed models convert, wide and overlong rule titles),
with colour off and forced, the transcript ``show`` prints is the one ``--follow`` prints,
character for character (escape sequences included). ``show`` reads the common kinds from
their JSON fields, ``--follow`` reads every row typed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_process import run_cli

from agentrunner import TraceStore, __version__
from agentrunner.runtime.recorder import Recorder
from agentrunner.values.types import AgentToolCall, Chunk, Message
from tests.imports.conftest import FIXTURES

CLAUDE_SESSION = FIXTURES / "claude-code" / "tool_heavy.jsonl"
COLOURS = {
    "no colour": {"NO_COLOR": "1", "FORCE_COLOR": None},
    "colour forced": {"FORCE_COLOR": "1", "NO_COLOR": None},
}


def _ok(*args: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store holding the demo episode, a fork of it and (when the fixture is there) an
    imported Claude Code session; their ids by what they are."""
    db = tmp_path_factory.mktemp("show") / "traces.db"
    demo = json.loads(_ok("run", "--db", str(db), "--json").stdout.splitlines()[-1])
    ids = {"demo": demo["episode_id"]}
    before = {*TraceStore(db).episode_ids()}
    _ok("fork", ids["demo"], "--turn", "2", "--run", "--db", str(db))
    store = TraceStore(db)
    [ids["fork"]] = {*store.episode_ids()} - before
    if CLAUDE_SESSION.is_file():
        before = {*store.episode_ids()}
        _ok("import", "--db", str(db), str(CLAUDE_SESSION))
        [ids["claude-code"]] = {*store.episode_ids()} - before
    ids["hostile text"] = _record_hostile(store)
    ids["odd rows"] = _record_odd_rows(store)
    store.close()
    return db, ids


def _record_hostile(store: TraceStore) -> str:
    """An episode whose recorded text looks like markup, holds escapes, tabs, a carriage
    return and lines wider than the console (wrapped or not)."""
    episode_id = store.create_episode(task_id="hostile", seed=0, env={"kind": "t"}, model={})
    rec = Recorder(store, store.writer(episode_id), secrets={})
    rec.start(
        task_id="hostile",
        seed=0,
        env={"kind": "t"},
        model={},
        config={},
        version=__version__,
        max_steps=1,
    )
    rec.message(
        Message(role="user", content="[bold]not markup[/] \x1b]52;c;aGk=\x07\tend\n" * 3), "prompt"
    )
    rec.turn = 1
    rec.request("c1", store.put_tools([]), "scripted", "[red]m[/]", {})
    for text in ("[link=http://x]click[/link]\r", "a\tb " * 80, "\x1b[2J" + "w" * 300):
        rec.chunk("c1", Chunk(channel="reasoning", text=text))
        rec.chunk("c1", Chunk(channel="text", text=text))
    call = AgentToolCall(call_id="k1", name="bash[/]", arguments='{"command": "' + "x" * 250 + '"}')
    rec.tool_call(call, call.parsed_arguments(), None)
    rec.tool_result(
        call, ("\tcol\x1b[31m red [/] " + "y" * 260 + "\n") * 20, reward=1.0, duration_s=0.1
    )
    rec.end("done", 1)
    return episode_id


ODD_ROWS = [
    (
        "model.request",
        {
            "call_id": "c1",
            "tip_hash": "t",
            "tools_hash": "h",
            "provider": "p",
            "model": "模型 wide",
        },
    ),
    ("model.chunk", {"call_id": "c1", "channel": "text", "index": "0", "text": "index as text"}),
    ("model.chunk", {"call_id": "c1", "channel": "text", "index": 1, "text": " and 模型"}),
    ("model.response", {"call_id": "c1", "message_hash": "m", "latency_s": 1}),
    ("usage", {"call_id": "c1", "input_tokens": 12.0, "output_tokens": 3, "cost_usd": 1}),
    ("tool.call", {"call_id": "k1", "name": "bash", "arguments": "{", "parsed": None}),
    (
        "tool.result",
        {
            "call_id": "k1",
            "name": "bash",
            "observation": "ok",
            "message_hash": "m",
            "reward": 1,
            "done": 1,
        },
    ),
    (
        "model.request",
        {
            "call_id": "c2",
            "tip_hash": "t",
            "tools_hash": "h",
            "provider": "p",
            "model": "m" * 300,
            "purpose": "turn",
            "masked": 2,
        },
    ),
    (
        "model.response",
        {
            "call_id": "c2",
            "message_hash": "m",
            "latency_s": 0.5,
            "stop_reason": "incomplete",
            "refusal": "no [b]thanks[/b]",
        },
    ),
    ("message", {"role": "user", "message_hash": "not stored"}),
    ("error", {"where": "tool", "type": "Timeout", "message": "slow", "retryable": 1}),
    ("cancel", {"where": "tool", "reason": "asked to"}),
    ("resume", {"from_seq": 2.0, "env_restore": "snapshot", "reason": "fork"}),
    ("error", {"where": "import", "type": "unmapped", "message": "odd record", "attempt": "1"}),
    ("error", {"where": "import", "type": "unmapped", "message": "odd record"}),
]
"""Rows as an older writer or another tool might have stored them: numbers a model converts
(``"0"``, ``12.0``, ``1`` for True, ``2.0`` for 2), a rule title of wide characters, one wider
than the console, a message the store does not hold, records an import kept raw."""


def _record_odd_rows(store: TraceStore) -> str:
    episode_id = store.create_episode(task_id="odd", seed=0, env={"kind": "t"}, model={})
    writer = store.writer(episode_id)
    rec = Recorder(store, writer, secrets={})
    rec.start(task_id="odd", seed=0, env={"kind": "t"}, model={}, config={}, version=__version__)
    for kind, payload in ODD_ROWS:
        writer.append_json(1, kind, json.dumps(payload, ensure_ascii=False))
    rec.end("done", 1)
    return episode_id


@pytest.mark.parametrize("colour", COLOURS)
@pytest.mark.parametrize("kind", ["demo", "fork", "claude-code", "hostile text", "odd rows"])
def test_show_prints_the_transcript_the_live_tail_prints(
    episodes: tuple[Path, dict[str, str]], kind: str, colour: str
) -> None:
    db, ids = episodes
    if kind not in ids:
        pytest.skip(f"{CLAUDE_SESSION} is absent")
    env = COLOURS[colour]
    shown = _ok("show", ids[kind], "--db", str(db), env=env).stdout
    tailed = _ok("show", ids[kind], "--follow", "--db", str(db), env=env).stdout
    transcript = shown.split("\n\n", 1)[1]  # after the summary
    assert transcript and tailed.startswith(transcript)
    assert tailed[len(transcript) :].count("\n") == 1  # then only the final status line
