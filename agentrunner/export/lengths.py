"""A note when rows are longer than TRL's trainers take by default.

TRL's ``DPOConfig``, ``KTOConfig`` and ``SFTConfig`` default ``max_length`` to 1024 tokens.
``DPOTrainer`` and ``KTOTrainer`` drop every example whose tokenized prompt alone reaches it
(``_prepare_dataset``, "Dropping fully truncated examples"); ``SFTTrainer`` cuts each
conversation to it, so the end of a longer one (the answer a row is for) is lost. An agent's
prompt, with its tool definitions and tool output, is often longer: the demo's DPO prompt is
about 5,500 characters. :class:`LengthWatch` measures the rows as they are written and says
so, with the setting to use. Characters stand in for tokens (3 to 4 a token for English text
and code), so the note errs on the side of showing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

TRL_MAX_LENGTH = 1024  # tokens: the default max_length of DPOConfig, KTOConfig, SFTConfig
MIN_CHARS_PER_TOKEN = 3

# format: (the columns TRL reads as the prompt, what it is called, what TRL does past the limit)
_MEASURED: dict[str, tuple[str, str, str]] = {
    "dpo": ("prompt", "prompt", "DPOTrainer drops every row whose prompt reaches DPOConfig"),
    "kto": ("prompt", "prompt", "KTOTrainer drops every row whose prompt reaches KTOConfig"),
    "sft": ("messages", "conversation", "SFTTrainer cuts each conversation at SFTConfig"),
}


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


class LengthWatch:
    """Passes rows through and keeps the longest prompt (with its tools) of format ``fmt``."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.longest = 0

    def rows(self, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        measured = _MEASURED.get(self.fmt)
        for row in rows:
            if measured is not None:
                size = _chars(row[measured[0]]) + _chars(row.get("tools") or [])
                self.longest = max(self.longest, size)
            yield row

    def notes(self) -> list[str]:
        measured = _MEASURED.get(self.fmt)
        if measured is None or self.longest < TRL_MAX_LENGTH * MIN_CHARS_PER_TOKEN:
            return []
        _, what, consequence = measured
        low, high = self.longest // 4, self.longest // MIN_CHARS_PER_TOKEN
        return [
            f"the longest {what} is {self.longest:,} characters with its tool definitions "
            f"(about {low:,}-{high:,} tokens); TRL's {consequence}.max_length (default "
            f"{TRL_MAX_LENGTH} tokens): set max_length=None, or above your longest row"
        ]
