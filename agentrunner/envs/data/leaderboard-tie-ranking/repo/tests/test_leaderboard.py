import unittest

from leaderboard import Entry, order, podium, rank


class LeaderboardTest(unittest.TestCase):
    def test_order_by_score(self):
        entries = [Entry("ann", 50, 10.0), Entry("bob", 70, 20.0), Entry("cy", 60, 5.0)]
        self.assertEqual([e.player for e in order(entries)], ["bob", "cy", "ann"])

    def test_distinct_scores_rank(self):
        entries = [Entry("ann", 50, 10.0), Entry("bob", 70, 20.0)]
        self.assertEqual([r for r, _ in rank(entries)], [1, 2])

    def test_podium_with_shared_silver(self):
        entries = [
            Entry("ann", 100, 1.0),
            Entry("bob", 90, 2.0),
            Entry("cy", 90, 3.0),
            Entry("dee", 80, 4.0),
        ]
        self.assertEqual(podium(entries), {"gold": ["ann"], "silver": ["bob", "cy"], "bronze": []})


if __name__ == "__main__":
    unittest.main()
