"""Prompt-cache hits as a report counts them: cache-read input tokens over all input tokens.

An episode's ratio is over the model calls whose token counts are known (the store's sums
leave the unknown ones out); an episode with no known input token (an imported session
whose source recorded no usage, an episode that made no call yet) has an unknown ratio,
never 0%. A set of episodes' ratio is over all the tokens of those whose ratio is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentrunner.report.records import CacheHits
from agentrunner.report.stats import percentile


def episode_ratio(tokens: Mapping[str, int]) -> float | None:
    """One episode's cache-hit ratio from its token sums (None: no known input token)."""
    read, total = tokens.get("cache_read", 0), tokens.get("input", 0)
    return read / total if total > 0 else None


def cache_hits(episodes_tokens: Sequence[Mapping[str, int]]) -> CacheHits:
    """The ratio over the episodes whose ratio is known, their median and lowest ratio, and
    how many episodes' ratio is unknown."""
    known = [t for t in episodes_tokens if t.get("input", 0) > 0]
    unknown = len(episodes_tokens) - len(known)
    ratios = [t.get("cache_read", 0) / t["input"] for t in known]
    read = sum(t.get("cache_read", 0) for t in known)
    total = sum(t["input"] for t in known)
    return CacheHits(
        ratio=read / total if total > 0 else None,
        episode_median=percentile(ratios, 50),
        episode_min=min(ratios, default=None),
        unknown=unknown,
    )
