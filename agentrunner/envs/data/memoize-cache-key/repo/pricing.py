"""Price display helpers used by the product pages."""

from memo import memoize

RATES = {"USD": 1.0, "EUR": 0.9, "GBP": 0.8, "JPY": 150.0}
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


@memoize
def convert(amount, currency="USD"):
    """Convert a USD amount to ``currency``."""
    return amount * RATES[currency]


@memoize
def display_price(amount, currency="USD", decimals=2):
    """Format a USD amount for display in ``currency``, e.g. "€9.00"."""
    value = convert(amount, currency=currency)
    if currency == "JPY":
        decimals = 0
    return f"{SYMBOLS[currency]}{value:,.{decimals}f}"


@memoize
def describe(value):
    """A debugging label showing the value and its type, e.g. "1 (int)"."""
    return f"{value!r} ({type(value).__name__})"
