"""Pagination helpers for the listing API.

Pages are 1-based. ``paginate`` is what the HTTP handlers call; ``page_count`` and
``showing_label`` are also used by the HTML templates.
"""


def page_count(total_items, per_page):
    """Number of pages needed to show ``total_items`` items, ``per_page`` at a time.

    An empty listing still has one (empty) page, so the UI can render "page 1 of 1".
    """
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    if total_items < 0:
        raise ValueError("total_items cannot be negative")
    if total_items == 0:
        return 1
    return total_items // per_page


def paginate(items, page, per_page=10):
    """Return the slice of ``items`` shown on ``page`` together with paging metadata.

    Raises ValueError for a page outside ``1..page_count``.
    """
    pages = page_count(len(items), per_page)
    if page < 1 or page > pages:
        raise ValueError(f"page {page} out of range 1..{pages}")
    start = (page - 1) * per_page
    end = start + per_page
    return {
        "items": list(items[start:end]),
        "page": page,
        "pages": pages,
        "has_prev": page > 1,
        "has_next": page < pages,
    }


def showing_label(page, per_page, total_items):
    """Human readable range, e.g. "Showing 11-20 of 42" (1-based, inclusive)."""
    if total_items == 0:
        return "Showing 0 of 0"
    first = (page - 1) * per_page + 1
    last = min(page * per_page, total_items)
    return f"Showing {first}-{last} of {total_items}"
