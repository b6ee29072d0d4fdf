"""Read mini-swe-agent trajectories (``*.traj.json``) into import items.

Three shapes are read: ``trajectory_format: "mini-swe-agent-1"`` (v1: ``info`` and
``messages``, an assistant's raw API response in ``extra.response``), ``"mini-swe-agent-1.1"``
(v2: parsed ``extra.actions``, ``extra.cost``, ``extra.timestamp``, toolcall models' ``tool_calls``
and ``role: "tool"`` messages, a final ``role: "exit"`` message; the Responses-API models save
each answer as the whole response object, ``{"object": "response", "output": [...]}``, and each
result as a ``function_call_output`` item) and the legacy bare list of messages. The records
fed are the messages; ``info`` and the rest of the file go to :class:`Source` (``extra``: exit
status, submission, model stats, config with secret-looking values masked by the importer,
format, ``price_provider: openrouter`` for OpenRouter models).

Mapping. A system message, and a user message that answers no tool call (the task, a format
error, a limit notice), is :class:`Said`. Each assistant message is one model call: ``Ask``,
``Piece``s (reasoning, text, and the arguments of real tool calls) and ``Answer``. In the
text-based shapes the bash block *is* the action, so it becomes one tool call named ``bash``
with arguments ``{"command": ...}`` and id ``bash-<record index>`` (``-<k>`` after the first of
several ``extra.actions``); the model's output text is kept whole as the message text (the block
is not cut out of it, and no ``tool_args`` piece repeats it). The user message that follows,
carrying the ``<returncode>``/``<output>`` observation (or the timeout notice, or v1's final
submission output), is :class:`Observed` for that call. The block is found as the run found it:
the configured ``action_regex`` when the config has one, else v1's ``bash`` fence, then v2's
``mswea_bash_command`` fence or tag; exactly one match makes an action (several or none was a
format error, and the next user message is then ``Said``).

A saved response object is one model call read by :mod:`.responses` (its text, refusal,
reasoning, ``function_call`` items as tool calls, its output items kept as the OpenAI adapter
keeps them); a ``function_call_output`` item is :class:`Observed` for its call.

Usage is per call, from ``extra.response.usage`` (OpenAI chat shape) or a response object's
own ``usage`` (Responses shape) with the cost from ``extra.cost`` (v2) or the usage's ``cost``
(OpenRouter); a call without a known cost (none recorded, or 0) is priced by the importer
(:mod:`.pricing`), and stays unknown when its model has no price.
``info.model_stats`` (v1 and v2 hold only the total cost and the number of calls, no tokens)
stays in ``Source.extra``: nothing is spread over the calls. A v2 format error keeps the
rejected answer in the error message's ``extra.model_response`` (a Responses-API model, the
whole response in ``extra.response``); it is imported as the call it was (with its usage, and
without tool calls: the function calls of a rejected response are kept raw), so the history
rebuilt for the next call holds that answer, which the run did not resend. The ``exit``
message and any record that is not a chat message are :class:`Unmapped`. A file none of whose
messages is a conversation (a system, user, assistant or tool message, a response object or a
tool result) is refused with a ValueError: it would import as an empty episode.

The session id is the instance id (or a digest alone, for the legacy list) joined to a digest
of the file's resolved path: every run of a benchmark names its instance the same way.

"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict, bash_call, chat_usage, iso_time, openai_call
from agentrunner.imports.files import file_tail, session_id, whole_json
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
from agentrunner.imports.responses import is_response, read_response
from agentrunner.values.types import AgentToolCall, AgentTurn, OpaquePart

NAME = "mini-swe-agent"
APPENDS = False
AGENT = "mini-swe-agent"
ACTION_REGEXES = (
    r"```bash\s*\n(.*?)\n```",
    r"```mswea_bash_command\s*\n(.*?)\n```",
    r"<mswea_bash_command>(.*?)</mswea_bash_command>",
)
_FORMAT = re.compile(r'"trajectory_format"\s*:\s*"mini-swe-agent')
_LEGACY_MARKS = ("<returncode>", "mswea_bash_command", "```bash", "COMPLETE_TASK_AND_SUBMIT")


def sniff(path: Path, head: str) -> bool:
    text = head.lstrip()
    if text.startswith("["):  # the legacy list of messages
        return '"role"' in text and any(mark in text for mark in _LEGACY_MARKS)
    if not text.startswith("{"):
        return False
    if _FORMAT.search(text) or (re.match(r'\{\s*"info"\s*:', text) and '"mini_version"' in text):
        return True
    return bool(_FORMAT.search(file_tail(path)))  # v1 writes its format key last


def records(path: Path, *, live: bool) -> list[Any]:
    """The trajectory's messages (a file is rewritten whole, so ``live`` changes nothing)."""
    return messages_of(whole_json(path), path)


def messages_of(data: Any, path: Path) -> list[Any]:
    """The trajectory's messages; a ValueError when it has none that make a conversation."""
    if isinstance(data, list):
        messages = data
    elif isinstance(data, dict) and isinstance(data.get("messages"), list):
        messages = list(data["messages"])
    else:
        raise ValueError(f"{path}: not a mini-swe-agent trajectory (no list of messages)")
    if not any(_converses(m) for m in messages):
        raise ValueError(
            f"{path}: the trajectory holds no conversation (none of its {len(messages)}"
            " messages is a system, user, assistant or tool message, a response object or a"
            " function_call_output item); nothing to import"
        )
    return messages


def _converses(record: Any) -> bool:
    """Whether a record is part of the conversation (not the exit marker, not unknown)."""
    if not isinstance(record, dict):
        return False
    return (
        record.get("role") in ("system", "user", "assistant", "tool")
        or is_response(record)
        or record.get("type") == "function_call_output"
    )


def parser(path: Path) -> MiniSweAgentParser:
    data = whole_json(path)
    messages_of(data, path)
    return MiniSweAgentParser(path, data)


class MiniSweAgentParser:
    """One trajectory's messages, in order, into items of its one session."""

    def __init__(self, path: Path, data: Any) -> None:
        self.source = _source(path, data)
        config = as_dict(
            as_dict(data.get("info") if isinstance(data, dict) else None).get("config")
        )
        self.model_type = str(config.get("model_type", ""))
        regexes = [as_dict(config.get(part)).get("action_regex") for part in ("agent", "model")]
        configured = tuple(r for r in regexes if isinstance(r, str) and r)
        self.regexes = configured or ACTION_REGEXES
        self.begun = False
        self.pending: list[tuple[str, str]] = []
        """Tool calls of the last answer still waiting for their result: (id, name)."""
        self.in_text = False
        """Whether those calls were read from the answer's text (their results come back as
        user messages; a toolcall model's come back as tool messages)."""

    def feed(self, index: int, record: Any) -> list[Emit]:
        out: list[Emit] = []
        if not self.begun:
            out.append(("", Begin(self.source)))
            self.begun = True
        out.extend(("", item) for item in self._items(index, record))
        return out

    def finish(self) -> list[Emit]:
        if self.begun:
            return []
        self.begun = True
        return [("", Begin(self.source))]

    def _items(self, index: int, record: Any) -> list[Item]:
        extra = as_dict(record.get("extra")) if isinstance(record, dict) else {}
        ts = iso_time(extra.get("timestamp"))
        if is_response(record):
            return self._response(index, record, extra)
        if isinstance(record, dict) and record.get("type") == "function_call_output":
            return self._result(record, record.get("call_id"), text_of(record.get("output")))
        if not isinstance(record, dict) or not isinstance(record.get("role"), str):
            return [Unmapped(record, "not a chat message (it has no role)")]
        role = record["role"]
        text = text_of(record.get("content"))
        match role:
            case "system":
                return [Said("system", text, ts)]
            case "assistant":
                return self._call(index, record, extra)
            case "user":
                rejected: list[Item] = []
                if is_response(extra.get("response")):  # v2, Responses API: a format error
                    rejected = self._response(index, extra["response"], extra, False)
                elif isinstance(extra.get("model_response"), str):  # v2: a format error
                    rejected = self._call(index, {"content": extra["model_response"]}, extra, False)
                if self.pending and self.in_text:
                    call, name = self.pending.pop(0)
                    error = extra.get("exception_info")
                    return [Observed(call, name, text, str(error) if error else None, ts)]
                return [*rejected, Said("user", text, ts)]
            case "tool":
                return self._result(record, record.get("tool_call_id"), text)
            case "exit":
                return [Unmapped(record, "the run's exit marker (its status is in episode.start)")]
        return [Unmapped(record, f"a message of role {role!r}, which no history holds")]

    def _result(self, record: dict[str, Any], answers: Any, text: str) -> list[Item]:
        """A tool message or ``function_call_output`` item: the result of the pending call
        it names."""
        extra = as_dict(record.get("extra"))
        error = extra.get("exception_info")
        for at, (pending, name) in enumerate(self.pending):
            if pending == answers:
                del self.pending[at]
                ts = iso_time(extra.get("timestamp"))
                return [Observed(pending, name, text, str(error) if error else None, ts)]
        return [Unmapped(record, "a tool result for no tool call of this trajectory")]

    def _response(
        self, index: int, response: dict[str, Any], extra: dict[str, Any], acted: bool = True
    ) -> list[Item]:
        """One model call saved as a whole Responses-API response object (``acted`` False
        for an answer the run rejected)."""
        call = f"call-{index}"
        read = read_response(
            response,
            cost=extra.get("cost"),
            model=self.source.model,
            fallback_id=f"tool-{index}",
            acted=acted,
        )
        turn = read.turn
        self.pending, self.in_text = [(c.call_id, c.name) for c in turn.tool_calls], False
        ts = iso_time(extra.get("timestamp")) or iso_time(response.get("created_at"))
        pieces = [Piece(call, channel, text, tool) for channel, text, tool in read.pieces]
        why = "function calls of a response the run rejected (a format error): not run"
        kept = [Unmapped(read.not_run, why, ts)] if read.not_run else []
        return [Ask(call, turn.model), *pieces, Answer(call, turn, ts), *kept]

    def _call(
        self, index: int, record: dict[str, Any], extra: dict[str, Any], acted: bool = True
    ) -> list[Item]:
        """One model call; ``acted`` False for an answer the run rejected (no actions)."""
        call = f"call-{index}"
        response = as_dict(extra.get("response"))
        choices = response.get("choices")
        choice = as_dict(choices[0]) if isinstance(choices, list) and choices else {}
        said = as_dict(choice.get("message"))
        text = text_of(record.get("content"))
        reasoning = next(
            (
                r
                for r in (
                    record.get("reasoning_content"),
                    said.get("reasoning"),
                    said.get("reasoning_content"),
                )
                if isinstance(r, str) and r
            ),
            None,
        )
        details = said.get("reasoning_details")
        opaque = tuple(
            OpaquePart(provider="openrouter", type=str(d.get("type", "reasoning")), data=d)
            for d in (details if isinstance(details, list) else [])
            if isinstance(d, dict)
        )
        calls, real = self._tool_calls(index, record, extra, text) if acted else ((), False)
        model = response.get("model") if isinstance(response.get("model"), str) else None
        model = model or self.source.model
        used = chat_usage(response.get("usage"), extra.get("cost"))
        turn = AgentTurn(
            message=text,
            reasoning=reasoning,
            tool_calls=calls,
            usage=used,
            model=model,
            provider_request_id=response.get("id") if isinstance(response.get("id"), str) else None,
            stop_reason=choice.get("finish_reason") or None,
            opaque=opaque,
        )
        self.pending, self.in_text = [(c.call_id, c.name) for c in calls], not real
        ts = iso_time(extra.get("timestamp")) or iso_time(response.get("created"))
        pieces = [Piece(call, "reasoning", reasoning)] if reasoning else []
        if text:
            pieces.append(Piece(call, "text", text))
        if real:
            pieces.extend(Piece(call, "tool_args", c.arguments, c.call_id) for c in calls)
        return [Ask(call, turn.model), *pieces, Answer(call, turn, ts)]

    def _tool_calls(
        self, index: int, record: dict[str, Any], extra: dict[str, Any], text: str
    ) -> tuple[tuple[AgentToolCall, ...], bool]:
        """The answer's tool calls, and whether the model made them as tool calls."""
        made = record.get("tool_calls")
        if isinstance(made, list) and made:
            return tuple(openai_call(c, f"tool-{index}-{k}") for k, c in enumerate(made)), True
        actions = extra.get("actions")
        if isinstance(actions, list):
            commands = [str(as_dict(a).get("command", "")) for a in actions]
        else:
            commands = []
            for regex in self.regexes:
                found = re.findall(regex, text, re.DOTALL)
                if found:
                    commands = [found[0].strip()] if len(found) == 1 else []
                    break
        ids = [f"bash-{index}" + (f"-{k}" if k else "") for k in range(len(commands))]
        return tuple(bash_call(i, c) for i, c in zip(ids, commands, strict=True)), False


def _source(path: Path, data: Any) -> Source:
    top = data if isinstance(data, dict) else {}
    info = as_dict(top.get("info"))
    config = as_dict(info.get("config"))
    model_name = as_dict(config.get("model")).get("model_name")
    model = model_name if isinstance(model_name, str) and model_name else None
    instance = top.get("instance_id") if isinstance(top.get("instance_id"), str) else None
    extra: dict[str, Any] = {
        "trajectory_format": top.get("trajectory_format", "legacy list of messages"),
        **{k: v for k, v in top.items() if k not in ("info", "messages", "trajectory_format")},
        **info,
    }
    if "openrouter" in str(config.get("model_type", "")).lower():
        extra["price_provider"] = "openrouter"  # OpenRouter's ids and prices
    version = info.get("mini_version")
    cwd = as_dict(config.get("environment")).get("cwd")
    return Source(
        format=NAME,
        path=str(path),
        session_id=session_id(instance, path),
        agent=AGENT,
        agent_version=version if isinstance(version, str) else None,
        model=model,
        cwd=cwd if isinstance(cwd, str) else None,
        title=instance,
        extra=extra,
    )
