"""Monthly billing schedule for subscriptions.

A subscription started on day D of a month is billed on day D of every following month;
in months that have no day D (e.g. D = 31 in April, or 29-31 in February) the bill falls
on the last day of that month instead, and the next month goes back to day D.
"""

import calendar
from datetime import date


def add_months(day, months):
    """The same day-of-month ``months`` months later (earlier if negative), clamped to the
    last day of the target month: 2024-01-31 + 1 month -> 2024-02-29."""
    year, month_index = divmod(day.year * 12 + (day.month - 1) + months, 12)
    month = month_index + 1
    last = calendar.monthrange(year, month)[1]
    return date(year, month, min(day.day, last))


def billing_dates(start, count):
    """The first ``count`` billing dates of a subscription started on ``start``."""
    return [add_months(start, n) for n in range(count)]


def next_billing_date(start, today):
    """The first billing date on or after ``today`` (``start`` itself if it is later)."""
    if today <= start:
        return start
    months = (today.year - start.year) * 12 + (today.month - start.month)
    candidate = add_months(start, months)
    if candidate < today:
        candidate = add_months(start, months + 1)
    return candidate
