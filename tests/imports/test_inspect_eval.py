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
    samples = {s["id"]: s for s in json.loads(inspect_python(tmp_path, READ, str(log)))}
    db = tmp_path / "t.db"
    reports = {key.split("/")[1]: report for key, report in imported(db, log).items()}
    assert sorted(reports) == sorted(samples) == ["one", "three", "two"]
    with TraceStore(db) as store:
        for sample_id, sample in samples.items():
            episode = reports[sample_id]["episode_id"]
            counted = kinds(store, episode)
            messages = sample["messages"]
            answers = [m for m in messages if m["role"] == "assistant"]
            calls = [c for m in answers for c in m.get("tool_calls") or []]
            events = sample["events"]
            models = [e for e in events if e["event"] == "model"]
            assert len(answers) == len(models) == (0 if sample["error"] else 2)
            assert counted["model.request"] == counted["model.response"] == len(answers)
            assert counted["tool.call"] == len(calls) == len(answers) // 2
            assert counted["tool.result"] == sum(m["role"] == "tool" for m in messages)
            said = [m for m in messages if m["role"] in ("system", "user")]
            assert counted["message"] == len(said) == 2
            tool_calls = payloads(store, episode, "tool.call")
            assert [(c["name"], c["parsed"]) for c in tool_calls] == [
                (c["function"], c["arguments"]) for c in calls
            ]
            usage = payloads(store, episode, "usage")
            assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [
                (e["output"]["usage"]["input_tokens"], e["output"]["usage"]["output_tokens"])
                for e in models
            ]
            others = [e for e in events if e["event"] not in ("model", "tool")]
            assert reports[sample_id]["kept_raw"] == len(others) > 0
            assert counted["error"] == len(others) + (1 if sample["error"] else 0)
            [end] = payloads(store, episode, "episode.end")
            value = (sample["scores"] or {}).get("includes", {}).get("value")
            assert (value, end["stop_reason"], end["total_reward"]) in (
                ("C", "done", 1.0), ("I", "done", 0.0), (None, "error", None),
            )  # fmt: skip
            [start] = payloads(store, episode, "episode.start")
            assert start["task_id"] == "arith"

    again = imported(db, log)
    assert sorted((r["episode_id"], r["events_added"]) for r in again.values()) == sorted(
        (r["episode_id"], 0) for r in reports.values()
    )
    shown = run_cli("show", reports["one"]["episode_id"], "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "add(x=1, y=1)" in shown.stdout and "The answer is 2" in shown.stdout
    broken = run_cli("show", reports["three"]["episode_id"], "--db", str(db))
    assert broken.returncode == 0, broken.stderr
    assert "sample three breaks" in broken.stdout


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
    assert report["format"] == "inspect-eval" and len(report["sessions"]) == 3
    with TraceStore(db) as store:
        usage = [u for s in report["sessions"] for u in payloads(store, s["episode_id"], "usage")]
    assert len(usage) == 4  # two samples' two calls each
    assert all(u["input_tokens"] is None and u["output_tokens"] is None for u in usage)


def test_a_score_maps_to_a_reward_as_inspect_reads_it_else_leaves_the_episode_unjudged() -> None:
    assert [reward_of(v) for v in ("C", "I", "P", "N", True, False, 0.25, 3)] == [
        1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.25, 3.0,
    ]  # fmt: skip
    assert [reward_of(v) for v in ("maybe", None, {"a": 1}, [1])] == [None, None, None, None]


def test_an_inspect_log_written_as_json_imports_as_its_eval_log_does(tmp_path: Path) -> None:
    log = eval_log(tmp_path / "inspect")
    converted = subprocess.run(
        [str(INSPECT_VENV / "bin" / "inspect"), "log", "convert", "--to", "json",
         "--output-dir", str(tmp_path / "json"), str(log)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr[-3000:]
    (as_json,) = (tmp_path / "json").glob("*.json")
    counts = []
    for path in (log, as_json):
        db = tmp_path / f"{path.suffix[1:]}.db"
        reports = imported(db, path)
        with TraceStore(db) as store:
            counts.append(
                {k.split("/")[1]: kinds(store, r["episode_id"]) for k, r in reports.items()}
            )
    assert counts[0] == counts[1] and len(counts[0]) == 3
