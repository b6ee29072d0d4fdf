"""Imported usage is priced by the provider a model name tells, never over a recorded cost."""

from __future__ import annotations

import pytest

from agentrunner.imports.pricing import provider_of, with_cost
from agentrunner.values.types import AgentUsage


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("anthropic/claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("vertex_ai/gemini-2.5-pro", ("google", "gemini-2.5-pro")),
        ("claude-opus-4-6", ("anthropic", "claude-opus-4-6")),
        ("gpt-4o", ("openai", "gpt-4o")),
        ("o3-mini", ("openai", "o3-mini")),
        ("o3lette", (None, "o3lette")),  # a short family only as a whole word
        ("acme/secret-model", (None, "acme/secret-model")),
    ],
)
def test_a_model_name_tells_its_provider(model: str, expected: tuple[str | None, str]) -> None:
    assert provider_of(model) == expected


def test_a_cost_the_source_recorded_is_kept() -> None:
    usage = AgentUsage(input_tokens=1000, output_tokens=10, cost_usd=1.5, price_source="source")
    assert with_cost(usage, "gpt-4o") == usage


def test_a_prefixed_name_is_priced_under_its_bare_name() -> None:
    priced = with_cost(AgentUsage(input_tokens=1000, output_tokens=10), "openai/gpt-4o")
    assert priced.cost_usd is not None and priced.cost_usd > 0
    assert priced.price_source is not None and "openai/gpt-4o" in priced.price_source


def test_an_unknown_model_stays_unpriced() -> None:
    usage = AgentUsage(input_tokens=1000, output_tokens=10)
    assert with_cost(usage, "acme/secret-model").cost_usd is None
