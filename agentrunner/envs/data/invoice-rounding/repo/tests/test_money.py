import unittest

from invoice import invoice_totals, render
from money import format_cents, split_evenly, to_cents


class MoneyTest(unittest.TestCase):
    def test_to_cents(self):
        self.assertEqual(to_cents("10.00"), 1000)
        self.assertEqual(to_cents("19.99"), 1999)

    def test_format(self):
        self.assertEqual(format_cents(1999), "19.99")
        self.assertEqual(format_cents(-250), "-2.50")

    def test_split_sums_to_total(self):
        self.assertEqual(sum(split_evenly(1000, 3)), 1000)

    def test_invoice(self):
        totals = invoice_totals([(2, "5.00")], tax_percent="10")
        self.assertEqual(totals, {"subtotal": 1000, "discount": 0, "tax": 100, "total": 1100})

    def test_render(self):
        self.assertEqual(
            render([(1, "4.00")]), "subtotal: 4.00\ndiscount: 0.00\ntax: 0.00\ntotal: 4.00"
        )


if __name__ == "__main__":
    unittest.main()
