"""Screens of the TUI: episodes, trace, branches, diff, fork editor, confirm and help."""
