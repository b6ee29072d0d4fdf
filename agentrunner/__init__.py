"""agentrunner: a local, crash-safe flight recorder for long-horizon LLM agents.

The public names below are imported on first use, so that loading a small part of the
package (the command line's entry point) stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from agentrunner.batch import run_batch
    from agentrunner.branching import Branching
    from agentrunner.environment import Environment, ResetResult, StepResult, ToolAction
    from agentrunner.errors import (
        AgentRunnerError,
        Cancelled,
        EnvironmentFailure,
        ModelError,
        StoreError,
        UsageError,
    )
    from agentrunner.fanout import score_actions
    from agentrunner.fork import fork_episode
    from agentrunner.model import AgentContext, Model
    from agentrunner.resume import resume_episode
    from agentrunner.runner import Rollout, RunConfig, arun_agent_episode, run_agent_episode
    from agentrunner.store import EpisodeSummary, EventRow, ModelInput, TraceStore
    from agentrunner.types import (
        AgentToolCall,
        AgentTurn,
        AgentUsage,
        Chunk,
        Message,
        OpaquePart,
        ToolSpec,
    )

_EXPORTS: dict[str, str] = {
    "AgentContext": "agentrunner.model",
    "AgentRunnerError": "agentrunner.errors",
    "AgentToolCall": "agentrunner.types",
    "AgentTurn": "agentrunner.types",
    "AgentUsage": "agentrunner.types",
    "Branching": "agentrunner.branching",
    "Cancelled": "agentrunner.errors",
    "Chunk": "agentrunner.types",
    "Environment": "agentrunner.environment",
    "EnvironmentFailure": "agentrunner.errors",
    "EpisodeSummary": "agentrunner.store",
    "EventRow": "agentrunner.store",
    "Message": "agentrunner.types",
    "Model": "agentrunner.model",
    "ModelError": "agentrunner.errors",
    "ModelInput": "agentrunner.store",
    "OpaquePart": "agentrunner.types",
    "ResetResult": "agentrunner.environment",
    "Rollout": "agentrunner.runner",
    "RunConfig": "agentrunner.runner",
    "StepResult": "agentrunner.environment",
    "StoreError": "agentrunner.errors",
    "ToolAction": "agentrunner.environment",
    "ToolSpec": "agentrunner.types",
    "TraceStore": "agentrunner.store",
    "UsageError": "agentrunner.errors",
    "arun_agent_episode": "agentrunner.runs",
    "fork_episode": "agentrunner.fork",
    "resume_episode": "agentrunner.runs",
    "run_agent_episode": "agentrunner.runs",
    "run_batch": "agentrunner.batch",
    "score_actions": "agentrunner.fanout",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrunner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentContext",
    "AgentRunnerError",
    "AgentToolCall",
    "AgentTurn",
    "AgentUsage",
    "Branching",
    "Cancelled",
    "Chunk",
    "Environment",
    "EnvironmentFailure",
    "EpisodeSummary",
    "EventRow",
    "Message",
    "Model",
    "ModelError",
    "ModelInput",
    "OpaquePart",
    "ResetResult",
    "Rollout",
    "RunConfig",
    "StepResult",
    "StoreError",
    "ToolAction",
    "ToolSpec",
    "TraceStore",
    "UsageError",
    "__version__",
    "arun_agent_episode",
    "fork_episode",
    "resume_episode",
    "run_agent_episode",
    "run_batch",
    "score_actions",
]
