"""The log's readers: an episode's history, state, restored environment and workspace
changes, read back from the store."""
