import unittest
from datetime import date

from schedule import add_months, billing_dates, next_billing_date


class ScheduleTest(unittest.TestCase):
    def test_add_one_month(self):
        self.assertEqual(add_months(date(2023, 3, 15), 1), date(2023, 4, 15))

    def test_clamps_to_month_end(self):
        self.assertEqual(add_months(date(2023, 1, 31), 1), date(2023, 2, 28))
        self.assertEqual(add_months(date(2024, 1, 31), 1), date(2024, 2, 29))

    def test_billing_dates_from_the_31st(self):
        self.assertEqual(
            billing_dates(date(2023, 1, 31), 4),
            [date(2023, 1, 31), date(2023, 2, 28), date(2023, 3, 31), date(2023, 4, 30)],
        )

    def test_next_billing_date(self):
        self.assertEqual(next_billing_date(date(2023, 1, 10), date(2023, 5, 2)), date(2023, 5, 10))


if __name__ == "__main__":
    unittest.main()
