"""One Messages call that the upstream refuses with a 429; exits 3 when the SDK says so."""

import sys

import anthropic

client = anthropic.Anthropic(api_key="sk-test-429-0123456789", max_retries=0)
try:
    client.messages.create(
        model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
    )
except anthropic.RateLimitError as exc:
    print("limited", exc.status_code)
    sys.exit(3)
