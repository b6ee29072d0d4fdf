"""Shared by the import tests: where the third-party sample traces are (skip when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "foreign-traces"


def fixture_files(folder: str, pattern: str = "*") -> list[Path]:
    """The sample files of one format (an empty list when the folder is absent)."""
    where = FIXTURES / folder
    return sorted(p for p in where.glob(pattern) if p.is_file()) if where.is_dir() else []


def needs(folder: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not (FIXTURES / folder).is_dir(), reason=f"{FIXTURES / folder} is absent"
    )
