"""Which records a SWE-agent run is read as: its history entries, with the executed steps of
its ``trajectory`` that the history lacks put in where they ran (see :mod:`.swe_agent`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrunner.imports.chat import as_dict
from agentrunner.imports.items import text_of


@dataclass(frozen=True)
class Step:
    """A ``trajectory`` step fed as a record: one the history lacks (``whole``: its output,
    action and observation), or only the result of one whose answer the history holds."""

    number: int
    step: dict[str, Any]
    whole: bool


def run_records(run: dict[str, Any]) -> list[Any]:
    """A run's history entries with the executed steps of its trajectory that they lack."""
    history: list[Any] = run["history"]
    raw = run.get("trajectory")
    steps = (
        [(n, s) for n, s in enumerate(raw) if isinstance(s, dict)] if isinstance(raw, list) else []
    )
    answers = [i for i, e in enumerate(history) if role_of(e) == "assistant" and not is_demo(e)]
    calling = function_calling(history)
    before: dict[int, list[Step]] = {}  # history index -> the unmatched steps fed before it
    after: dict[int, Step] = {}  # an answer's history index -> its result from its step
    waiting: list[Step] = []
    free = 0
    for n, step in steps:
        at = next((k for k in range(free, len(answers)) if _same(step, history[answers[k]])), None)
        if at is None:
            waiting.append(Step(n, step, whole=True))
            continue
        free, answer = at + 1, answers[at]
        before[answer], waiting = waiting, []
        result = step.get("observation")
        if isinstance(result, str) and not _has_result(history, answer, calling):
            after[answer] = Step(n, step, whole=False)
    out: list[Any] = []
    for i, entry in enumerate(history):
        out.extend(before.get(i, ()))
        out.append(entry)
        if i in after:
            out.append(after[i])
    return out + waiting


def _same(step: dict[str, Any], entry: dict[str, Any]) -> bool:
    """A trajectory step and a history answer are one model output: same action, and the
    step's response is the entry's content or its thought the entry's."""
    action = entry.get("action")
    if not isinstance(action, str) or step.get("action") != action:
        return False
    thought = entry.get("thought")
    return step.get("response") == text_of(entry.get("content")) or (
        isinstance(thought, str) and step.get("thought") == thought
    )


def _has_result(history: list[Any], answer: int, calling: bool) -> bool:
    """Whether the history holds the result of the answer at ``answer`` (``calling``: the
    run used function calling)."""
    later = history[answer + 1 :]
    if not calling:
        return bool(later) and role_of(later[0]) == "user" and not is_demo(later[0])
    calls = history[answer].get("tool_calls")
    made = {as_dict(c).get("id") for c in calls} if isinstance(calls, list) else set()
    for entry in later:
        if role_of(entry) == "assistant":
            return False
        ids = entry.get("tool_call_ids") if role_of(entry) == "tool" else None
        if isinstance(ids, list) and made & set(ids):
            return True
    return False


def function_calling(history: list[Any]) -> bool:
    """Whether a run used function calling (an entry has ``tool_calls``)."""
    return any(isinstance(e, dict) and e.get("tool_calls") for e in history)


def role_of(entry: Any) -> str | None:
    value = entry.get("role") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def is_demo(entry: Any) -> bool:
    return isinstance(entry, dict) and bool(entry.get("is_demo"))
