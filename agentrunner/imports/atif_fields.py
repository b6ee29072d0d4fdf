"""Reading the fields of an ATIF step: text content, tool calls, usage from ``metrics``, tool
definitions; and what agentrunner's own ATIF export writes under ``extra`` (read back so that
an export imported again is the same episode: task, seed, model, lineage, reward, edits)."""

from __future__ import annotations

import json
from typing import Any

from agentrunner.imports.items import Episode, text_of
from agentrunner.values.types import AgentToolCall, AgentUsage, Message, ToolSpec

NS = "agentrunner"
"""The key of agentrunner's own data in every ``extra`` its ATIF export writes."""

CACHE_WRITE = ("cache_creation_input_tokens", "cache_creation_tokens", "cache_write_tokens")
REASONING = ("reasoning_tokens", "thinking_tokens")


def tool_calls(left: dict[str, Any]) -> tuple[AgentToolCall, ...]:
    """A step's tool calls; what they carry besides id, name and arguments stays in ``left``."""
    value = left.pop("tool_calls", None)
    if value is None:
        return ()
    if not isinstance(value, list):
        left["tool_calls"] = value
        return ()
    calls: list[AgentToolCall] = []
    kept: list[Any] = []
    for raw in value:
        call_id = raw.get("tool_call_id") if isinstance(raw, dict) else None
        name = raw.get("function_name") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(call_id, str) or not isinstance(name, str):
            kept.append(raw)
            continue
        args = raw.get("arguments", {})
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        unparsed = ours(raw).get("raw_arguments")  # what the model wrote, when it did not parse
        if args == {} and isinstance(unparsed, str):
            text = unparsed
        calls.append(AgentToolCall(call_id=call_id, name=name, arguments=text))
        rest = {k: v for k, v in raw.items() if k not in ("tool_call_id", "function_name")}
        if isinstance(args, dict):
            rest.pop("arguments", None)
        if rest:
            kept.append({"tool_call_id": call_id, **rest})
    if kept:
        left["tool_calls"] = kept
    return tuple(calls)


def usage_of(left: dict[str, Any]) -> AgentUsage:
    """A model call's usage from the step's ``metrics`` (the fields used are taken out)."""
    metrics = left.pop("metrics", None)
    if not isinstance(metrics, dict):
        if metrics is not None:
            left["metrics"] = metrics
        return AgentUsage()
    rest = dict(metrics)
    counts = {
        k: _take_int(rest, k) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")
    }
    extra = rest.pop("extra", None)
    write = reasoning = 0
    if isinstance(extra, dict):
        extra = dict(extra)
        write, reasoning = _take_int(extra, *CACHE_WRITE), _take_int(extra, *REASONING)
    if extra:
        rest["extra"] = extra
    cost = rest.pop("cost_usd", None)
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)):
        rest["cost_usd"], cost = cost, None
    if rest:
        left["metrics"] = rest
    usage = AgentUsage(
        input_tokens=counts["prompt_tokens"],
        output_tokens=counts["completion_tokens"],
        cache_read_tokens=counts["cached_tokens"],
        cache_write_tokens=write,
        reasoning_tokens=reasoning,
        cost_usd=None if cost is None else float(cost),
        price_source=None if cost is None else "source",
    )
    return usage


def tool_specs(value: Any) -> tuple[tuple[ToolSpec, ...], bool]:
    """Tool definitions in OpenAI's function shape (or flat) as specs, and whether any
    carried more than a spec holds (then the source's list is kept as it is)."""
    specs: list[ToolSpec] = []
    lossy = False
    for raw in list_of(value):
        fn = raw.get("function", raw) if isinstance(raw, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            lossy = True
            continue
        spec = ToolSpec(name=fn["name"], description=str_of(fn.get("description")) or "")
        if isinstance(fn.get("parameters"), dict):
            spec = spec.model_copy(update={"parameters": fn["parameters"]})
        specs.append(spec)
        shown = {k: v for k, v in fn.items() if k in ("name", "description", "parameters")}
        outer = {k: v for k, v in raw.items() if k != "function"} if fn is not raw else {}
        lossy |= shown != fn or outer not in ({}, {"type": "function"})
    return tuple(specs), lossy


def take_text(left: dict[str, Any], key: str) -> str:
    """The text of a message or result; content with parts other than text stays in ``left``."""
    value = left.pop(key, None)
    plain = all(isinstance(p, dict) and p.get("type") == "text" for p in list_of(value))
    if not (value is None or isinstance(value, str) or (isinstance(value, list) and plain)):
        left[key] = value
    return text_of(value)


def results_of(step: Any) -> list[dict[str, Any]]:
    observation = step.get("observation") if isinstance(step, dict) else None
    results = observation.get("results") if isinstance(observation, dict) else None
    return [r for r in list_of(results) if isinstance(r, dict)]


def names_a_call(result: dict[str, Any]) -> bool:
    return isinstance(result.get("source_call_id"), str) and bool(result["source_call_id"])


def _take_int(fields: dict[str, Any], *keys: str) -> int:
    """The first of ``keys`` that holds a count, taken out of ``fields`` (0 if none does)."""
    for key in keys:
        value = fields.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            del fields[key]
            return value
        if key in fields and value is None:
            del fields[key]
    return 0


def list_of(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def str_of(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------ agentrunner's own extra


def ours(value: Any) -> dict[str, Any]:
    """agentrunner's part of an object's ``extra`` (empty when it has none)."""
    extra = value.get("extra") if isinstance(value, dict) else None
    own = extra.get(NS) if isinstance(extra, dict) else None
    return own if isinstance(own, dict) else {}


def episode_told(doc: dict[str, Any]) -> Episode | None:
    """The episode an agentrunner export was: its task, seed and model spec, and for a fork
    the session its parent's export is (``parent_trajectory``, else the parent's episode id,
    which is its trajectory's ids) and how many leading steps are the parent's (copied)."""
    own, agent = ours(doc), ours(doc.get("agent"))
    task, seed, model = own.get("task_id"), own.get("seed"), agent.get("model")
    if not isinstance(task, str) or not isinstance(seed, int) or not isinstance(model, dict):
        return None
    parent, link = own.get("parent_episode_id"), own.get("parent_trajectory")
    spawner = _session_of(own.get("spawned_by"))
    if not isinstance(parent, str):
        return Episode(task, seed, model, spawned_by=spawner)
    shared = 0
    for step in list_of(doc.get("steps")):
        if not isinstance(step, dict) or step.get("is_copied_context") is not True:
            break
        shared += 1
    fork_of = _session_of(link) or f"{parent}/{parent}"
    return Episode(task, seed, model, fork_of, shared, spawned_by=spawner)


def spawning_call(doc: dict[str, Any]) -> str | None:
    """The call that started the sub-agent an agentrunner export is (None for any other)."""
    spawned = ours(doc).get("spawned_by")
    call = spawned.get("call_id") if isinstance(spawned, dict) else None
    return call if isinstance(call, str) else None


def _session_of(value: Any) -> str | None:
    """The ATIF session key (``session_id/trajectory_id``) an export's link names."""
    if not isinstance(value, dict):
        return None
    ids = [value.get("session_id"), value.get("trajectory_id")]
    return "/".join(str(i) for i in ids) if all(isinstance(i, str) for i in ids) else None


def end_told(doc: dict[str, Any]) -> tuple[str, float] | None:
    """The stop reason and total reward an agentrunner export says its episode ended with
    (None when it did not end, or its reward is unknown)."""
    own = ours(doc)
    stop, reward = own.get("stop_reason"), own.get("total_reward")
    if isinstance(stop, str) and isinstance(reward, int | float) and not isinstance(reward, bool):
        return stop, float(reward)
    return None


def outcome_told(result: dict[str, Any]) -> dict[str, Any]:
    """What an agentrunner export says the environment made of a tool call (reward, done,
    truncated, step, duration_s, error), as :class:`Observed` fields; {} for any other."""
    own = ours(result)
    out: dict[str, Any] = {}
    if _number(own.get("reward")):
        out["reward"] = float(own["reward"])
    for key in ("done", "truncated"):
        if isinstance(own.get(key), bool):
            out[key] = own[key]
    if _count(own.get("step")):
        out["step"] = own["step"]
    if _number(own.get("duration_s")):
        out["duration_s"] = float(own["duration_s"])
    if isinstance(own.get("error"), str):
        out["error"] = own["error"]
    return out


def edit_told(step: dict[str, Any], text: str, calls: tuple[AgentToolCall, ...]) -> Message | None:
    """The assistant message a fork put in the model's place, for the step an agentrunner
    export marks so (``reason: edit``, no model call, not copied); else None."""
    own = ours(step)
    if own.get("reason") != "edit" or step.get("llm_call_count") != 0:
        return None
    if step.get("is_copied_context") is True:
        return None
    reasoning = own.get("reasoning")
    return Message(
        role="assistant",
        content=text,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        tool_calls=calls,
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
