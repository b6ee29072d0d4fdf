"""``anthropic:MODEL``: the Anthropic Messages API, streamed and recorded chunk by chunk.

``thinking_delta`` becomes ``reasoning`` chunks, ``text_delta`` ``text``, a ``tool_use``
block's ``input_json_delta`` ``tool_args`` under its id. Thinking blocks (with their
signatures), ``redacted_thinking`` and server-tool blocks are kept verbatim and passed back
unchanged and in order (see :mod:`providers._anthropic_messages`). A ``refusal`` stop is
recorded as a refusal; an ``error`` event mid-stream becomes a typed error.

Options (``get_model("anthropic:claude-sonnet-4-5", **options)``): ``api_key`` (else
``ANTHROPIC_API_KEY``, or ``ANTHROPIC_AUTH_TOKEN``), ``base_url`` (else
``ANTHROPIC_BASE_URL``), ``thinking`` (``"adaptive"``, a budget in tokens for manual
extended thinking, or the API's own dict; off by default), ``max_tokens`` (16384),
``temperature``, ``cache`` (automatic prompt caching, on by default), ``betas``,
``extra_body``, ``timeout``, ``max_retries`` (4), ``retry_delay`` / ``retry_max_delay``,
``price_provider``, ``on_event``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agentrunner.values.errors import ModelError, UsageError
from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentTurn
from providers._anthropic_messages import layout_parts, request_messages, tools_param
from providers._errors import classify, connection_detail, missing_key
from providers._retry import parse_retry_after, with_retry_after
from providers.streaming import Fold, SdkStream, StreamingAdapter
from providers.turn_builder import TurnBuilder
from providers.usage import from_anthropic

ENV_KEY = "ANTHROPIC_API_KEY"
ENV_TOKEN = "ANTHROPIC_AUTH_TOKEN"
DEFAULT_MAX_TOKENS = 16384


def thinking_param(thinking: Any) -> dict[str, Any] | None:
    """The API's ``thinking`` object for the adapter's ``thinking`` option."""
    if thinking is None or thinking is False:
        return None
    if thinking is True or thinking == "adaptive":
        return {"type": "adaptive"}
    if isinstance(thinking, int):
        return {"type": "enabled", "budget_tokens": thinking}
    if isinstance(thinking, dict):
        return dict(thinking)
    raise UsageError(
        f"thinking={thinking!r}: use 'adaptive', a token budget (int) or the API's dict"
    )


class MessagesFold:
    """State of one Messages stream: content blocks by index, as they build up."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.service_tier: str | None = None
        self._json: dict[int, list[str]] = {}

    def feed(self, event: dict[str, Any], b: TurnBuilder) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            b.model = str(message.get("model") or b.model)
            self._usage(message.get("usage") or {}, b)
        elif kind == "content_block_start":
            self._start(int(event.get("index", 0)), dict(event.get("content_block") or {}), b)
        elif kind == "content_block_delta":
            self._delta(event, b)
        elif kind == "content_block_stop":
            self._stop(int(event.get("index", 0)), b)
        elif kind == "message_delta":
            self._message_delta(event, b)
        elif kind != "message_stop":
            b.keep_raw(event)

    def _usage(self, usage: dict[str, Any], b: TurnBuilder) -> None:
        self.usage.update({k: v for k, v in usage.items() if v is not None})
        b.usage = from_anthropic(self.usage)
        tier = self.usage.get("service_tier")
        self.service_tier = str(tier) if tier else self.service_tier

    def _start(self, index: int, block: dict[str, Any], b: TurnBuilder) -> None:
        self.blocks[index] = block
        kind = block.get("type")
        if kind == "tool_use":
            b.start_call(str(index), str(block.get("id")), str(block.get("name")))
        elif kind == "text":
            b.text(str(block.get("text") or ""))
        elif kind == "thinking":
            b.reasoning(str(block.get("thinking") or ""))

    def _delta(self, event: dict[str, Any], b: TurnBuilder) -> None:
        index = int(event.get("index", 0))
        block = self.blocks.setdefault(index, {})
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            b.text(delta["text"])
            block["text"] = str(block.get("text") or "") + delta["text"]
        elif kind == "thinking_delta":
            b.reasoning(delta["thinking"])
            block["thinking"] = str(block.get("thinking") or "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + delta["signature"]
        elif kind == "input_json_delta":
            if block.get("type") == "tool_use":
                b.call_args(str(index), delta["partial_json"])
            self._json.setdefault(index, []).append(delta["partial_json"])
        elif kind == "citations_delta":
            block["citations"] = [*(block.get("citations") or []), delta["citation"]]
        else:
            b.keep_raw(event)

    def _stop(self, index: int, b: TurnBuilder) -> None:
        raw = "".join(self._json.pop(index, []))
        block = self.blocks.get(index)
        if block is None:
            return
        if raw.strip():
            try:
                block["input"] = json.loads(raw)
            except json.JSONDecodeError:
                block["input"] = {}
        elif block.get("type") == "tool_use" and block.get("input"):
            # The whole input came with the block's start (no deltas): stream it now.
            b.finish_call(str(index), json.dumps(block["input"], ensure_ascii=False))

    def _message_delta(self, event: dict[str, Any], b: TurnBuilder) -> None:
        delta = event.get("delta") or {}
        if isinstance(event.get("usage"), dict):
            self._usage(event["usage"], b)
        if delta.get("stop_reason"):
            b.stop_reason = str(delta["stop_reason"])
        if delta.get("stop_reason") == "refusal":
            # No refusal text is streamed: record the provider's explanation (or category).
            details = delta.get("stop_details") or {}
            category = details.get("category") or "unspecified category"
            b.refusal(str(details.get("explanation") or f"refused ({category})"))

    def turn(self, b: TurnBuilder) -> AgentTurn:
        return b.turn(layout_parts([self.blocks[i] for i in sorted(self.blocks)]))


class AnthropicModel(StreamingAdapter):
    """``anthropic:MODEL``: streams ``POST /v1/messages``."""

    provider = "anthropic"
    label = "Anthropic"
    default_url = "https://api.anthropic.com"
    price_provider_id = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        thinking: Any = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float | None = None,
        cache: bool = True,
        betas: list[str] | None = None,
        extra_body: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        key = api_key or os.environ.get(ENV_KEY)
        token = None if key else os.environ.get(ENV_TOKEN)
        if not key and not token:
            raise missing_key(ENV_KEY, self.provider)
        self._secret = key or token or ""
        import anthropic  # only once a key is there: a missing key fails at once
        import httpx2

        self.sdk_errors = (anthropic.AnthropicError, httpx2.HTTPError)
        self.client = anthropic.Anthropic(
            api_key=key,
            auth_token=token,
            base_url=base_url,
            max_retries=0,
            timeout=timeout if timeout is not None else anthropic.NOT_GIVEN,
        )
        thinking_api = thinking_param(thinking)
        budget = (thinking_api or {}).get("budget_tokens")
        if isinstance(budget, int) and budget >= max_tokens:
            raise UsageError(
                f"the thinking budget ({budget} tokens) must be below max_tokens ({max_tokens})"
            )
        given = {
            "thinking": thinking,
            "max_tokens": max_tokens if max_tokens != DEFAULT_MAX_TOKENS else None,
            "temperature": temperature,
            "cache": None if cache else False,
            "betas": betas,
            "extra_body": extra_body,
        }
        params: dict[str, Any] = {"max_tokens": max_tokens}
        optional = {
            "thinking": thinking_api,
            "temperature": temperature,
            "cache_control": {"type": "ephemeral"} if cache else None,
            "extra_headers": {"anthropic-beta": ",".join(betas)} if betas else None,
            "extra_body": extra_body,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(
            model,
            base_url=str(self.client.base_url),
            params=params,
            options={k: v for k, v in given.items() if v is not None},
            **options,
        )

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "api": "messages"}

    def build_request(self, context: AgentContext) -> dict[str, Any]:
        system, messages = request_messages(context.messages)
        request: dict[str, Any] = {"model": self.model, **self.params, **context.params}
        if system:
            request["system"] = system
        request["messages"] = messages
        if context.tools:
            request["tools"] = tools_param(context.tools)
        return request

    def open_stream(self, request: dict[str, Any]) -> SdkStream:
        stream: SdkStream = self.client.messages.create(stream=True, **request)
        return stream

    def new_fold(self) -> Fold:
        return MessagesFold()

    def translate(self, exc: BaseException) -> ModelError:
        import anthropic
        import httpx2

        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            error = body.get("error")
            error = error if isinstance(error, dict) else {}
            typed = classify(
                provider=self.server,
                status=exc.status_code,
                error_type=exc.type or error.get("type"),
                code=exc.error_code,
                message=str(exc.api_message or exc.message),
                request_id=exc.request_id,
                env_var=ENV_KEY,
                secret=self._secret,
            )
            return with_retry_after(typed, parse_retry_after(exc.response.headers))
        if isinstance(exc, anthropic.APIConnectionError | httpx2.HTTPError):
            return classify(
                provider=self.endpoint,
                message=connection_detail(exc),
                secret=self._secret,
            )
        return classify(provider=self.server, message=str(exc), secret=self._secret)


def create(name: str, **options: Any) -> AnthropicModel:
    """The registry's entry for ``anthropic:MODEL``."""
    return AnthropicModel(name, **options)
