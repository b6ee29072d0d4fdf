"""OTLP export: episodes as OpenTelemetry traces, to an OTLP JSON file or an OTLP/HTTP endpoint.

Each episode is one trace (:mod:`agentrunner.export.otlp_spans` says which spans and why),
built as ``opentelemetry-proto`` messages and sent in batches: several episodes per
``ExportTraceServiceRequest``, each request at most ``max_bytes`` of spans (an episode bigger
than that is split across requests). Two ways out:

- :func:`write_otlp_file`: the OTLP JSON file format, one ``ExportTraceServiceRequest`` per
  line (JSON Lines), from ``google.protobuf.json_format`` with the OTLP/JSON encoding's two
  differences from the plain protobuf mapping: enums as integers and trace / span ids as hex
  (:func:`request_json`; :func:`parse_request_json` reads a line back);
- :func:`send_otlp`: OTLP/HTTP, binary protobuf ``POST`` ed to ``{endpoint}/v1/traces`` (an
  endpoint with a path of its own is used as given). A request the endpoint fails or refuses
  stops the export with :class:`OtlpEndpointError`, which says how much was sent before it;
  ids are stable, so exporting again updates what was sent.

The spans hold no key or auth header (the store holds none); ``headers`` given to
:func:`send_otlp` go to the endpoint only, never into a message.

It needs the ``[otlp]`` extra (``opentelemetry-proto``, ``openinference-semantic-conventions``):
:func:`require_otlp` says so in one line.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from agentrunner import __version__
from agentrunner.export.writer import RecordableRows, check_output, write_jsonl
from agentrunner.values.errors import AgentRunnerError, UsageError
from agentrunner.values.redaction import public_url

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from agentrunner.store.protocol import StoreBackend

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""Spans per request, in protobuf bytes (collectors commonly accept 4 MiB and more)."""
TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
ID_KEYS = ("traceId", "spanId", "parentSpanId")


class OtlpEndpointError(AgentRunnerError):
    """The OTLP endpoint could not be reached, failed, or refused spans (exit code 1)."""


def require_otlp() -> None:
    """Refuse, in one line, when the ``[otlp]`` extra is not installed."""
    try:
        import openinference.semconv.trace  # noqa: F401
        import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401
    except ImportError:
        raise UsageError(
            "OTLP export needs opentelemetry-proto, which is not installed: "
            "pip install 'agentrunner[otlp]'"
        ) from None


def episode_spans(store: StoreBackend, episode_id: str, *, content: bool) -> list[Span]:
    """One episode's trace as ``opentelemetry-proto`` spans (see :mod:`.otlp_spans`)."""
    require_otlp()
    from agentrunner.export import otlp_spans

    return otlp_spans.episode_spans(store, episode_id, content=content)


@dataclass
class OtlpResult:
    """What an export wrote or sent (``notes``: what the file's writer had to replace)."""

    episodes: int = 0
    spans: int = 0
    requests: int = 0
    notes: list[str] = field(default_factory=list)


def otlp_requests(
    store: StoreBackend,
    episode_ids: Iterable[str],
    *,
    content: bool,
    max_bytes: int = MAX_REQUEST_BYTES,
    counted: OtlpResult | None = None,
) -> Iterator[ExportTraceServiceRequest]:
    """The episodes' traces in requests of at most ``max_bytes`` of spans each (one span
    bigger than that goes alone). ``counted`` is told each episode and span as it is read."""
    require_otlp()
    from agentrunner.export import otlp_spans

    counted = counted if counted is not None else OtlpResult()
    spawners = otlp_spans.spawners_of(store)

    def spans() -> Iterator[Span]:
        for episode_id in episode_ids:
            read = otlp_spans.episode_spans(store, episode_id, content=content, spawners=spawners)
            counted.episodes += 1
            for span in read:
                yield span
                counted.spans += 1  # once batched: a request yielded before it excludes it

    return in_requests(spans(), max_bytes)


def in_requests(
    spans: Iterable[Span], max_bytes: int = MAX_REQUEST_BYTES
) -> Iterator[ExportTraceServiceRequest]:
    """``spans`` in requests of at most ``max_bytes`` of spans each (one span bigger than
    that goes alone)."""
    batch: list[Span] = []
    size = 0
    for span in spans:
        span_size = span.ByteSize()
        if batch and size + span_size > max_bytes:
            yield _request(batch)
            batch, size = [], 0
        batch.append(span)
        size += span_size
    if batch:
        yield _request(batch)


def _request(spans: Sequence[Span]) -> ExportTraceServiceRequest:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

    from agentrunner.export.otlp_attrs import key_values

    resource = Resource(
        attributes=key_values({"service.name": "agentrunner", "service.version": __version__})
    )
    scope = InstrumentationScope(name="agentrunner", version=__version__)
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(resource=resource, scope_spans=[ScopeSpans(scope=scope, spans=spans)])
        ]
    )


# ------------------------------------------------------------------ the OTLP JSON file


def _spans_of(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            yield from scope.get("spans", [])


def _recode_ids(document: dict[str, Any], recode: Any) -> dict[str, Any]:
    """Every trace / span id of a request's JSON form re-encoded in place by ``recode``."""
    for span in _spans_of(document):
        for holder in (span, *span.get("links", [])):
            for key in ID_KEYS:
                if holder.get(key):
                    holder[key] = recode(holder[key])
    return document


def request_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """A request in the OTLP/JSON encoding: ``json_format``'s mapping with enums as integers
    and ids as hex (where the plain protobuf mapping writes base64)."""
    from google.protobuf import json_format

    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    return _recode_ids(document, lambda b64: base64.b64decode(b64).hex())


def parse_request_json(document: Mapping[str, Any]) -> ExportTraceServiceRequest:
    """One line of an OTLP JSON file (parsed) back into its ``ExportTraceServiceRequest``."""
    require_otlp()
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    recoded = _recode_ids(
        copy.deepcopy(dict(document)), lambda hex_id: base64.b64encode(bytes.fromhex(hex_id))
    )
    return json_format.ParseDict(recoded, ExportTraceServiceRequest())


def write_otlp_file(
    store: StoreBackend,
    episode_ids: Iterable[str],
    output: Path | None,
    *,
    content: bool = True,
    max_bytes: int = MAX_REQUEST_BYTES,
) -> OtlpResult:
    """Write the episodes' traces as an OTLP JSON file (stdout when ``output`` is None)."""
    require_otlp()
    if output is not None:
        check_output(output)
    result = OtlpResult()
    requests = otlp_requests(
        store, episode_ids, content=content, max_bytes=max_bytes, counted=result
    )
    recordable = RecordableRows()
    result.requests = write_jsonl(recordable.rows(request_json(r) for r in requests), output)
    result.notes = recordable.notes()
    return result


# ------------------------------------------------------------------ OTLP/HTTP


def traces_url(endpoint: str) -> str:
    """The URL to ``POST`` spans to: ``endpoint`` itself when it names a path, else its
    ``/v1/traces`` (what OTLP exporters do with a base endpoint)."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"not an http(s) URL: {public_url(endpoint)} (e.g. http://127.0.0.1:6006)",
            param="endpoint",
        )
    if parts.path in ("", "/"):
        parts = parts._replace(path=TRACES_PATH)
    return urlunsplit(parts)


def _refusal(response: httpx.Response) -> str | None:
    """Why a 2xx answer still refused spans (OTLP partial success), or None."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    if not response.content or not response.headers.get("content-type", "").startswith(PROTOBUF):
        return None
    answer = ExportTraceServiceResponse()
    try:
        answer.ParseFromString(response.content)
    except DecodeError:
        return None
    rejected = answer.partial_success.rejected_spans
    if not rejected:
        return None
    return f"it rejected {rejected} span(s): {answer.partial_success.error_message or 'no reason'}"


def send_otlp(
    store: StoreBackend,
    episode_ids: Iterable[str],
    endpoint: str,
    *,
    content: bool = True,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    max_bytes: int = MAX_REQUEST_BYTES,
) -> OtlpResult:
    """Send the episodes' traces to an OTLP/HTTP endpoint, one request after another;
    the first that fails raises :class:`OtlpEndpointError` (what was sent before it stays
    sent, and the message says how much that was)."""
    require_otlp()
    url = traces_url(endpoint)
    result, read = OtlpResult(), OtlpResult()
    sent_headers = {**(headers or {}), "Content-Type": PROTOBUF}
    requests = otlp_requests(store, episode_ids, content=content, max_bytes=max_bytes, counted=read)
    with httpx.Client(timeout=timeout) as client:
        for request in requests:
            problem = post_request(client, url, request.SerializeToString(), sent_headers)
            if problem is not None:
                raise OtlpEndpointError(
                    f"OTLP endpoint {public_url(url)}: {problem}; sent before it: "
                    f"{result.requests} request(s), {result.spans} span(s) (export again to send"
                    " the rest: spans already sent are updated, not duplicated)"
                )
            result.requests += 1
            result.spans = read.spans
            result.episodes = read.episodes
    return result


def post_request(
    client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str]
) -> str | None:
    """One request sent; what went wrong, or None."""
    try:
        response = client.post(url, content=body, headers=dict(headers))
    except httpx.HTTPError as exc:
        return f"cannot send ({type(exc).__name__}: {exc or 'no detail'})"
    if response.status_code >= 300:
        detail = " ".join(response.text.split())[:200]
        return f"answered {response.status_code} {response.reason_phrase}" + (
            f": {detail}" if detail else ""
        )
    return _refusal(response)
