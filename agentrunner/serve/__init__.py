"""Serving agentrunner's workspace environments to trainers over the OpenEnv protocol, every
step recorded as an episode in the trace store (``agentrunner serve-env``)."""
