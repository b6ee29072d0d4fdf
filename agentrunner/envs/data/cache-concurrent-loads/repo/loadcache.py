"""A read-through cache in front of slow loaders (database queries, HTTP calls).

The web server calls ``LoadingCache.get`` from many worker threads at once.
"""

import threading


class LoadingCache:
    """Cache ``loader(key)`` results.

    Contract:

    * the loader runs at most once per key while its value is cached: when several threads
      ask for the same missing key at the same time, one of them runs the loader and the
      others wait for it and get the same value;
    * loads of *different* keys must not wait for each other (a slow key must not stall
      the whole server);
    * if the loader raises, the exception propagates and nothing is cached, so a later
      ``get`` tries again;
    * ``stats()`` reports {"hits", "loads", "size"}: a hit is a ``get`` answered without
      running the loader, ``loads`` counts loader runs that returned a value.
    """

    def __init__(self, loader):
        self._loader = loader
        self._values = {}
        self._lock = threading.Lock()
        self._hits = 0
        self._loads = 0

    def get(self, key):
        with self._lock:
            if key in self._values:
                self._hits += 1
                return self._values[key]
        value = self._loader(key)
        with self._lock:
            self._loads += 1
            self._values[key] = value
        return value

    def invalidate(self, key):
        """Forget ``key``; the next ``get`` loads it again."""
        with self._lock:
            self._values.pop(key, None)

    def stats(self):
        with self._lock:
            return {"hits": self._hits, "loads": self._loads, "size": len(self._values)}
