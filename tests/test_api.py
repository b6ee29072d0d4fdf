"""The package's public surface."""

from __future__ import annotations

import agentrunner
import providers


def test_all_names_exist_and_are_sorted() -> None:
    assert all(hasattr(agentrunner, name) for name in agentrunner.__all__)
    assert agentrunner.__all__ == sorted(agentrunner.__all__)


def test_all_holds_the_seed_sdk_names() -> None:
    for name in ("TraceStore", "run_agent_episode", "AgentTurn", "AgentToolCall", "AgentUsage"):
        assert name in agentrunner.__all__


def test_providers_all_names_exist() -> None:
    assert all(hasattr(providers, name) for name in providers.__all__)


def test_core_does_not_import_provider_sdks() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentrunner, agentrunner.cli.main, agentrunner.runtime.runner;"
        "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
