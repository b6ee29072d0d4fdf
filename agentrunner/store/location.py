"""Where the trace store is when no ``--db`` names one: ``$AGENTRUNNER_DB``, else one store
per user in the XDG data folder (never the working directory, so never inside a repository
an agent works on)."""

from __future__ import annotations

import os
from pathlib import Path


def user_db_path() -> Path:
    """The per-user default store: ``$XDG_DATA_HOME/agentrunner/traces.db``, or
    ``~/.local/share/agentrunner/traces.db`` when that variable is unset, empty or relative
    (the XDG base directory rule; hand-written: platformdirs is not a dependency)."""
    data = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data) if os.path.isabs(data) else Path.home() / ".local" / "share"
    return base / "agentrunner" / "traces.db"


def default_db_path() -> Path:
    """The store a command opens without ``--db``: ``$AGENTRUNNER_DB`` or :func:`user_db_path`."""
    return Path(os.environ.get("AGENTRUNNER_DB") or user_db_path())
