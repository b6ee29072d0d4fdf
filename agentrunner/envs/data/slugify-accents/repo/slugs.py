"""URL slugs for blog articles."""

import re

MAX_LENGTH = 50


def slugify(title, max_length=MAX_LENGTH):
    """Turn an article title into a URL slug.

    Letters are lower-cased and accents are dropped (so "Café" gives "cafe"); every run of
    characters other than ASCII letters and digits becomes a single "-"; there are no
    leading/trailing dashes. Slugs longer than ``max_length`` are cut (without leaving a
    trailing dash). A title with nothing usable gives "untitled".
    """
    text = title.lower()
    text = text.encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    if len(text) > max_length:
        text = text[:max_length].rstrip("-")
    return text or "untitled"


def unique_slug(title, taken):
    """A slug for ``title`` that is not in the set ``taken`` ("post", "post-2", "post-3", ...)."""
    base = slugify(title)
    slug = base
    n = 2
    while slug in taken:
        slug = f"{base}-{n}"
        n += 1
    return slug
