"""New episode ids: ULIDs whose random part is drawn afresh for every id.

python-ulid's ``ULID()`` is monotonic: ids made in the same millisecond (forks made
together, a batch's members) differ only in their last character, so no prefix shorter than
the whole id tells them apart on screen. Fresh randomness tells them apart a character or
two after the time; ids still sort by the millisecond they were made in.
"""

from __future__ import annotations

import secrets
import time

from ulid import ULID


def new_episode_id() -> str:
    """A ULID: 48 bits of milliseconds since the epoch, then 80 fresh random bits."""
    millis = time.time_ns() // 1_000_000
    return str(ULID(millis.to_bytes(6, "big") + secrets.token_bytes(10)))
