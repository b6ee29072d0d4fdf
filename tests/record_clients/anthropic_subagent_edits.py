"""A main agent whose model starts a sub-agent that edits a file in the shared working folder:
the main call asks for an ``Agent``; the sub-agent's first call asks for a ``write``
(``{"path": P, "text": T}``), which it runs, and its second call carries the result; then
the main agent's next call carries the sub-agent's answer."""

from pathlib import Path

import anthropic

client = anthropic.Anthropic(api_key="sk-test-subedit-0123456789", max_retries=0)
ask = [{"role": "user", "content": "Fix calc.py."}]
main = "You are the main agent."
first = client.messages.create(model="m", max_tokens=99, system=main, messages=ask)
spawn = first.content[0]
assert spawn.type == "tool_use"
sub_ask = [{"role": "user", "content": str(spawn.input["prompt"])}]  # type: ignore[index]
sub_system = "You are a sub-agent."
step = client.messages.create(model="m", max_tokens=99, system=sub_system, messages=sub_ask)
write = step.content[0]
assert write.type == "tool_use"
Path(str(write.input["path"])).write_text(str(write.input["text"]))  # type: ignore[index]
written = {"type": "tool_result", "tool_use_id": write.id, "content": "written"}
sub_done = client.messages.create(
    model="m",
    max_tokens=99,
    system=sub_system,
    messages=[
        *sub_ask,
        {"role": "assistant", "content": [write.model_dump(exclude_none=True)]},
        {"role": "user", "content": [written]},
    ],  # type: ignore[list-item]
)
found = sub_done.content[0].text  # type: ignore[union-attr]
answer = {"type": "tool_result", "tool_use_id": spawn.id, "content": found}
done = client.messages.create(
    model="m",
    max_tokens=99,
    system=main,
    messages=[
        *ask,
        {"role": "assistant", "content": [spawn.model_dump(exclude_none=True)]},
        {"role": "user", "content": [answer]},
    ],  # type: ignore[list-item]
)
print(done.content[0].text)  # type: ignore[union-attr]
