import unittest

from invoice import installments, invoice_totals
from money import format_cents, percent_of, split_evenly, to_cents


class HiddenToCentsTest(unittest.TestCase):
    def test_prices_that_floats_get_wrong(self):
        self.assertEqual(to_cents("0.29"), 29)
        self.assertEqual(to_cents("4.35"), 435)
        self.assertEqual(to_cents("1.15"), 115)

    def test_short_forms(self):
        self.assertEqual(to_cents("5"), 500)
        self.assertEqual(to_cents("0.5"), 50)

    def test_negative(self):
        self.assertEqual(to_cents("-3.10"), -310)

    def test_large_amount(self):
        self.assertEqual(to_cents("12345678.91"), 1234567891)

    def test_too_many_decimals(self):
        with self.assertRaises(ValueError):
            to_cents("1.005")

    def test_not_a_number(self):
        with self.assertRaises(ValueError):
            to_cents("ten")


class HiddenPercentTest(unittest.TestCase):
    def test_half_cent_rounds_up(self):
        self.assertEqual(percent_of(125, 10), 13)
        self.assertEqual(percent_of(50, "5"), 3)

    def test_half_cent_away_from_zero_for_refunds(self):
        self.assertEqual(percent_of(-125, 10), -13)

    def test_fractional_percent(self):
        self.assertEqual(percent_of(1999, "8.25"), 165)
        self.assertEqual(percent_of(1000, "0.05"), 1)

    def test_below_half_rounds_down(self):
        self.assertEqual(percent_of(1001, "10"), 100)


class HiddenSplitTest(unittest.TestCase):
    def test_remainder_goes_to_first_shares(self):
        self.assertEqual(split_evenly(1000, 3), [334, 333, 333])
        self.assertEqual(split_evenly(200, 3), [67, 67, 66])

    def test_even_split(self):
        self.assertEqual(split_evenly(100, 4), [25, 25, 25, 25])

    def test_fewer_cents_than_parts(self):
        self.assertEqual(split_evenly(2, 5), [1, 1, 0, 0, 0])

    def test_invalid_parts(self):
        with self.assertRaises(ValueError):
            split_evenly(100, 0)


class HiddenInvoiceTest(unittest.TestCase):
    def test_small_prices_times_quantity(self):
        totals = invoice_totals([(3, "0.29"), (1, "0.57")])
        self.assertEqual(totals["subtotal"], 144)

    def test_discount_then_tax(self):
        lines = [(1, "19.99"), (2, "5.00")]
        totals = invoice_totals(lines, discount_percent="10", tax_percent="8.25")
        self.assertEqual(totals, {"subtotal": 2999, "discount": 300, "tax": 223, "total": 2922})

    def test_installments_sum_to_total(self):
        lines = [(1, "99.99")]
        parts = installments(lines, 3, tax_percent="20")
        self.assertEqual(parts, [4000, 4000, 3999])
        self.assertEqual(format_cents(sum(parts)), "119.99")


if __name__ == "__main__":
    unittest.main()
