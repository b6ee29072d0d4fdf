import threading
import time
import unittest

from loadcache import LoadingCache


def run_threads(target, count):
    results = [None] * count
    errors = [None] * count
    start = threading.Barrier(count, timeout=5)

    def worker(i):
        try:
            start.wait()
            results[i] = target(i)
        except Exception as exc:
            errors[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results, errors


class CountingLoader:
    def __init__(self, delay=0.05):
        self.delay = delay
        self.calls = []
        self._lock = threading.Lock()

    def __call__(self, key):
        with self._lock:
            self.calls.append(key)
        time.sleep(self.delay)
        return f"value-{key}"


class HiddenLoadingCacheTest(unittest.TestCase):
    def test_one_load_for_many_concurrent_gets(self):
        loader = CountingLoader()
        cache = LoadingCache(loader)
        results, errors = run_threads(lambda i: cache.get("user:1"), 8)
        self.assertEqual(errors, [None] * 8)
        self.assertEqual(results, ["value-user:1"] * 8)
        self.assertEqual(loader.calls, ["user:1"])
        self.assertEqual(cache.stats(), {"hits": 7, "loads": 1, "size": 1})

    def test_mixed_keys_each_loaded_once(self):
        loader = CountingLoader(delay=0.03)
        cache = LoadingCache(loader)
        results, errors = run_threads(lambda i: cache.get(i % 3), 9)
        self.assertEqual(errors, [None] * 9)
        self.assertEqual(results, [f"value-{i % 3}" for i in range(9)])
        self.assertEqual(sorted(loader.calls), [0, 1, 2])
        self.assertEqual(cache.stats(), {"hits": 6, "loads": 3, "size": 3})

    def test_slow_key_does_not_block_other_keys(self):
        release_slow = threading.Event()
        fast_done = threading.Event()

        def loader(key):
            if key == "slow":
                release_slow.wait(2)
                return "slow-value"
            return "fast-value"

        cache = LoadingCache(loader)
        slow = threading.Thread(target=cache.get, args=("slow",))
        slow.start()
        time.sleep(0.02)

        def fetch_fast():
            cache.get("fast")
            fast_done.set()

        fast = threading.Thread(target=fetch_fast)
        fast.start()
        finished_while_slow_pending = fast_done.wait(1)
        release_slow.set()
        slow.join(5)
        fast.join(5)
        self.assertTrue(finished_while_slow_pending)
        self.assertEqual(cache.get("slow"), "slow-value")

    def test_failed_load_is_not_cached(self):
        attempts = []

        def flaky(key):
            attempts.append(key)
            if len(attempts) == 1:
                raise ConnectionError("db down")
            return "ok"

        cache = LoadingCache(flaky)
        with self.assertRaises(ConnectionError):
            cache.get("k")
        self.assertEqual(cache.get("k"), "ok")
        self.assertEqual(cache.stats(), {"hits": 0, "loads": 1, "size": 1})

    def test_concurrent_gets_after_failure_recover(self):
        state = {"calls": 0}
        lock = threading.Lock()

        def loader(key):
            with lock:
                state["calls"] += 1
                first = state["calls"] == 1
            time.sleep(0.03)
            if first:
                raise TimeoutError("slow db")
            return "v"

        cache = LoadingCache(loader)
        results, errors = run_threads(lambda i: cache.get("k"), 5)
        failures = [e for e in errors if e is not None]
        self.assertGreaterEqual(len(failures), 1)
        for failure in failures:
            self.assertIsInstance(failure, TimeoutError)
        self.assertEqual([r for r in results if r is not None], ["v"] * (5 - len(failures)))
        calls_so_far = state["calls"]
        self.assertEqual(cache.get("k"), "v")
        self.assertEqual(state["calls"], max(calls_so_far, 2))

    def test_invalidate_reloads_once(self):
        loader = CountingLoader(delay=0.02)
        cache = LoadingCache(loader)
        cache.get("a")
        cache.invalidate("a")
        _, errors = run_threads(lambda i: cache.get("a"), 4)
        self.assertEqual(errors, [None] * 4)
        self.assertEqual(loader.calls, ["a", "a"])

    def test_none_is_a_cacheable_value(self):
        calls = []
        cache = LoadingCache(lambda key: calls.append(key))
        self.assertIsNone(cache.get("x"))
        self.assertIsNone(cache.get("x"))
        self.assertEqual(calls, ["x"])


if __name__ == "__main__":
    unittest.main()
