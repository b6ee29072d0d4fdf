"""Shared by the import tests: where the third-party sample traces are (skip when absent),
and reading back what an import wrote."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from agentrunner import TraceStore
from agentrunner.imports.importer import import_file
from agentrunner.imports.items import Format
from agentrunner.imports.registry import HEAD_BYTES, Follower

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "foreign-traces"


def fixture_files(folder: str, pattern: str = "*") -> list[Path]:
    """The sample files of one format (an empty list when the folder is absent)."""
    where = FIXTURES / folder
    return sorted(p for p in where.glob(pattern) if p.is_file()) if where.is_dir() else []


def needs(folder: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not (FIXTURES / folder).is_dir(), reason=f"{FIXTURES / folder} is absent"
    )


def payloads(store: TraceStore, episode: str, kind: str) -> list[dict[str, Any]]:
    return [row.payload for row in store.iter_events(episode, kinds=[kind])]


def kinds(store: TraceStore, episode: str) -> Counter[str]:
    return Counter(row.kind for row in store.iter_events(episode))


def head(path: Path) -> str:
    """What format detection reads of a file."""
    return path.read_bytes()[:HEAD_BYTES].decode("utf-8", errors="replace")


def only_episode(store: TraceStore, path: Path, fmt: ModuleType) -> str:
    """The one episode importing a one-session file makes."""
    [report] = import_file(store, path, cast(Format, fmt))  # a format module is a Format
    return report.episode_id


def followed_and_whole(
    tmp_path: Path, source: Path, fmt: ModuleType, growing: Path
) -> tuple[Counter[str], Counter[str]]:
    """The event kinds of ``source`` imported while followed, written to ``growing`` one line
    at a time, and imported whole: a format that grows by appending must give the same."""
    growing.parent.mkdir(parents=True, exist_ok=True)
    growing.write_text("")
    with TraceStore(tmp_path / "followed.db") as store:
        follower = Follower(store)
        for line in source.read_text().splitlines(keepends=True):
            with growing.open("a") as f:
                f.write(line)
            follower.look([growing])
        follower.finish()
        follower.close()
        [episode] = [e.episode_id for e in store.list_episodes()]
        followed = kinds(store, episode)
    with TraceStore(tmp_path / "whole.db") as store:
        whole = kinds(store, only_episode(store, source, fmt))
    return followed, whole
