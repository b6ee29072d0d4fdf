"""The ``--seeds`` syntax of ``batch``: inclusive ranges and single seeds."""

from __future__ import annotations

import re

from agentrunner.lifecycle.batch import SEED_MAX, SEED_MIN
from agentrunner.values.errors import UsageError

MAX_SEEDS = 100_000
SEEDS_FORMS = "0-7, 1,2,5 or -3..4 (write --seeds=-3..4 when the value starts with -)"
_SEED_PART = re.compile(r"(-?\d+)(?:(\.\.|-)(-?\d+))?")


def parse_seeds(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``; ``"-3..-1"`` -> ``[-3, -2, -1]``.

    Ranges are inclusive, ``A-B`` or ``A..B`` (either end may be negative; ``..`` reads
    better then). At most ``MAX_SEEDS`` seeds, each a signed 64-bit integer; duplicates are
    dropped, order kept.
    """
    seeds: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        match = _SEED_PART.fullmatch(part)
        if match is None:
            raise UsageError(f"--seeds must look like {SEEDS_FORMS}; got {text!r}")
        lo, hi = int(match[1]), int(match[3] if match[3] is not None else match[1])
        for seed in (lo, hi):
            if not SEED_MIN <= seed <= SEED_MAX:
                raise UsageError(f"--seeds: {seed} is not between {SEED_MIN} and {SEED_MAX}")
        if hi < lo:
            raise UsageError(
                f"--seeds: {part} is a reversed range (from {lo} down to {hi}); "
                f"write {hi}{match[2]}{lo}"
            )
        if len(seeds) + (hi - lo + 1) > MAX_SEEDS:
            raise UsageError(f"--seeds selects more than {MAX_SEEDS:,} seeds")
        seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise UsageError(f"--seeds selects no seed; give e.g. {SEEDS_FORMS}")
    return list(dict.fromkeys(seeds))
