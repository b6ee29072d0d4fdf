import unittest

from cleanup import effective_settings, merge, prune


class PruneTest(unittest.TestCase):
    def test_nothing_to_prune(self):
        self.assertEqual(
            prune({"theme": "dark", "font": {"size": 12}}), {"theme": "dark", "font": {"size": 12}}
        )

    def test_drops_none(self):
        self.assertEqual(prune({"theme": None, "font": "mono"}), {"font": "mono"})

    def test_merge(self):
        self.assertEqual(merge({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}), {"a": {"x": 1, "y": 3}})

    def test_effective(self):
        self.assertEqual(
            effective_settings({"theme": "light"}, {"lang": "fr"}), {"theme": "light", "lang": "fr"}
        )


if __name__ == "__main__":
    unittest.main()
