"""Widgets of the TUI: the virtualized event list, the detail pane, the trace header."""
