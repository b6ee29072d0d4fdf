"""Small statistics helpers used by the reporting job."""


def mean(values):
    """Return the arithmetic mean of a non-empty sequence of numbers."""
    if not values:
        raise ValueError("mean() of an empty sequence")
    total = 0
    for value in values:
        total += value
    return total / len(values)


def spread(values):
    """Return max(values) - min(values) for a non-empty sequence."""
    if not values:
        raise ValueError("spread() of an empty sequence")
    return max(values) - min(values)
