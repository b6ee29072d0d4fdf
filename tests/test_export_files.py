"""Export files: Parquet with fixed schemas read back through pyarrow, permissions from the
umask, and outputs that cannot be written refused in one line, with nothing half-written."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_export import make_fanout
from test_fanout import SUBMIT

from agentrunner import TraceStore, run_agent_episode
from agentrunner.cli.main import main
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.export import ExportOptions, export_rows
from agentrunner.export.writer import write_parquet
from agentrunner.lifecycle.fanout import FanoutResult
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.values.errors import AgentRunnerError
from providers import get_model

pq = pytest.importorskip("pyarrow.parquet")

EVERY_OPTION = ExportOptions(reasoning_key="reasoning_content", with_tool_results=True)


@pytest.fixture(scope="module")
def fanout(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TraceStore, FanoutResult]]:
    store, result = make_fanout(tmp_path_factory.mktemp("fanout"))
    yield store, result
    store.close()


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


def _export(db: Path, out: Path, fmt: str, *args: str) -> int:
    return main(["export", "--db", str(db), "--format", fmt, "-o", str(out), *args])


def _decoded(value: Any) -> Any:
    """A Parquet row as JSON Lines has it: JSON-text fields decoded, nulls left out."""
    if isinstance(value, dict):
        out = {k: _decoded(v) for k, v in value.items() if v is not None}
        if isinstance(out.get("tools"), str):
            out["tools"] = json.loads(out["tools"])
        if isinstance(out.get("arguments"), str):
            out["arguments"] = json.loads(out["arguments"])
        return out
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def _calls(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for r in rows for m in r["messages"] for c in m.get("tool_calls") or []]


# ------------------------------------------------------------------ Parquet


@pytest.mark.parametrize("fmt", ["sft", "dpo", "grpo", "kto"])
def test_parquet_round_trip_gives_back_the_json_lines_rows(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path, fmt: str
) -> None:
    store, _ = fanout
    _, rows = export_rows(store, fmt, options=EVERY_OPTION)
    expected = list(rows)
    assert write_parquet(iter(expected), tmp_path / "x.parquet", fmt, "reasoning_content") > 0
    back = pq.read_table(tmp_path / "x.parquet").to_pylist()
    assert _decoded(back) == _decoded(expected)


def test_dpo_parquet_with_tool_calls_without_arguments_is_written(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    model = get_model("scripted:demo")
    parent = run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store)
    (fork,) = fork_episode(store, parent.episode_id, turn=1, action=SUBMIT)
    resume_episode(store, fork)
    out = tmp_path / "pairs.parquet"
    assert _export(store.path, out, "dpo", "--tool-args", "object") == 0
    (row,) = pq.read_table(out).to_pylist()
    sides = [row["chosen"][0]["tool_calls"][0], row["rejected"][0]["tool_calls"][0]]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in sides] == [
        ("list_files", "{}"),
        ("submit", "{}"),
    ]


def test_parquet_tool_calls_read_back_with_only_their_own_arguments(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    out = tmp_path / "sft.parquet"
    assert _export(store.path, out, "sft", "--tool-args", "object") == 0
    _, rows = export_rows(store, "sft", options=ExportOptions(tool_args="object"))
    recorded = [c["function"]["arguments"] for c in _calls(list(rows))]
    back = [json.loads(c["function"]["arguments"]) for c in _calls(pq.read_table(out).to_pylist())]
    assert back == recorded
    assert not any(v is None for args in back for v in args.values())


def test_parquet_columns_keep_their_types_when_there_are_no_rows(
    fanout: tuple[TraceStore, FanoutResult], store: TraceStore, tmp_path: Path
) -> None:
    full, _ = fanout
    assert _export(full.path, tmp_path / "full.parquet", "dpo") == 0
    assert _export(store.path, tmp_path / "empty.parquet", "dpo") == 0
    empty = pq.read_table(tmp_path / "empty.parquet")
    assert empty.num_rows == 0
    assert empty.schema.equals(pq.read_table(tmp_path / "full.parquet").schema)


def test_rows_that_do_not_fit_the_parquet_schema_are_a_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    with pytest.raises(AgentRunnerError, match="could not write the rows as Parquet"):
        write_parquet(iter([{"messages": [], "tools": [], "reward": "high"}]), out, "sft")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_parquet_write_leaves_the_existing_file_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    out.write_bytes(b"earlier export")
    with pytest.raises(AgentRunnerError):
        write_parquet(iter([{"messages": [], "tools": [], "score": 1.0}]), out, "sft")
    assert out.read_bytes() == b"earlier export"
    assert list(tmp_path.iterdir()) == [out]


# ------------------------------------------------------------------ permissions


@pytest.mark.usefixtures("umask_027")
@pytest.mark.parametrize("name", ["rows.jsonl", "rows.parquet"])
def test_exported_files_get_the_permissions_of_the_umask(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path, name: str
) -> None:
    store, _ = fanout
    assert _export(store.path, tmp_path / name, "sft") == 0
    assert (tmp_path / name).stat().st_mode & 0o777 == 0o640


# ------------------------------------------------------------------ outputs that cannot be files


def test_export_to_a_directory_is_bad_usage_in_one_line(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = fanout
    (tmp_path / "out").mkdir()
    assert _export(store.path, tmp_path / "out", "sft") == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "is a directory" in err and len(err.splitlines()) == 1
    assert list((tmp_path / "out").iterdir()) == [] and len(list(tmp_path.iterdir())) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_export_where_no_file_can_be_created_is_bad_usage_in_one_line(
    fanout: tuple[TraceStore, FanoutResult], capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = fanout
    before = Path("/proc/version").read_text()
    assert _export(store.path, Path("/proc/version"), "sft") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write /proc/version:") and len(err.splitlines()) == 1
    assert Path("/proc/version").read_text() == before
