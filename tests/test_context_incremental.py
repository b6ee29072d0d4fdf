"""What a request sends and its estimate, kept between requests, equal what the whole history
gives: ``mask:K``'s kept view across its block boundaries (an output whose origin is found
late, a history that is not the one kept), and the budget's kept character count."""

from __future__ import annotations

from agentrunner.runtime.context import message_chars
from agentrunner.runtime.context.budget import CharCount
from agentrunner.runtime.context.policies import MaskCache, ToolOrigin, masked
from agentrunner.values.types import AgentToolCall, Message


def _turn(turn: int, chars: int = 300) -> list[Message]:
    call = AgentToolCall(call_id=f"c{turn}", name="bash", arguments='{"command": "ls"}')
    return [
        Message(role="assistant", content=f"step {turn}", tool_calls=(call,)),
        Message(role="tool", content="y" * chars, tool_call_id=f"c{turn}", name="bash"),
    ]


def test_the_kept_masked_view_equals_masking_the_whole_history_every_request() -> None:
    for keep in (1, 3):
        history = [Message(role="system", content="s"), Message(role="user", content="t")]
        origins: dict[int, ToolOrigin] = {}
        cache = MaskCache()
        late: dict[int, ToolOrigin] = {}
        for turn in range(1, 30):
            sent = cache.masked(history, origins, turn, keep)
            assert sent == masked(history, origins, turn, keep)
            origins.update(late)  # found only after a request went without it
            late = {}
            for message in _turn(turn, chars=10 if turn % 7 == 0 else 300):
                if message.role == "tool":
                    found = late if turn % 5 == 0 else origins
                    found[len(history)] = ToolOrigin(turn, turn * 10)
                history.append(message)


def test_the_kept_view_starts_again_for_another_history() -> None:
    history = [Message(role="user", content="t"), *_turn(1), *_turn(2), *_turn(3)]
    origins = {2: ToolOrigin(1, 5), 4: ToolOrigin(2, 9), 6: ToolOrigin(3, 13)}
    cache = MaskCache()
    cache.masked(history, origins, 4, 1)
    other = [Message(role="user", content="t"), *_turn(1, chars=500), *_turn(2), *_turn(3)]
    assert cache.masked(other, origins, 4, 1) == masked(other, origins, 4, 1)


def test_the_kept_character_count_equals_counting_every_message() -> None:
    count = CharCount()
    history = [Message(role="user", content="task")]
    for turn in range(1, 8):
        history += _turn(turn)
        assert count(history) == sum(message_chars(m) for m in history)
    changed = [*history[:3], Message(role="user", content="a summary"), *history[6:]]
    assert count(changed) == sum(message_chars(m) for m in changed)
    assert count(history[:4]) == sum(message_chars(m) for m in history[:4])
