import unittest

from pagination import page_count, paginate, showing_label


class HiddenPaginationTest(unittest.TestCase):
    def test_page_count_partial_last_page(self):
        self.assertEqual(page_count(10, 3), 4)
        self.assertEqual(page_count(1, 10), 1)
        self.assertEqual(page_count(11, 10), 2)

    def test_page_count_exact_and_empty(self):
        self.assertEqual(page_count(9, 3), 3)
        self.assertEqual(page_count(0, 5), 1)

    def test_page_count_rejects_bad_per_page(self):
        with self.assertRaises(ValueError):
            page_count(10, 0)

    def test_last_partial_page(self):
        result = paginate(list("abcdefghij"), 4, per_page=3)
        self.assertEqual(result["items"], ["j"])
        self.assertEqual(result["pages"], 4)
        self.assertFalse(result["has_next"])
        self.assertTrue(result["has_prev"])

    def test_middle_page_has_next(self):
        result = paginate(list("abcdefghij"), 3, per_page=3)
        self.assertEqual(result["items"], ["g", "h", "i"])
        self.assertTrue(result["has_next"])

    def test_single_short_page(self):
        result = paginate([1, 2], 1, per_page=10)
        self.assertEqual(result["items"], [1, 2])
        self.assertEqual(result["pages"], 1)
        self.assertFalse(result["has_next"])

    def test_empty_listing(self):
        result = paginate([], 1)
        self.assertEqual(result["items"], [])
        self.assertEqual(result["pages"], 1)

    def test_out_of_range(self):
        with self.assertRaises(ValueError):
            paginate(list(range(10)), 5, per_page=3)
        with self.assertRaises(ValueError):
            paginate(list(range(10)), 0, per_page=3)

    def test_label_last_page(self):
        self.assertEqual(showing_label(4, 3, 10), "Showing 10-10 of 10")
        self.assertEqual(showing_label(1, 10, 0), "Showing 0 of 0")


if __name__ == "__main__":
    unittest.main()
