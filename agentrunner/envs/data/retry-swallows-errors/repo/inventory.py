"""Stock levels from the inventory service."""

import time

from retry import call_with_retry


class UnknownSku(LookupError):
    """The inventory service does not know this SKU."""


def fetch_stock(client, sku, sleep=time.sleep):
    """Units in stock for ``sku`` (an int, possibly 0).

    ``client.get_stock(sku)`` may raise ConnectionError/TimeoutError on network trouble
    (retried) or UnknownSku for a SKU that does not exist (not retried: retrying cannot
    help, and the caller shows "no such product").
    """
    return call_with_retry(lambda: client.get_stock(sku), sleep=sleep)


def fetch_many(client, skus, sleep=time.sleep):
    """Stock for several SKUs as a dict; unknown SKUs are left out."""
    levels = {}
    for sku in skus:
        try:
            levels[sku] = fetch_stock(client, sku, sleep=sleep)
        except UnknownSku:
            continue
    return levels
