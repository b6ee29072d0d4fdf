"""What a request sends, its estimate and its chain, kept between requests, equal what the
whole history gives: ``mask:K``'s kept view across its block boundaries (an output whose
origin is found late, a history that is not the one kept), the budget's kept character
count, the chain of the messages sent, and the summary's turns found from the end."""

from __future__ import annotations

from pathlib import Path

from agentrunner import TraceStore
from agentrunner.runtime.context import EpisodeContext, Prepared, message_chars
from agentrunner.runtime.context.budget import CharCount, shared_prefix
from agentrunner.runtime.context.policies import (
    MaskCache,
    MaskPolicy,
    ToolOrigin,
    masked,
    recent_start,
)
from agentrunner.values.model import as_model
from agentrunner.values.types import AgentToolCall, AgentTurn, Message


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


def test_the_shared_prefix_is_the_first_message_that_differs() -> None:
    history = [Message(role="user", content="t"), *_turn(1), *_turn(2), *_turn(3)]
    copies = [message.model_copy() for message in history]
    for changed in range(len(history) + 1):
        new = [*history[:changed], Message(role="user", content="other"), *history[changed:]]
        assert shared_prefix(history, new) == changed
        assert shared_prefix(new, history) == changed
        assert shared_prefix(history[:changed], history) == changed
        assert shared_prefix(history, history[:changed]) == changed
    assert shared_prefix(history, copies) == len(history)  # equal messages count as the same


def _stored_whole(store: TraceStore, messages: list[Message]) -> str | None:
    tip = None
    for message in messages:
        tip = store.put_message(tip, message)
    return tip


def test_the_kept_chain_of_the_messages_sent_equals_the_chain_stored_whole(
    tmp_path: Path,
) -> None:
    store = TraceStore(tmp_path / "chains.db")
    context = EpisodeContext(MaskPolicy(2), None, as_model(lambda _: AgentTurn(message="")))
    history = [Message(role="system", content="s"), Message(role="user", content="t")]
    origins: dict[int, ToolOrigin] = {}
    try:
        for turn in range(1, 16):
            sent, count = context.mask_cache.masked(history, origins, turn, 2)
            if turn == 9:  # a request that sends another history: its chain starts again
                sent = [Message(role="user", content="elsewhere"), *sent[1:]]
            tip = _stored_whole(store, history)
            assert tip is not None
            kept = context.sent_tip(store, Prepared(sent, 0, count), history, tip)
            assert kept == _stored_whole(store, sent)
            for message in _turn(turn):
                if message.role == "tool":
                    origins[len(history)] = ToolOrigin(turn, turn * 10)
                history.append(message)
    finally:
        store.close()


def test_the_last_turns_found_from_the_end_begin_where_counting_from_the_start_says() -> None:
    history = [Message(role="user", content="t")]
    for turn in range(1, 6):
        history += _turn(turn)
        history.append(Message(role="user", content="continue"))
        for keep in range(1, 8):
            starts = [i for i, m in enumerate(history) if m.role == "assistant"]
            expected = starts[-keep] if len(starts) >= keep else len(history)
            assert recent_start(history, keep) == expected
