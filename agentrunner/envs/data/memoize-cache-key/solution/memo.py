"""A small memoization decorator (we need cache statistics, which lru_cache lacks)."""

import functools

_KWARGS_MARK = object()


def _make_key(args, kwargs):
    key = tuple((type(arg), arg) for arg in args)
    if kwargs:
        key += (_KWARGS_MARK,)
        key += tuple((name, type(value), value) for name, value in sorted(kwargs.items()))
    return key


def memoize(func):
    """Cache ``func``'s results per call arguments.

    Two calls share a cache entry only if they have equal positional arguments *of the
    same types* and the same keyword arguments (in any order); so f(1), f(1.0) and f(True)
    are cached separately, and so are f(2, scale=3) and f(2, scale=4). Calls with an
    unhashable argument (a list, a dict...) are not cached: ``func`` is simply called.

    The wrapper exposes ``cache_info()`` -> {"hits": int, "misses": int, "size": int} and
    ``cache_clear()``.
    """
    cache = {}
    stats = {"hits": 0, "misses": 0}

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        key = _make_key(args, kwargs)
        try:
            hash(key)
        except TypeError:
            return func(*args, **kwargs)
        if key in cache:
            stats["hits"] += 1
            return cache[key]
        stats["misses"] += 1
        result = func(*args, **kwargs)
        cache[key] = result
        return result

    def cache_info():
        return {**stats, "size": len(cache)}

    def cache_clear():
        cache.clear()
        stats.update(hits=0, misses=0)

    wrapper.cache_info = cache_info
    wrapper.cache_clear = cache_clear
    return wrapper
