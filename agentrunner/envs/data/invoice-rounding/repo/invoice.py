"""Invoice totals for the billing service."""

from money import format_cents, percent_of, split_evenly, to_cents


def invoice_totals(lines, discount_percent="0", tax_percent="0"):
    """Totals in cents for ``lines`` = [(quantity, unit_price_string), ...].

    The discount applies to the subtotal; tax applies to the discounted amount.
    """
    subtotal = sum(quantity * to_cents(price) for quantity, price in lines)
    discount = percent_of(subtotal, discount_percent)
    taxable = subtotal - discount
    tax = percent_of(taxable, tax_percent)
    return {"subtotal": subtotal, "discount": discount, "tax": tax, "total": taxable + tax}


def render(lines, discount_percent="0", tax_percent="0"):
    """The totals block of the invoice PDF, one "label: amount" per line."""
    totals = invoice_totals(lines, discount_percent, tax_percent)
    return "\n".join(f"{label}: {format_cents(totals[label])}" for label in totals)


def installments(lines, count, discount_percent="0", tax_percent="0"):
    """The invoice total split into ``count`` monthly installments (in cents)."""
    return split_evenly(invoice_totals(lines, discount_percent, tax_percent)["total"], count)
