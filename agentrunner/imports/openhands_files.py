"""Reading a conversation the OpenHands SDK persisted into the records the OpenHands importer
feeds its parser.

The layout, as ``openhands-sdk`` 1.58 writes it when a ``Conversation`` is given a
``persistence_dir`` (the OpenHands app and agent server keep theirs the same way): a folder per
conversation, named by its id in hex, holding ``base_state.json`` (the conversation's state,
saved whole again as it changes: the agent and its LLM's settings, the workspace, the execution
status, and ``stats.usage_to_metrics``: per LLM ``token_usages`` and ``response_latencies``,
each entry naming the ``response_id`` of the model's answer it is for) and ``events/``, one
JSON file per event, ``event-<index, 5+ digits>-<event id>.json``. Events are only ever added,
with the next index, so the conversation grows by new files and a re-read finds the earlier
ones where they were. ``base_state.json`` is the file that stands for the conversation (an
event file named or found leads to it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict
from agentrunner.imports.files import whole_json

STATE = "base_state.json"
EVENTS = "events"
EVENT_FILE = re.compile(r"^event-(?P<index>\d{5,})-[0-9a-fA-F-]{8,}\.json$")


def conversation_of(path: Path) -> Path | None:
    """The ``base_state.json`` of the conversation ``path`` belongs to (itself, or an event
    file's), or None when ``path`` is neither."""
    if path.name == STATE:
        state = path
    elif EVENT_FILE.match(path.name) and path.parent.name == EVENTS:
        state = path.parent.parent / STATE
    else:
        return None
    return state if (state.parent / EVENTS).is_dir() and state.is_file() else None


def event_files(state: Path) -> list[Path]:
    """The conversation's event files, in the order of their index."""
    found = []
    for path in (state.parent / EVENTS).iterdir():
        match = EVENT_FILE.match(path.name)
        if match:
            found.append((int(match["index"]), path))
    return [path for _, path in sorted(found)]


def change_mark(state: Path) -> tuple[int, ...]:
    """What changes when the conversation gains an event: how many event files it has and
    the newest one's size and time (``base_state.json``'s own are looked at by the caller)."""
    try:
        files = event_files(state)
        last = files[-1].stat() if files else None
    except OSError:
        return ()
    return (len(files), last.st_size, last.st_mtime_ns) if last else (0,)


def call_metrics(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per model answer (its ``response_id``): ``{"usage": <token usage or absent>,
    "latency": <seconds or absent>, "model": ...}``, from every LLM's metrics."""
    metrics: dict[str, dict[str, Any]] = {}
    for llm in as_dict(as_dict(state.get("stats")).get("usage_to_metrics")).values():
        llm = as_dict(llm)
        for key, field in (("response_latencies", "latency"), ("token_usages", "usage")):
            for entry in llm.get(key) or []:
                entry = as_dict(entry)
                response = entry.get("response_id")
                if isinstance(response, str) and response:
                    seen = metrics.setdefault(response, {"model": llm.get("model_name")})
                    seen[field] = entry.get("latency") if field == "latency" else entry
    return metrics


def conversation_records(state_path: Path, *, live: bool) -> list[dict[str, Any]]:
    """The conversation's records: first its state (``{"state": ...}``), then each event in
    order (``{"event": ..., "metrics": <its model answer's, when it is one>}``). The state is
    read before the events, so an answer whose usage it does not have yet is one OpenHands had
    not saved it for when read. With ``live`` (the conversation may be running) the records
    stop before the first answer the state has no metrics for (its usage may come) and before
    an event file not yet written whole."""
    state = as_dict(whole_json(state_path))
    metrics = call_metrics(state)
    records: list[dict[str, Any]] = [{"state": state}]
    for path in event_files(state_path):
        try:
            event = as_dict(whole_json(path))
        except ValueError as exc:
            if live:  # being written: a later look reads it
                break
            raise ValueError(f"{EVENTS}/{path.name}: {exc}") from None
        response = event.get("llm_response_id")
        known = metrics.get(response) if isinstance(response, str) else None
        if live and response is not None and known is None:
            break
        records.append({"event": event, "metrics": known})
    return records


def looks_like_state(head: str) -> bool:
    """Whether the start of a ``base_state.json`` is an SDK conversation's state (its
    ``agent`` comes first, after its ``id``)."""
    try:
        value = json.loads(head)
    except json.JSONDecodeError:  # longer than the head read
        return head.lstrip().startswith("{") and '"agent"' in head
    return isinstance(value, dict) and "agent" in value
