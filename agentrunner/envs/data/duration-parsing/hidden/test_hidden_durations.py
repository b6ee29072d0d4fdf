import unittest

from durations import format_duration, parse_duration


class HiddenParseDurationTest(unittest.TestCase):
    def test_days(self):
        self.assertEqual(parse_duration("2d"), 172800)

    def test_three_components(self):
        self.assertEqual(parse_duration("1h30m15s"), 5415)

    def test_milliseconds(self):
        self.assertAlmostEqual(parse_duration("1500ms"), 1.5)

    def test_minutes_and_milliseconds(self):
        self.assertAlmostEqual(parse_duration("1m500ms"), 60.5)

    def test_fractional_unit(self):
        self.assertEqual(parse_duration("1.5h"), 5400)

    def test_spaces_between_components(self):
        self.assertEqual(parse_duration(" 2h 15m "), 8100)

    def test_uppercase(self):
        self.assertEqual(parse_duration("1H30M"), 5400)

    def test_bare_integer(self):
        self.assertEqual(parse_duration("45"), 45)

    def test_bare_decimal(self):
        self.assertEqual(parse_duration("2.5"), 2.5)

    def test_empty_rejected(self):
        for text in ("", "   "):
            with self.assertRaises(ValueError, msg=repr(text)):
                parse_duration(text)

    def test_garbage_rejected(self):
        for text in ("abc", "soon", "h"):
            with self.assertRaises(ValueError, msg=repr(text)):
                parse_duration(text)

    def test_stray_characters_rejected(self):
        for text in ("1h30x", "10 minutes", "5m!"):
            with self.assertRaises(ValueError, msg=repr(text)):
                parse_duration(text)

    def test_negative_rejected(self):
        with self.assertRaises(ValueError):
            parse_duration("-5m")

    def test_round_trip(self):
        for text in ("1d2h3m4s", "45m", "3h"):
            self.assertEqual(format_duration(parse_duration(text)), text)


if __name__ == "__main__":
    unittest.main()
