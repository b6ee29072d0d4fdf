"""Streamed redaction: a secret form anywhere in a stream is redacted, whatever its length, its
place in the text and where the stream is cut (the redactor's quick "nothing here" decision
must never pass one by)."""

from __future__ import annotations

import base64

import pytest

from agentrunner.values.redaction import Redactor, secret_forms

LONG = "sk-proj-Zq8vY2mT4nL7xK1pR6wD9sJ3hF0cB5gA"
SHORT = "hunter"
FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit; "


def _streamed(redactor: Redactor, text: str, cut: int) -> str:
    """``text`` streamed in pieces of ``cut`` characters, redacted piece by piece."""
    return "".join(
        redactor.stream("call/text", text[i : i + cut]) for i in range(0, len(text), cut)
    )


@pytest.mark.parametrize("secret", [LONG, SHORT])
def test_every_form_of_a_secret_at_every_offset_is_redacted_in_one_piece(secret: str) -> None:
    redactor = Redactor({"API_KEY": secret})
    for form in secret_forms(secret):
        for offset in range(len(FILLER)):
            text = FILLER[:offset] + form + FILLER[offset:]
            assert redactor.text(text) == redactor.stream(f"k{offset}", text), (form, offset)
            assert form not in redactor.stream(f"s{offset}", text)


@pytest.mark.parametrize("cut", [1, 5, 7, 16, 41, 64])
def test_a_key_streamed_in_pieces_of_any_size_leaves_none_of_it_in_the_stream(cut: int) -> None:
    redactor = Redactor({"OPENAI_API_KEY": LONG})
    encoded = base64.b64encode(LONG.encode()).decode()
    for offset in range(0, 48, 3):
        for form in (LONG, LONG.upper(), LONG[::-1], encoded):
            text = FILLER[:offset] + form + " " + FILLER
            out = _streamed(redactor, text, cut)
            assert "[redacted:OPENAI_API_KEY]" in out, (form, offset, cut)
            assert form[:6] not in out and form[-6:] not in out, (form, offset, cut)
            redactor.end_streams("call/")


def test_text_without_a_secret_streams_through_unchanged() -> None:
    redactor = Redactor({"OPENAI_API_KEY": LONG, "DB_PASSWORD": SHORT})
    text = FILLER * 5
    assert _streamed(redactor, text, 16) == text
