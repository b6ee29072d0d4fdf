import unittest

from memo import memoize
from pricing import convert, describe, display_price


def counted(func):
    calls = []

    def inner(*args, **kwargs):
        calls.append((args, kwargs))
        return func(*args, **kwargs)

    inner.__name__ = func.__name__
    inner.__doc__ = func.__doc__
    return memoize(inner), calls


class HiddenMemoizeTest(unittest.TestCase):
    def test_keyword_arguments_are_part_of_the_key(self):
        power, _ = counted(lambda base, exponent=2: base**exponent)
        self.assertEqual(power(2, exponent=3), 8)
        self.assertEqual(power(2, exponent=5), 32)
        self.assertEqual(power(2), 4)

    def test_keyword_order_does_not_matter_for_results(self):
        f, _ = counted(lambda a=0, b=0: a - b)
        self.assertEqual(f(a=5, b=2), 3)
        self.assertEqual(f(b=2, a=5), 3)
        self.assertEqual(f(a=2, b=5), -3)

    def test_keyword_value_cached(self):
        f, calls = counted(lambda x, scale=1: x * scale)
        f(3, scale=2)
        f(3, scale=2)
        self.assertEqual(len(calls), 1)

    def test_equal_values_of_different_types(self):
        f, calls = counted(lambda v: f"{v!r}")
        self.assertEqual([f(1), f(1.0), f(True)], ["1", "1.0", "True"])
        self.assertEqual(len(calls), 3)

    def test_unhashable_arguments_call_through(self):
        f, calls = counted(lambda items: sum(items))
        self.assertEqual(f([1, 2]), 3)
        self.assertEqual(f([1, 2, 3]), 6)
        self.assertEqual(len(calls), 2)

    def test_unhashable_keyword_argument(self):
        f, _ = counted(lambda x, opts=None: (x, len(opts or {})))
        self.assertEqual(f(1, opts={"a": 1}), (1, 1))

    def test_cache_clear(self):
        f, calls = counted(lambda x: x + 1)
        f(1)
        f.cache_clear()
        f(1)
        self.assertEqual(len(calls), 2)
        self.assertEqual(f.cache_info(), {"hits": 0, "misses": 1, "size": 1})

    def test_wraps_metadata(self):
        @memoize
        def compute(x):
            """Docstring."""
            return x

        self.assertEqual(compute.__name__, "compute")
        self.assertEqual(compute.__doc__, "Docstring.")

    def test_pricing(self):
        self.assertEqual(display_price(5), "$5.00")
        self.assertEqual(display_price(5, currency="GBP"), "£4.00")
        self.assertEqual(display_price(5, currency="JPY"), "¥750")
        self.assertEqual(display_price(5, decimals=0), "$5")
        self.assertEqual(convert(10, currency="EUR"), 9.0)

    def test_describe(self):
        self.assertEqual(describe(1), "1 (int)")
        self.assertEqual(describe(True), "True (bool)")
        self.assertEqual(describe(1.0), "1.0 (float)")


if __name__ == "__main__":
    unittest.main()
