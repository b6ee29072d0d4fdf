import unittest

from csvlite import read_records, split_row


class SplitRowTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(split_row("a, b ,c"), ["a", "b", "c"])

    def test_quoted_field(self):
        self.assertEqual(split_row('1,"Smith",x'), ["1", "Smith", "x"])

    def test_quoted_comma(self):
        self.assertEqual(split_row('2,"Doe, Jane",admin'), ["2", "Doe, Jane", "admin"])


class ReadRecordsTest(unittest.TestCase):
    def test_records(self):
        text = "id,name\n1,Ann\n\n2,Bob\n"
        self.assertEqual(
            read_records(text), [{"id": "1", "name": "Ann"}, {"id": "2", "name": "Bob"}]
        )

    def test_wrong_field_count(self):
        with self.assertRaises(ValueError):
            read_records("id,name\n1\n")


if __name__ == "__main__":
    unittest.main()
