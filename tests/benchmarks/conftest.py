"""Benchmarks run on demand only: ``pytest tests/benchmarks -m benchmark -s``."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _on_demand(request: pytest.FixtureRequest) -> None:
    """Skip unless benchmarks were asked for (a ``-m`` on the command line replaces the
    ``-m 'not benchmark'`` of addopts, so ``-m 'not slow'`` alone must not run them)."""
    expr = request.config.getoption("markexpr") or ""
    if "benchmark" not in expr or "not benchmark" in expr:
        pytest.skip("benchmarks run on demand: pytest tests/benchmarks -m benchmark -s")
