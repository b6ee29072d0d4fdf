"""ATIF export: episodes made for real come out as trajectories Harbor accepts, with their values.

Each trajectory is checked against the JSON Schema generated from Harbor's pydantic models
(the shared fixture; those checks are skipped when it is absent) and against the cross-field
rules of Harbor's ``TrajectoryValidator``, written below as :func:`rule_violations`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from test_fanout import SUBMIT

from agentrunner import (
    AgentContext,
    AgentToolCall,
    AgentTurn,
    AgentUsage,
    TraceStore,
    run_agent_episode,
)
from agentrunner.cli.main import main
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.export import Selection, atif_trajectory, export_rows, select_episodes
from agentrunner.imports import atif
from agentrunner.imports.importer import import_file
from agentrunner.imports.registry import import_paths
from agentrunner.lifecycle.batch import run_batch
from agentrunner.lifecycle.fanout import score_actions
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.values.errors import IncompleteStreamError
from agentrunner.values.events import ToolResult, Usage
from agentrunner.values.types import Message
from agentrunner.verifiers import RuleVerifier, verify_episode
from providers import get_model

ATIF = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "foreign-traces" / "atif"
SCHEMA = ATIF / "atif-trajectory.schema.json"
needs_schema = pytest.mark.skipif(not SCHEMA.is_file(), reason=f"{SCHEMA} is absent")
SAMPLES = sorted(p for p in ATIF.glob("*.json") if p != SCHEMA) if ATIF.is_dir() else []

KINDS = (
    "root",
    "fork",
    "edit",
    "reasoned-edit",
    "fanout",
    "batch",
    "cancelled",
    "failed",
    "resumed",
    "usage",
)
EDIT = {"name": "bash", "arguments": {"command": "echo edited"}}
AGENT_ONLY = (
    "model_name",
    "reasoning_effort",
    "reasoning_content",
    "tool_calls",
    "metrics",
    "llm_call_count",
)
WORKSPACE_TOOLS = {"bash", "read_file", "write_file", "str_replace", "list_files", "submit"}
BAD_ARGUMENTS = '{"command": "ls'
REASONED_EDIT = Message(
    role="assistant",
    reasoning="The tests come first.",
    tool_calls=(AgentToolCall(call_id="t", name="bash", arguments={"command": "ls tests"}),),
)


# ------------------------------------------------------------------ Harbor's cross-field rules


def rule_violations(doc: dict[str, Any]) -> list[str]:
    """What breaks the rules Harbor's TrajectoryValidator checks beyond the schema."""
    problems: list[str] = []
    if not doc["agent"].get("version"):  # harbor-atif2otel's validator refuses an empty one
        problems.append("agent.version is empty")
    steps = doc["steps"]
    ids = [s["step_id"] for s in steps]
    if ids != list(range(1, len(steps) + 1)):
        problems.append(f"step ids are not 1..{len(steps)} without gaps: {ids}")
    for step in steps:
        where = f"step {step['step_id']}"
        calls = {c["tool_call_id"] for c in step.get("tool_calls") or []}
        for result in (step.get("observation") or {}).get("results", []):
            source = result.get("source_call_id")
            if source is not None and source not in calls:
                problems.append(f"{where}: result for {source!r}, not a tool call of the step")
        if step["source"] != "agent":
            problems += [
                f"{where}: {f} on a {step['source']} step"
                for f in AGENT_ONLY
                if step.get(f) is not None
            ]
        if step.get("llm_call_count") == 0:
            problems += [
                f"{where}: {f} with llm_call_count 0"
                for f in ("metrics", "reasoning_content")
                if step.get(f) is not None
            ]
        timestamp = step.get("timestamp")
        if timestamp is not None:
            try:
                datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
            except ValueError:
                problems.append(f"{where}: timestamp {timestamp!r} is not ISO 8601")
    subagents = [t.get("trajectory_id") for t in doc.get("subagent_trajectories") or []]
    if None in subagents or len(set(subagents)) != len(subagents):
        problems.append("embedded subagent trajectories need unique trajectory ids")
    return problems


def schema_errors(doc: dict[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


# ------------------------------------------------------------------ episodes made for real


def _cancel_after(n: int) -> Callable[[], bool]:
    """A cancel_check that fires on its n-th poll (polls happen per chunk and per step)."""
    count = [0]

    def check() -> bool:
        count[0] += 1
        return count[0] > n

    return check


def _breaks_at_turn_2(context: AgentContext) -> AgentTurn:
    """Looks around once, then its stream breaks half-way through the next answer."""
    if context.turn == 1:
        call = AgentToolCall(call_id="ls", name="list_files")
        return AgentTurn(tool_calls=(call,), usage=AgentUsage(input_tokens=100, output_tokens=10))
    context.emit("text", "half a tho")
    partial = AgentTurn(message="half a tho", usage=AgentUsage(input_tokens=120, output_tokens=3))
    raise IncompleteStreamError("stream ended early", partial=partial)


def _submits(context: AgentContext) -> AgentTurn:
    call = AgentToolCall(call_id="done", name="submit")
    return AgentTurn(tool_calls=(call,), usage=AgentUsage(input_tokens=130, output_tokens=4))


def _cached_and_malformed(context: AgentContext) -> AgentTurn:
    """A cached prompt and arguments that do not parse, then a submit."""
    if context.turn == 1:
        return AgentTurn(
            reasoning="Let me list the files.",
            tool_calls=(AgentToolCall(call_id="bad", name="bash", arguments=BAD_ARGUMENTS),),
            model="demo-2025",
            usage=AgentUsage(
                input_tokens=1000,
                output_tokens=50,
                cache_read_tokens=600,
                cache_write_tokens=300,
                reasoning_tokens=20,
                cost_usd=0.25,
            ),
        )
    call = AgentToolCall(call_id="sub", name="submit")
    usage = AgentUsage(input_tokens=1100, output_tokens=5, cache_read_tokens=1000, cost_usd=0.05)
    return AgentTurn(tool_calls=(call,), usage=usage)


@dataclass
class Made:
    store: TraceStore
    ids: dict[str, str]
    group_id: str
    batch_id: str


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """One store holding an episode of each kind (read-only for the tests)."""
    tmp = tmp_path_factory.mktemp("atif")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
        store = TraceStore(tmp / "traces.db")
        ids: dict[str, str] = {}
        with WorkspaceEnv(snapshot_dir=tmp / "snaps") as env:

            def run(model: Any, **kw: Any) -> str:
                return run_agent_episode(
                    env=env, task_id="demo-mean", model_fn=model, store=store, **kw
                ).episode_id

            ids["root"] = run(get_model("scripted:demo"))
            verify_episode(store, ids["root"], RuleVerifier(["stop:done"], name="ok"))
            ids["cancelled"] = run(get_model("scripted:demo"), cancel_check=_cancel_after(60))
            ids["failed"] = run(_breaks_at_turn_2)
            ids["resumed"] = run(_breaks_at_turn_2)
            ids["usage"] = run(_cached_and_malformed)
        resume_episode(store, ids["resumed"], model_fn=_submits)
        (ids["fork"],) = fork_episode(store, ids["root"], turn=3)
        resume_episode(store, ids["fork"])
        (ids["edit"],) = fork_episode(store, ids["root"], turn=4, action=json.dumps(EDIT))
        resume_episode(store, ids["edit"])
        (ids["reasoned-edit"],) = fork_episode(store, ids["root"], turn=4, action=REASONED_EDIT)
        fanout = score_actions(store, ids["root"], turn=4, actions=[[SUBMIT]], n=1)
        (ids["fanout"],) = fanout.ranked[0].episodes
        batch = run_batch(
            store,
            task_seed_pairs=[("demo-mean", 7)],
            env_factory=lambda: WorkspaceEnv(snapshot_dir=tmp / "batch-snaps"),
            model_factory=lambda: get_model("scripted:demo"),
        )
        ids["batch"] = str(batch.episodes[0].episode_id)
    yield Made(store, ids, fanout.group_id, batch.batch_id)
    store.close()


@pytest.fixture(scope="module")
def docs(made: Made) -> dict[str, dict[str, Any]]:
    out = {}
    for kind, episode_id in made.ids.items():
        doc = atif_trajectory(made.store, episode_id)
        assert doc is not None
        out[kind] = doc
    return out


def _own(item: dict[str, Any]) -> dict[str, Any]:
    """agentrunner's part of an object's ``extra``."""
    return item["extra"]["agentrunner"]


def _results(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for s in doc["steps"] for r in (s.get("observation") or {}).get("results", [])]


def _typed(store: TraceStore, episode_id: str, kind: str) -> list[Any]:
    return [row.typed() for row in store.iter_events(episode_id, kinds=[kind])]


# ------------------------------------------------------------------ valid ATIF


@needs_schema
@pytest.mark.parametrize("kind", KINDS)
def test_export_is_valid_against_harbors_schema(docs: dict[str, dict[str, Any]], kind: str) -> None:
    assert docs[kind]["schema_version"] == "ATIF-v1.7"
    assert schema_errors(docs[kind]) == []


@pytest.mark.parametrize("kind", KINDS)
def test_export_keeps_harbors_cross_field_rules(docs: dict[str, dict[str, Any]], kind: str) -> None:
    assert rule_violations(docs[kind]) == []


@needs_schema
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_harbors_own_samples_pass_the_same_checks(sample: Path) -> None:
    doc = json.loads(sample.read_text())
    assert (schema_errors(doc), rule_violations(doc)) == ([], [])


def _first(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return next(s for s in doc["steps"] if key in s)


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "gap": (lambda d: d["steps"][1].update(step_id=5), "without gaps"),
    "foreign result": (
        lambda d: _first(d, "observation")["observation"]["results"][0].update(
            source_call_id="nope"
        ),
        "not a tool call of the step",
    ),
    "agent field on a user step": (
        lambda d: d["steps"][1].update(model_name="m"),
        "model_name on a user step",
    ),
    "metrics without a call": (
        lambda d: _first(d, "metrics").update(llm_call_count=0),
        "with llm_call_count 0",
    ),
    "timestamp": (lambda d: d["steps"][0].update(timestamp="yesterday"), "not ISO 8601"),
    "empty version": (lambda d: d["agent"].update(version=""), "agent.version is empty"),
}


@pytest.mark.parametrize("broken", MUTATIONS)
def test_rule_checker_catches_each_broken_rule(
    docs: dict[str, dict[str, Any]], broken: str
) -> None:
    doc = copy.deepcopy(docs["root"])
    mutate, rule = MUTATIONS[broken]
    mutate(doc)
    problems = rule_violations(doc)
    assert problems and all(rule in p for p in problems)


# ------------------------------------------------------------------ values


def test_steps_follow_the_history_system_user_then_agent_turns(
    made: Made, docs: dict[str, dict[str, Any]]
) -> None:
    steps = docs["root"]["steps"]
    responses = _typed(made.store, made.ids["root"], "model.response")
    assert [s["source"] for s in steps[:2]] == ["system", "user"]
    model_steps = [s for s in steps if s["source"] == "agent"]
    assert [_own(s)["stop_reason"] for s in model_steps] == [r.stop_reason for r in responses]
    assert all(s["llm_call_count"] == 1 and s["model_name"] == "demo" for s in model_steps)


def test_tool_results_pair_with_their_calls_in_order(
    made: Made, docs: dict[str, dict[str, Any]]
) -> None:
    results: list[ToolResult] = _typed(made.store, made.ids["root"], "tool.result")
    exported = [(r["source_call_id"], r["content"]) for r in _results(docs["root"])]
    assert exported == [(r.call_id, r.observation) for r in results]
    for step in docs["root"]["steps"]:
        calls = [c["tool_call_id"] for c in step.get("tool_calls", [])]
        paired = [r["source_call_id"] for r in (step.get("observation") or {}).get("results", [])]
        assert paired == calls


def test_token_totals_are_the_sum_of_the_episodes_usage_and_of_its_steps(
    made: Made, docs: dict[str, dict[str, Any]]
) -> None:
    for kind in ("root", "fork", "resumed"):
        usage: list[Usage] = _typed(made.store, made.ids[kind], "usage")
        metrics = [s["metrics"] for s in docs[kind]["steps"] if "metrics" in s]
        final = docs[kind]["final_metrics"]
        assert final["total_prompt_tokens"] == sum(u.input_tokens for u in usage)
        assert final["total_prompt_tokens"] == sum(m["prompt_tokens"] for m in metrics)
        assert final["total_completion_tokens"] == sum(m["completion_tokens"] for m in metrics)
        assert final["total_completion_tokens"] == sum(u.output_tokens for u in usage)
        assert final["total_steps"] == len(docs[kind]["steps"])


def test_fork_totals_are_its_own_spend_plus_what_it_inherits(
    made: Made, docs: dict[str, dict[str, Any]]
) -> None:
    fork = made.store.episode(made.ids["fork"])
    final = docs["fork"]["final_metrics"]
    own, inherited = fork.tokens, fork.inherited_tokens
    assert final["total_prompt_tokens"] == own["input"] + inherited["input"]
    assert final["extra"]["total_reasoning_tokens"] == own["reasoning"] + inherited["reasoning"]


def test_prompt_tokens_include_cached_ones_and_cache_writes_go_to_extra(
    docs: dict[str, dict[str, Any]],
) -> None:
    first = next(s for s in docs["usage"]["steps"] if s["source"] == "agent")
    assert first["metrics"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "cached_tokens": 600,
        "cost_usd": 0.25,
        "extra": {"cache_write_tokens": 300, "reasoning_tokens": 20},
    }
    assert (first["model_name"], first["reasoning_content"]) == (
        "demo-2025",
        "Let me list the files.",
    )
    final = docs["usage"]["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_cached_tokens"]) == (2100, 1600)
    assert final["total_cost_usd"] == pytest.approx(0.30)
    assert final["extra"] == {"total_cache_write_tokens": 300, "total_reasoning_tokens": 20}


def test_unparsable_arguments_stay_raw_in_the_tool_calls_extra(
    docs: dict[str, dict[str, Any]],
) -> None:
    step = next(s for s in docs["usage"]["steps"] if s.get("tool_calls"))
    (call,) = step["tool_calls"]
    assert call["arguments"] == {}
    assert _own(call)["raw_arguments"] == BAD_ARGUMENTS
    assert _own(call)["parse_error"].startswith("arguments are not valid JSON")
    (result,) = step["observation"]["results"]
    assert result["content"].startswith("error:") and _own(result)["step"] is None


def test_reward_and_stop_reason_are_in_the_trajectorys_extra(
    made: Made, docs: dict[str, dict[str, Any]]
) -> None:
    own = _own(docs["root"])
    rewards = [_own(r)["reward"] for r in _results(docs["root"])]
    assert (own["status"], own["stop_reason"], own["total_reward"]) == ("completed", "done", 1.0)
    assert sum(r for r in rewards if r is not None) == 1.0
    assert (own["episode_id"], own["task_id"], own["attempts"]) == (
        made.ids["root"],
        "demo-mean",
        1,
    )
    assert (own["parent_episode_id"], own["fork_group"], own["batches"]) == (None, None, [])


def test_verifier_results_are_in_the_trajectorys_extra(docs: dict[str, dict[str, Any]]) -> None:
    (result,) = _own(docs["root"])["verifications"]
    assert (result["verifier"], result["passed"], result["score"]) == ("ok", True, 1.0)


def test_tool_definitions_are_the_offered_tools_in_openai_function_shape(
    docs: dict[str, dict[str, Any]],
) -> None:
    tools = docs["root"]["agent"]["tool_definitions"]
    assert {t["function"]["name"] for t in tools} == WORKSPACE_TOOLS
    assert all(t["type"] == "function" and "parameters" in t["function"] for t in tools)


def test_fork_exports_its_parents_prefix_as_copied_context(
    made: Made, docs: dict[str, dict[str, Any]]
) -> None:
    steps = docs["fork"]["steps"]
    copied = [s for s in steps if s.get("is_copied_context")]
    rest = steps[len(copied) :]
    assert copied and rest and not any(s.get("is_copied_context") for s in rest)
    assert {_own(s)["episode_id"] for s in copied} == {made.ids["root"]}
    assert {_own(s)["episode_id"] for s in rest} == {made.ids["fork"]}
    unmarked = [{k: v for k, v in s.items() if k != "is_copied_context"} for s in copied]
    assert unmarked == docs["root"]["steps"][: len(copied)]
    own = _own(docs["fork"])
    fork = made.store.episode(made.ids["fork"])
    assert (own["parent_episode_id"], own["fork_seq"]) == (made.ids["root"], fork.fork_seq)
    assert own["ancestors"] == [made.ids["root"]]


def test_edited_action_is_an_agent_step_without_a_model_call(
    docs: dict[str, dict[str, Any]],
) -> None:
    (step,) = [s for s in docs["edit"]["steps"] if _own(s).get("reason") == "edit"]
    assert (step["source"], step["llm_call_count"]) == ("agent", 0)
    assert not {"metrics", "reasoning_content", "model_name", "is_copied_context"} & set(step)
    (call,) = step["tool_calls"]
    assert (call["function_name"], call["arguments"]) == (EDIT["name"], EDIT["arguments"])
    (result,) = step["observation"]["results"]
    assert result["source_call_id"] == call["tool_call_id"]
    assert result["content"].startswith("edited")


def test_edited_message_keeps_its_reasoning_in_extra_not_as_reasoning_content(
    docs: dict[str, dict[str, Any]],
) -> None:
    (step,) = [s for s in docs["reasoned-edit"]["steps"] if _own(s).get("reason") == "edit"]
    assert "reasoning_content" not in step
    assert _own(step)["reasoning"] == "The tests come first."


def test_fanout_member_names_its_fork_group(made: Made, docs: dict[str, dict[str, Any]]) -> None:
    group = _own(docs["fanout"])["fork_group"]
    assert (group["group_id"], group["candidate"], group["proposal"]) == (made.group_id, 0, False)


def test_batch_episode_names_its_batch(made: Made, docs: dict[str, dict[str, Any]]) -> None:
    own = _own(docs["batch"])
    assert (own["batches"], own["seed"]) == ([made.batch_id], 7)


def test_cancelled_episode_says_so_and_keeps_its_cancel(docs: dict[str, dict[str, Any]]) -> None:
    own = _own(docs["cancelled"])
    assert (own["status"], own["stop_reason"], len(own["cancels"])) == ("cancelled", "cancelled", 1)


def test_failed_episode_ends_with_its_broken_answer(docs: dict[str, dict[str, Any]]) -> None:
    own = _own(docs["failed"])
    last = docs["failed"]["steps"][-1]
    assert (own["status"], own["stop_reason"]) == ("failed", "incomplete")
    assert [e["type"] for e in own["errors"]] == ["IncompleteStreamError"]
    assert (last["source"], last["message"], last["llm_call_count"]) == ("agent", "half a tho", 1)
    assert _own(last)["incomplete"] is True and last["metrics"]["prompt_tokens"] == 120


def test_a_broken_stream_retried_on_resume_counts_both_calls(
    docs: dict[str, dict[str, Any]],
) -> None:
    own = _own(docs["resumed"])
    step = docs["resumed"]["steps"][-1]
    assert [c["stop_reason"] for c in _own(step)["calls"]] == ["incomplete", None]
    assert (step["llm_call_count"], step["metrics"]["prompt_tokens"]) == (2, 120 + 130)
    assert (own["status"], own["attempts"], len(own["resumes"])) == ("completed", 2, 1)
    assert not any("incomplete" in _own(s) for s in docs["resumed"]["steps"])


def test_named_episodes_select_only_them_in_every_format(made: Made) -> None:
    selection = Selection(episodes=(made.ids["fork"],))
    _, rows = export_rows(made.store, "sft", selection=selection)
    assert [r["source"]["episode_id"] for r in rows] == [made.ids["fork"]]


# ------------------------------------------------------------------ CLI


def _export(made: Made, *args: str) -> int:
    return main(["export", "--db", str(made.store.path), "--format", "atif", *args])


def test_cli_writes_one_named_episode_of_any_status_to_a_file(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "cancelled.json"
    assert _export(made, made.ids["cancelled"], "-o", str(out)) == 0
    doc = json.loads(out.read_text())
    assert (doc["session_id"], rule_violations(doc)) == (made.ids["cancelled"], [])


@pytest.mark.parametrize("existing", [False, True], ids=["trailing-slash", "existing-dir"])
def test_cli_writes_one_file_per_episode_into_a_directory(
    made: Made, tmp_path: Path, existing: bool
) -> None:
    out = tmp_path / "atif"
    if existing:
        out.mkdir()
    assert _export(made, "--status", "any", "-o", str(out) if existing else f"{out}/") == 0
    selected = select_episodes(made.store, Selection(statuses=())).episodes
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{e.episode_id}.json" for e in selected)
    doc = json.loads((out / f"{made.ids['edit']}.json").read_text())
    assert doc == json.loads(json.dumps(atif_trajectory(made.store, made.ids["edit"])))


def test_cli_refuses_several_episodes_for_one_file(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    assert _export(made, "--status", "any", "-o", str(out)) == 2
    assert not out.exists()


def test_cli_prints_a_single_episode_on_stdout(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _export(made, made.ids["root"]) == 0
    assert json.loads(capsys.readouterr().out)["session_id"] == made.ids["root"]


# ------------------------------------------------------------------ round trips and imports


def _atif_content(doc: dict[str, Any]) -> Any:
    """A trajectory without ``extra`` at any level: what ATIF itself says (agentrunner's own
    bookkeeping under ``extra`` names episodes, seqs and the import, which a copy cannot
    share)."""
    if isinstance(doc, dict):
        return {k: _atif_content(v) for k, v in doc.items() if k != "extra"}
    if isinstance(doc, list):
        return [_atif_content(v) for v in doc]
    return doc


def _reimported(store: TraceStore, doc: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / f"{doc['trajectory_id']}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    (report,) = import_file(store, path, atif)
    again = atif_trajectory(store, report.episode_id)
    assert again is not None
    return again


@pytest.mark.parametrize("kind", KINDS)
def test_an_exported_trajectory_imported_and_exported_again_is_the_same(
    docs: dict[str, dict[str, Any]], kind: str, tmp_path: Path
) -> None:
    with TraceStore(tmp_path / "copy.db") as store:
        again = _reimported(store, docs[kind], tmp_path)
    assert _atif_content(again) == _atif_content(docs[kind])


@needs_schema
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_harbors_samples_imported_export_valid_atif(sample: Path, tmp_path: Path) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        reports = import_file(store, sample, atif)
        for report in reports:
            doc = atif_trajectory(store, report.episode_id)
            assert doc is not None
            assert schema_errors(doc) == [] and rule_violations(doc) == []


FOREIGN = sorted(
    p
    for folder in ("claude-code", "codex", "mini-swe-agent", "swe-agent")
    for p in (ATIF.parent / folder).glob("*")
    if p.is_file()
)


@needs_schema
@pytest.mark.parametrize("path", FOREIGN, ids=lambda p: p.name[:40])
def test_every_imported_session_exports_valid_atif_naming_its_agent(
    path: Path, tmp_path: Path
) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        (report,) = import_paths(store, [path])
        assert report.sessions
        for session in report.sessions:
            doc = atif_trajectory(store, session.episode_id)
            assert doc is not None
            assert schema_errors(doc) == [] and rule_violations(doc) == []
            assert doc["agent"]["name"] == session.source.agent
