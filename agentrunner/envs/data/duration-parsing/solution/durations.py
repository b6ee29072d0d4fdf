"""Human-friendly durations for the job scheduler's config ("timeout = 1h30m").

Accepted syntax for ``parse_duration``:

* one or more ``<number><unit>`` components, e.g. "1h30m", "90s", "1.5h", "2d 4h";
  units are d, h, m, s and ms (case-insensitive), whitespace between components is allowed;
* a bare number ("45", "2.5") means seconds;
* anything else (empty text, unknown units, stray characters, negative values) is rejected
  with ValueError, so a typo in a config file fails loudly instead of becoming a 0s timeout.
"""

import re

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_NUMBER = r"\d+(?:\.\d+)?"
_COMPONENT = re.compile(rf"({_NUMBER})\s*(ms|[dhms])")
_FULL = re.compile(rf"(?:{_NUMBER}\s*(?:ms|[dhms])\s*)+")


def parse_duration(text):
    """Return the duration described by ``text`` in seconds, as a float."""
    text = text.strip().lower()
    if re.fullmatch(_NUMBER, text):
        return float(text)
    if not _FULL.fullmatch(text):
        raise ValueError(f"invalid duration: {text!r}")
    total = 0.0
    for number, unit in _COMPONENT.findall(text):
        total += float(number) * _UNIT_SECONDS[unit]
    return total


def format_duration(seconds):
    """Compact form of a whole number of seconds: 5400 -> "1h30m", 0 -> "0s"."""
    seconds = int(seconds)
    if seconds < 0:
        raise ValueError("negative duration")
    if seconds == 0:
        return "0s"
    parts = []
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_SECONDS[unit]
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
