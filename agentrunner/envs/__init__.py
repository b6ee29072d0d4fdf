"""Environments the runner drives: the local coding workspace and its tasks."""
