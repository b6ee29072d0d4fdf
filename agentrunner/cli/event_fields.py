"""The payload of a stored event, read as the JSON object it is stored as, without building
its typed model: ``show`` reads a row of a long episode in a fraction of the time
:meth:`~agentrunner.store.EventRow.typed` takes, and a plain episode without loading pydantic.

A payload is read this way only when every field its model declares has a value of the type
the model would keep as it is (a required field present, an optional one absent or of its
type); anything else (an older or a damaged row, a value the model would convert or refuse)
is None, and the caller reads the row typed, which converts it or says what is wrong.
"""

from __future__ import annotations

import json
from typing import Any

_decode = json.JSONDecoder().raw_decode  # json.loads without its two whitespace scans
_NONE = type(None)
_STR = (str,)
_INT = (int,)
_NUMBER = (int, float)
_CHANNELS = frozenset({"reasoning", "text", "tool_args", "refusal"})
_OPTIONAL_ID = (str, _NONE)
_OPTIONAL_NUMBER = (int, float, _NONE)
_CHOICES = {
    "model.request": ("purpose", "turn", frozenset({"turn", "compaction"})),
    "cancel": ("where", None, frozenset({"generate", "tool", "between_turns"})),
    "resume": ("reason", "resume", frozenset({"resume", "fork"})),
}
"""Kind -> a field whose model allows only these values, and its default (None: required)."""

_REQUIRED: dict[str, dict[str, tuple[type, ...]]] = {
    "model.request": {
        "call_id": _STR,
        "tip_hash": _STR,
        "tools_hash": _STR,
        "provider": _STR,
        "model": _STR,
    },
    "model.chunk": {"call_id": _STR, "channel": _STR, "index": _INT, "text": _STR},
    "model.response": {"call_id": _STR, "message_hash": _STR, "latency_s": _NUMBER},
    "usage": {"call_id": _STR},
    "tool.call": {"call_id": _STR, "name": _STR, "arguments": _STR},
    "tool.result": {"call_id": _STR, "name": _STR, "observation": _STR, "message_hash": _STR},
    "episode.start": {
        "task_id": _STR,
        "seed": _INT,
        "env": (dict,),
        "model": (dict,),
        "config": (dict,),
        "version": _STR,
    },
    "message": {"role": _STR, "message_hash": _STR},
    "cancel": {"where": _STR, "reason": _STR},
    "error": {"where": _STR, "type": _STR, "message": _STR},
    "resume": {"from_seq": _INT, "env_restore": _STR},
    "episode.end": {"stop_reason": _STR, "turns": _INT, "total_reward": _OPTIONAL_NUMBER},
}
"""Kind -> its model's required fields and the types their JSON values take."""

_COUNT = (int, _NONE)
_OPTIONAL: dict[str, dict[str, tuple[type, ...]]] = {
    "model.request": {
        "params": (dict,),
        "input_tokens_estimate": _COUNT,
        "context_window": _COUNT,
        "masked": _INT,
        "purpose": _STR,
        "covers": _COUNT,
    },
    "model.chunk": {"tool_call_id": _OPTIONAL_ID},
    "model.response": {
        "stop_reason": (str, _NONE),
        "provider_request_id": (str, _NONE),
        "model": (str, _NONE),
        "refusal": (str, _NONE),
    },
    "usage": {
        "input_tokens": _COUNT,
        "output_tokens": _COUNT,
        "cache_read_tokens": _COUNT,
        "cache_write_tokens": _COUNT,
        "reasoning_tokens": _COUNT,
        "cost_usd": _OPTIONAL_NUMBER,
        "price_source": (str, _NONE),
    },
    "tool.call": {"parsed": (dict, _NONE), "parse_error": (str, _NONE)},
    "tool.result": {
        "reward": _OPTIONAL_NUMBER,
        "done": (bool,),
        "error": (str, _NONE),
        "duration_s": _NUMBER,
        "snapshot": (str, _NONE),
        "step": _COUNT,
        "truncated": (bool,),
    },
    "episode.start": {"max_steps": _COUNT},
    "message": {"reason": _STR},
    "cancel": {},
    "error": {"retryable": (bool,), "attempt": _INT},
    "resume": {"dangling": (list,), "reason": _STR, "config": (dict, _NONE)},
    "episode.end": {"totals": (dict,)},
}
"""Kind -> its model's optional fields and the types their JSON values take."""


def read_fields(kind: str, payload_json: str) -> dict[str, Any] | None:
    """The payload of an event of ``kind`` as its JSON object, when every field is of its
    type; otherwise None (read it typed)."""
    required = _REQUIRED.get(kind)
    if required is None:
        return None
    try:
        payload, end = _decode(payload_json)
    except ValueError:
        return None
    if type(payload) is not dict or end != len(payload_json):
        return None
    if kind == "model.chunk":  # most rows: checked without a loop
        fits = (
            type(payload.get("text")) is str
            and payload.get("channel") in _CHANNELS
            and type(payload.get("index")) is int
            and type(payload.get("call_id")) is str
            and type(payload.get("tool_call_id")) in _OPTIONAL_ID
        )
        return payload if fits else None
    for name, types in required.items():
        if name not in payload or type(payload[name]) not in types:
            return None
    for name, types in _OPTIONAL[kind].items():
        if name in payload and type(payload[name]) not in types:
            return None
    choice = _CHOICES.get(kind)
    if choice is not None and payload.get(choice[0], choice[1]) not in choice[2]:
        return None
    if kind == "model.response" and payload.get("opaque", []) != []:
        return None  # its parts are typed values: read it typed
    if kind == "resume" and any(type(d) is not dict for d in payload.get("dangling", ())):
        return None
    return payload
