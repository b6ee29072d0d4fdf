import threading
import time
import unittest

from loadcache import LoadingCache


def run_threads(target, count):
    results = [None] * count
    errors = []
    start = threading.Barrier(count, timeout=5)

    def worker(i):
        try:
            start.wait()
            results[i] = target(i)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results, errors


class LoadingCacheTest(unittest.TestCase):
    def test_sequential(self):
        cache = LoadingCache(lambda key: key.upper())
        self.assertEqual(cache.get("a"), "A")
        self.assertEqual(cache.get("a"), "A")
        self.assertEqual(cache.stats(), {"hits": 1, "loads": 1, "size": 1})

    def test_concurrent_requests_for_one_key(self):
        calls = []

        def slow_loader(key):
            calls.append(key)
            time.sleep(0.05)
            return key * 2

        cache = LoadingCache(slow_loader)
        results, errors = run_threads(lambda i: cache.get("k"), 6)
        self.assertEqual(errors, [])
        self.assertEqual(results, ["kk"] * 6)
        self.assertEqual(calls, ["k"])

    def test_different_keys_load_in_parallel(self):
        both_loading = threading.Barrier(2, timeout=1)

        def loader(key):
            both_loading.wait()  # fails if the other key's load is not running meanwhile
            return key

        cache = LoadingCache(loader)
        results, errors = run_threads(lambda i: cache.get(f"key{i}"), 2)
        self.assertEqual(errors, [])
        self.assertEqual(results, ["key0", "key1"])


if __name__ == "__main__":
    unittest.main()
