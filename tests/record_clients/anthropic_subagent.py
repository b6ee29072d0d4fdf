"""A main agent whose model asks for a sub-agent: the sub-agent's call (its own system prompt,
starting from the prompt passed), then the main agent's next call carrying its answer."""

import anthropic

client = anthropic.Anthropic(api_key="sk-test-sub-0123456789", max_retries=0)
ask = [{"role": "user", "content": "Find the bug."}]
main = "You are the main agent."
first = client.messages.create(model="claude-sonnet-4-5", max_tokens=99, system=main, messages=ask)
call = first.content[0]
assert call.type == "tool_use"
prompt = str(call.input["prompt"])  # type: ignore[index]
sub = client.messages.create(
    model="claude-sonnet-4-5",
    max_tokens=99,
    system="You are a sub-agent.",
    messages=[{"role": "user", "content": prompt}],
)
found = sub.content[0].text  # type: ignore[union-attr]
result = {"type": "tool_result", "tool_use_id": call.id, "content": found}
done = client.messages.create(
    model="claude-sonnet-4-5",
    max_tokens=99,
    system=main,
    messages=[
        *ask,
        {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
        {"role": "user", "content": [result]},
    ],  # type: ignore[list-item]
)
print(done.content[0].text)  # type: ignore[union-attr]
