"""The OpenAI SDK client, its API key and its exceptions, shared by both OpenAI adapters.

The key comes from ``api_key=`` or ``OPENAI_API_KEY`` and stays inside the client (never in
``spec()`` or ``params``); the base URL from ``base_url=`` or ``OPENAI_BASE_URL``, which is
how any OpenAI-compatible server (vLLM, Ollama, llama.cpp, DeepSeek) is reached. The SDK's
own retries are off: the adapter retries itself, so that each failed attempt is recorded.
The SDK is imported once the key is known to be there, so a missing key fails at once.
"""

from __future__ import annotations

import os
from typing import Any

from agentrunner.values.errors import ModelError
from providers._errors import classify, connection_detail, missing_key
from providers._retry import parse_retry_after, with_retry_after
from providers.streaming import StreamingAdapter

ENV_KEY = "OPENAI_API_KEY"
DEFAULT_URL = "https://api.openai.com/v1"


class OpenAIAdapter(StreamingAdapter):
    """Common set-up of the Responses and Chat Completions adapters."""

    label = "OpenAI"
    default_url = DEFAULT_URL
    price_provider_id = "openai"

    def __init__(
        self,
        model: str,
        *,
        params: dict[str, Any],
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> None:
        key = api_key or os.environ.get(ENV_KEY)
        if not key:
            raise missing_key(ENV_KEY, self.provider)
        self._secret = key
        import httpx2
        import openai

        self.sdk_errors = (openai.OpenAIError, httpx2.HTTPError)
        self.client = openai.OpenAI(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout if timeout is not None else openai.NOT_GIVEN,
        )
        super().__init__(model, base_url=str(self.client.base_url), params=params, **options)

    def translate(self, exc: BaseException) -> ModelError:
        import httpx2
        import openai

        status: int | None = None
        request_id: str | None = None
        body: Any = None
        retry_after: float | None = None
        if isinstance(exc, openai.APIStatusError):
            status, request_id, body = exc.status_code, exc.request_id, exc.body
            retry_after = parse_retry_after(exc.response.headers)
        elif isinstance(exc, openai.APIConnectionError | httpx2.HTTPError):
            return classify(
                provider=self.endpoint,
                message=connection_detail(exc),
                secret=self._secret,
            )
        elif isinstance(exc, openai.APIError):  # an error object inside the stream
            status, body = 200, exc.body
        error = body.get("error", body) if isinstance(body, dict) else {}
        error = error if isinstance(error, dict) else {}
        message = str(error.get("message") or getattr(exc, "message", None) or exc)
        typed = classify(
            provider=self.server,
            status=status,
            error_type=str(error["type"]) if error.get("type") else None,
            code=str(error["code"]) if error.get("code") else None,
            message=message,
            request_id=request_id,
            env_var=ENV_KEY,
            secret=self._secret,
        )
        return with_retry_after(typed, retry_after)
