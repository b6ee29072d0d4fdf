"""Known secret values (API keys, tokens) and their redaction from recorded text."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_SECRET_LEN = 8


def known_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret-looking environment variables (name -> value), longest values first."""
    env = os.environ if environ is None else environ
    found = {
        name: value
        for name, value in env.items()
        if _SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LEN
    }
    return dict(sorted(found.items(), key=lambda kv: -len(kv[1])))


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """Replace each known secret value in ``text`` with a marker naming its variable."""
    for name, value in secrets.items():
        if value in text:
            text = text.replace(value, f"[redacted:{name}]")
    return text
