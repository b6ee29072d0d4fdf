"""What showing recorded text safely costs: ``show``'s transcript of a 200-turn episode with
:mod:`agentrunner.values.safe_text` at work, against the same transcript with it turned into the
identity (CPU time, best of 7, interleaved), and ``visible``'s throughput on clean and dirty
text. Budget: escaping adds at most 10% to the transcript; ``visible`` runs at 20 MB/s or more
(``str.translate`` with multi-character replacements managed 10 MB/s on dirty text).

Run: ``pytest tests/benchmarks/test_bench_safe_text.py -m benchmark -s``
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from agentrunner import TraceStore, run_agent_episode
from agentrunner.cli.render import EventRenderer
from agentrunner.envs.jail import SandboxConfig
from agentrunner.envs.tasks import Task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values import safe_text
from providers.scripted import ScriptedModel

pytestmark = pytest.mark.benchmark

TURNS = 200
BUDGET = 1.10
ROUNDS = 7


def _turn(i: int) -> dict[str, object]:
    dirty = "\x1b[2J\x1b]0;title\x07 " if i % 10 == 0 else ""  # one turn in ten carries escapes
    return {
        "reasoning": "I should look at the numbers again and think about edge cases. " * 4,
        "text": f"{dirty}Let me run the tests once more to see what they say now. " * 3,
        "tool_calls": [
            {"name": "bash", "arguments": {"command": "seq 1 40 | sed 's/^/output line /'"}}
        ],
    }


@pytest.fixture(scope="module")
def episode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("safe-text-bench")
    script = root / "long.json"
    turns = [_turn(i) for i in range(TURNS)]
    script.write_text(json.dumps({"episodes": [{"match": "", "turns": turns}]}))
    task = Task(task_id="long", prompt="Do it.", files={"a.txt": "x\n"}, max_steps=TURNS + 10)
    sandbox = SandboxConfig(mode="process")
    with (
        TraceStore(root / "long.db") as store,
        WorkspaceEnv(task=task, sandbox=sandbox, snapshots=False) as env,
    ):
        rollout = run_agent_episode(
            env=env,
            task_id="long",
            model_fn=ScriptedModel(str(script), pace=0),
            store=store,
            max_turns=TURNS + 10,
        )
    return root / "long.db", rollout.episode_id


def _transcript(db: Path, episode_id: str) -> float:
    """CPU seconds to render the episode as ``show`` does (to /dev/null)."""
    with TraceStore(db) as store, open(os.devnull, "w") as out:
        renderer = EventRenderer(
            Console(file=out, width=120, highlight=False), store=store, episode_id=episode_id
        )
        start = time.process_time()
        for row in store.iter_events(episode_id):
            renderer(row.seq, row.turn, row.typed())
        return time.process_time() - start


@pytest.fixture
def unescaped(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], None]:
    """Turns escaping off (``True``) and on again (``False``)."""
    original = safe_text.visible

    def switch(off: bool) -> None:
        monkeypatch.setattr(safe_text, "visible", (lambda text: text) if off else original)

    return switch


def test_escaping_adds_at_most_10_percent_to_shows_transcript(
    episode: tuple[Path, str], unescaped: Callable[[bool], None]
) -> None:
    db, episode_id = episode
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(ROUNDS):
        for off in (True, False):
            unescaped(off)
            times[off].append(_transcript(db, episode_id))
    unescaped(False)
    plain, escaped = min(times[True]), min(times[False])
    print(
        f"\nshow transcript, {TURNS} turns: {escaped * 1000:.0f} ms escaped, "
        f"{plain * 1000:.0f} ms unescaped: {escaped / plain:.3f}x (budget {BUDGET}x)"
    )
    assert escaped / plain <= BUDGET


@pytest.mark.parametrize("dirty", [False, True], ids=["clean", "dirty"])
def test_visible_shows_at_least_20_mb_of_text_a_second(dirty: bool) -> None:
    text = "line of output number 12 and some more words here\n" * 20_000
    if dirty:
        text = text.replace("number 12", "number \x1b[2J12")
    start = time.process_time()
    for _ in range(10):
        safe_text.visible(text)
    elapsed = (time.process_time() - start) / 10
    rate = len(text) / elapsed / 1e6
    print(f"\nvisible(): {rate:.0f} MB/s on {'dirty' if dirty else 'clean'} text")
    assert rate >= 20
