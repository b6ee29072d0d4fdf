import unittest

from durations import format_duration, parse_duration


class ParseDurationTest(unittest.TestCase):
    def test_hours_and_minutes(self):
        self.assertEqual(parse_duration("1h30m"), 5400)

    def test_seconds(self):
        self.assertEqual(parse_duration("90s"), 90)

    def test_milliseconds(self):
        self.assertEqual(parse_duration("250ms"), 0.25)

    def test_format(self):
        self.assertEqual(format_duration(5400), "1h30m")


if __name__ == "__main__":
    unittest.main()
