"""Deep redaction: the costlier encodings of known secrets, looked for in tool results,
workspace snapshot blobs and exports (never in each streamed chunk, design section 7b).

On top of the cheap forms :mod:`agentrunner.values.redaction` gives (as is, cased, reversed, hex,
base64), a :class:`DeepRedactor` replaces by ``[redacted:NAME]``:

- rot13 of the value; base32 (upper and lower case) and base64 of the reversed value, at any
  alignment inside a longer encoded text;
- the value with one character (any, the same or not) inserted between each pair of its
  characters;
- any run of :data:`FRAGMENT` or more consecutive characters of the value (a key cut in
  pieces); and, in the next tool result of the episode, the rest of a value whose piece ended
  the previous one's fragment, however short (down to :data:`REST_MIN` characters);
- a run of hex byte pairs or of decimal (or octal) byte numbers separated by white space,
  commas or colons (``od -An -tx1``, ``od -An -tu1``, ``od -b``; ``od``'s address column is
  skipped) whose bytes hold the value in a form above: the whole run;
- base64 of a gzip stream (``gzip | base64``, wrapped or not, complete or cut short) whose
  first :data:`GZIP_CAP` uncompressed bytes hold the value in a form above: the whole run;
- a snapshot blob that is itself compressed (gzip, zlib as in a git loose object, a git pack:
  :mod:`agentrunner.values.redaction_compressed`) and holds the value once uncompressed: the whole
  blob (a git object so replaced is unreadable in a restored ``.git``).
"""

from __future__ import annotations

import base64
import codecs
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from agentrunner.values.redaction_compressed import INFLATE_CAP, compression, inflated

FRAGMENT = 12
"""A run of this many consecutive characters of a secret is redacted wherever it shows up."""
REST_MIN = 4
"""The rest of a secret cut by the previous tool result is redacted from this length on."""
GZIP_CAP = 1 << 20
"""How much of a base64 run's gzip stream is uncompressed to look for a secret."""
_OVERLAP = 4096
"""Bytes of an uncompressed piece searched again with the next."""
_ANCHOR = FRAGMENT // 2

_HEX_SEP = r"(?:[ \t,:;%]|\\x|0x|\r?\n(?:[ \t]*[0-9A-Fa-f]{7,8}:?[ \t]+)?)+"
"""Between hex bytes: white space, commas, colons, ``%``, ``\\x``, ``0x``; at a line start an
address column (``od``, ``xxd``, ``hexdump -C``)."""
_HEX_RUN = re.compile(
    r"(?<![0-9A-Za-wyz])(?:\\x|0x|%)?(?:[0-9A-Fa-f]{2})+(?![0-9A-Za-z])"
    rf"(?:{_HEX_SEP}(?:[0-9A-Fa-f]{{2}})+(?![0-9A-Za-z]))+"
)
_DEC_RUN = re.compile(
    r"(?<![0-9A-Za-z.])[0-9]{1,3}(?:(?:[ \t,]+|[ \t]*\r?\n(?:[0-7]{7,}[ \t]+)?[ \t]*)"
    r"[0-9]{1,3}(?![0-9A-Za-z.])){5,}"
)
_GZIP_B64 = re.compile(r"H4sI[A-Za-z0-9+/]*={0,2}(?:[ \t]*\r?\n[A-Za-z0-9+/]+={0,2})*")
_ADDRESS = re.compile(r"(?m)^[ \t]*(?:[0-7]{7,}|[0-9A-Fa-f]{7,8}:?)[ \t]+")
_SPACE = re.compile(r"\s+")


def _class_table(allowed: str) -> bytes:
    """A ``bytes.translate`` table: each byte of ``allowed`` to ``r``, any other to ``x``."""
    return bytes(0x72 if chr(c) in allowed else 0x78 for c in range(256))


_HEX_CHARS = _class_table("0123456789abcdefABCDEF \t\r\n,:;%\\x")
_DEC_CHARS = _class_table("0123456789 \t\r\n,")


def marker(name: str) -> str:
    return f"[redacted:{name}]"


def encoded_cores(raw: bytes, encode: Callable[[bytes], bytes], bits: int, group: int) -> set[str]:
    """The part of ``encode(raw)`` that stays the same wherever ``raw`` sits in a longer text:
    one core per alignment (``bits`` per output character, ``group`` input bytes per block)."""
    cores = set()
    for shift in range(group):
        encoded = encode(b"\0" * shift + raw).decode("ascii")
        start = -(-shift * 8 // bits)  # the first character made of ``raw``'s bits alone
        end = (shift + len(raw)) * 8 // bits  # past the last one
        cores.add(encoded[start:end])
    return cores


def costly_forms(value: str) -> set[str]:
    """rot13, base32 (both cases) and base64 of the reversed value, at every alignment."""
    raw = value.encode("utf-8", "surrogatepass")
    forms = {codecs.encode(value, "rot13")}
    for core in encoded_cores(raw, base64.b32encode, 5, 5):
        forms |= {core, core.lower()}
    backwards = value[::-1].encode("utf-8", "surrogatepass")
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms |= encoded_cores(backwards, encode, 6, 3)
    return forms


def _byte_view(text: str) -> str:
    """A text as its UTF-8 bytes read one character a byte (how blobs are searched)."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int
    end: int
    name: str
    rest: str | None = None
    """What of the secret follows a fragment that ended before the secret's end."""


class _Matcher:
    """The forms of every secret (as given), interleaved values and fragments: one pattern."""

    def __init__(self, secrets: Mapping[str, str], forms: Mapping[str, str], min_len: int):
        self.names = dict(forms)
        for name, value in secrets.items():
            for form in costly_forms(value):
                if len(form) >= min_len:
                    self.names.setdefault(form, name)
        self.grams: dict[str, tuple[str, str, int]] = {}
        for name, value in secrets.items():
            for i in range(len(value) - FRAGMENT + 1):
                self.grams.setdefault(value[i : i + FRAGMENT], (name, value, i))
        spread = {  # one character (any) between each pair of the value's characters
            "".join(f"{re.escape(c)}." for c in value[:-1]) + re.escape(value[-1]): name
            for name, value in secrets.items()
        }
        self.spread = [(re.compile(p, re.DOTALL), name) for p, name in spread.items()]
        alternatives = [
            *map(re.escape, sorted(self.names, key=len, reverse=True)),
            *(f"(?:{p})" for p in spread),
            *map(re.escape, self.grams),
        ]
        self.pattern = re.compile("|".join(alternatives), re.DOTALL) if alternatives else None
        # A fragment of FRAGMENT characters holds one of these (FRAGMENT >= 2 * _ANCHOR).
        anchors = {v[j : j + _ANCHOR] for v in secrets.values() for j in range(0, len(v), _ANCHOR)}
        self._probes = (*self.names, *(a for a in anchors if len(a) == _ANCHOR))

    def hits(self, text: str) -> Iterator[_Hit]:
        if self.pattern is None or not self._maybe(text):
            return
        pos = 0
        while (m := self.pattern.search(text, pos)) is not None:
            found = m.group(0)
            if found in self.names:
                yield _Hit(m.start(), m.end(), self.names[found])
                pos = m.end()
            elif found in self.grams:
                name, value, i = self.grams[found]
                end, j = m.end(), i + FRAGMENT
                while end < len(text) and j < len(value) and text[end] == value[j]:
                    end, j = end + 1, j + 1
                yield _Hit(m.start(), end, name, value[j:] if j < len(value) else None)
                pos = end
            else:
                name = next(n for p, n in self.spread if p.fullmatch(found))
                yield _Hit(m.start(), m.end(), name)
                pos = m.end()

    def _maybe(self, text: str) -> bool:
        """Whether ``text`` may hold a hit: substring searches, far cheaper than the pattern."""
        for probe in self._probes:
            if probe in text:
                return True
        return any(p.search(text) for p, _ in self.spread)

    def first(self, text: str) -> _Hit | None:
        """The first secret form ``text`` holds (None when it holds none)."""
        return next(self.hits(text), None)


class DeepRedactor:
    """Redacts known secrets in every form above: in text (a tool result; the rest of a
    secret cut by the previous result too) and in a blob's bytes."""

    def __init__(self, secrets: Mapping[str, str], forms: Mapping[str, str], min_len: int):
        """``forms``: the cheap forms of the secrets (form -> name), from the caller."""
        self._text = _Matcher(secrets, forms, min_len)
        ascii_only = all(v.isascii() for v in secrets.values())
        self._bytes = (
            self._text
            if ascii_only
            else _Matcher(
                {n: _byte_view(v) for n, v in secrets.items()},
                {_byte_view(f): n for f, n in forms.items()},
                min_len,
            )
        )
        self._least = min((len(v.encode()) for v in secrets.values()), default=0)
        self._least = min(self._least, FRAGMENT)  # a dump's line holds a fragment or more
        self._rest: tuple[str, str] | None = None

    def text(self, text: str) -> str:
        """``text`` with every secret form, fragment and encoded run replaced by a marker."""
        return self._redact(text, _ascii(text), self._text, [])[0]

    def result(self, text: str) -> str:
        """One tool result of the episode: :meth:`text`, and the rest of a secret whose
        last fragment in the previous result stopped short of its end."""
        rests: list[_Hit] = []
        if self._rest is not None:
            rest, name = self._rest
            rests = [_Hit(m.start(), m.end(), name) for m in re.finditer(re.escape(rest), text)]
        out, self._rest = self._redact(text, _ascii(text), self._text, rests)
        return out

    def data(self, data: bytes) -> bytes:
        """A file's bytes with every secret form replaced (the whole file when it is a gzip
        or zlib stream or a git pack holding one); the same bytes object when it holds none."""
        if self._bytes.pattern is None:
            return data
        if compression(data) is not None:
            name = self._compressed_secret(data)
            if name is not None:
                return marker(name).encode()
        view = data.decode("latin-1")
        out = self._redact(view, data, self._bytes, [])[0]
        return data if out is view else out.encode("latin-1")

    def _redact(
        self, text: str, raw: bytes, matcher: _Matcher, extra: list[_Hit]
    ) -> tuple[str, tuple[str, str] | None]:
        """``text`` redacted (``raw``: its bytes, one a character), and the rest of a secret
        its last fragment stopped short of."""
        if matcher.pattern is None or not text:
            return text, None
        undecided: list[tuple[int, int, str]] = []
        hits = [*extra, *matcher.hits(text), *self._runs(text, raw, undecided)]
        if not hits:
            return text, None
        # The rest of a secret whose piece a hit ended (a dump's last, shorter line), as is or
        # in a run's bytes, later in the same text.
        for piece, name in {(h.rest, h.name) for h in hits if h.rest and len(h.rest) >= REST_MIN}:
            after = min(h.end for h in hits if h.rest == piece)
            found = (m.start() for m in re.finditer(re.escape(piece), text) if m.start() >= after)
            hits += [_Hit(i, i + len(piece), name) for i in found]
            view = _byte_view(piece)
            hits += [_Hit(a, b, name) for a, b, data in undecided if a >= after and view in data]
        hits.sort(key=lambda h: (h.start, -h.end))
        out: list[str] = []
        pos = 0
        rest: tuple[str, str] | None = None
        for hit in hits:
            if hit.end <= pos:
                continue
            out.append(text[pos : max(pos, hit.start)])
            out.append(marker(hit.name))
            pos = hit.end
            rest = (hit.rest, hit.name) if hit.rest and len(hit.rest) >= REST_MIN else None
        out.append(text[pos:])
        return "".join(out), rest

    def _runs(self, text: str, raw: bytes, undecided: list[tuple[int, int, str]]) -> Iterator[_Hit]:
        """Encoded runs (hex or decimal bytes, base64 of gzip) whose bytes hold a secret; the
        runs that hold none go to ``undecided`` (span, bytes). The run patterns are tried only
        where ``raw`` has a stretch of their characters long enough to hold a fragment (found
        by C-speed translate and find)."""
        runs = ((_HEX_RUN, _hex_bytes, _HEX_CHARS), (_DEC_RUN, _number_bytes, _DEC_CHARS))
        for pattern, decode, table in runs:
            for start, end in _stretches(raw.translate(table), 2 * self._least - 1):
                for m in pattern.finditer(text, start, end):
                    for data in decode(m.group(0)):
                        view = data.decode("latin-1")
                        hit = self._bytes.first(view)
                        if hit is not None:
                            yield _Hit(m.start(), m.end(), hit.name, hit.rest)
                            break
                        undecided.append((m.start(), m.end(), view))
        if "H4sI" in text:
            for m in _GZIP_B64.finditer(text):
                name = self._compressed_secret(_b64_bytes(m.group(0)), GZIP_CAP)
                if name is not None:
                    yield _Hit(m.start(), m.end(), name)

    def _compressed_secret(self, data: bytes, cap: int = INFLATE_CAP) -> str | None:
        """The name of a secret the uncompressed bytes of ``data`` hold (None when none)."""
        tail = b""
        for piece in inflated(data, cap):
            joined = tail + piece
            hit = self._bytes.first(joined.decode("latin-1"))
            if hit is not None:
                return hit.name
            tail = joined[-_OVERLAP:]
        return None


def _ascii(text: str) -> bytes:
    """``text`` as one byte a character (``?`` for any other than ASCII)."""
    return text.encode("ascii", "replace")


def _stretches(classes: bytes, least: int) -> Iterator[tuple[int, int]]:
    """The spans of at least ``least`` consecutive ``r`` in ``classes``."""
    probe = b"r" * max(least, 1)
    at = classes.find(probe)
    while at != -1:
        start = classes.rfind(b"x", 0, at) + 1
        end = classes.find(b"x", at)
        end = len(classes) if end == -1 else end
        yield start, end
        at = classes.find(probe, end)


def _hex_bytes(run: str) -> list[bytes]:
    digits = _SPACE.sub("", re.sub(r"[,:;%]|\\x|0x", " ", _ADDRESS.sub(" ", run)))
    return [bytes.fromhex(digits)] if len(digits) % 2 == 0 else []


def _number_bytes(run: str) -> list[bytes]:
    numbers = re.findall(r"[0-9]+", _ADDRESS.sub(" ", run))
    out = [bytes(int(n) if int(n) <= 255 else 0 for n in numbers)]
    if all(len(n) == 3 and set(n) <= set("01234567") for n in numbers):
        out.append(bytes(int(n, 8) & 0xFF for n in numbers))
    return out


def _b64_bytes(run: str) -> bytes:
    """A base64 run's bytes (a run cut short loses only its last incomplete group)."""
    digits = _SPACE.sub("", run).rstrip("=")
    digits = digits[: len(digits) - len(digits) % 4]
    try:
        return base64.b64decode(digits)
    except ValueError:
        return b""
