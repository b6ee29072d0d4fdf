"""One Chat Completions call with the OpenAI SDK, not streamed."""

import openai

client = openai.OpenAI(api_key="sk-test-plain-0123456789", max_retries=0)
messages = [{"role": "user", "content": "Hi"}]
answer = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
print(answer.choices[0].message.content)
