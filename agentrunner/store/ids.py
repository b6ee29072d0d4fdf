"""New episode ids: ULIDs that sort in the order they were made and tell siblings apart
early.

python-ulid's ``ULID()`` is monotonic by adding 1 to the random part within a millisecond,
so ids made in the same millisecond (forks made together, a batch's members) differ only in
their last character, and no prefix shorter than the whole id tells them apart on screen.
Here a new millisecond draws a fresh random part, and another id in the same millisecond
adds a random step of 2^74 to 2^75 to the last one's: it still sorts after it (listings are
newest first by id), and the two differ a character or two after the time. About 20 ids fit
in a millisecond this way; the next one waits for the clock to move on.
"""

from __future__ import annotations

import secrets
import threading
import time

_RANDOM_BITS = 80
_STEP = 1 << 74
_lock = threading.Lock()
_last = (0, 0)  # (milliseconds, random part) of the last id this process made


def new_episode_id() -> str:
    """A ULID: 48 bits of milliseconds since the epoch, then 80 random bits; later than
    every id this process made before it."""
    global _last
    with _lock:
        while True:
            millis = time.time_ns() // 1_000_000
            last_millis, last_random = _last
            if millis > last_millis:
                random = secrets.randbits(_RANDOM_BITS)
                break
            random = last_random + _STEP + secrets.randbelow(_STEP)
            if random < 1 << _RANDOM_BITS:
                millis = last_millis  # the clock may have stepped back: stay in order
                break
            time.sleep(0.0001)  # this millisecond is used up
        _last = (millis, random)
    from ulid import ULID  # it loads importlib.metadata: only when an id is made

    return str(ULID(millis.to_bytes(6, "big") + random.to_bytes(10, "big")))
