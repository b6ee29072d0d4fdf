"""One streamed Chat Completions call with the OpenAI SDK, offering a tool."""

import openai

client = openai.OpenAI(api_key="sk-test-chat-0123456789", max_retries=0)
stream = client.chat.completions.create(
    model="gpt-4o",
    stream=True,
    messages=[{"role": "user", "content": "Weather and AAPL?"}],
    tools=[{"type": "function", "function": {"name": "GetWeatherArgs", "parameters": {}}}],
)
print(sum(1 for _ in stream))
