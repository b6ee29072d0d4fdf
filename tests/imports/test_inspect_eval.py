"""The Inspect AI importer, on the ``.eval`` logs the real ``inspect_ai`` writes (a two-sample task
run offline against its mock model, which calls a tool and then answers): each sample epoch is
an episode with the model calls, tool calls, results, tokens and score that Inspect's own log
reader finds in the file, the rest of the sample's events kept raw, and importing again adds
nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_process import last_json, run_cli

from agentrunner import TraceStore
from agentrunner.imports.inspect_eval import reward_of
from tests.imports.conftest import kinds, payloads
from tests.imports.inspect_support import INSPECT_VENV, eval_log

pytestmark = pytest.mark.slow

READ = """
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], resolve_attachments=True)
print(json.dumps([s.model_dump(mode="json") for s in log.samples]))
"""
WITHOUT_USAGE = """
import sys
from inspect_ai.log import read_eval_log, write_eval_log
log = read_eval_log(sys.argv[1])
for sample in log.samples:
    for event in sample.events:
        if event.event == "model":
            event.output.usage = None
write_eval_log(log, sys.argv[2])
"""


def inspect_python(folder: Path, script: str, *args: str) -> str:
    """Run ``script`` with Inspect's own Python (its zip reader and log model); its output."""
    path = folder / "script.py"
    path.write_text(script)
    done = subprocess.run(
        [str(INSPECT_VENV / "bin" / "python"), str(path), *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def imported(db: Path, log: Path) -> dict[str, dict[str, Any]]:
    """``agentrunner import --json LOG``: its session reports by sample entry's session id."""
    done = run_cli("import", "--json", str(log), "--db", str(db))
    assert done.returncode == 0, done.stderr
    [report] = last_json(done.stdout)
    assert report["format"] == "inspect-eval"
    return {s["session_id"].split("@")[0]: s for s in report["sessions"]}


def test_a_real_inspect_log_imports_each_sample_with_the_calls_tokens_and_score_it_has(
    tmp_path: Path,
) -> None:
    log = eval_log(tmp_path / "inspect")
    samples = json.loads(inspect_python(tmp_path, READ, str(log)))
    db = tmp_path / "t.db"
    reports = imported(db, log)
    assert len(reports) == len(samples) == 2
    with TraceStore(db) as store:
        for sample in samples:
            [report] = [r for k, r in reports.items() if k.endswith(f"/{sample['id']}/epoch-1")]
            episode = report["episode_id"]
            counted = kinds(store, episode)
            messages = sample["messages"]
            answers = [m for m in messages if m["role"] == "assistant"]
            calls = [c for m in answers for c in m.get("tool_calls") or []]
            events = sample["events"]
            models = [e for e in events if e["event"] == "model"]
            assert len(answers) == len(models) == 2 and len(calls) == 1
            assert counted["model.request"] == counted["model.response"] == len(answers)
            assert counted["tool.call"] == len(calls)
            assert counted["tool.result"] == sum(m["role"] == "tool" for m in messages) == 1
            said = [m for m in messages if m["role"] in ("system", "user")]
            assert counted["message"] == len(said)
            tool_calls = payloads(store, episode, "tool.call")
            assert [(c["name"], c["parsed"]) for c in tool_calls] == [
                (c["function"], c["arguments"]) for c in calls
            ]
            usage = payloads(store, episode, "usage")
            assert [u["input_tokens"] for u in usage] == [
                e["output"]["usage"]["input_tokens"] for e in models
            ]
            assert [u["output_tokens"] for u in usage] == [
                e["output"]["usage"]["output_tokens"] for e in models
            ]
            others = [e for e in events if e["event"] not in ("model", "tool")]
            assert report["kept_raw"] == counted["error"] == len(others) > 0
            [end] = payloads(store, episode, "episode.end")
            value = sample["scores"]["includes"]["value"]
            assert (value, end["total_reward"]) in (("C", 1.0), ("I", 0.0))
            start = payloads(store, episode, "episode.start")[0]
            assert start["task_id"] == "arith"

    again = imported(db, log)
    assert {k: (r["episode_id"], r["events_added"]) for k, r in again.items()} == {
        k: (r["episode_id"], 0) for k, r in reports.items()
    }
    shown = run_cli("show", next(iter(reports.values()))["episode_id"], "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "add(x=" in shown.stdout and "reward" in shown.stdout


def test_an_inspect_log_without_usage_imports_it_as_unknown_and_a_folder_finds_it(
    tmp_path: Path,
) -> None:
    log = eval_log(tmp_path / "inspect")
    bare = tmp_path / "bare" / "no-usage.eval"
    bare.parent.mkdir()
    inspect_python(tmp_path, WITHOUT_USAGE, str(log), str(bare))
    db = tmp_path / "t.db"
    done = run_cli("import", "--json", str(bare.parent), "--db", str(db))
    assert done.returncode == 0, done.stderr
    [report] = last_json(done.stdout)
    assert report["format"] == "inspect-eval" and len(report["sessions"]) == 2
    with TraceStore(db) as store:
        for session in report["sessions"]:
            usage = payloads(store, session["episode_id"], "usage")
            assert len(usage) == 2
            assert all(u["input_tokens"] is None and u["output_tokens"] is None for u in usage)


def test_a_score_maps_to_a_reward_as_inspect_reads_it_else_leaves_the_episode_unjudged() -> None:
    assert [reward_of(v) for v in ("C", "I", "P", "N", True, False, 0.25, 3)] == [
        1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.25, 3.0,
    ]  # fmt: skip
    assert [reward_of(v) for v in ("maybe", None, {"a": 1}, [1])] == [None, None, None, None]
