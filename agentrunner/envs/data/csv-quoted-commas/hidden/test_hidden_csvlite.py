import unittest

from csvlite import read_records, split_row


class HiddenSplitRowTest(unittest.TestCase):
    def test_quoted_comma_in_middle(self):
        self.assertEqual(split_row('a,"b,c",d'), ["a", "b,c", "d"])

    def test_several_commas_in_quotes(self):
        self.assertEqual(split_row('"1,2,3",x'), ["1,2,3", "x"])

    def test_escaped_quotes(self):
        self.assertEqual(split_row('"He said ""hi""",x'), ['He said "hi"', "x"])

    def test_escaped_quotes_around_comma(self):
        self.assertEqual(split_row('"a ""b, c"" d",e'), ['a "b, c" d', "e"])

    def test_empty_fields(self):
        self.assertEqual(split_row("a,,c"), ["a", "", "c"])

    def test_trailing_empty_field(self):
        self.assertEqual(split_row("a,b,"), ["a", "b", ""])

    def test_empty_quoted_field(self):
        self.assertEqual(split_row('"",x'), ["", "x"])

    def test_space_before_opening_quote(self):
        self.assertEqual(split_row('x, "y, z"'), ["x", "y, z"])

    def test_whitespace_inside_quotes_kept(self):
        self.assertEqual(split_row('"  padded ",b'), ["  padded ", "b"])

    def test_other_delimiter(self):
        self.assertEqual(split_row('a;"b;c";d', delimiter=";"), ["a", "b;c", "d"])

    def test_unterminated_quote(self):
        with self.assertRaises(ValueError):
            split_row('"abc,def')


class HiddenReadRecordsTest(unittest.TestCase):
    def test_quoted_comma_in_record(self):
        text = 'name,city,notes\n"Doe, Jane",Paris,"likes ""tea"""\nBob,"Rome, IT",\n'
        self.assertEqual(
            read_records(text),
            [
                {"name": "Doe, Jane", "city": "Paris", "notes": 'likes "tea"'},
                {"name": "Bob", "city": "Rome, IT", "notes": ""},
            ],
        )

    def test_line_number_in_error(self):
        with self.assertRaisesRegex(ValueError, "line 3"):
            read_records("a,b\n1,2\n1,2,3\n")


if __name__ == "__main__":
    unittest.main()
