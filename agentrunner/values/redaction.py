"""What the recorder writes is always recordable and never holds a known secret.

*Recordable*: Python strings may hold lone surrogates (a provider's broken escape, a file name
that is not UTF-8) that UTF-8 and JSON cannot carry; they become U+FFFD and the caller says
in the payload how many were replaced (``replaced_chars``).

*No secrets*: the values of secret-looking environment variables (names with KEY, TOKEN,
SECRET, PASSWORD, CREDENTIAL, AUTH) of at least :data:`MIN_SECRET_LEN` characters are
replaced by ``[redacted:NAME]`` wherever they appear, in the forms a model that echoes or
decodes a key would produce: as is, upper- and lower-case, reversed, hex, and base64 (plain
and URL-safe, at any alignment inside a longer encoded text). Streamed text is redacted
across chunk boundaries (chunks are written as they come, never held back): a chunk ending
in the first :data:`MIN_PARTIAL` or more characters of a secret has them redacted, and the
next chunk the rest of it.

Tool results, workspace snapshot blobs and exports are also searched for the costlier forms
(rot13, base32, spaced hex and decimal bytes, base64 of gzip, pieces of a key, a key spread
with a character between each pair): :mod:`agentrunner.values.redaction_encodings`.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentrunner.values.redaction_encodings import DeepRedactor

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_SECRET_LEN = 6
"""Shorter values are not treated as secrets (they would match ordinary text)."""
MIN_PARTIAL = 6
"""A chunk ending in this many or more characters of a secret has them redacted."""
_SURROGATES = re.compile("[\ud800-\udfff]")
_OVERLAP = 64 << 10
"""Bytes of a large file's previous block searched again with the next one."""


def recordable(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many were replaced."""
    if text.isascii():  # the usual case, decided at once
        return text, 0
    return _SURROGATES.subn("\ufffd", text)


def known_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret-looking environment variables (name -> value), longest values first."""
    env = os.environ if environ is None else environ
    found = {
        name: value
        for name, value in env.items()
        if _SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LEN
    }
    return dict(sorted(found.items(), key=lambda kv: -len(kv[1])))


def secret_forms(value: str) -> set[str]:
    """The texts under which ``value`` may show up: as is, cased, reversed, hex, base64."""
    raw = value.encode("utf-8", "surrogatepass")
    forms = {value, value.upper(), value.lower(), value[::-1], raw.hex(), raw.hex().upper()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for shift in range(3):  # the stable middle of the encoding at each alignment
            encoded = encode(b"\0" * shift + raw).decode("ascii")
            start = -(-shift * 4 // 3)  # characters touched by the padding bytes
            end = len(encoded) - (4 if (shift + len(raw)) % 3 else 0)
            core = encoded[start:end].rstrip("=")
            if len(core) >= MIN_SECRET_LEN:
                forms.add(core)
    return {f for f in forms if len(f) >= MIN_SECRET_LEN}


class _Probe:
    """Tells at little cost whether a text may hold one of some forms (never misses one).

    A form of ``least`` or more characters covers, wherever it sits, the ``width``
    characters at some multiple of ``stride`` (``least - width + 1``): those slices of a text
    are looked up among the forms' own slices of that width. Where the forms are too short
    for a useful stride, each form is searched for instead."""

    _WIDTH = 8

    def __init__(self, forms: Iterable[str]) -> None:
        self.forms = tuple(forms)
        least = min(map(len, self.forms), default=0)
        self.width = min(least, self._WIDTH)
        self.stride = least - self.width + 1
        self.slices = frozenset(
            f[i : i + self.width] for f in self.forms for i in range(len(f) - self.width + 1)
        )

    def may_hold(self, text: str) -> bool:
        if self.stride < self._WIDTH:  # short forms: a search each
            return any(form in text for form in self.forms)
        width, slices = self.width, self.slices
        for at in range(0, len(text) - width + 1, self.stride):
            if text[at : at + width] in slices:
                return True
        return False


class Redactor:
    """Replaces known secrets in recorded text (and bytes), streams included."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self.secrets = dict(known_secrets() if secrets is None else secrets)
        self._names: dict[str, str] = {}
        for name, value in self.secrets.items():
            for form in secret_forms(value):
                self._names.setdefault(form, name)
        forms = sorted(self._names, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        self._grams = {f[i : i + MIN_PARTIAL] for f in forms for i in range(len(f) - MIN_PARTIAL)}
        self._probe = _Probe(forms)
        self._tails: dict[str, str] = {}

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every known secret form replaced by ``[redacted:NAME]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: f"[redacted:{self._names[m.group(0)]}]", text)

    def value(self, value: Any) -> Any:
        """Strings inside lists and dicts (keys too) redacted, the rest unchanged."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        return value

    @cached_property
    def _deep(self) -> DeepRedactor:
        return DeepRedactor(self.secrets, self._names, MIN_SECRET_LEN)

    def deep(self, text: str) -> str:
        """``text`` cleared of known secrets in the costlier forms too (an export, an error)."""
        return self._deep.text(text) if self._pattern is not None and text else text

    def deep_value(self, value: Any) -> Any:
        """Strings inside lists and dicts (keys too) as :meth:`deep` leaves them."""
        if isinstance(value, str):
            return self.deep(value)
        if isinstance(value, list | tuple):
            return [self.deep_value(v) for v in value]
        if isinstance(value, dict):
            return {self.deep(str(k)): self.deep_value(v) for k, v in value.items()}
        return value

    def result(self, text: str) -> str:
        """The episode's next tool result, as :meth:`deep` and with the rest of a secret
        whose piece ended the previous result's redactions."""
        return self._deep.result(text) if self._pattern is not None else text

    def data(self, data: bytes) -> bytes:
        """File contents with every known secret form replaced (for workspace snapshots);
        the very same object when it holds none."""
        return self._deep.data(data) if self._pattern is not None else data

    def large(self, blocks: Iterable[bytes]) -> bytes | None:
        """A file too large to hold in memory, read in ``blocks``: None when it holds no known
        secret, else what is stored in its place (a marker naming the secret, its size)."""
        tail = b""
        size = 0
        for block in blocks:
            size += len(block)
            joined = tail + block
            clean = self.data(joined)
            if clean is not joined:
                name = clean.split(b"[redacted:", 1)[1].split(b"]", 1)[0].decode()
                return f"[redacted:{name}] (a file of over {size >> 20} MiB)\n".encode()
            tail = block[-_OVERLAP:]
        return None

    def stream(self, key: str, text: str) -> str:
        """One streamed piece of ``key``'s text, redacted together with what came before it:
        a secret split across pieces is redacted in both."""
        if self._pattern is None:
            return text
        tail = self._tails.get(key, "")
        joined = tail + text
        # The usual case, decided at once: the end begins no secret (a set lookup) and no
        # secret form is inside (a few slices looked up, see _Probe).
        if joined[-MIN_PARTIAL:] not in self._grams and not self._probe.may_hold(joined):
            self._tails[key] = joined[1 - MIN_PARTIAL :]
            return text
        held = self._secret_prefix(joined)  # the end begins a secret: hide its part in ours
        out: list[str] = []
        pos = len(tail)  # only the new text is ours to rewrite
        for match in self._pattern.finditer(joined):
            if match.end() <= pos:
                continue
            if match.start() >= pos:
                out.append(joined[pos : match.start()])
            out.append(f"[redacted:{self._names[match.group(0)]}]")
            pos = match.end()
        cut = max(pos, len(joined) - held) if held else len(joined)
        out.append(joined[pos:cut])
        if cut < len(joined):
            out.append(f"[redacted:{self._prefix_name(joined[len(joined) - held :])}]")
        # A secret the next piece completes begins in the last ``held`` characters (the
        # longest end of this text that begins one), or in fewer than MIN_PARTIAL of them.
        self._tails[key] = joined[-max(held, MIN_PARTIAL - 1) :]
        return "".join(out)

    def _secret_prefix(self, text: str) -> int:
        """How many trailing characters of ``text`` begin some secret form (0 if fewer than
        :data:`MIN_PARTIAL`)."""
        if text[-MIN_PARTIAL:] not in self._grams:
            return 0  # the usual case, decided at once
        best = 0
        for form in self._names:
            for size in range(min(len(form) - 1, len(text)), MIN_PARTIAL - 1, -1):
                if text.endswith(form[:size]):
                    best = max(best, size)
                    break
        return best

    def _prefix_name(self, prefix: str) -> str:
        return next(n for f, n in self._names.items() if f.startswith(prefix))

    def end_streams(self, prefix: str) -> None:
        """Forget the tails of the streams whose key starts with ``prefix`` (a finished call)."""
        for key in [k for k in self._tails if k.startswith(prefix)]:
            del self._tails[key]


_SECRET_FIELD = re.compile(
    r"api[_-]?key|secret|passw(or)?d|authorization|(access|auth|refresh|session)[_-]?token", re.I
)


def mask_secret_fields(value: Any) -> Any:
    """JSON data with every non-empty string under a secret-looking key (``api_key``,
    ``password``, ``authorization``, ...) replaced by ``[masked]``: an imported agent's config
    may carry a key whose value this machine does not know."""
    if isinstance(value, dict):
        return {
            k: "[masked]"
            if isinstance(k, str) and _SECRET_FIELD.search(k) and isinstance(v, str) and v
            else mask_secret_fields(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_secret_fields(v) for v in value]
    return value


def scrub(value: Any, redactor: Redactor | None) -> tuple[Any, int]:
    """JSON data as it may be recorded: every string (keys too) made recordable and, with a
    redactor, cleared of known secrets; and how many characters were replaced."""
    if isinstance(value, str):
        clean, replaced = recordable(value)
        return (redactor.text(clean) if redactor is not None else clean), replaced
    if isinstance(value, list | tuple):
        items = [scrub(v, redactor) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for key, item in value.items():
            new_key, n_key = scrub(key, redactor)
            out[new_key], n = scrub(item, redactor)
            total += n + n_key
        return out, total
    return value, 0


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """Replace each known secret (in all its forms, the costlier ones too) in ``text`` with a
    marker, as a tool result is recorded."""
    return Redactor(secrets).deep(text)


def public_url(url: str) -> str:
    """``url`` without credentials (``user:password@``), query or fragment: fit to be
    recorded (IPv6 hosts keep their brackets, the path is kept as given)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
