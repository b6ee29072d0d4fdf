"""The context budget: a model's context window and the input tokens a request will send.

The estimate is the previous response's reported input tokens plus the characters added
since, divided by a characters-per-token ratio calibrated on this episode's reported usage
(no tokenizer download): the ratio between two reports' differences, so what every request
counts besides its messages (tool definitions, framing) stays out of it."""

from __future__ import annotations

from agentrunner.values.types import AgentUsage, Message

DEFAULT_CHARS_PER_TOKEN = 4.0
CHARS_PER_TOKEN_RANGE = (0.5, 16.0)
"""The ratios a calibration may take (a tiny difference between two reports says little)."""


def context_window(provider: str, model: str) -> int | None:
    """The model's context window from genai-prices' bundled model table (the one pricing
    reads), or None when the table does not know the model."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    for provider_id in (provider, None):
        try:
            _, info = snapshot.find_provider_model(model, None, provider_id, None)
        except (LookupError, ValueError):
            continue
        return info.context_window
    return None


def message_chars(message: Message) -> int:
    """The characters a message puts in a request (what the estimate counts)."""
    calls = sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return len(message.content) + len(message.reasoning or "") + calls


def shared_prefix(old: list[Message], new: list[Message]) -> int:
    """How many leading messages ``new`` has equal to ``old``'s (the same objects compare
    equal without looking inside them). Slices compare in C: a request that extends the last
    one costs a pass over pointers, and one that differs is found by halving."""
    length = min(len(old), len(new))
    whole = new[:length] == old if length == len(old) else new == old[:length]
    if whole:
        return length
    low, high = 0, length  # new[:low] equals old[:low]; new[:high] does not equal old[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if new[low:middle] == old[low:middle]:
            low = middle
        else:
            high = middle
    return low


class CharCount:
    """Counts a request's characters, keeping the last request's count by message: a
    request that begins with the last one's messages counts only the rest, so an episode's
    growing requests cost what they add, not their length."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._sums = [0]  # _sums[i]: the characters of _messages[:i]

    def __call__(self, messages: list[Message]) -> int:
        shared = shared_prefix(self._messages, messages)
        del self._sums[shared + 1 :]
        for message in messages[shared:]:
            self._sums.append(self._sums[-1] + message_chars(message))
        self._messages = list(messages)
        return self._sums[-1]


class Budget:
    """Estimates a request's input tokens from the last reported usage and the characters
    added since, at a characters-per-token ratio calibrated on this episode's reports (the
    characters added between two reports over the tokens added)."""

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.reported_tokens = 0
        self.reported_chars = 0
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.chars = CharCount()

    def estimate(self, messages: list[Message]) -> int:
        chars = self.chars(messages)
        added = (chars - self.reported_chars) / self.chars_per_token
        return max(0, round(self.reported_tokens + added))

    def fits(self, messages: list[Message], share: float = 1.0) -> bool:
        """Whether ``messages`` fit ``share`` of the window (always, when it is unknown)."""
        return self.window is None or self.estimate(messages) <= share * self.window

    def calibrate(self, messages: list[Message], usage: AgentUsage | None) -> None:
        """Take a response's reported input tokens for the request of ``messages``."""
        tokens = usage.input_tokens if usage is not None else None
        if not tokens:
            return
        chars = self.chars(messages)
        added_chars, added_tokens = chars - self.reported_chars, tokens - self.reported_tokens
        if self.reported_tokens and added_chars and added_chars * added_tokens > 0:
            low, high = CHARS_PER_TOKEN_RANGE
            self.chars_per_token = min(max(added_chars / added_tokens, low), high)
        self.reported_tokens, self.reported_chars = tokens, chars
