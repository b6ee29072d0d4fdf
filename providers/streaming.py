"""The life of one streaming model call, shared by the SDK adapters.

A subclass says how to build its request, open the SDK's stream, fold one stream event
into a :class:`TurnBuilder` and translate an SDK exception. This base does the rest:
bounded retries with an ``error`` event per failed attempt, the provider's request id,
closing the connection when the episode is cancelled or interrupted (the chunks already
recorded stay), a stream that breaks or ends without a finish reason
(``IncompleteStreamError`` carrying what arrived), pricing, and a ``spec()`` without secrets
that holds what it takes to build the same adapter again (base URL and model options).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any, Protocol

from agentrunner.values.errors import ContextOverflowError, IncompleteStreamError, ModelError
from agentrunner.values.model import AgentContext
from agentrunner.values.redaction import public_url
from agentrunner.values.types import AgentTurn
from providers._retry import call_with_retries
from providers.turn_builder import TurnBuilder
from providers.usage import priced

REQUEST_ID_HEADERS = ("x-request-id", "request-id")


class StreamFailure(Exception):
    """A provider error that arrived as an event inside the stream (already typed)."""

    def __init__(self, error: ModelError) -> None:
        super().__init__(str(error))
        self.error = error


class Fold(Protocol):
    """Folds one call's stream events (plain dicts, as on the wire) into a builder."""

    def feed(self, event: dict[str, Any], builder: TurnBuilder) -> None: ...

    def turn(self, builder: TurnBuilder) -> AgentTurn:
        """The turn as it stands (complete, or partial after a broken stream)."""
        ...


class SdkStream(Protocol):
    """What the adapters need of an SDK stream: events, the response, and close()."""

    response: Any

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class StreamingAdapter(ABC):
    """A ``Model`` that streams one provider's API through its official SDK."""

    provider: str = ""
    label: str = ""
    default_url: str = ""
    price_provider_id: str = ""
    sdk_errors: tuple[type[BaseException], ...] = ()

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        params: dict[str, Any],
        max_retries: int = 4,
        retry_delay: float = 1.0,
        retry_max_delay: float = 30.0,
        price_provider: str | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.base_url = public_url(base_url).rstrip("/")
        self.params = params
        # The options this adapter was built with (JSON, no secrets), recorded in spec() so
        # that a resume or fork builds the same adapter: see providers.model_from_spec.
        self.options = dict(options or {})
        if price_provider is not None:
            self.options["price_provider"] = price_provider
        self.max_retries = max(0, max_retries)
        self.retry_delay = retry_delay
        self.retry_max_delay = retry_max_delay
        self.on_event = on_event
        self.custom_url = self.base_url != public_url(self.default_url).rstrip("/")
        custom = self.custom_url
        self._price_id = price_provider or (None if custom else self.price_provider_id)
        self._price_url = None if self._price_id else self.base_url

    @property
    def server(self) -> str:
        """Who answers, for error messages: the provider, or the server at a custom base URL
        (a local vLLM or Ollama is not "OpenAI")."""
        if self.custom_url:
            return f"the {self.label}-compatible server at {self.base_url}"
        return self.label

    @property
    def endpoint(self) -> str:
        """Where a connection was attempted, for "cannot reach ..." messages."""
        return self.server if self.custom_url else f"{self.label} at {self.base_url}"

    def spec(self) -> dict[str, Any]:
        """What ``episode.start`` records: enough to rebuild the adapter, never a key."""
        spec: dict[str, Any] = {
            "spec": f"{self.provider}:{self.model}",
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
        }
        if self.options:
            spec["options"] = dict(self.options)
        return spec

    # -- what a subclass provides

    @abstractmethod
    def build_request(self, context: AgentContext) -> dict[str, Any]:
        """The request's keyword arguments for the SDK call (no secrets)."""

    @abstractmethod
    def open_stream(self, request: dict[str, Any]) -> SdkStream:
        """Send the request; return the SDK's stream once the response headers are in."""

    @abstractmethod
    def new_fold(self) -> Fold:
        """A fresh fold for one attempt."""

    @abstractmethod
    def translate(self, exc: BaseException) -> ModelError:
        """The typed error for an exception from ``sdk_errors``."""

    # -- one call

    def __call__(self, context: AgentContext) -> AgentTurn:
        request = self.build_request(context)
        return call_with_retries(
            context,
            lambda: self._attempt(context, request),
            max_retries=self.max_retries,
            base_delay=self.retry_delay,
            max_delay=self.retry_max_delay,
        )

    def _attempt(self, context: AgentContext, request: dict[str, Any]) -> AgentTurn:
        builder = TurnBuilder(context, provider=self.provider, model=self.model)
        fold = self.new_fold()
        context.check_cancel()
        try:
            stream = self.open_stream(request)
        except self.sdk_errors as exc:
            raise self.translate(exc) from None
        headers = getattr(stream.response, "headers", {})
        builder.request_id = next((headers[h] for h in REQUEST_ID_HEADERS if h in headers), None)
        try:
            with closing(stream):  # closes the connection however the block ends
                for event in stream:
                    data = event.to_dict(mode="json")
                    if self.on_event is not None:
                        self.on_event(data)
                    context.check_cancel()
                    fold.feed(data, builder)
        except self.sdk_errors as exc:
            raise self._broken(self.translate(exc), fold, builder) from None
        except StreamFailure as failure:
            raise self._broken(failure.error, fold, builder) from None
        if builder.stop_reason is None:
            raise IncompleteStreamError(
                f"the {self.label} stream ended without a finish reason "
                f"after {builder.chunks} chunk(s)",
                partial=self._turn(fold, builder),
            )
        return self._turn(fold, builder)

    def _broken(self, error: ModelError, fold: Fold, builder: TurnBuilder) -> ModelError:
        """A stream that failed: the typed error as is when nothing was recorded yet (so a
        retryable one is retried), else an incomplete stream carrying what arrived."""
        if builder.chunks == 0 or isinstance(error, ContextOverflowError):
            return error
        return IncompleteStreamError(
            f"the {self.label} stream broke after {builder.chunks} chunk(s): {error}",
            partial=self._turn(fold, builder),
        )

    def _turn(self, fold: Fold, builder: TurnBuilder) -> AgentTurn:
        turn = fold.turn(builder)
        usage = priced(
            turn.usage,
            turn.model or self.model,
            provider_id=self._price_id,
            api_url=self._price_url,
            service_tier=getattr(fold, "service_tier", None),
        )
        return turn.model_copy(update={"usage": usage})
