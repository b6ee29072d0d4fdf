"""The Textual TUI (``agentrunner tui``): browse episodes, follow running ones live, replay,
branch and resume traces. Start with :func:`agentrunner.tui.app.run_tui`."""
