"""Codex compactions read as items: the call that summarized the history and the history
Codex went on from.

Codex 0.171 writes the compaction call's output as an assistant ``message`` item marked
``metadata.compaction_output`` (its usage in the ``token_count`` after it), then a
``compacted`` record: ``message``, the text that hands the summary over, and
``replacement_history``, the items the model's history was replaced with. Older rollouts hold
only the ``compacted`` record (with or without the replacement): then the record itself
stands for the compaction call, its ``message`` the answer, its usage unknown.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentrunner.imports.items import Answer, Ask, Item, Piece, Said, text_of
from agentrunner.values.events import COMPACTION
from agentrunner.values.types import AgentTurn, AgentUsage

SYSTEM_ROLES = ("developer", "system")


def is_compaction_output(record: Any) -> bool:
    """Whether a response item is output of a compaction call (not of a turn)."""
    metadata = record.get("metadata") if isinstance(record, dict) else None
    return isinstance(metadata, dict) and metadata.get("compaction_output") is True


def compaction_call(
    call_id: str, payload: dict[str, Any], model: str | None, provider: str, ts: str | None
) -> list[Item]:
    """A ``compacted`` record whose call's output the rollout does not hold, as that call:
    asked, and answered by the record's ``message`` (its usage unknown)."""
    text = text_of(payload.get("message"))
    turn = AgentTurn(message=text, usage=AgentUsage.unknown(), provider=provider, model=model)
    piece = [Piece(call_id, "text", text, ts=ts)] if text else []
    return [Ask(call_id, model, ts, purpose=COMPACTION), *piece, Answer(call_id, turn, ts)]


def replacement(
    payload: dict[str, Any], instructions: str | None, ts: str | None
) -> tuple[list[Item], bool] | None:
    """The history a ``compacted`` record replaced the model's with, as messages that begin a
    new chain (the session's base instructions first: every request sends them), and whether
    it holds items no message stands for (the record is then also kept raw); None when the
    record does not say what the history became."""
    history = payload.get("replacement_history")
    if not isinstance(history, list):
        return None
    said: list[Said] = []
    if instructions:
        said.append(Said("system", instructions, ts))
    other = False
    for entry in history:
        entry = entry if isinstance(entry, dict) else {}
        role = entry.get("role")
        if entry.get("type") != "message" or role not in ("user", *SYSTEM_ROLES):
            other = True
            continue
        text = text_of(entry.get("content"))
        if role in SYSTEM_ROLES:
            said.append(Said("system", text, ts))
        else:
            said.append(Said("user", text, ts, reason=COMPACTION))
    if said:
        said[0] = replace(said[0], fresh=True)
    return list(said), other
