"""Branching from the trace screen: what the fork editor is pre-filled with, and the fork.

``f`` on a row forks at that row's model turn K (design section 4): the editor starts with
turn K's assistant message (or the tool call under the cursor) as editable JSON, or an empty
user message to inject, or nothing to re-sample. The fork itself is
:func:`agentrunner.lifecycle.fork.fork_episode` (a new episode; the parent is never changed);
the app then runs it in the background.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.lifecycle.fork import fork_episode
from agentrunner.store import EpisodeSummary, Segment
from agentrunner.tui.data import id_prefixes
from agentrunner.tui.rows import typed
from agentrunner.values.events import ModelResponse, ToolCall
from agentrunner.values.safe_text import json_safe, one_line_visible

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

Mode = Literal["edit", "inject", "resample"]


@dataclass(frozen=True)
class ForkPrefill:
    """What the fork editor opens with."""

    episode_id: str
    turn: int
    edit: str  # JSON of the assistant message or tool call at the fork point
    model: str
    on_tool_call: bool
    short_id: str  # the episode's shortest id prefix unique in the store


@dataclass(frozen=True)
class ForkRequest:
    """What the user confirmed in the fork editor."""

    episode_id: str
    turn: int
    mode: Mode
    text: str
    model: str | None  # None: the parent's model


def _tool_call_json(call: ToolCall) -> dict[str, Any]:
    arguments: Any = call.parsed if call.parsed is not None else call.arguments
    return {"name": call.name, "arguments": arguments}


def fork_prefill(
    store: StoreBackend,
    episode_id: str,
    segments: Sequence[Segment],
    turn: int,
    seq: int,
) -> ForkPrefill:
    """The editor's content for a fork at ``turn`` (cursor on the event at ``seq``)."""
    summary = store.episode(episode_id)
    model = one_line_visible(summary.model_spec.spec)  # unchanged: the parent's
    rows = store.events(episode_id, after_seq=seq - 1, limit=1, segments=segments)
    call = typed(rows[0]) if rows else None
    if isinstance(call, ToolCall):
        edit = _editable_json(_tool_call_json(call))
        return ForkPrefill(summary.episode_id, turn, edit, model, True, _short(store, summary))
    last = store.last_at_turn(episode_id, "model.response", turn)
    response = typed(last) if last is not None else None
    value: dict[str, Any] = {"message": "", "tool_calls": []}
    if isinstance(response, ModelResponse):
        message = store.message(response.message_hash)
        value = {
            "message": message.content,
            "tool_calls": [
                {"name": c.name, "arguments": _parsed(c.arguments)} for c in message.tool_calls
            ],
        }
    edit = _editable_json(value)
    return ForkPrefill(summary.episode_id, turn, edit, model, False, _short(store, summary))


def _editable_json(value: Any) -> str:
    """``value`` as JSON for the editor, what a terminal would act on as ``\\u`` escapes."""
    return json_safe(json.dumps(value, indent=2, ensure_ascii=False))


def _short(store: StoreBackend, episode: EpisodeSummary) -> str:
    return id_prefixes(store, [episode.episode_id])[episode.episode_id]


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def make_fork(store: StoreBackend, request: ForkRequest) -> tuple[str, dict[str, str]]:
    """Create the fork the editor asked for; return its id (not yet run) and its shortest
    unique prefix (by id)."""
    (fork_id,) = fork_episode(
        store,
        request.episode_id,
        turn=request.turn,
        message=request.text if request.mode == "inject" else None,
        action=request.text if request.mode == "edit" else None,
        model=request.model,
    )
    return fork_id, id_prefixes(store, [fork_id])
