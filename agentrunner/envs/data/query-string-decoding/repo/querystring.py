"""Query-string handling for the search endpoint (we avoid framework helpers here because
the same code runs inside the edge worker)."""

from urllib.parse import quote, unquote


def parse_query(query):
    """Parse a URL query string into a dict of lists, keeping the order of repeated keys.

    "?a=1&b=x&b=y" -> {"a": ["1"], "b": ["x", "y"]}. A leading "?" is ignored, empty
    pairs are skipped, a key without "=" gets the value "". "+" means a space and
    %XX escapes are decoded (UTF-8) in keys and values, so an encoded "&" or "=" (%26,
    %3D) is an ordinary character of the key or value it appears in.
    """
    query = unquote(query.removeprefix("?"))
    params = {}
    for pair in query.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        params.setdefault(key, []).append(value)
    return params


def build_query(params):
    """Inverse of parse_query: {"q": ["a b"], "n": ["1"]} -> "q=a+b&n=1".

    Values may also be given as a single string instead of a list.
    """
    pairs = []
    for key, values in params.items():
        if isinstance(values, str):
            values = [values]
        for value in values:
            pairs.append(f"{_encode(key)}={_encode(value)}")
    return "&".join(pairs)


def _encode(text):
    return quote(str(text), safe="").replace("%20", "+")


def get_one(params, key, default=None):
    """The first value of ``key`` in parsed ``params``, or ``default``."""
    values = params.get(key)
    return values[0] if values else default
