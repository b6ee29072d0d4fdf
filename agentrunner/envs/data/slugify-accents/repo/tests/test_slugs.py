import unittest

from slugs import slugify, unique_slug


class SlugifyTest(unittest.TestCase):
    def test_plain_title(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_accented_title(self):
        self.assertEqual(slugify("Café au lait"), "cafe-au-lait")

    def test_unique(self):
        self.assertEqual(unique_slug("Hello", {"hello", "hello-2"}), "hello-3")


if __name__ == "__main__":
    unittest.main()
