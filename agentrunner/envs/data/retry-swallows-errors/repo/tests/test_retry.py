import unittest

from inventory import UnknownSku, fetch_stock
from retry import call_with_retry


class FakeClient:
    def __init__(self, responses):
        self.responses = list(responses)
        self.calls = 0

    def get_stock(self, sku):
        self.calls += 1
        response = self.responses.pop(0)
        if isinstance(response, BaseException):
            raise response
        return response


class RetryTest(unittest.TestCase):
    def test_recovers_from_transient_errors(self):
        waits = []
        client = FakeClient([ConnectionError("reset"), TimeoutError("slow"), 12])
        self.assertEqual(fetch_stock(client, "A-1", sleep=waits.append), 12)
        self.assertEqual(waits, [0.5, 1.0])

    def test_unknown_sku(self):
        client = FakeClient([UnknownSku("B-2")] * 3)
        with self.assertRaises(UnknownSku):
            fetch_stock(client, "B-2", sleep=lambda s: None)

    def test_plain_success(self):
        self.assertEqual(call_with_retry(lambda: "ok", sleep=lambda s: None), "ok")


if __name__ == "__main__":
    unittest.main()
