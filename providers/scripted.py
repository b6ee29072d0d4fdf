"""The scripted model: an offline, deterministic model driven by a script file.

A script is JSON: ``{"name": ..., "episodes": [{"match": "text in the task prompt",
"turns": [{"reasoning": ..., "text": ..., "tool_calls": [{"name": ..., "arguments":
{...} | "raw string"}]}, ...]}]}``. The next turn is a pure function of the request:
the episode whose ``match`` occurs in the first user message, and the script turn numbered
by the request's turn (``context.turn``: a compacted history, which holds fewer assistant
messages, goes on where it was). Tool-call ids are derived from that number, so equal
requests give equal turns. Past the end of its script the model calls ``submit()``; a
prompt that no episode's ``match`` occurs in gets a one-line warning on stderr, then that
``submit()`` at once. A turn may instead list ``"alternatives"`` (turns): a decision
point's sample ``i`` plays alternative ``i`` (modulo their number), any other call the
first. A turn's ``"usage"`` (``{"input_tokens": N, ...}``) replaces the counts the model
reports for it; by default it counts about four characters a token of what it was sent. A
compaction call (``context.purpose``) is answered with the episode's ``"summary"`` text
when it has one, else a summary of what it was sent: how many messages of each role, the
tools called, the last message.

A bundled script is named (``scripted:demo``); any other is a ``.json`` path, and its content
is recorded with the episode (``spec()["options"]["script"]``), so ``resume`` and ``fork``
play the same script from any folder, even once the file has changed or gone.

Turns stream like a real provider: reasoning, then text, then each tool call's arguments, in
small chunks with a short pause (``pace`` seconds per chunk; ``AGENTRUNNER_SCRIPTED_PACE``
or ``pace=0`` turns pacing off).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentrunner.values.errors import UsageError
from agentrunner.values.events import COMPACTION
from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, Channel, Message

SCRIPTS = Path(__file__).parent / "scripts"
DEFAULT_PACE_S = 0.03
FIRST_TOKEN_DELAY = 8  # a turn's first chunk waits this many chunk-paces ("thinking")
CHUNK_CHARS = 16
_FINAL_TURN: dict[str, Any] = {
    "text": "I have nothing left to try; submitting.",
    "tool_calls": [{"name": "submit", "arguments": {}}],
}


def _chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Split text into word-aligned pieces of about ``size`` characters (joined: ``text``)."""
    out: list[str] = []
    current = ""
    for token in re.findall(r"\s*\S+|\s+", text):
        if current and len(current) + len(token) > size:
            out.append(current)
            current = ""
        current += token
    if current:
        out.append(current)
    return out


def _is_file(name: str) -> bool:
    """A script given as a path (``fix.json``), not a bundled one by name (``demo``)."""
    return name.endswith(".json")


def _load_script(name: str) -> dict[str, Any]:
    path = Path(name) if _is_file(name) else SCRIPTS / f"{name}.json"
    try:
        script: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in SCRIPTS.glob("*.json")))
        raise UsageError(
            f"no script {name!r} for the scripted model (bundled: {known}; or give a .json path)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read script {path}: {exc}") from None
    return _checked(script, str(path))


def _checked(script: Any, where: str) -> dict[str, Any]:
    if not isinstance(script, dict) or not isinstance(script.get("episodes"), list):
        raise UsageError(f"script {where} has no 'episodes' list")
    return script


class ScriptedModel:
    """Plays a script back as a streaming model."""

    provider = "scripted"

    def __init__(
        self, name: str, *, pace: float | None = None, script: dict[str, Any] | None = None
    ) -> None:
        """``script``: the script's content as recorded (then ``name`` is not read again)."""
        self.model = name
        self.script = _load_script(name) if script is None else _checked(script, name)
        self._warned: set[str] = set()
        if pace is None:
            pace = float(os.environ.get("AGENTRUNNER_SCRIPTED_PACE", DEFAULT_PACE_S))
        self.pace = max(0.0, pace)
        self.params: dict[str, Any] = {}

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "spec": f"scripted:{self.model}",
            "provider": "scripted",
            "model": self.model,
        }
        if _is_file(self.model):  # a path is relative to a folder: keep what it held
            spec["options"] = {"script": self.script}
        return spec

    def _episode_for(self, context: AgentContext) -> dict[str, Any]:
        """The script's episode for this conversation (empty when none matches its task)."""
        prompt = next((m.content for m in context.messages if m.role == "user"), "")
        for episode in self.script["episodes"]:
            if episode.get("match", "") in prompt:
                return dict(episode)
        if prompt not in self._warned:
            self._warned.add(prompt)
            sys.stderr.write(
                f"warning: the task prompt contains no 'match' text of script {self.model}"
                " (its episodes: " + ", ".join(self._matches()) + "); the scripted model "
                "submits at once\n"
            )
        return {}

    def _matches(self) -> list[str]:
        """The first few episodes' ``match`` texts, quoted (what the warning names)."""
        episodes = self.script["episodes"]
        shown = [json.dumps(e.get("match", ""), ensure_ascii=False) for e in episodes[:3]]
        return shown + (["…"] if len(episodes) > 3 else [])

    def _sleep(self, context: AgentContext, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            context.check_cancel()
            time.sleep(min(left, 0.05))

    def _stream(
        self, context: AgentContext, channel: Channel, text: str, call_id: str | None = None
    ) -> None:
        for piece in _chunks(text):
            if self.pace:
                self._sleep(context, self.pace)
            context.emit(channel, piece, call_id)

    def __call__(self, context: AgentContext) -> AgentTurn:
        if context.purpose == COMPACTION:
            return self._summarize(context)
        index = max(context.turn - 1, 0)
        turns: list[dict[str, Any]] = self._episode_for(context).get("turns", [])
        step = turns[index] if index < len(turns) else _FINAL_TURN
        options = step.get("alternatives")
        if isinstance(options, list) and options:  # sample i of a decision point plays i
            step = options[(context.sample or 0) % len(options)]
        if self.pace:
            self._sleep(context, self.pace * FIRST_TOKEN_DELAY)
        reasoning = str(step.get("reasoning") or "") or None
        text = str(step.get("text") or "")
        if reasoning:
            self._stream(context, "reasoning", reasoning)
        if text:
            self._stream(context, "text", text)
        calls: list[AgentToolCall] = []
        for i, call in enumerate(step.get("tool_calls", [])):
            args = call.get("arguments", {})
            raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            call_id = f"call_{index + 1:03d}_{i}"
            self._stream(context, "tool_args", raw, call_id)
            calls.append(AgentToolCall(call_id=call_id, name=call["name"], arguments=raw))
        out_chars = len(text) + len(reasoning or "") + sum(len(c.arguments) for c in calls)
        usage = _usage(context, out_chars, len(reasoning or ""))
        declared = step.get("usage")
        if isinstance(declared, dict):
            usage = AgentUsage.model_validate({**usage.model_dump(), **declared})
        return AgentTurn(
            reasoning=reasoning,
            message=text,
            tool_calls=tuple(calls),
            usage=usage,
            provider="scripted",
            model=self.model,
            provider_request_id=f"scripted-{index + 1}",
            stop_reason="tool_use" if calls else "end_turn",
        )

    def _summarize(self, context: AgentContext) -> AgentTurn:
        """A compaction call's answer: a summary made from the messages it was sent."""
        if self.pace:
            self._sleep(context, self.pace * FIRST_TOKEN_DELAY)
        text = str(self._episode_for(context).get("summary") or summary_of(context.messages))
        self._stream(context, "text", text)
        return AgentTurn(
            message=text,
            usage=_usage(context, len(text), 0),
            provider="scripted",
            model=self.model,
            provider_request_id=f"scripted-compaction-{context.turn}",
            stop_reason="end_turn",
        )


def _usage(context: AgentContext, out_chars: int, reasoning_chars: int) -> AgentUsage:
    """What the model reports as counted: about four characters a token of what it was sent
    (its messages' text and reasoning) and of what it answered."""
    seen = sum(len(m.content) + len(m.reasoning or "") for m in context.messages)
    return AgentUsage(
        input_tokens=seen // 4 + 40,
        output_tokens=out_chars // 4 + 1,
        reasoning_tokens=reasoning_chars // 4,
        cost_usd=0.0,
        price_source="scripted (free)",
    )


def summary_of(messages: list[Message]) -> str:
    """A deterministic summary of ``messages`` (the last one, the request to summarize, not
    counted): how many of each role, the tools called, and the last message before it."""
    summarized = messages[:-1]
    roles = Counter(m.role for m in summarized)
    tools = Counter(c.name for m in summarized for c in m.tool_calls)
    last = next((m.content for m in reversed(summarized) if m.content), "")
    return (
        f"Summary of {len(summarized)} messages ("
        + ", ".join(f"{n} {role}" for role, n in sorted(roles.items()))
        + "); tools called: "
        + (", ".join(f"{name} x{n}" for name, n in sorted(tools.items())) or "none")
        + f". Last: {last[:200]}"
    )


def create(name: str, **options: Any) -> ScriptedModel:
    return ScriptedModel(name, **options)
