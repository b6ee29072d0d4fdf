import unittest

from pagination import page_count, paginate, showing_label


class PaginationTest(unittest.TestCase):
    def test_first_page(self):
        result = paginate(list(range(25)), 1, per_page=10)
        self.assertEqual(result["items"], list(range(10)))
        self.assertTrue(result["has_next"])
        self.assertFalse(result["has_prev"])

    def test_exact_multiple(self):
        self.assertEqual(page_count(30, 10), 3)

    def test_last_page_of_uneven_listing(self):
        result = paginate(list(range(25)), 3, per_page=10)
        self.assertEqual(result["items"], [20, 21, 22, 23, 24])

    def test_label(self):
        self.assertEqual(showing_label(2, 10, 42), "Showing 11-20 of 42")


if __name__ == "__main__":
    unittest.main()
