"""Import other agents' traces (Claude Code, Codex, mini-swe-agent, SWE-agent, ATIF) as episodes.

:mod:`.registry` finds a file's format and imports it; :mod:`.importer` writes sessions into
the store; :mod:`.items` is what format modules read a source into.
"""
