import unittest

from querystring import build_query, get_one, parse_query


class QueryStringTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(parse_query("?a=1&b=x&b=y"), {"a": ["1"], "b": ["x", "y"]})

    def test_percent_escapes(self):
        self.assertEqual(parse_query("city=S%C3%A3o%20Paulo"), {"city": ["São Paulo"]})

    def test_search_for_ampersand(self):
        query = build_query({"q": "salt & pepper", "page": "2"})
        self.assertEqual(parse_query(query), {"q": ["salt & pepper"], "page": ["2"]})

    def test_get_one(self):
        self.assertEqual(get_one({"a": ["1", "2"]}, "a"), "1")
        self.assertIsNone(get_one({}, "a"))


if __name__ == "__main__":
    unittest.main()
