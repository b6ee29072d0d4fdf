"""Two streamed Messages calls with the Anthropic SDK: the fixture's first request, then the
same conversation with the model's answer and a tool result for its tool call."""

import json
import os

import anthropic

client = anthropic.Anthropic(api_key=os.environ["TEST_KEY"], max_retries=0)
first = json.loads(os.environ["TEST_REQUEST"])
first.pop("stream")
with client.messages.stream(**first) as stream:
    answer = stream.get_final_message()
call = next(b for b in answer.content if b.type == "tool_use")
result = {"type": "tool_result", "tool_use_id": call.id, "content": "1 USD = 0.92 EUR"}
second = dict(first)
second["messages"] = [
    *first["messages"],
    {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
    {"role": "user", "content": [result]},
]
with client.messages.stream(**second) as stream:
    print(stream.get_final_message().stop_reason)
