"""agentrunner: a local, crash-safe flight recorder for long-horizon LLM agents."""

__version__ = "0.1.0"

from agentrunner.environment import Environment, ResetResult, StepResult, ToolAction  # noqa: E402
from agentrunner.errors import (  # noqa: E402
    AgentRunnerError,
    Cancelled,
    EnvironmentFailure,
    ModelError,
    StoreError,
    UsageError,
)
from agentrunner.model import AgentContext, Model  # noqa: E402
from agentrunner.runner import Rollout, RunConfig, arun_agent_episode, run_agent_episode  # noqa: E402
from agentrunner.store import EpisodeSummary, EventRow, ModelInput, TraceStore  # noqa: E402
from agentrunner.types import (  # noqa: E402
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
    "run_agent_episode",
]
