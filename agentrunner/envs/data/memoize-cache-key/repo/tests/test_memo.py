import unittest

from memo import memoize
from pricing import display_price


class MemoizeTest(unittest.TestCase):
    def test_caches_repeated_calls(self):
        calls = []

        @memoize
        def square(x):
            calls.append(x)
            return x * x

        self.assertEqual(square(4), 16)
        self.assertEqual(square(4), 16)
        self.assertEqual(calls, [4])
        self.assertEqual(square.cache_info(), {"hits": 1, "misses": 1, "size": 1})

    def test_prices_in_several_currencies(self):
        self.assertEqual(display_price(10), "$10.00")
        self.assertEqual(display_price(10, currency="EUR"), "€9.00")


if __name__ == "__main__":
    unittest.main()
