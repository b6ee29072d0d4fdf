import unittest
from datetime import date

from schedule import add_months, billing_dates, next_billing_date


class HiddenAddMonthsTest(unittest.TestCase):
    def test_november_to_december(self):
        self.assertEqual(add_months(date(2023, 11, 15), 1), date(2023, 12, 15))

    def test_year_rollover(self):
        self.assertEqual(add_months(date(2023, 12, 5), 1), date(2024, 1, 5))
        self.assertEqual(add_months(date(2023, 6, 30), 12), date(2024, 6, 30))
        self.assertEqual(add_months(date(2023, 1, 1), 23), date(2024, 12, 1))

    def test_backwards(self):
        self.assertEqual(add_months(date(2024, 1, 15), -1), date(2023, 12, 15))
        self.assertEqual(add_months(date(2024, 3, 31), -1), date(2024, 2, 29))
        self.assertEqual(add_months(date(2024, 5, 10), -17), date(2022, 12, 10))

    def test_zero(self):
        self.assertEqual(add_months(date(2024, 2, 29), 0), date(2024, 2, 29))

    def test_leap_day_yearly(self):
        self.assertEqual(add_months(date(2024, 2, 29), 12), date(2025, 2, 28))
        self.assertEqual(add_months(date(2024, 2, 29), 48), date(2028, 2, 29))


class HiddenScheduleTest(unittest.TestCase):
    def test_day_31_across_a_year(self):
        dates = billing_dates(date(2023, 10, 31), 6)
        self.assertEqual(
            dates,
            [
                date(2023, 10, 31),
                date(2023, 11, 30),
                date(2023, 12, 31),
                date(2024, 1, 31),
                date(2024, 2, 29),
                date(2024, 3, 31),
            ],
        )

    def test_day_30_after_february(self):
        dates = billing_dates(date(2023, 1, 30), 3)
        self.assertEqual(dates, [date(2023, 1, 30), date(2023, 2, 28), date(2023, 3, 30)])

    def test_count_edge_cases(self):
        self.assertEqual(billing_dates(date(2023, 5, 1), 1), [date(2023, 5, 1)])
        self.assertEqual(billing_dates(date(2023, 5, 1), 0), [])

    def test_next_in_december(self):
        self.assertEqual(
            next_billing_date(date(2023, 1, 20), date(2023, 11, 25)), date(2023, 12, 20)
        )

    def test_next_after_short_month(self):
        self.assertEqual(next_billing_date(date(2023, 1, 31), date(2023, 3, 1)), date(2023, 3, 31))
        self.assertEqual(next_billing_date(date(2023, 1, 31), date(2023, 2, 28)), date(2023, 2, 28))

    def test_next_before_start(self):
        self.assertEqual(next_billing_date(date(2024, 6, 1), date(2024, 1, 1)), date(2024, 6, 1))

    def test_next_across_years(self):
        self.assertEqual(next_billing_date(date(2022, 12, 31), date(2024, 2, 1)), date(2024, 2, 29))


if __name__ == "__main__":
    unittest.main()
