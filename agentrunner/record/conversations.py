"""Which recorded episode a model call belongs to: conversations told apart by their messages.

A request continues the conversation whose last request's messages it extends (its chain
of messages holds that request's last one), within the same client session when the client
names one. Messages are compared as the client means them: marks whose placement moves from
call to call (``cache_control``), and call ids a client invents each run (Gemini's), are left
out of the comparison, never out of the record.
A conversation whose first request ends a user message with the prompt a sub-agent tool call
of another conversation passed (Claude Code's ``Agent``/``Task``, OpenCode's ``task``, Codex's
``spawn_agent``), in the same client session or the session its client names as the parent, is
that call's sub-agent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agentrunner.runtime.recorder import Recorder
from agentrunner.values.hashing import canonical_json
from agentrunner.values.types import Message

SPAWNING_TOOLS = {"Agent": "prompt", "Task": "prompt", "task": "prompt", "spawn_agent": "message"}
"""Sub-agent tools: the argument holding the prompt (Codex's ``spawn_agent`` may pass ``items``
instead: structured input whose text items end the sub-agent's first message)."""
SHORT_PROMPT = 24
"""A sub-agent prompt shorter than this links only a first message that is exactly it."""
DETACHED = frozenset({"spawn_agent"})
"""Sub-agent tools whose result comes back at once (the sub-agent's id) while the sub-agent
works on: their prompt stays open until a conversation takes it, not until the result."""
VOLATILE_KEYS = frozenset({"cache_control"})
INVENTED_IDS = frozenset({"functionCall", "functionResponse"})
"""Gemini parts whose ``id`` a client may invent per run (Gemini CLI stamps the time in it)."""


def normal(value: Any) -> Any:
    """A message's native form without the marks whose placement moves between calls,
    without the call ids a client invents for itself each run, and with a content that is
    one text block read as that text (Claude Code sends a message as a block with a
    ``cache_control`` mark in one call and as a plain string in the next)."""
    if isinstance(value, dict):
        out = {
            k: _without_id(normal(v)) if k in INVENTED_IDS else normal(v)
            for k, v in value.items()
            if k not in VOLATILE_KEYS
        }
        content = out.get("content")
        if (
            isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and set(content[0]) == {"type", "text"}
            and content[0]["type"] == "text"
        ):
            out["content"] = content[0]["text"]
        return out
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def _without_id(value: Any) -> Any:
    return {k: v for k, v in value.items() if k != "id"} if isinstance(value, dict) else value


def compared(message: Message) -> bool:
    """Whether a message counts when two calls' conversations are compared: a system prompt
    sent as a body field does not (it names dates, folders and sessions that change from run
    to run; the record keeps it all the same)."""
    return message.body_field in (None, "input")


def keys(messages: list[Message]) -> list[str]:
    """Each message's place in its conversation, as compared: a hash over it and the compared
    messages before it (one per message, so positions line up; "" before the first)."""
    out: list[str] = []
    last = ""
    for m in messages:
        if compared(m):
            digest = hashlib.sha256(last.encode())
            digest.update(canonical_json([m.role, normal(m.raw)]).encode())
            last = digest.hexdigest()
        out.append(last)
    return out


@dataclass(frozen=True)
class Spawn:
    """A sub-agent tool call waiting for its sub-agent's first request."""

    prompt: str
    detached: bool
    """The call's result comes back before the sub-agent ends (see :data:`DETACHED`)."""

    def starts(self, text: str) -> bool:
        """Whether a user message ``text`` starts this sub-agent: it ends with the prompt (a
        prompt shorter than :data:`SHORT_PROMPT`, such as "ok", must be the whole message)."""
        if len(self.prompt) < SHORT_PROMPT:
            return text == self.prompt
        return text.endswith(self.prompt)


@dataclass
class Conversation:
    """One recorded episode being written: its recorder and what the next call continues."""

    episode_id: str
    recorder: Recorder
    session: str | None
    chain: list[str] = field(default_factory=list)
    """The stored hashes of the last request's messages (its tip last)."""
    keys: list[str] = field(default_factory=list)
    """The same messages' places as compared (:func:`keys`)."""
    open_calls: dict[str, str] = field(default_factory=dict)
    """Tool calls the model made whose results have not come back: call id -> tool name."""
    prompts: dict[str, Spawn] = field(default_factory=dict)
    """Sub-agent calls no conversation has taken yet, by call id."""
    calls: int = 0


class Conversations:
    """The conversations of one proxy, found by the tips of their requests."""

    def __init__(self) -> None:
        self._by_tip: dict[tuple[str | None, str], Conversation] = {}
        self.all: list[Conversation] = []

    def find(self, session: str | None, chain: list[str]) -> Conversation | None:
        """The conversation whose latest request a request with these :func:`keys` extends
        (or repeats: a retry)."""
        for digest in reversed(chain):
            found = self._by_tip.get((session, digest)) if digest else None
            if found is not None:
                return found
        return None

    def add(self, conversation: Conversation) -> None:
        self.all.append(conversation)

    def advance(self, conversation: Conversation, chain: list[str], places: list[str]) -> None:
        """The conversation's latest request: its stored ``chain`` and its :func:`keys`."""
        conversation.chain, conversation.keys = chain, places
        if places and places[-1]:
            self._by_tip[(conversation.session, places[-1])] = conversation

    def spawner(
        self, sessions: tuple[str | None, ...], messages: list[Message]
    ) -> tuple[str, str] | None:
        """(episode, tool call) of the sub-agent call whose prompt ends one of the user messages
        of a new conversation's first request (whole, or after context the client put before
        it: Claude Code sends a reminder block first, Codex sends its AGENTS.md and environment
        as earlier user messages), among the conversations of ``sessions`` (the request's
        session, and the parent session its client names); the longest such prompt, the
        earliest call among equals. The call is taken: a second conversation with the same
        prompt is another call's sub-agent, or none."""
        texts = [m.content.strip() for m in messages if m.role == "user" and m.content]
        found: tuple[int, Conversation, str] | None = None
        for conversation in self.all:
            if conversation.session not in sessions:
                continue
            for call_id, spawn in conversation.prompts.items():
                if not any(spawn.starts(text) for text in texts):
                    continue
                if found is None or len(spawn.prompt) > found[0]:
                    found = (len(spawn.prompt), conversation, call_id)
        if found is None:
            return None
        conversation, call_id = found[1], found[2]
        del conversation.prompts[call_id]
        return conversation.episode_id, call_id


def spawned(name: str, arguments: str) -> Spawn | None:
    """The sub-agent a tool call starts (None: not a sub-agent call)."""
    field_name = SPAWNING_TOOLS.get(name)
    if field_name is None:
        return None
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    prompt = parsed.get(field_name)
    items = parsed.get("items")
    if not isinstance(prompt, str) and isinstance(items, list):
        texts = [i.get("text") for i in items if isinstance(i, dict) and i.get("type") == "text"]
        prompt = next((t for t in reversed(texts) if isinstance(t, str) and t.strip()), None)
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    return Spawn(prompt=prompt.strip(), detached=name in DETACHED)
