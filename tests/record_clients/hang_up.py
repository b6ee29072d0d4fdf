"""Starts a streamed Messages call and hangs up after three pieces of the answer."""

import json
import os

import httpx

message = {"role": "user", "content": "go"}
body = json.dumps({"model": "m", "stream": True, "max_tokens": 5, "messages": [message]})
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
headers = {"x-api-key": "sk-test-hangup-0123456789"}
with httpx.stream("POST", url, content=body, headers=headers, timeout=60) as answer:
    for i, _ in enumerate(answer.iter_raw()):
        if i == 2:
            break
print("hung up")
