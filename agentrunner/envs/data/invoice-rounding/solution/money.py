"""Money helpers. Amounts are handled as integer cents everywhere except at the edges,
where they arrive as decimal strings ("19.99") from the product catalogue."""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation


def _decimal(value):
    try:
        result = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"not a number: {value!r}") from None
    if not result.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return result


def to_cents(amount):
    """Parse a decimal amount string ("19.99", "5", "0.5", "-3.10") into integer cents.

    Amounts with more than two decimal places ("1.005") or that are not numbers at all
    raise ValueError.
    """
    cents = _decimal(amount) * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"more than two decimal places: {amount!r}")
    return int(cents)


def format_cents(cents):
    """1999 -> "19.99", 5 -> "0.05", -250 -> "-2.50"."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def percent_of(cents, percent):
    """``percent`` percent of ``cents``, rounded to a whole cent, halves away from zero.

    ``percent`` is a number or a decimal string such as "8.25".
    Example: percent_of(125, 10) == 13 (12.5 cents rounds up).
    """
    exact = Decimal(cents) * _decimal(percent) / 100
    return int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def split_evenly(cents, parts):
    """Split a non-negative amount into ``parts`` whole-cent shares.

    The shares sum exactly to ``cents``, differ by at most one cent, and the larger shares
    come first: split_evenly(1000, 3) == [334, 333, 333].
    """
    if parts < 1:
        raise ValueError("parts must be at least 1")
    share, remainder = divmod(cents, parts)
    return [share + 1] * remainder + [share] * (parts - remainder)
