"""Structured log events for the audit trail.

Events are plain dicts so they can be serialised with json.dumps. Callers often build many
events in a loop, so every event must be independent: changing one event (or the list/dict a
caller passed in) must never affect another event.
"""

DEFAULT_LEVEL = "info"
LEVELS = ("debug", "info", "warning", "error")


def make_event(name, level=DEFAULT_LEVEL, tags=None, extra=None):
    """Return a new event dict.

    ``tags`` (a list of strings) and ``extra`` (a dict) are optional; the event gets its own
    copies with a ``level:<level>`` tag appended and a default ``source`` of ``"app"``.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}")
    tags = [*(tags or ()), f"level:{level}"]
    extra = dict(extra or {})
    extra.setdefault("source", "app")
    return {"name": name, "level": level, "tags": tags, "extra": extra}


def with_tag(event, tag):
    """Return a copy of ``event`` with ``tag`` added; ``event`` itself is unchanged."""
    if tag in event["tags"]:
        return dict(event)
    return {**event, "tags": [*event["tags"], tag]}


def summarize(events):
    """Count events per level, e.g. {"info": 3, "error": 1}."""
    counts = {}
    for event in events:
        counts[event["level"]] = counts.get(event["level"], 0) + 1
    return counts
