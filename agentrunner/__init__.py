"""agentrunner: a local, crash-safe flight recorder for long-horizon LLM agents.

The public names below are imported on first use, so that loading a small part of the
package (the command line's entry point) stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from agentrunner.lifecycle.batch import run_batch
    from agentrunner.lifecycle.fanout import score_actions
    from agentrunner.lifecycle.fork import fork_episode
    from agentrunner.lifecycle.resume import resume_episode
    from agentrunner.runtime.runner import Rollout, RunConfig, arun_agent_episode, run_agent_episode
    from agentrunner.store import EpisodeSummary, EventRow, ModelInput, TraceStore
    from agentrunner.values.branching import Branching
    from agentrunner.values.environment import Environment, ResetResult, StepResult, ToolAction
    from agentrunner.values.errors import (
        AgentRunnerError,
        Cancelled,
        EnvironmentFailure,
        ModelError,
        StoreError,
        UsageError,
    )
    from agentrunner.values.model import AgentContext, Model
    from agentrunner.values.types import (
        AgentToolCall,
        AgentTurn,
        AgentUsage,
        Chunk,
        Message,
        OpaquePart,
        ToolSpec,
    )

_EXPORTS: dict[str, str] = {
    "AgentContext": "agentrunner.values.model",
    "AgentRunnerError": "agentrunner.values.errors",
    "AgentToolCall": "agentrunner.values.types",
    "AgentTurn": "agentrunner.values.types",
    "AgentUsage": "agentrunner.values.types",
    "Branching": "agentrunner.values.branching",
    "Cancelled": "agentrunner.values.errors",
    "Chunk": "agentrunner.values.types",
    "Environment": "agentrunner.values.environment",
    "EnvironmentFailure": "agentrunner.values.errors",
    "EpisodeSummary": "agentrunner.store",
    "EventRow": "agentrunner.store",
    "Message": "agentrunner.values.types",
    "Model": "agentrunner.values.model",
    "ModelError": "agentrunner.values.errors",
    "ModelInput": "agentrunner.store",
    "OpaquePart": "agentrunner.values.types",
    "ResetResult": "agentrunner.values.environment",
    "Rollout": "agentrunner.runtime.runner",
    "RunConfig": "agentrunner.runtime.runner",
    "StepResult": "agentrunner.values.environment",
    "StoreError": "agentrunner.values.errors",
    "ToolAction": "agentrunner.values.environment",
    "ToolSpec": "agentrunner.values.types",
    "TraceStore": "agentrunner.store",
    "UsageError": "agentrunner.values.errors",
    "arun_agent_episode": "agentrunner.lifecycle.runs",
    "fork_episode": "agentrunner.lifecycle.fork",
    "resume_episode": "agentrunner.lifecycle.runs",
    "run_agent_episode": "agentrunner.lifecycle.runs",
    "run_batch": "agentrunner.lifecycle.batch",
    "score_actions": "agentrunner.lifecycle.fanout",
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
