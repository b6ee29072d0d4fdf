"""The package's entry points that run episodes, with the decision engine plugged in.

The runner (a layer below) knows the decision engine only as a hook that
:mod:`agentrunner.lifecycle.decisions` registers when it loads; this module loads it, so that
``agentrunner.run_agent_episode(..., branching=...)`` and ``agentrunner.resume_episode`` of
a branching episode reach it. Batches and fan-outs load it through their units
(:mod:`agentrunner.lifecycle.members`), the command line through its run options.
"""

from __future__ import annotations

import agentrunner.lifecycle.decisions  # noqa: F401  (the engine plugs into the runner as it loads)
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.runtime.runner import arun_agent_episode, run_agent_episode

__all__ = ["arun_agent_episode", "resume_episode", "run_agent_episode"]
