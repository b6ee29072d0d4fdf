import copy
import unittest

from cleanup import effective_settings, prune


class HiddenPruneTest(unittest.TestCase):
    def test_top_level_none_values(self):
        self.assertEqual(prune({"a": None, "b": 1, "c": None}), {"b": 1})

    def test_nested_dict_emptied(self):
        self.assertEqual(prune({"a": {"b": None}, "c": 2}), {"c": 2})

    def test_deeply_nested(self):
        doc = {"a": {"b": {"c": {"d": None}}, "e": [None]}, "f": {"g": 0}}
        self.assertEqual(prune(doc), {"f": {"g": 0}})

    def test_lists(self):
        self.assertEqual(prune([1, None, 2]), [1, 2])
        self.assertEqual(prune({"tags": [None, None]}), {})

    def test_dicts_inside_lists(self):
        doc = {"rules": [{"name": "x", "limit": None}, {"limit": None}, {}, []]}
        self.assertEqual(prune(doc), {"rules": [{"name": "x"}]})

    def test_originally_empty_containers_dropped(self):
        self.assertEqual(prune({"a": {}, "b": [], "c": "x"}), {"c": "x"})

    def test_falsy_values_kept(self):
        doc = {"count": 0, "enabled": False, "name": "", "ratio": 0.0, "items": [0, False, ""]}
        self.assertEqual(prune(doc), doc)

    def test_top_level_becomes_empty(self):
        self.assertEqual(prune({"a": None}), {})
        self.assertEqual(prune([None]), [])
        self.assertEqual(prune({}), {})

    def test_scalars_returned_unchanged(self):
        self.assertEqual(prune(5), 5)
        self.assertEqual(prune("x"), "x")

    def test_input_not_modified(self):
        doc = {"a": None, "b": {"c": None, "d": [None, {"e": None}, 1]}}
        before = copy.deepcopy(doc)
        self.assertEqual(prune(doc), {"b": {"d": [1]}})
        self.assertEqual(doc, before)

    def test_effective_settings_keeps_default_for_cleared_field(self):
        defaults = {"theme": "light", "editor": {"tab": 4, "wrap": True}}
        user = {"theme": None, "editor": {"tab": 2, "wrap": None}}
        self.assertEqual(
            effective_settings(defaults, user),
            {"theme": "light", "editor": {"tab": 2, "wrap": True}},
        )


if __name__ == "__main__":
    unittest.main()
