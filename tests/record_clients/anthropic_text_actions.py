"""An agent that acts on the model's words, not through tool calls (as aider and
mini-swe-agent do): an answer ``WRITE PATH`` followed by lines writes those lines to file PATH
in the working folder, and the agent says so in its next user message; any other answer ends
the run."""

import anthropic

client = anthropic.Anthropic(api_key="sk-test-words-0123456789", max_retries=0)
messages: list[dict[str, object]] = [{"role": "user", "content": "fix calc.py"}]
while True:
    with client.messages.stream(model="m", max_tokens=50, messages=messages) as stream:  # type: ignore[arg-type]
        text = stream.get_final_text()
    if not text.startswith("WRITE "):
        break
    head, _, body = text.partition("\n")
    path = head.removeprefix("WRITE ").strip()
    with open(path, "w") as fh:
        fh.write(body)
    messages += [
        {"role": "assistant", "content": text},
        {"role": "user", "content": f"wrote {path}"},
    ]
print("done")
