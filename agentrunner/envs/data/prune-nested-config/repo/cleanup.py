"""Cleaning up settings documents before they are stored.

The settings editor sends JSON where a cleared field is null. Before storing we drop the
nulls and whatever becomes empty because of them.
"""


def prune(value):
    """Return a copy of ``value`` with None values removed, recursively.

    * dict entries whose value is None are dropped, and None items are dropped from lists;
    * nested dicts and lists that are empty (originally, or after pruning) are dropped too;
    * other falsy values (0, False, "") are real settings and are kept;
    * the top-level value itself is never dropped: prune({"a": None}) == {};
    * ``value`` itself is not modified.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            cleaned = prune(item)
            if cleaned is None or cleaned == {} or cleaned == []:
                del value[key]
            else:
                value[key] = cleaned
        return value
    if isinstance(value, list):
        return [prune(item) for item in value if item is not None]
    return value


def merge(defaults, overrides):
    """Recursively merge two settings dicts into a new dict (``overrides`` wins)."""
    merged = dict(defaults)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def effective_settings(defaults, user_settings):
    """The settings to store: the user's (pruned) settings merged over the defaults."""
    return merge(defaults, prune(user_settings))
