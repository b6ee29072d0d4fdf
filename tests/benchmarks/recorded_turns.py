"""One equal-sized turn of an episode, recorded through the Recorder: the unit the store and
show benchmarks build their long episodes from."""

from __future__ import annotations

from agentrunner.runtime.recorder import Recorder
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, Chunk

CHUNKS_PER_TURN = 20
OBSERVATION_BYTES = 1024


def record_turn(rec: Recorder, turn: int, tools_hash: str) -> None:
    """One equal-sized turn (request, 20 streamed chunks, response, usage, one tool call and
    its 1 KiB observation: 25 events), recorded the way the runner records it."""
    rec.turn = turn
    call_id = f"call-{turn}-1"
    rec.request(call_id, tools_hash, "scripted", "bench", {})
    tool_call_id = f"call_{turn:04d}_0"
    pieces: list[Chunk] = []
    for i in range(CHUNKS_PER_TURN):
        channel = "reasoning" if i < 10 else "text" if i < 16 else "tool_args"
        text = f"piece {turn:04d}/{i:02d} of it. "  # 23 characters
        pieces.append(Chunk(channel=channel, text=text, tool_call_id=None))
    args = f'{{"command": "python -m unittest 2>&1 | tail -n {turn:04d}"}}'
    pieces[16:] = [
        Chunk(channel="tool_args", text=args[j : j + 14], tool_call_id=tool_call_id)
        for j in range(0, len(args), 14)
    ][:4]
    for piece in pieces:
        rec.chunk(call_id, piece)
    call = AgentToolCall(call_id=tool_call_id, name="bash", arguments=args)
    result = AgentTurn(
        reasoning="".join(p.text for p in pieces if p.channel == "reasoning"),
        message="".join(p.text for p in pieces if p.channel == "text"),
        tool_calls=(call,),
        usage=AgentUsage(input_tokens=1000 + turn, output_tokens=80, cost_usd=0.0),
        provider="scripted",
        model="bench",
        provider_request_id=f"req-{turn:04d}",
        stop_reason="tool_use",
    )
    rec.response(call_id, result, 0.25)
    rec.tool_call(call, call.parsed_arguments(), None)
    line = f"turn {turn:04d}: ok\n"
    observation = (line * (OBSERVATION_BYTES // len(line) + 1))[:OBSERVATION_BYTES]
    rec.tool_result(call, observation, reward=0.0, duration_s=0.01)
