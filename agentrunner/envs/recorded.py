"""The environment of a recorded agent: its own machine, which only the agent can drive.

An episode recorded through the proxy (``agentrunner record`` / ``agentrunner proxy``) saw
another agent's model calls; its tools ran inside that agent. The runner cannot continue it:
the agent can (it retries through a restarted proxy), or a replay serves it back.
"""

from __future__ import annotations

from typing import Any

KIND = "recorded"


def why_not_runnable(spec: dict[str, Any]) -> str:
    """What to tell someone who asks to resume or replay a recorded episode."""
    agent = spec.get("agent") or "another agent"
    return (
        f"it was recorded from {agent} through the recording proxy: only the agent can continue"
        " it (run it again through `agentrunner record`), the runner has no environment to run"
        " its tools in"
    )
