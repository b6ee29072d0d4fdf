"""Read SWE-agent trajectories (``*.traj``) into import items.

A ``.traj`` file holds ``history`` (every message the agent kept: system prompt, demonstration,
instance prompt, the model's actions, the observations), ``trajectory`` (one step per executed
action: thought, action, observation, response, the ``query`` sent, execution time, state),
``info`` (exit status, submission, ``model_stats``, versions), ``replay_config`` and
``environment``; a RetryAgent file holds ``attempts``, each of that shape. The records fed are
the history entries (each attempt's in turn; an attempt after the first is its own session,
keyed ``attempt-<n>``; the top-level copy of the chosen attempt is not read twice) with the
executed steps the history lacks put in as :class:`Step` records (see below). The rest goes
to :class:`Source`: model from ``replay_config``, version from ``info``, and in ``extra`` the
info, the replay config (secret-looking values masked), the environment, the genai-prices
``price_provider``, and per trajectory step what only the step has (execution time, state,
extra info).

Steps the history lacks. The history may miss executed steps (in real files: the final
``submit`` with its patch, a rejected edit). Each step is matched, in order, with the first
unmatched model answer of the history that has the same action and the same output (its
``response`` is the entry's content, or its ``thought`` the entry's); a matched step is not
fed again. An unmatched step is fed whole, where it ran: before the answer matched with the
next matched step, or after the history. A matched step whose result the history lacks (the
last ``submit``'s observation) gives that result, right after its answer. The trajectory keeps
no tool call, only the command SWE-agent ran in its shell, so an unmatched step's call is
``bash`` with ``{"command": action}`` (id ``action-<record index>``), as without function
calling. The chain is linear: requests after such a step hold it, though the history SWE-agent
showed the model did not.

Mapping. System and user entries are :class:`Said`. Each assistant entry is one model call
(``Ask``, ``Piece``s, ``Answer``), its ``thinking_blocks`` its reasoning and kept verbatim as
opaque parts. With function calling the recorded ``tool_calls`` are the calls and each ``tool``
entry (``tool_call_ids``) is :class:`Observed`. Without it (thought-action parsing, no entry of
the session has ``tool_calls``) the parsed ``action`` is the call: one tool call ``bash`` with
``{"command": action}`` and id ``action-<record index>`` (SWE-agent runs it in its shell; the
model's output is kept whole as the message text), and the next user entry is its observation.
An assistant or tool entry of a demonstration (``is_demo``) is :class:`Unmapped`: an example
shown to the model, not a call this run made, and items have no way to put an assistant message
into the history without a call. Anything else that is not a chat message is Unmapped too.

Usage. SWE-agent records only the run's totals (``info.model_stats``: tokens sent and
received, cost, calls). Once the run has ended (``info.exit_status`` is set), those totals are
the usage of the session's last answer, so the episode's totals equal the file's; every other
answer has no usage (no per-call numbers are invented). While the run is still going nothing
is put anywhere but ``Source.extra``. ``api_calls`` may exceed the answers: calls whose output
was rejected and asked again are not in the history, but their tokens are in the totals.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict, bash_call, openai_call
from agentrunner.imports.files import session_id, whole_json
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Emit,
    Item,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
    text_of,
)
from agentrunner.imports.swe_agent_steps import (
    Step,
    function_calling,
    is_demo,
    role_of,
    run_records,
)
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, OpaquePart

NAME = "swe-agent"
APPENDS = False
AGENT = "swe-agent"
_SHAPE = re.compile(r'\{\s*"(trajectory|history|environment|attempts)"\s*:')
_ENTRY_MARKS = ('"message_type"', '"tool_call_ids"', '"execution_time"', '"is_demo"', '"thought"')
_FIRST_STEP = re.compile(
    r'"trajectory"\s*:\s*\[\s*\{\s*"(action|observation|response|thought|state|query)"\s*:'
)


def sniff(path: Path, head: str) -> bool:
    text = head.lstrip()
    if not _SHAPE.match(text):
        return False
    return any(mark in text for mark in _ENTRY_MARKS) or bool(_FIRST_STEP.search(text))


def records(path: Path, *, live: bool) -> list[Any]:
    """Every session's history entries with the steps they lack, in order (``live`` changes
    nothing: a ``.traj`` file is rewritten whole)."""
    return [entry for run in _runs(whole_json(path), path) for entry in run_records(run)]


def parser(path: Path) -> SweAgentParser:
    return SweAgentParser(path, whole_json(path))


def _runs(data: Any, path: Path) -> list[dict[str, Any]]:
    """The file's runs: its attempts, or the file itself."""
    if isinstance(data, dict):
        attempts = data.get("attempts")
        runs = attempts if isinstance(attempts, list) and attempts else [data]
        if all(isinstance(r, dict) and isinstance(r.get("history"), list) for r in runs):
            return runs
    raise ValueError(f"{path}: not a SWE-agent trajectory (no history list)")


@dataclass
class _Session:
    key: str
    start: int
    source: Source
    function_calling: bool
    last_answer: int | None
    totals: AgentUsage
    begun: bool = False
    pending: dict[str, str] = field(default_factory=dict)
    """Tool calls of the last answer still waiting for their result: id -> name."""


class SweAgentParser:
    """A trajectory's history entries, in order, into items of their sessions."""

    def __init__(self, path: Path, data: Any) -> None:
        runs = _runs(data, path)
        several = len(runs) > 1 or "attempts" in data
        self.sessions: list[_Session] = []
        start = 0
        for n, run in enumerate(runs):
            fed = run_records(run)
            source = _source(
                path, run, data if n == 0 and several else None, n if several else None
            )
            answers = [i for i, e in enumerate(fed) if _answers(e)]
            self.sessions.append(
                _Session(
                    key=f"attempt-{n}" if n else "",
                    start=start,
                    source=source,
                    function_calling=function_calling(run["history"]),
                    last_answer=start + answers[-1] if answers else None,
                    totals=_totals(run.get("info")),
                )
            )
            start += len(fed)
        self.starts = [s.start for s in self.sessions]

    def feed(self, index: int, record: Any) -> list[Emit]:
        session = self.sessions[max(bisect_right(self.starts, index) - 1, 0)]
        out: list[Emit] = []
        if not session.begun:
            session.begun = True
            out.append((session.key, Begin(session.source)))
        out.extend((session.key, item) for item in self._items(session, index, record))
        return out

    def finish(self) -> list[Emit]:
        """Sessions with no entries still begin (their episode records the run's info)."""
        out: list[Emit] = []
        for session in self.sessions:
            if not session.begun:
                session.begun = True
                out.append((session.key, Begin(session.source)))
        return out

    def _items(self, session: _Session, index: int, entry: Any) -> list[Item]:
        if isinstance(entry, Step):
            return self._step(session, index, entry)
        role = role_of(entry)
        if role is None:
            return [Unmapped(entry, "not a chat message (it has no role)")]
        text = text_of(entry.get("content"))
        if is_demo(entry) and role in ("assistant", "tool"):
            return [Unmapped(entry, f"a demonstration's {role} message, not a call of this run")]
        match role:
            case "system":
                return [Said("system", text)]
            case "user":
                if session.pending and not session.function_calling and not is_demo(entry):
                    call, name = next(iter(session.pending.items()))
                    del session.pending[call]
                    return [Observed(call, name, text)]
                return [Said("user", text)]
            case "assistant":
                return self._call(session, index, entry, text)
            case "tool":
                ids = entry.get("tool_call_ids")
                for call in ids if isinstance(ids, list) else []:
                    if call in session.pending:
                        return [Observed(call, session.pending.pop(call), text)]
                return [Unmapped(entry, "a tool result for no tool call of this trajectory")]
        return [Unmapped(entry, f"a message of role {role!r}, which no history holds")]

    def _step(self, session: _Session, index: int, record: Step) -> list[Item]:
        """A step the history lacks (its answer, its call and its result), or the result
        of the history's answer just before it."""
        result = record.step.get("observation")
        if not record.whole:
            if not session.pending:
                return [Unmapped(record, "a step's result for no open call")]
            call, name = next(iter(session.pending.items()))
            del session.pending[call]
            return [Observed(call, name, text_of(result))]
        action = _action(index, record.step.get("action"))
        calls = (action,) if action else ()
        text = text_of(record.step.get("response"))
        items = self._answer(session, index, text, calls, real=False, blocks=[])
        session.pending = {}
        if calls and result is not None:
            items.append(Observed(calls[0].call_id, calls[0].name, text_of(result)))
        return items

    def _call(self, session: _Session, index: int, entry: dict[str, Any], text: str) -> list[Item]:
        made = entry.get("tool_calls")
        if session.function_calling:
            calls = tuple(
                openai_call(c, f"tool-{index}-{k}")
                for k, c in enumerate(made if isinstance(made, list) else [])
            )
        else:
            action = _action(index, entry.get("action"))
            calls = (action,) if action else ()
        blocks = entry.get("thinking_blocks")
        blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
        return self._answer(
            session, index, text, calls, real=session.function_calling, blocks=blocks
        )

    def _answer(
        self,
        session: _Session,
        index: int,
        text: str,
        calls: tuple[AgentToolCall, ...],
        *,
        real: bool,
        blocks: list[dict[str, Any]],
    ) -> list[Item]:
        """One model call: its output ``text``, its tool ``calls`` (``real``: as the model
        wrote them, streamed as tool arguments) and its thinking ``blocks``."""
        call = f"call-{index}"
        thinking = [b["thinking"] for b in blocks if isinstance(b.get("thinking"), str)]
        model = session.source.model
        turn = AgentTurn(
            message=text,
            reasoning="\n".join(thinking) or None,
            tool_calls=calls,
            usage=session.totals if index == session.last_answer else AgentUsage(),
            model=model,
            opaque=tuple(
                OpaquePart(provider="anthropic", type=str(b.get("type", "thinking")), data=b)
                for b in blocks
            ),
        )
        session.pending = {c.call_id: c.name for c in calls}
        pieces = [Piece(call, "reasoning", turn.reasoning)] if turn.reasoning else []
        if text:
            pieces.append(Piece(call, "text", text))
        if real:
            pieces.extend(Piece(call, "tool_args", c.arguments, c.call_id) for c in calls)
        return [Ask(call, model), *pieces, Answer(call, turn)]


def _action(index: int, action: Any) -> AgentToolCall | None:
    """A parsed action as the command SWE-agent ran in its shell (None when there is none)."""
    has_action = isinstance(action, str) and action.strip()
    return bash_call(f"action-{index}", str(action)) if has_action else None


def _answers(record: Any) -> bool:
    """Whether a record is a model answer of the run."""
    if isinstance(record, Step):
        return record.whole
    return role_of(record) == "assistant" and not is_demo(record)


def _totals(info: Any) -> AgentUsage:
    """A finished run's totals as one usage (empty while the run goes on; the importer prices
    it when SWE-agent knew no cost)."""
    info = info if isinstance(info, dict) else {}
    stats = info.get("model_stats")
    if not info.get("exit_status") or not isinstance(stats, dict):
        return AgentUsage()
    sent, received, cost = (
        stats.get(k) for k in ("tokens_sent", "tokens_received", "instance_cost")
    )
    usage = AgentUsage(
        input_tokens=sent if isinstance(sent, int) else 0,
        output_tokens=received if isinstance(received, int) else 0,
    )
    if not isinstance(cost, int | float) or cost == 0:
        return usage  # SWE-agent writes 0 for a cost it did not know
    return usage.model_copy(
        update={"cost_usd": float(cost), "price_source": "SWE-agent model_stats (run totals)"}
    )


def _config(value: Any) -> dict[str, Any]:
    """``replay_config``, which SWE-agent writes as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {"raw": value}
    return value if isinstance(value, dict) else {}


def _source(path: Path, run: dict[str, Any], whole: Any, attempt: int | None) -> Source:
    info = as_dict(run.get("info"))
    config = _config(run.get("replay_config"))
    model = as_dict(as_dict(config.get("agent")).get("model")).get("name")
    problem = config.get("problem_statement")
    instance = problem.get("id") if isinstance(problem, dict) else None
    name = instance if isinstance(instance, str) and instance else path.name.removesuffix(".traj")
    steps = [
        {k: v for k, v in step.items() if k in ("execution_time", "state", "extra_info")}
        for step in run.get("trajectory", [])
        if isinstance(step, dict)
    ]
    state = steps[0].get("state") if steps else None
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except json.JSONDecodeError:
            state = None
    cwd = state.get("working_dir") if isinstance(state, dict) else None
    extra: dict[str, Any] = {
        "info": info,
        "replay_config": config,
        "environment": run.get("environment"),
        "steps": steps,
    }
    if attempt is not None:
        extra["attempt"] = attempt
        name = f"{name}/attempt-{attempt}"
    if isinstance(whole, dict) and isinstance(whole.get("info"), dict):
        extra["retry_info"] = whole["info"]  # the RetryAgent's own info (reviews, totals)
    version = info.get("swe_agent_version")
    return Source(
        format=NAME,
        path=str(path),
        session_id=session_id(name, path),
        agent=AGENT,
        agent_version=version if isinstance(version, str) else None,
        model=model if isinstance(model, str) else None,
        cwd=cwd if isinstance(cwd, str) else None,
        title=name,
        extra=extra,
    )
