"""Parquet tables of export rows: one fixed schema per format, free-form objects as JSON text.

Arrow needs one type per column. Messages, sources and rewards have fixed shapes and keep
them (absent message keys read back as null); what has no fixed shape is stored as JSON
text: the ``tools`` column (JSON schemas) and each tool call's ``arguments`` (with
``--tool-args object`` the JSON text of the object, which ``json.loads`` gives back;
otherwise the raw string the model wrote). Those fields carry the metadata
``{"agentrunner.json": "true"}`` in the file's schema. Inferring the types from the rows
instead would merge the argument keys of every call into each call (with nulls) and fail on
an object with no keys.

pyarrow is optional: this module imports it only inside its functions, and every error it
raises while a table is built or written becomes an :class:`AgentRunnerError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from agentrunner.values.errors import AgentRunnerError, UsageError

if TYPE_CHECKING:
    import pyarrow as pa

JSON_TEXT = {b"agentrunner.json": b"true"}
BATCH_ROWS = 256


def require_pyarrow() -> None:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UsageError(
            "Parquet output needs pyarrow, which is not installed: "
            "pip install 'agentrunner[parquet]' (or export JSON Lines without --parquet)"
        ) from None


def schema(fmt: str, reasoning_key: str | None = None) -> pa.Schema:
    """The Parquet schema of format ``fmt`` (``reasoning_key``: the assistant reasoning key)."""
    import pyarrow as pa

    text, integer, number = pa.string(), pa.int64(), pa.float64()
    message_fields = _message_fields(reasoning_key)
    messages = pa.list_(pa.struct(message_fields))
    tools = pa.field("tools", text, metadata=JSON_TEXT)
    decision = [("episode_id", text), ("seq", integer), ("turn", integer)]
    episode_source = pa.struct([*decision, ("task_id", text), ("seed", integer), ("model", text)])
    action_source = pa.struct(
        [*decision, ("episodes", pa.list_(text)), ("rewards", pa.list_(number))]
    )
    fields: dict[str, list[Any]] = {
        "sft": [("messages", messages), tools, ("reward", number), ("source", episode_source)],
        "dpo": [
            ("prompt", messages),
            ("chosen", messages),
            ("rejected", messages),
            tools,
            ("chosen_reward", number),
            ("rejected_reward", number),
            ("source", pa.struct([*decision, ("fork_groups", pa.list_(text))])),
            ("chosen_source", action_source),
            ("rejected_source", action_source),
        ],
        "grpo": [
            ("prompt", messages),
            ("reference_completions", pa.list_(messages)),
            ("reference_rewards", pa.list_(number)),
            tools,
            (
                "source",
                pa.struct(
                    [
                        ("kind", text),
                        *decision,
                        ("fork_groups", pa.list_(text)),
                        ("task_id", text),
                        ("seeds", pa.list_(integer)),
                        ("batches", pa.list_(text)),
                    ]
                ),
            ),
            ("sources", pa.list_(pa.struct(decision))),
        ],
        "kto": [
            ("prompt", messages),
            ("completion", messages),
            ("label", pa.bool_()),
            ("reward", number),
            tools,
            ("source", episode_source),
        ],
        "prm": _prm_fields(message_fields, tools, decision, reasoning_key),
    }
    return pa.schema(fields[fmt])


def _message_fields(reasoning_key: str | None) -> list[tuple[str, pa.DataType]]:
    """A chat message's fields (its tool calls' arguments as JSON text)."""
    import pyarrow as pa

    text = pa.string()
    call = pa.struct(
        [
            ("id", text),
            ("type", text),
            (
                "function",
                pa.struct([("name", text), pa.field("arguments", text, metadata=JSON_TEXT)]),
            ),
        ]
    )
    message_fields = [("role", text), ("content", text)]
    if reasoning_key:
        message_fields.append((reasoning_key, text))
    message_fields += [
        ("refusal", text),
        ("tool_calls", pa.list_(call)),
        ("tool_call_id", text),
        ("name", text),
    ]
    return message_fields


def _prm_fields(
    message_fields: list[tuple[str, pa.DataType]],
    tools: pa.Field,
    decision: list[tuple[str, pa.DataType]],
    reasoning_key: str | None,
) -> list[Any]:
    """The prm format's fields: a decision's state, one candidate action and its value."""
    import pyarrow as pa

    text, integer, number = pa.string(), pa.int64(), pa.float64()
    messages = pa.list_(pa.struct(message_fields))
    # the action always carries its reasoning (under reasoning_content by default)
    action_fields = (
        message_fields
        if reasoning_key
        else [*message_fields[:2], ("reasoning_content", text), *message_fields[2:]]
    )
    return [
        ("state", pa.struct([("messages", messages), tools])),
        ("action", pa.struct(action_fields)),
        ("value", number),
        ("spread", number),
        ("n", integer),
        ("adopted", pa.bool_()),
        ("mode", text),
        ("duplicate_of", integer),
        (
            "source",
            pa.struct(
                [
                    *decision,
                    ("fork_group", text),
                    ("candidate", integer),
                    ("proposal", text),
                    ("continuations", pa.list_(text)),
                    ("rewards", pa.list_(number)),
                ]
            ),
        ),
    ]


class _Misfit(Exception):
    """A row holds a key its schema has no field for."""


def _fit(value: Any, type_: pa.DataType, where: str) -> Any:
    """``value`` in the shape ``type_`` takes: JSON-text fields encoded, unknown keys refused."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(type_) and isinstance(value, dict):
        names = {type_.field(i).name for i in range(type_.num_fields)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise _Misfit(f"{where}.{unknown[0]}")
        return {
            f.name: _fit_field(value.get(f.name), f, f"{where}.{f.name}")
            for f in (type_.field(i) for i in range(type_.num_fields))
        }
    if pa.types.is_list(type_) and isinstance(value, list):
        return [_fit(v, type_.value_type, f"{where}[]") for v in value]
    return value  # a scalar, or a mismatch pyarrow reports


def _fit_field(value: Any, field: pa.Field, where: str) -> Any:
    if field.metadata == JSON_TEXT and value is not None and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return _fit(value, field.type, where)


def fit_row(row: dict[str, Any], table_schema: pa.Schema) -> dict[str, Any]:
    """One export row as a row of ``table_schema`` (raises ``_Misfit`` on an unknown key)."""
    unknown = sorted(set(row) - set(table_schema.names))
    if unknown:
        raise _Misfit(unknown[0])
    return {f.name: _fit_field(row.get(f.name), f, f.name) for f in table_schema}


def write_table(rows: Iterable[dict[str, Any]], out: IO[bytes], table_schema: pa.Schema) -> int:
    """Write ``rows`` to ``out`` as one Parquet table in batches; return how many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    count = 0
    it = iter(rows)
    try:
        with pq.ParquetWriter(out, table_schema) as writer:
            while batch := list(islice(it, BATCH_ROWS)):
                fitted = [fit_row(r, table_schema) for r in batch]
                writer.write_batch(pa.RecordBatch.from_pylist(fitted, schema=table_schema))
                count += len(batch)
    except _Misfit as exc:
        raise AgentRunnerError(
            f"row {count + 1} has a field the Parquet schema lacks ({exc}); this is a bug in "
            "agentrunner: export JSON Lines instead and report it"
        ) from None
    except pa.ArrowException as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AgentRunnerError(
            f"could not write the rows as Parquet ({reason}); export JSON Lines instead"
        ) from None
    return count
