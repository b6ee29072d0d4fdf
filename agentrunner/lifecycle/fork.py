"""Forks: branch an episode at a model turn, with an optional edit, never changing the parent.

A fork is a new episode with ``parent_episode_id`` and ``fork_seq``. It inherits its
parent's events up to ``fork_seq`` by reference and numbers its own from ``fork_seq + 1``.
The fork point of turn K is just before that turn's first ``model.request``, so the fork's
history is exactly what the model saw at turn K. The fork then either re-samples turn K
(maybe with another model, maybe after an injected user message) or replaces it with an
edited assistant message / tool call(s), which its first run executes. A new fork has not
started: it shows as ``pending`` until it is run (``--run`` or ``agentrunner resume``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentrunner.readers.state import rebuild
from agentrunner.values.errors import UsageError
from agentrunner.values.events import MessageEvent, ModelRequest
from agentrunner.values.types import AgentToolCall, Message
from providers import get_model

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def fork_point(store: StoreBackend, episode_id: str, turn: int) -> int:
    """The seq just before turn ``turn``'s first model request in the episode's history."""
    if turn < 1:
        raise UsageError(f"`turn` counts model turns from 1 (got {turn})", param="turn")
    for row in store.iter_events(episode_id, kinds=["model.request", "message"]):
        if row.turn != turn:
            continue
        # a turn starts with its first request, or with the edit that replaced it in a fork
        match row.typed():
            case ModelRequest() | MessageEvent(reason="edit"):
                return row.seq - 1
    turns = store.episode(episode_id).turns
    raise UsageError(
        f"episode {episode_id} has no model turn {turn} (it has {turns}); "
        f"fork at a turn between 1 and {turns}"
    )


def parse_action(action: str | dict[str, Any] | list[Any], turn: int) -> Message:
    """The assistant message an ``--action`` edit stands for.

    Accepted: one tool call ``{"name": ..., "arguments": {...}}``, a list of them, or a whole
    message ``{"message": "text", "tool_calls": [...]}``.
    """
    try:
        value = json.loads(action) if isinstance(action, str) else action
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"`action` is not valid JSON: {exc.msg} at char {exc.pos}", param="action"
        ) from None
    if isinstance(value, dict) and "name" in value:
        text, raw_calls = "", [value]
    elif isinstance(value, list):
        text, raw_calls = "", value
    elif isinstance(value, dict) and ("tool_calls" in value or "message" in value):
        text, raw_calls = str(value.get("message", "")), list(value.get("tool_calls", []))
    else:
        raise UsageError(
            '--action must be a tool call {"name": ..., "arguments": {...}}, a list of them, '
            'or {"message": ..., "tool_calls": [...]}'
        )
    calls = []
    for i, raw in enumerate(raw_calls):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise UsageError(f"`action` tool call #{i + 1} needs a string 'name'", param="action")
        calls.append(
            AgentToolCall(
                call_id=str(raw.get("call_id") or f"edit_{turn:03d}_{i}"),
                name=raw["name"],
                arguments=raw.get("arguments", {}),
            )
        )
    return Message(role="assistant", content=text, tool_calls=tuple(calls))


def message_action(message: Message) -> dict[str, Any]:
    """An assistant message as an ``--action`` (what :func:`parse_action` reads back)."""
    return {
        "message": message.content,
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, "call_id": c.call_id}
            for c in message.tool_calls
        ],
    }


def model_spec(model: str) -> dict[str, Any]:
    """What a fork continued by ``model`` (``PROVIDER:MODEL``) records as its model, built to
    check it: a malformed name or an unknown provider is a ``UsageError``, so a front end can
    check a typed model before it forks (the TUI's fork screen does)."""
    return get_model(model).spec()


def fork_episode(
    store: StoreBackend,
    episode_id: str,
    *,
    turn: int,
    message: str | None = None,
    action: str | dict[str, Any] | list[Any] | Message | None = None,
    model: str | None = None,
    n: int = 1,
) -> list[str]:
    """Create ``n`` forks of ``episode_id`` at ``turn``; return their ids (not yet run).

    ``message`` injects a user message before the turn is re-sampled; ``action`` replaces the
    turn's output with an edited assistant message (see :func:`parse_action`); ``model``
    re-samples with another model spec. The parent is never changed.
    """
    if message is not None and action is not None:
        raise UsageError("give `message` or `action`, not both", param="message")
    if n < 1:
        raise UsageError("-n must be at least 1")
    parent = store.episode(episode_id)
    seq = fork_point(store, parent.episode_id, turn)
    edit = action if isinstance(action, Message) or action is None else parse_action(action, turn)
    spec = model_spec(model) if model is not None else parent.model
    tip = rebuild(store, parent.episode_id, upto_seq=seq).tip
    first: tuple[int, MessageEvent] | None = None
    if message is not None:
        digest = store.put_message(tip, Message(role="user", content=message))
        first = (turn - 1, MessageEvent(role="user", message_hash=digest, reason="fork"))
    elif edit is not None:
        digest = store.put_message(tip, edit)
        first = (turn, MessageEvent(role="assistant", message_hash=digest, reason="edit"))
    forks = [
        store.create_episode(
            task_id=parent.task_id,
            seed=parent.seed,
            env=parent.env,
            model=spec,
            parent_episode_id=parent.episode_id,
            fork_seq=seq,
            first_event=first,
        )
        for _ in range(n)
    ]
    return forks
