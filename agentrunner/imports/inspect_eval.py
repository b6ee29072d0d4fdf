"""Read Inspect AI evaluation logs (``.eval`` files, and ``.json`` ones) into import items.

The layout, as inspect-ai 0.3.285 writes it: a zip archive (:mod:`.eval_zip`) holding
``header.json`` (the eval's spec: ``eval.task``, ``eval.model``, ``eval.task_id``; its plan,
results and stats; written when the eval ends, ``_journal/start.json`` holding the spec before),
one ``samples/<id>_epoch_<n>.json`` per sample and epoch (``messages``: the conversation as it
ended; ``events``: what happened, ``model`` events among them with each call's ``output`` and
``usage``; ``scores``; ``error``; ``attachments``: long texts that messages and events name as
``attachment://<hash>``), and ``summaries.json``, ``reductions.json`` and ``_journal/*``, which
repeat what the samples hold (not read). A log is rewritten whole, never appended to. A log
written with ``--log-format json`` is one JSON object of the same parts (``eval``, ...,
``samples``).

Mapping. Each sample epoch is one session. Its ``system`` and ``user`` messages are
:class:`Said`; each ``assistant`` message is one model call (``Ask``, its reasoning, text and
tool arguments as ``Piece``s, ``Answer`` with its tool calls), timed and with the usage of the
``model`` event whose output is that message (none: unknown usage); ``tool`` messages are
:class:`Observed`. Inspect's ``input_tokens`` leave out cached ones, which are added back
(agentrunner's input counts them). The sample's ``error`` is a :class:`Failure`. The first
scorer's score is the episode's reward (``episode.end``): a number as it is, a boolean as 1/0,
Inspect's ``"C"``/``"I"``/``"P"``/``"N"`` (correct, incorrect, partial, no answer) as 1/0/0.5/0
(as Inspect's own ``value_to_float`` reads them); any other value leaves the episode unjudged
(all scores are kept in the session's source). Every other event (spans, state and store
changes, scoring, a model call whose answer is not among the messages) and a message of any
other role is kept raw (:class:`Unmapped`).

The records are ``{"entry": name, "value": parsed JSON}``: the eval's spec first, then the
samples in the archive's order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict, is_number
from agentrunner.imports.eval_zip import entries
from agentrunner.imports.files import session_id, whole_json
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Emit,
    Ended,
    Failure,
    Item,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
)
from agentrunner.values.events import StopReason
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage

NAME = "inspect-eval"
APPENDS = False
AGENT = "inspect-ai"
SPEC_ENTRIES = ("header.json", "_journal/start.json")
SAMPLES = "samples/"
LETTER_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
MAPPED_EVENTS = ("model", "tool")
"""Event kinds the messages already carry (a tool event's result is its tool message)."""
ATTACHMENT = "attachment://"
JSON_LOG = re.compile(r'\{\s*"version":\s*\d+,\s*"status":\s*"\w+",\s*"eval":\s*\{')
"""How a log written as JSON (``--log-format json``) begins."""


def sniff(path: Path, head: str) -> bool:
    if path.name.endswith(".eval"):
        return head.startswith("PK\x03\x04")
    return path.name.endswith(".json") and bool(JSON_LOG.match(head))


def records(path: Path, *, live: bool) -> list[Any]:
    if not path.name.endswith(".eval"):
        return _json_log_records(path)
    found = entries(path, lambda name: name in SPEC_ENTRIES or name.startswith(SAMPLES))
    spec = next((name for name in SPEC_ENTRIES if name in found), None)
    if spec is None:
        raise ValueError("no header.json or _journal/start.json in it: not an Inspect log")
    samples = [name for name in found if name.startswith(SAMPLES)]
    return [{"entry": name, "value": found[name]} for name in [spec, *samples]]


def _json_log_records(path: Path) -> list[Any]:
    """The records of a log written with ``--log-format json``: one JSON object holding the
    spec (``eval``) and the ``samples``, named here as the ``.eval`` layout names them."""
    log = as_dict(whole_json(path))
    if "eval" not in log:
        raise ValueError("no 'eval' in it: not an Inspect log")
    samples = [as_dict(s) for s in log.get("samples") or []]
    header = {k: v for k, v in log.items() if k != "samples"}
    return [
        {"entry": "header.json", "value": header},
        *(
            {"entry": f"{SAMPLES}{s.get('id')}_epoch_{s.get('epoch')}.json", "value": s}
            for s in samples
        ),
    ]


def parser(path: Path) -> InspectEvalParser:
    return InspectEvalParser(path)


def usage_of(output: Any) -> AgentUsage:
    """A model call's usage from its output's ``usage`` (unknown when it has none)."""
    usage = as_dict(as_dict(output).get("usage"))
    if not is_number(usage.get("input_tokens")):
        return AgentUsage.unknown()

    def count(key: str) -> int | None:
        value = _number(usage.get(key))
        return None if value is None else int(value)

    read, written = count("input_tokens_cache_read"), count("input_tokens_cache_write")
    counted = AgentUsage(
        input_tokens=(count("input_tokens") or 0) + (read or 0) + (written or 0),
        output_tokens=count("output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=written,
        reasoning_tokens=count("reasoning_tokens"),
    )
    cost = _number(usage.get("total_cost"))
    if cost is None:
        return counted
    return counted.model_copy(
        update={"cost_usd": cost, "price_source": "recorded in the Inspect log"}
    )


def reward_of(value: Any) -> float | None:
    """A score's value as a reward (None: not one; see the module's docstring)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        return LETTER_SCORES.get(value)
    return _number(value)


class InspectEvalParser:
    """One log's records into items, one session per sample epoch (key: its entry's name)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.spec: dict[str, Any] = {}

    def feed(self, index: int, record: Any) -> list[Emit]:
        entry, value = str(as_dict(record).get("entry")), as_dict(as_dict(record).get("value"))
        if not entry.startswith(SAMPLES):
            self.spec = as_dict(value.get("eval"))
            return []
        return [(entry, item) for item in SampleReader(self.path, self.spec, entry, value).items()]

    def finish(self) -> list[Emit]:
        return []


class SampleReader:
    """One sample epoch's items."""

    def __init__(self, path: Path, spec: dict[str, Any], entry: str, sample: dict[str, Any]):
        self.path, self.spec, self.entry, self.sample = path, spec, entry, sample
        self.attachments = as_dict(sample.get("attachments"))
        events = [as_dict(e) for e in sample.get("events") or []]
        self.events = events
        self.calls = {_answer_id(e): e for e in events if e.get("event") == "model"}
        self.tools = {str(e.get("id")): e for e in events if e.get("event") == "tool"}
        self.now = _text(sample.get("started_at"))

    def items(self) -> list[Item]:
        out: list[Item] = [Begin(self._source(), self.now)]
        answered: set[str] = set()
        for message in self.sample.get("messages") or []:
            out.extend(self._message(as_dict(message), answered))
        for event in self.events:
            if event.get("event") not in MAPPED_EVENTS or (
                event.get("event") == "model" and _answer_id(event) not in answered
            ):
                out.append(self._raw_event(event))
        error = as_dict(self.sample.get("error"))
        if error:
            message = self._resolve(str(error.get("message", "")))
            out.append(Failure("inspect-ai", "sample error", message, self.now))
        stop = StopReason.ERROR if error else StopReason.DONE
        ended = _text(self.sample.get("completed_at")) or self.now
        out.append(Ended(stop, self._reward(), ended))
        return out

    def _raw_event(self, event: dict[str, Any]) -> Unmapped:
        kind = event.get("event")
        if kind == "model":
            why = "a model call whose answer is not in the sample's messages (a scorer's, say)"
        else:
            why = f"an Inspect {kind!r} event, which the model is not sent"
        return Unmapped(event, why, _text(event.get("timestamp")))

    def _source(self) -> Source:
        spec = self.spec
        packages = as_dict(spec.get("packages"))
        sample_id, epoch = self.sample.get("id"), self.sample.get("epoch")
        name = f"{spec.get('task_id') or spec.get('task')}/{sample_id}/epoch-{epoch}"
        keys = ("task", "task_id", "task_version", "run_id", "eval_id", "model", "model_args")
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=session_id(name, self.path),
            agent=AGENT,
            agent_version=_text(packages.get("inspect_ai")),
            model=_text(spec.get("model")),
            title=_text(spec.get("task")),
            extra={
                **{key: spec[key] for key in keys if key in spec},
                "model_generate_config": spec.get("model_generate_config"),
                "entry": self.entry,
                "sample_id": sample_id,
                "epoch": epoch,
                "target": self.sample.get("target"),
                "scores": self.sample.get("scores"),
            },
        )

    def _reward(self) -> float | None:
        scores = as_dict(self.sample.get("scores"))
        first = next(iter(scores.values()), None)
        return reward_of(as_dict(first).get("value")) if first is not None else None

    def _message(self, message: dict[str, Any], answered: set[str]) -> list[Item]:
        role = message.get("role")
        if role in ("system", "user"):
            return [Said("system" if role == "system" else "user", self._content(message)[0])]
        if role == "assistant":
            answered.add(str(message.get("id")))
            return self._answer(message)
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            done = as_dict(self.tools.get(call_id))
            self.now = _text(done.get("completed")) or self.now
            error = as_dict(message.get("error"))
            said = self._resolve(str(error.get("message", ""))) if error else None
            name = str(message.get("function") or done.get("function") or "unknown")
            return [Observed(call_id, name, self._content(message)[0], said, self.now)]
        return [Unmapped(message, f"a message of role {role!r}, which no importer maps")]

    def _answer(self, message: dict[str, Any]) -> list[Item]:
        call = str(message.get("id"))
        event = as_dict(self.calls.get(call))
        asked = _text(event.get("timestamp")) or self.now
        self.now = _text(event.get("completed")) or asked
        output = as_dict(event.get("output"))
        text, reasoning = self._content(message)
        calls = tuple(
            AgentToolCall(
                call_id=str(c.get("id")),
                name=str(c.get("function") or "unknown"),
                arguments=json.dumps(c.get("arguments"), ensure_ascii=False, sort_keys=True),
            )
            for c in map(as_dict, message.get("tool_calls") or [])
        )
        model = _text(message.get("model")) or _text(output.get("model"))
        turn = AgentTurn(
            message=text,
            reasoning=reasoning or None,
            tool_calls=calls,
            usage=usage_of(output) if event else AgentUsage.unknown(),
            model=model,
        )
        pieces = [Piece(call, "reasoning", reasoning)] if reasoning else []
        if text:
            pieces.append(Piece(call, "text", text))
        pieces.extend(Piece(call, "tool_args", c.arguments, c.call_id) for c in calls)
        return [
            Ask(call, model, asked),
            *pieces,
            Answer(call, turn, self.now, _number(output.get("time"))),
        ]

    def _content(self, message: dict[str, Any]) -> tuple[str, str]:
        """A message's text and reasoning (Inspect's content: a string or a list of parts)."""
        content = message.get("content")
        if isinstance(content, str):
            return self._resolve(content), ""
        texts, thoughts = [], []
        for part in map(as_dict, content if isinstance(content, list) else []):
            if part.get("type") == "reasoning":
                thoughts.append(self._resolve(str(part.get("reasoning") or part.get("summary"))))
            elif isinstance(part.get("text"), str):
                texts.append(self._resolve(part["text"]))
            else:
                texts.append(f"[{part.get('type', 'content')}]")
        return "\n".join(texts), "\n\n".join(thoughts)

    def _resolve(self, text: str) -> str:
        """A text Inspect moved to the sample's attachments, put back."""
        if text.startswith(ATTACHMENT):
            found = self.attachments.get(text.removeprefix(ATTACHMENT))
            return found if isinstance(found, str) else text
        return text


def _answer_id(event: dict[str, Any]) -> str:
    """The id of the message a model event answered with."""
    choices = as_dict(event.get("output")).get("choices") or [{}]
    return str(as_dict(as_dict(choices[0]).get("message")).get("id"))


def _number(value: Any) -> float | None:
    return float(value) if is_number(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
