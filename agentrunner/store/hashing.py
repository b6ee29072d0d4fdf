"""The content hashes' old address: they live in :mod:`agentrunner.values.hashing`, beneath
the store and the environments, which both use them."""

from __future__ import annotations

from agentrunner.values.hashing import (
    canonical_json,
    file_sha256,
    message_hash,
    message_json,
    tools_hash,
    tools_json,
)

__all__ = [
    "canonical_json",
    "file_sha256",
    "message_hash",
    "message_json",
    "tools_hash",
    "tools_json",
]
