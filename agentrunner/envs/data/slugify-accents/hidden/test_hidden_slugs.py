import unittest

from slugs import slugify, unique_slug


class HiddenSlugifyTest(unittest.TestCase):
    def test_french(self):
        self.assertEqual(slugify("Crème Brûlée"), "creme-brulee")

    def test_uppercase_accents(self):
        self.assertEqual(slugify("ÉCOLE Élémentaire"), "ecole-elementaire")

    def test_nordic_and_german(self):
        self.assertEqual(slugify("Ångström über alles"), "angstrom-uber-alles")

    def test_spanish(self):
        self.assertEqual(slugify("Año Nuevo: ¡Feliz!"), "ano-nuevo-feliz")

    def test_already_decomposed_input(self):
        self.assertEqual(slugify("Jose\u0301"), "jose")

    def test_ascii_unchanged(self):
        self.assertEqual(slugify("  Python 3.12 -- what's new?  "), "python-3-12-what-s-new")

    def test_nothing_usable(self):
        self.assertEqual(slugify("!!! ???"), "untitled")
        self.assertEqual(slugify("日本語"), "untitled")

    def test_truncation_after_transliteration(self):
        self.assertEqual(slugify("é" * 60), "e" * 50)
        self.assertEqual(slugify("ab cd", max_length=3), "ab")

    def test_unique_with_accents(self):
        self.assertEqual(unique_slug("Café", {"cafe"}), "cafe-2")


if __name__ == "__main__":
    unittest.main()
