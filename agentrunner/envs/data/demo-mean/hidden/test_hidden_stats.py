import unittest

from stats import mean, spread


class HiddenMeanTest(unittest.TestCase):
    def test_single_value(self):
        self.assertEqual(mean([5]), 5)

    def test_floats(self):
        self.assertAlmostEqual(mean([0.5, 1.5]), 1.0)

    def test_negative(self):
        self.assertEqual(mean([-2, 2, -4, 4]), 0)

    def test_empty_raises(self):
        with self.assertRaises(ValueError):
            mean([])

    def test_spread_single(self):
        self.assertEqual(spread([3]), 0)


if __name__ == "__main__":
    unittest.main()
