"""The statistics an evaluation report states, each with its uncertainty.

Pure functions over plain numbers (no store): the Wilson score interval of a pass rate, the
unbiased pass@k estimator (Chen et al., 2021: 1 - C(n - c, k) / C(n, k) per task, averaged),
the mean with its standard error and a normal interval, percentiles by linear interpolation
(numpy's default), the exact McNemar test on paired outcomes, and a paired mean difference
with its interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def as_list(self) -> list[float]:
        return [self.low, self.high]


def wilson(passed: int, n: int, z: float = Z95) -> Interval | None:
    """The Wilson score interval of ``passed`` out of ``n`` (None for ``n == 0``)."""
    if n == 0:
        return None
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate that at least one of ``k`` samples passes, from ``n`` samples of
    which ``c`` passed (``k <= n``)."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean and its standard error (sample standard deviation / sqrt n)."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, statistics.stdev(values) / math.sqrt(len(values))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between order statistics."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class McNemar:
    """Paired pass/fail outcomes of A and B: ``only_a`` pairs only A passed, ``only_b``
    only B; the exact two-sided p-value (binomial, p = 1/2, on the discordant pairs)."""

    only_a: int
    only_b: int
    p_value: float


def mcnemar(only_a: int, only_b: int) -> McNemar:
    n = only_a + only_b
    if n == 0:
        return McNemar(only_a, only_b, 1.0)
    log_half = n * math.log(0.5)
    tail = sum(  # in logs: exact enough, and quick for any number of pairs
        math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half)
        for i in range(min(only_a, only_b) + 1)
    )
    return McNemar(only_a, only_b, min(1.0, 2 * tail))


def paired_difference(
    a: Sequence[float], b: Sequence[float], z: float = Z95
) -> tuple[float | None, Interval | None]:
    """The mean of ``b - a`` over pairs, with its normal 95% interval."""
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    mean, se = mean_se(diffs)
    if mean is None:
        return None, None
    if se is None:
        return mean, None
    return mean, Interval(mean - z * se, mean + z * se)
