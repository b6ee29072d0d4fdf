"""An agent that edits files in its working folder: streamed Messages calls with the
Anthropic SDK until the model stops asking for tools; each ``write`` tool call
(``{"path": P, "text": T}``, with ``"env": NAME`` the value of that variable appended) writes
file P and is answered with a tool result."""

import os
from pathlib import Path

import anthropic

client = anthropic.Anthropic(api_key="sk-test-edits-0123456789", max_retries=0)
messages: list[dict[str, object]] = [{"role": "user", "content": "fix calc.py"}]
while True:
    with client.messages.stream(model="m", max_tokens=50, messages=messages) as stream:  # type: ignore[arg-type]
        answer = stream.get_final_message()
    calls = [b for b in answer.content if b.type == "tool_use"]
    if not calls:
        break
    results = []
    for call in calls:
        args = dict(call.input)  # type: ignore[call-overload]
        path = Path(str(args["path"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(args["text"]) + os.environ.get(str(args.get("env", "")), ""))
        results.append({"type": "tool_result", "tool_use_id": call.id, "content": "written"})
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
        {"role": "user", "content": results},
    ]
print("done")
