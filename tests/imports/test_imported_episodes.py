"""Verifiers and training exports read imported sessions as they read our own episodes."""

from __future__ import annotations

from agentrunner import TraceStore
from agentrunner.export import Selection, export_rows
from agentrunner.imports import claude_code, mini_swe_agent
from agentrunner.verifiers import RuleVerifier, verify_episode
from tests.imports.conftest import FIXTURES, needs, only_episode

TOOL_HEAVY = FIXTURES / "claude-code" / "tool_heavy.jsonl"
DJANGO = FIXTURES / "mini-swe-agent" / "django__django-16255.traj.json"


@needs("claude-code")
def test_rules_see_the_commands_a_claude_code_session_ran(store: TraceStore) -> None:
    episode = only_episode(store, TOOL_HEAVY, claude_code)
    verdict = verify_episode(store, episode, RuleVerifier(["tool:Bash", "command:mix phx"]))
    assert verdict.passed, verdict.details


@needs("mini-swe-agent")
def test_rules_see_the_commands_a_mini_swe_agent_run_ran(store: TraceStore) -> None:
    episode = only_episode(store, DJANGO, mini_swe_agent)
    assert verify_episode(store, episode, RuleVerifier(["command:^sed -i"])).passed
    assert not verify_episode(store, episode, RuleVerifier(["command:no-such-tool-xyz"])).passed


@needs("claude-code")
def test_an_imported_session_exports_an_sft_row_from_its_exact_history(store: TraceStore) -> None:
    episode = only_episode(store, TOOL_HEAVY, claude_code)
    _, rows = export_rows(store, "sft", selection=Selection(episodes=(episode,)))
    [row] = list(rows)
    assert row["reward"] is None  # an imported session is unjudged, never 0
    assert row["source"]["episode_id"] == episode
    prompt = row["messages"]
    assert prompt[0] == {"role": "user", "content": "start phoenix in background"}
    names = {c["function"]["name"] for m in prompt for c in m.get("tool_calls", [])}
    assert "Bash" in names
