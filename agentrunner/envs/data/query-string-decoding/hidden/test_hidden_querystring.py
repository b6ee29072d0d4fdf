import unittest

from querystring import build_query, get_one, parse_query


class HiddenQueryStringTest(unittest.TestCase):
    def test_encoded_ampersand_in_value(self):
        self.assertEqual(parse_query("q=rock%26roll&x=1"), {"q": ["rock&roll"], "x": ["1"]})

    def test_encoded_equals_in_value(self):
        self.assertEqual(parse_query("expr=a%3Db"), {"expr": ["a=b"]})

    def test_encoded_equals_in_key(self):
        self.assertEqual(parse_query("a%3Db=c"), {"a=b": ["c"]})

    def test_plus_is_space(self):
        self.assertEqual(parse_query("q=hello+world"), {"q": ["hello world"]})

    def test_encoded_plus_is_plus(self):
        self.assertEqual(parse_query("q=1%2B1"), {"q": ["1+1"]})

    def test_literal_equals_in_value(self):
        self.assertEqual(parse_query("token=abc=="), {"token": ["abc=="]})

    def test_key_without_value_and_empty_pairs(self):
        self.assertEqual(parse_query("&flag&&a=&b=2&"), {"flag": [""], "a": [""], "b": ["2"]})

    def test_empty(self):
        self.assertEqual(parse_query(""), {})
        self.assertEqual(parse_query("?"), {})

    def test_utf8(self):
        self.assertEqual(parse_query("name=Jos%C3%A9+%C3%81lvarez"), {"name": ["José Álvarez"]})

    def test_round_trip(self):
        params = {"q": ["a&b=c", "x+y", "50% off"], "na me": ["ü"], "empty": [""]}
        self.assertEqual(parse_query(build_query(params)), params)

    def test_get_one_after_parse(self):
        params = parse_query("sort=price%2Cdesc&sort=name")
        self.assertEqual(get_one(params, "sort"), "price,desc")
        self.assertEqual(get_one(params, "missing", "x"), "x")


if __name__ == "__main__":
    unittest.main()
