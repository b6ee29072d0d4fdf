"""agentrunner: a local, crash-safe flight recorder for long-horizon LLM agents."""

__version__ = "0.1.0"

from agentrunner.batch import run_batch
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

__all__ = [
    "AgentContext",
    "AgentRunnerError",
    "AgentToolCall",
    "AgentTurn",
    "AgentUsage",
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
