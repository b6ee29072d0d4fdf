"""One streamed Responses call with the OpenAI SDK."""

import openai

client = openai.OpenAI(api_key="sk-test-responses-0123456789", max_retries=0)
with client.responses.stream(model="gpt-5", input="What is the capital?") as stream:
    print(stream.get_final_response().status)
