"""The context policy each episode ran with, as a report groups and compares by it.

An episode's policy is the one its history last recorded: the ``config`` of its last
``resume`` that recorded settings (a fork that changed ``--context``, or a resume that did),
else its ``episode.start``'s (a fork inherits its root's). A built-in policy reads as it is
written on the command line (``none``, ``mask:10``, ``summarize``); a custom one as its name
and settings; :data:`NOT_RECORDED` when the record names none (an imported session, an
episode recorded before ``--context`` existed).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

NOT_RECORDED = "-"
SETTINGS_EVENTS = ["episode.start", "resume"]


def policies(store: StoreBackend, episode_ids: Iterable[str]) -> dict[str, str]:
    """Each episode's context policy (one indexed read of its settings events per episode)."""
    return {episode_id: policy_of(store, episode_id) for episode_id in episode_ids}


def policy_of(store: StoreBackend, episode_id: str) -> str:
    """The context policy ``episode_id``'s history last recorded, as text."""
    setting: Any = None
    for row in store.iter_events(episode_id, kinds=SETTINGS_EVENTS):
        config = row.payload.get("config")
        if isinstance(config, dict):  # a resume that kept the settings records none
            setting = config.get("context")
    return label(setting)


def label(setting: Any) -> str:
    """A recorded ``context`` setting as text: a built-in policy's own, a custom one's name
    and settings (compact JSON), :data:`NOT_RECORDED` for none."""
    if setting is None:
        return NOT_RECORDED
    if isinstance(setting, dict):
        name, settings = setting.get("name", "?"), setting.get("settings")
        spelled = json.dumps(settings, sort_keys=True, separators=(",", ":")) if settings else ""
        return f"{name} {spelled}".strip()
    return str(setting)
