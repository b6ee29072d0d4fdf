import unittest

from leaderboard import Entry, order, podium, rank, top

FOUR_WITH_TIE = [
    Entry("a", 100, 1.0),
    Entry("b", 90, 2.0),
    Entry("c", 90, 3.0),
    Entry("d", 80, 4.0),
]


def names(pairs):
    return [(r, e.player) for r, e in pairs]


class HiddenOrderTest(unittest.TestCase):
    def test_higher_score_first(self):
        entries = [Entry("a", 1, 0.0), Entry("b", 3, 0.0), Entry("c", 2, 0.0)]
        self.assertEqual([e.player for e in order(entries)], ["b", "c", "a"])

    def test_equal_scores_earlier_submission_first(self):
        entries = [Entry("late", 80, 300.0), Entry("early", 80, 100.0), Entry("mid", 80, 200.0)]
        self.assertEqual([e.player for e in order(entries)], ["early", "mid", "late"])

    def test_full_ties_keep_input_order(self):
        entries = [Entry("zed", 10, 5.0), Entry("amy", 10, 5.0), Entry("max", 10, 5.0)]
        self.assertEqual([e.player for e in order(entries)], ["zed", "amy", "max"])

    def test_input_not_reordered(self):
        entries = [Entry("a", 1, 0.0), Entry("b", 2, 0.0)]
        order(entries)
        self.assertEqual([e.player for e in entries], ["a", "b"])


class HiddenRankTest(unittest.TestCase):
    def test_shared_rank_skips_next(self):
        entries = FOUR_WITH_TIE
        self.assertEqual(names(rank(entries)), [(1, "a"), (2, "b"), (2, "c"), (4, "d")])

    def test_shared_first_place(self):
        entries = [Entry("a", 90, 2.0), Entry("b", 90, 1.0), Entry("c", 70, 0.5)]
        self.assertEqual(names(rank(entries)), [(1, "b"), (1, "a"), (3, "c")])

    def test_all_tied(self):
        entries = [Entry(p, 5, 0.0) for p in "xyz"]
        self.assertEqual([r for r, _ in rank(entries)], [1, 1, 1])

    def test_empty(self):
        self.assertEqual(rank([]), [])
        self.assertEqual(top([], 3), [])

    def test_top_cut_off_inside_tie_group(self):
        entries = FOUR_WITH_TIE
        self.assertEqual(names(top(entries, 3)), [(1, "a"), (2, "b"), (2, "c")])

    def test_top_includes_tie_at_cut_off(self):
        entries = FOUR_WITH_TIE
        self.assertEqual(names(top(entries, 2)), [(1, "a"), (2, "b"), (2, "c")])

    def test_podium_two_golds(self):
        entries = [Entry("a", 9, 2.0), Entry("b", 9, 1.0), Entry("c", 8, 0.0), Entry("d", 7, 0.0)]
        self.assertEqual(podium(entries), {"gold": ["b", "a"], "silver": [], "bronze": ["c"]})

    def test_podium_distinct(self):
        entries = [Entry("a", 3, 0.0), Entry("b", 2, 0.0), Entry("c", 1, 0.0), Entry("d", 0, 0.0)]
        self.assertEqual(podium(entries), {"gold": ["a"], "silver": ["b"], "bronze": ["c"]})


if __name__ == "__main__":
    unittest.main()
