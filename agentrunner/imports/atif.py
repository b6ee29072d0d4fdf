"""Import ATIF trajectories (Harbor's Agent Trajectory Interchange Format, RFC 0001).

An ATIF file is one JSON document: a header (``schema_version``, ``session_id``, ``agent``,
``notes``, ``final_metrics``, ``extra``, embedded ``subagent_trajectories``) and ``steps``. Its
records are the steps, one each; the parser reads the header itself. A step becomes:

- ``system`` / ``user``: :class:`Said` with the message's text;
- ``agent``: :class:`Ask`, :class:`Piece` s (``reasoning_content`` as reasoning, ``message``
  as text, each tool call's arguments as tool_args), :class:`Answer` (tool calls with their
  arguments as JSON text; usage from ``metrics``: ATIF's ``prompt_tokens`` includes
  ``cached_tokens``, as ``input_tokens`` does; cache writes and reasoning tokens from
  ``metrics.extra``; ``cost_usd`` when the step has one, else priced by the importer);
- each observation result: :class:`Observed` for the tool call it names. A result naming none
  (Harbor's terminus-2 leaves the id out) is paired with the step's unanswered tool calls in
  order when there are as many of each; otherwise, and on system or user steps, its text
  enters the history as a message of the step's role (``user`` on agent steps).

An agent step with ``llm_call_count: 0`` (a scripted action, no model) or ``is_copied_context``
(context copied from an earlier trajectory) still needs a model call (an edit agentrunner's
export marks, below, is the one exception). It gets one with no chunks; a step of
no model call has zero usage (cost 0), a copied one the metrics it carries. Both, and an
``llm_call_count`` above 1 (aggregated metrics), are kept as the answer's marks
(``source_marks`` on its ``model.response``; ``is_copied_context`` of a system or user step on
its ``message``), which the ATIF export gives back, so a trajectory exported, imported and
exported again is the same.

Nothing is dropped: a step's fields that have no event of their own (``extra``,
``reasoning_effort``, tool calls' and results' ``extra``, ``subagent_trajectory_ref``,
non-text content parts, token ids, logprobs, other metrics) follow its items as one
:class:`Unmapped`. Embedded subagent trajectories become sessions of their own whose parent
is the tool call whose result refers to them (unreferenced ones follow the first step).

What agentrunner's own ATIF export writes under ``extra["agentrunner"]`` is read back
(:mod:`agentrunner.imports.atif_fields`), so that an export imported again is the same episode:
its task, seed and model spec; each result's reward, ``done``, ``truncated``, ``step``,
``duration_s`` and ``error``; its end (stop reason and total reward, an ``episode.end``; none
when the reward is null, unjudged); a step of reason ``edit`` as the edit it was (an assistant
``message`` of reason ``edit``, no model call) and a user step's reason (``fork``,
``continue``); arguments that did not parse as the model wrote them. A fork (its steps up to
the fork point ``is_copied_context``) whose parent's export was imported before is imported as
a fork of that episode, only its own steps written; otherwise whole. A file from another tool
carries none of this: its results have no reward and its episode none (unknown, never 0).

Session ids: ATIF's ``session_id`` names a run, not a document (continuations and subagents
share it; Harbor's golden files all say ``NORMALIZED_SESSION_ID``), so the session key is
``session_id/trajectory_id`` when the document has a ``trajectory_id``, else
``session_id@`` a digest of the file's resolved path (moving a file imports it anew).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from agentrunner.imports.atif_fields import (
    edit_told,
    end_told,
    episode_told,
    list_of,
    names_a_call,
    ours,
    outcome_told,
    results_of,
    spawning_call,
    str_of,
    take_text,
    tool_calls,
    tool_specs,
    usage_of,
)
from agentrunner.imports.files import session_id, whole_json
from agentrunner.imports.importer import stamp
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Edited,
    Emit,
    Ended,
    Item,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
)
from agentrunner.values.types import AgentTurn, AgentUsage

NAME = "atif"
APPENDS = False

_VERSION = re.compile(r'"schema_version"\s*:\s*"ATIF-')
_HEADER = {"schema_version", "session_id", "trajectory_id", "agent", "steps", "notes"}
_HEADER |= {"final_metrics", "continued_trajectory_ref", "extra", "subagent_trajectories"}
_AGENT = {"name", "version", "model_name", "tool_definitions", "extra"}


def sniff(path: Path, head: str) -> bool:
    """One JSON object whose ``schema_version`` starts with ``ATIF-``."""
    text = head.lstrip("\ufeff \t\r\n")
    if not text.startswith("{"):
        return False
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        # More after one value is JSONL, not a document; anything else is a head cut short.
        return exc.msg != "Extra data" and _VERSION.search(text) is not None
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    return isinstance(version, str) and version.startswith("ATIF-")


def records(path: Path, *, live: bool) -> list[Any]:
    """The trajectory's steps (an ATIF file is written whole: there is no partial tail)."""
    steps = _document(path).get("steps")
    if not isinstance(steps, list):
        raise ValueError(f"{path}: an ATIF trajectory without a steps list")
    return steps


def parser(path: Path) -> _Trajectory:
    doc = _document(path)
    raw, tid = str_of(doc.get("session_id")), str_of(doc.get("trajectory_id"))
    # a trajectory id names one document; a session id alone names a run (see above)
    session = (f"{raw}/{tid}" if raw else tid) if tid else session_id(raw or NAME, path)
    return _Trajectory(doc, path=path, key="", session_id=session)


def _document(path: Path) -> dict[str, Any]:
    doc = whole_json(path)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: an ATIF trajectory must be a JSON object")
    return doc


class _Trajectory:
    """One trajectory (the file's, or an embedded subagent's) read into one session; it is
    the file's parser (fed the steps), and an embedded one is read :meth:`whole`."""

    def __init__(
        self,
        doc: dict[str, Any],
        *,
        path: Path,
        key: str,
        session_id: str,
        parent: str | None = None,
        parent_call: str | None = None,
    ) -> None:
        self.doc, self.path, self.key, self.session_id = doc, path, key, session_id
        self.parent, self.parent_call = parent, parent_call
        agent = doc.get("agent")
        self.agent: dict[str, Any] = agent if isinstance(agent, dict) else {}
        self.model = str_of(self.agent.get("model_name"))
        self.names: dict[str, str] = {}  # tool call id -> tool name, over the steps so far
        self.steps = list_of(doc.get("steps"))
        self.subagents = {
            str_of(sub.get("trajectory_id")) or f"subagent-{i + 1}": sub
            for i, sub in enumerate(list_of(doc.get("subagent_trajectories")))
            if isinstance(sub, dict)
        }
        self.referenced = {
            ref.get("trajectory_id")
            for step in self.steps
            for result in results_of(step)
            for ref in list_of(result.get("subagent_trajectory_ref"))
            if isinstance(ref, dict)
        }
        self.started: set[str] = set()
        self.begun = False

    def feed(self, index: int, record: Any) -> list[Emit]:
        out = [] if self.begun else self._begin()
        out += self.step(index, record)
        return out + self._unreferenced() if index == 0 else out

    def finish(self) -> list[Emit]:
        out = [] if self.begun else self._begin() + self._unreferenced()
        told = end_told(self.doc) if not self.key else None  # the file's own trajectory
        if told is None:
            return out
        last = self.steps[-1] if self.steps and isinstance(self.steps[-1], dict) else {}
        return [*out, (self.key, Ended(*told, ts=str_of(last.get("timestamp"))))]

    def whole(self) -> list[Emit]:
        """Every item of an embedded trajectory at once (it has no records of its own)."""
        out = [emit for index, step in enumerate(self.steps) for emit in self.feed(index, step)]
        return out + self.finish()

    def _begin(self) -> list[Emit]:
        self.begun = True
        first = self.steps[0] if self.steps and isinstance(self.steps[0], dict) else {}
        return [(self.key, Begin(self.source(), str_of(first.get("timestamp"))))]

    def _unreferenced(self) -> list[Emit]:
        """Embedded subagents no result refers to (no call started them): after step 1."""
        return [
            emit
            for tid in self.subagents
            if tid not in self.referenced
            for emit in self._subagent(tid, None)
        ]

    def _subagent(self, tid: str, call: str | None) -> list[Emit]:
        if tid in self.started:
            return []
        self.started.add(tid)
        child = _Trajectory(
            self.subagents[tid],
            path=self.path,
            key=f"{self.key}/{tid}",
            session_id=f"{self.session_id}/{tid}",
            parent=self.key,
            parent_call=call,
        )
        return child.whole()

    def source(self) -> Source:
        doc, agent = self.doc, self.agent
        tools, lossy = tool_specs(agent.get("tool_definitions"))
        extra: dict[str, Any] = {"schema_version": doc.get("schema_version")}
        for name in ("session_id", "trajectory_id", "notes", "final_metrics", "extra"):
            extra[name] = doc.get(name)
        extra["continued_trajectory_ref"] = doc.get("continued_trajectory_ref")
        extra["agent_extra"] = agent.get("extra")
        extra["tool_definitions"] = agent.get("tool_definitions") if lossy else None
        unknown = {k: v for k, v in doc.items() if k not in _HEADER}
        unknown |= {f"agent.{k}": v for k, v in agent.items() if k not in _AGENT}
        extra["unmapped"] = unknown or None
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=self.session_id,
            agent=str_of(agent.get("name")) or "atif",
            agent_version=str_of(agent.get("version")),
            model=self.model,
            tools=tools,
            parent_session=self.parent,
            parent_call_id=self.parent_call if self.key else spawning_call(doc),
            extra={k: v for k, v in extra.items() if v is not None},
            episode=episode_told(doc) if not self.key else None,
        )

    def step(self, index: int, step: Any) -> list[Emit]:
        if not isinstance(step, dict):
            return [(self.key, Unmapped(step, "an ATIF step that is not a JSON object"))]
        left = dict(step)
        ts = str_of(left.pop("timestamp", None))
        if ts is not None and stamp(ts) is None:
            left["timestamp"] = ts  # kept: the items cannot carry a time it does not read
        if left.get("step_id") == index + 1:
            del left["step_id"]
        role = left.pop("source", None)
        items: list[Item] = []
        others: list[Emit] = []
        if role in ("system", "user"):
            text = take_text(left, "message")
            copied = left.pop("is_copied_context", None)
            if not isinstance(copied, bool | None):
                left["is_copied_context"] = copied
            marks = {"is_copied_context": True} if copied else {}
            reason = str_of(ours(step).get("reason"))
            items.append(Said(role, text, ts, marks, reason=reason))
            items += self._results(left, [], role, ts, others)
        elif role == "agent":
            items += self._agent(index, step, left, ts, others)
        else:
            return [(self.key, Unmapped(step, f"an ATIF step whose source is {role!r}"))]
        if left:
            fields = ", ".join(sorted(left))
            why = f"ATIF step fields with no place in the event log: {fields}"
            items.append(Unmapped({"step_id": step.get("step_id"), **left}, why, ts))
        return [(self.key, item) for item in items] + others

    def _agent(
        self,
        index: int,
        step: dict[str, Any],
        left: dict[str, Any],
        ts: str | None,
        others: list[Emit],
    ) -> list[Item]:
        call = f"step-{index + 1}"
        model = str_of(left.pop("model_name", None))
        reasoning = str_of(left.pop("reasoning_content", None))
        text = take_text(left, "message")
        calls = tool_calls(left)
        count = left.pop("llm_call_count", None)
        copied = left.pop("is_copied_context", None)
        if not isinstance(copied, bool | None):
            left["is_copied_context"] = copied
        edit = edit_told(step, text, calls)
        if edit is not None:  # a fork's edit, not a model's answer
            self.names |= {c.call_id: c.name for c in calls}
            items: list[Item] = [Edited(edit, ts)]
            return items + self._results(left, [c.call_id for c in calls], "user", ts, others)
        copied = copied is True
        called = count != 0 and not copied
        marks: dict[str, Any] = {"llm_call_count": count} if count not in (None, 1) else {}
        if copied:
            marks["is_copied_context"] = True
        free = AgentUsage(cost_usd=0.0, price_source="source")  # no model call of its own
        usage = usage_of(left) if count != 0 else free
        turn = AgentTurn(
            reasoning=reasoning,
            message=text,
            tool_calls=calls,
            usage=usage,
            model=model or self.model,
        )
        items = [Ask(call, model, ts)]
        if called:
            if reasoning:
                items.append(Piece(call, "reasoning", reasoning, ts=ts))
            if text:
                items.append(Piece(call, "text", text, ts=ts))
            items += [Piece(call, "tool_args", c.arguments, c.call_id, ts) for c in calls]
        items.append(Answer(call, turn, ts, marks=marks))
        self.names |= {c.call_id: c.name for c in calls}
        return items + self._results(left, [c.call_id for c in calls], "user", ts, others)

    def _results(
        self,
        left: dict[str, Any],
        calls: list[str],
        role: Literal["system", "user"],
        ts: str | None,
        others: list[Emit],
    ) -> list[Item]:
        """A step's observation results (``calls``: the ids of its tool calls); what they
        carry besides call id and text goes back into ``left``."""
        observation = left.pop("observation", None)
        if observation is None:
            return []
        if not isinstance(observation, dict) or not isinstance(observation.get("results"), list):
            left["observation"] = observation
            return []
        results: list[Any] = observation["results"]
        named = {str_of(r.get("source_call_id")) for r in results if isinstance(r, dict)}
        waiting = [c for c in calls if c not in named]
        unnamed = [i for i, r in enumerate(results) if isinstance(r, dict) and not names_a_call(r)]
        paired = dict(zip(unnamed, waiting, strict=True)) if len(unnamed) == len(waiting) else {}
        items: list[Item] = []
        kept: list[Any] = []
        for i, result in enumerate(results):
            if not isinstance(result, dict):
                kept.append({"index": i, "result": result})
                continue
            rest = dict(result)
            text = take_text(rest, "content")
            source = rest.pop("source_call_id", None)
            known = str_of(source) in self.names  # a call of this step (or, late, of one before)
            target = source if known else paired.get(i)
            if target is not None:
                outcome = outcome_told(result)
                items.append(Observed(target, self.names[target], text, ts=ts, **outcome))
            elif result.get("content") is not None:
                items.append(Said(role, text, ts))
            if source is not None and source != target:
                rest["source_call_id"] = source
            for ref in list_of(result.get("subagent_trajectory_ref")):
                if isinstance(ref, dict) and ref.get("trajectory_id") in self.subagents:
                    others += self._subagent(ref["trajectory_id"], target)
            if rest:
                kept.append({"index": i, **rest})
        more = {k: v for k, v in observation.items() if k != "results"}
        if kept or more:
            left["observation"] = {"results": kept, **more}
        return items
