"""Which files make one Claude Code session, and how its subagents link to it.

Claude Code writes a session as its main file ``<folder>/<session id>.jsonl`` and one file per
subagent: ``<folder>/<session id>/subagents/agent-<agent id>.jsonl`` since 2.1, and
``<folder>/agent-<agent id>.jsonl`` before (its records name the session). A subagent's records
carry ``isSidechain: true`` and ``agentId``; 2.1.x main files may also copy them inside
``agent_progress`` records. The tool call that started a subagent is named in the main file: by
the ``agentId`` of that call's result (``toolUseResult``), by the ``parentToolUseID`` of the
progress records, or by the prompt the call passed (the subagent's first user message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_AGENT_FILE = re.compile(r"agent-([A-Za-z0-9_-]+)")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SUBAGENT_TOOLS = frozenset({"Task", "Agent"})


def agent_of(path: Path) -> str | None:
    """The agent id a subagent file's name gives (``agent-<id>.jsonl``), else None."""
    match = _AGENT_FILE.fullmatch(path.stem)
    return match.group(1) if match else None


def lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects among a file's whole lines (nothing when it cannot be read)."""
    try:
        with path.open("rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    return  # being written
                try:
                    value = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(value, dict):
                    yield value
    except OSError:
        return


def named_session(path: Path) -> str | None:
    """The session a file belongs to: a main file's name when it is a session id, else the
    first ``sessionId`` its records give."""
    if agent_of(path) is None and UUID.fullmatch(path.stem):
        return path.stem
    for record in lines(path):
        if isinstance(record.get("sessionId"), str) and record["sessionId"]:
            return str(record["sessionId"])
    return None


def main_file(subagent: Path, session_id: str | None) -> Path | None:
    """The main file of the session a subagent file belongs to, if it is where Claude Code
    puts it."""
    if subagent.parent.name == "subagents":
        folder = subagent.parent.parent
        candidate = folder.parent / f"{folder.name}.jsonl"
    elif session_id:
        candidate = subagent.parent / f"{session_id}.jsonl"
    else:
        return None
    return candidate if candidate.is_file() else None


def own_file(main: Path, session_id: str, agent_id: str) -> Path | None:
    """A subagent's own file beside a main file, if there is one."""
    for candidate in (
        main.parent / main.stem / "subagents" / f"agent-{agent_id}.jsonl",
        main.parent / f"agent-{agent_id}.jsonl",
    ):
        if candidate.is_file() and named_session(candidate) == session_id:
            return candidate
    return None


def subagent_files(main: Path, session_id: str | None) -> list[Path]:
    """A main file's subagents' own files, sorted (2.1's folder, then older ones beside)."""
    folder = main.parent / main.stem / "subagents"
    found = sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []
    if session_id:
        beside = sorted(main.parent.glob("agent-*.jsonl"))
        found += [p for p in beside if p.is_file() and named_session(p) == session_id]
    return found


def session_files(path: Path) -> list[Path]:
    """Every file of the session ``path`` belongs to, in the order they import: the main
    file first (a subagent's episode links to its parent's), then its subagents'."""
    if agent_of(path) is not None:
        main = main_file(path, named_session(path))
        if main is None:
            return [path]
        group = session_files(main)
        return group if path in group else [*group, path]
    return [path, *subagent_files(path, named_session(path))]


def spawning_call(main: Path, agent_id: str, prompt: str | None) -> str | None:
    """The main file's tool call that started subagent ``agent_id``."""
    by_prompt: str | None = None
    for record in lines(main):
        result = record.get("toolUseResult")
        if isinstance(result, dict) and result.get("agentId") == agent_id:
            for block in _content(record):
                if block.get("type") == "tool_result" and block.get("tool_use_id"):
                    return str(block["tool_use_id"])
        data = record.get("data")
        parent_call = record.get("parentToolUseID")
        if isinstance(data, dict) and data.get("agentId") == agent_id and parent_call:
            return str(parent_call)
        for block in _content(record):
            given = block.get("input")
            if (
                by_prompt is None
                and prompt is not None
                and block.get("type") == "tool_use"
                and block.get("name") in SUBAGENT_TOOLS
                and isinstance(given, dict)
                and given.get("prompt") == prompt
            ):
                by_prompt = str(block.get("id") or "") or None
    return by_prompt


def _content(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
