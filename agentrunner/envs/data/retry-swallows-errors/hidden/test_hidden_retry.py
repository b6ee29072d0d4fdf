import logging
import unittest

from inventory import UnknownSku, fetch_many, fetch_stock
from retry import call_with_retry

logging.disable(logging.CRITICAL)


class Script:
    """A callable that raises or returns the scripted outcomes in order."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class Client:
    def __init__(self, per_sku):
        self.per_sku = {sku: Script(*outcomes) for sku, outcomes in per_sku.items()}

    def get_stock(self, sku):
        return self.per_sku[sku]()


class HiddenRetryTest(unittest.TestCase):
    def setUp(self):
        self.waits = []

    def test_non_retryable_error_propagates_at_once(self):
        func = Script(ValueError("bad request"), "never")
        with self.assertRaises(ValueError):
            call_with_retry(func, sleep=self.waits.append)
        self.assertEqual(func.calls, 1)
        self.assertEqual(self.waits, [])

    def test_exhausted_attempts_raise_last_error(self):
        func = Script(ConnectionError("one"), ConnectionError("two"), TimeoutError("three"))
        with self.assertRaisesRegex(TimeoutError, "three"):
            call_with_retry(func, sleep=self.waits.append)
        self.assertEqual(func.calls, 3)
        self.assertEqual(self.waits, [0.5, 1.0])

    def test_falsy_results_are_results(self):
        for value in (0, None, [], ""):
            func = Script(value)
            self.assertEqual(call_with_retry(func, sleep=self.waits.append), value)
            self.assertEqual(func.calls, 1)
        self.assertEqual(self.waits, [])

    def test_subclass_of_transient_error_is_retried(self):
        func = Script(ConnectionResetError("reset"), 5)
        self.assertEqual(call_with_retry(func, sleep=self.waits.append), 5)
        self.assertEqual(self.waits, [0.5])

    def test_custom_retry_on(self):
        func = Script(KeyError("k"), KeyError("k"), "done")
        result = call_with_retry(
            func, attempts=5, retry_on=(KeyError,), backoff=1, sleep=self.waits.append
        )
        self.assertEqual(result, "done")
        self.assertEqual(self.waits, [1, 2])

    def test_custom_retry_on_excludes_defaults(self):
        func = Script(ConnectionError("down"), "x")
        with self.assertRaises(ConnectionError):
            call_with_retry(func, retry_on=(KeyError,), sleep=self.waits.append)
        self.assertEqual(func.calls, 1)

    def test_single_attempt(self):
        func = Script(TimeoutError("slow"))
        with self.assertRaises(TimeoutError):
            call_with_retry(func, attempts=1, sleep=self.waits.append)
        self.assertEqual(self.waits, [])

    def test_invalid_attempts(self):
        with self.assertRaises(ValueError):
            call_with_retry(lambda: 1, attempts=0, sleep=self.waits.append)

    def test_out_of_stock_is_zero(self):
        client = Client({"A": [0]})
        self.assertEqual(fetch_stock(client, "A", sleep=self.waits.append), 0)
        self.assertEqual(self.waits, [])

    def test_unknown_sku_not_retried(self):
        client = Client({"A": [UnknownSku("A"), 3]})
        with self.assertRaises(UnknownSku):
            fetch_stock(client, "A", sleep=self.waits.append)
        self.assertEqual(client.per_sku["A"].calls, 1)

    def test_fetch_many(self):
        client = Client({"A": [ConnectionError(), 4], "B": [UnknownSku("B")], "C": [0]})
        self.assertEqual(
            fetch_many(client, ["A", "B", "C"], sleep=self.waits.append), {"A": 4, "C": 0}
        )

    def test_service_down_raises(self):
        client = Client({"A": [ConnectionError("down")] * 3})
        with self.assertRaises(ConnectionError):
            fetch_stock(client, "A", sleep=self.waits.append)


if __name__ == "__main__":
    unittest.main()
