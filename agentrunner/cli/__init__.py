"""The ``agentrunner`` command line."""
