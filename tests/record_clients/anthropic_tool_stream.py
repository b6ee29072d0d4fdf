"""One streamed Messages call; prints the input of the tool call the model made."""

import anthropic

client = anthropic.Anthropic(api_key="sk-test-tool-0123456789")
messages = [{"role": "user", "content": "ls"}]
with client.messages.stream(model="m", max_tokens=5, messages=messages) as stream:  # type: ignore[arg-type]
    print(stream.get_final_message().content[0].input)  # type: ignore[union-attr]
