"""Canonical JSON and content hashes: the identity of messages, tool sets and files (a value
beneath the store and the environments, which both hash)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.values.types import Message, ToolSpec


def canonical_json(value: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_json(message: Message) -> str:
    return canonical_json(message.model_dump(mode="json", exclude_defaults=True))


def message_hash(parent_hash: str | None, canonical_message: str) -> str:
    """Hash of (parent hash, canonical message): a message's place in its chain."""
    digest = hashlib.sha256()
    digest.update((parent_hash or "").encode())
    digest.update(b"\x00")
    digest.update(canonical_message.encode())
    return digest.hexdigest()


def tools_json(tools: Sequence[ToolSpec]) -> str:
    # A tool's ``raw`` form (a recorded client's) is left out when absent, so the runner's tool
    # sets keep the hashes they always had.
    return canonical_json([t.model_dump(mode="json", exclude_none=True) for t in tools])


def tools_hash(canonical_tools: str) -> str:
    return hashlib.sha256(canonical_tools.encode()).hexdigest()


def file_sha256(path: Path, block: int = 1 << 20) -> str:
    """The sha256 of a file's bytes, read a block at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            digest.update(chunk)
    return digest.hexdigest()
