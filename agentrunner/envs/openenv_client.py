"""An ``Environment`` that drives any server speaking the OpenEnv contract.

Responsibility: translate between the OpenEnv wire protocol and agentrunner's
:class:`~agentrunner.values.environment.Environment` protocol, and translate the foreign errors
met on the way (httpx, websockets, malformed replies) into
:class:`~agentrunner.values.errors.EnvironmentFailure` once, here.

The OpenEnv contract (as served by ``openenv`` 0.10's ``create_app``):

- ``GET /health`` -> ``{"status": "healthy"}``; ``GET /metadata`` -> ``{"name",
  "description", "version", ...}``; ``GET /schema`` -> ``{"action", "observation",
  "state", ...}`` JSON schemas.
- The episode runs over ``WS /ws`` (HTTP ``/reset`` and ``/step`` build a fresh
  environment per request, so they cannot carry an episode). The client sends
  ``{"type": "reset", "data": {...kwargs}}``, ``{"type": "step", "data": {...action}}``
  and ``{"type": "close"}``; the server answers ``{"type": "observation", "data":
  {"observation": {...}, "reward": float | null, "done": bool, "metadata"?: {...}}}`` or
  ``{"type": "error", "data": {"message", "code", ...}}``.

The model sees one tool whose flat parameters are the action schema's fields. Action
validation errors (and exceptions the environment raised while stepping, after which the
session stays usable) come back as tool-level errors so the model can correct itself;
refused sessions, protocol violations, timeouts and dropped connections raise
``EnvironmentFailure``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextlib import ExitStack, suppress
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection, connect

from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.errors import EnvironmentFailure, UsageError
from agentrunner.values.redaction import public_url
from agentrunner.values.types import ToolSpec

# Error codes after which the session stays open and the model can try again.
TOOL_LEVEL_ERROR_CODES = frozenset({"VALIDATION_ERROR", "EXECUTION_ERROR"})
_MAX_MESSAGE_BYTES = 100 * 2**20
_CLOSE_WAIT_S = 5.0
_DEFAULT_TOOL = "step"


def render_observation(observation: Mapping[str, Any]) -> str:
    """Render an observation as sorted ``key: value`` lines, exactly and deterministically.

    Single-line strings are shown raw, multi-line strings as an indented ``|`` block, and
    every other value as compact sorted-keys JSON. No key is dropped.
    """
    if not observation:
        return "(empty observation)"
    lines: list[str] = []
    for key in sorted(observation):
        value = observation[key]
        if isinstance(value, str) and "\n" in value:
            block = "\n".join("  " + line for line in value.split("\n"))
            lines.append(f"{key}: |\n{block}")
        elif isinstance(value, str):
            lines.append(f"{key}: {value}")
        else:
            lines.append(f"{key}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    return "\n".join(lines)


def tool_from_schema(action_schema: Mapping[str, Any], metadata: Mapping[str, Any]) -> ToolSpec:
    """The one tool the model calls: the action schema's fields as flat parameters.

    The name is the action class name in snake case without its ``Action`` suffix
    (``EchoAction`` -> ``echo``), or ``step``. OpenEnv's optional base-class
    ``metadata`` field is plumbing, not part of the action, and is left out.
    """
    title = str(action_schema.get("title") or "")
    stem = re.sub(r"Action$", "", title)
    name = re.sub(r"[^a-z0-9_]+", "_", re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()).strip("_")
    name = name[:64] or _DEFAULT_TOOL
    required = [str(field) for field in action_schema.get("required", [])]
    properties = dict(action_schema.get("properties") or {})
    if "metadata" not in required:
        properties.pop("metadata", None)
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    for key in ("$defs", "additionalProperties"):
        if key in action_schema:
            parameters[key] = action_schema[key]
    description = str(
        action_schema.get("description")
        or metadata.get("description")
        or "Take one step in the environment."
    )
    return ToolSpec(name=name, description=description, parameters=parameters)


def format_validation_errors(data: Mapping[str, Any]) -> str:
    """``"field: reason; other: reason"`` from an OpenEnv error reply, else its message."""
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        parts = []
        for err in errors:
            if isinstance(err, Mapping):
                loc = ".".join(str(part) for part in err.get("loc", ())) or "action"
                parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        if parts:
            return "; ".join(parts)
    return str(data.get("message") or "invalid action")


def _error_data(reply: Mapping[str, Any]) -> Mapping[str, Any]:
    data = reply.get("data")
    return data if isinstance(data, Mapping) else {}


class OpenEnvEnv:
    """Drives one OpenEnv server: HTTP for health, metadata and schema; the episode over WS."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        url = base_url.strip().rstrip("/")
        scheme, sep, rest = url.partition("://")
        http_scheme = {"http": "http", "https": "https", "ws": "http", "wss": "https"}.get(
            scheme.lower()
        )
        if not sep or http_scheme is None or not rest:
            raise UsageError(f"not an http(s) or ws(s) URL for an OpenEnv server: {base_url!r}")
        self.base_url = f"{http_scheme}://{rest}"
        self.public_url = public_url(self.base_url)
        self.ws_url = f"{'wss' if http_scheme == 'https' else 'ws'}://{rest}/ws"
        self.timeout = timeout
        self._metadata: dict[str, Any] = {}
        self._tool: ToolSpec | None = None
        self._max_steps: int | None = None
        self._stack = ExitStack()
        self._ws: ClientConnection | None = None
        self._steps = 0

    def spec(self) -> dict[str, Any]:
        return {"kind": "openenv", "url": self.public_url, "env_name": self._metadata.get("name")}

    def reset(self, task_id: str, seed: int) -> ResetResult:
        self._read_server_description()
        assert self._tool is not None
        if self._ws is None:
            self._open_session()
        payload: dict[str, Any] = {"seed": seed}
        if task_id:
            payload["task_id"] = task_id
        reply = self._exchange({"type": "reset", "data": payload}, during="reset")
        if reply.get("type") == "error":
            self._drop_session()
            raise self._refusal(reply, during="reset")
        observation, _, _, _ = self._parse_observation(reply, during="reset")
        self._steps = 0
        return ResetResult(
            prompt=render_observation(observation),
            system=self._system_prompt(),
            tools=(self._tool,),
            max_steps=self._max_steps,
        )

    def step(self, action: ToolAction) -> StepResult:
        if self._ws is None or self._tool is None:
            raise EnvironmentFailure(
                f"no open OpenEnv session with {self.public_url}: call reset() first"
            )
        if action.name != self._tool.name:
            error = f"unknown tool {action.name!r}; this environment offers {self._tool.name!r}"
            return StepResult(observation=f"error: {error}", error=error)
        self._steps += 1
        during = f"step {self._steps}"
        reply = self._exchange({"type": "step", "data": dict(action.arguments)}, during=during)
        if reply.get("type") == "error":
            data = _error_data(reply)
            code = str(data.get("code", ""))
            if code not in TOOL_LEVEL_ERROR_CODES:
                self._drop_session()
                raise self._refusal(reply, during=during)
            if code == "VALIDATION_ERROR":
                error = f"invalid action: {format_validation_errors(data)}"
            else:
                error = f"the environment failed on this action: {data.get('message', '')}"
            return StepResult(observation=f"error: {error}", error=error, info={"code": code})
        observation, reward, done, metadata = self._parse_observation(reply, during=during)
        truncated = not done and self._max_steps is not None and self._steps >= self._max_steps
        return StepResult(
            observation=render_observation(observation),
            reward=reward,
            done=done or truncated,
            truncated=truncated,
            info={"metadata": metadata} if metadata else {},
        )

    def close(self) -> None:
        """Ends the session (the server frees its slot) and closes the socket; idempotent."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            ws.send(json.dumps({"type": "close"}))
            # The server closes the socket only after it has destroyed the session.
            ws.recv(timeout=min(self.timeout, _CLOSE_WAIT_S))
        except (ConnectionClosed, TimeoutError, OSError):
            pass
        finally:
            self._close_stack()

    # -- HTTP -----------------------------------------------------------------------------

    def _read_server_description(self) -> None:
        try:
            with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
                health = self._get_json(client, "/health")
                if str(health.get("status", "healthy")).lower() == "unhealthy":
                    raise EnvironmentFailure(
                        f"OpenEnv server at {self.public_url} reports itself unhealthy: {health}"
                    )
                metadata = self._get_json(client, "/metadata", optional=True)
                schema = self._get_json(client, "/schema")
        except httpx.TransportError as exc:
            raise EnvironmentFailure(
                f"cannot reach OpenEnv server at {self.public_url}: {exc or type(exc).__name__}"
            ) from exc
        action_schema = schema.get("action")
        if not isinstance(action_schema, Mapping):
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} has no action schema in GET /schema"
            )
        self._metadata = metadata
        self._tool = tool_from_schema(action_schema, metadata)
        max_steps = metadata.get("max_steps")
        valid = isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0
        self._max_steps = max_steps if valid else None

    def _get_json(
        self, client: httpx.Client, path: str, *, optional: bool = False
    ) -> dict[str, Any]:
        response = client.get(path)
        if optional and response.status_code == 404:
            return {}
        if response.status_code != 200:
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} answered GET {path} with HTTP "
                f"{response.status_code}: {response.text[:200]}"
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} sent non-JSON for GET {path}: "
                f"{response.text[:200]!r}"
            ) from exc
        if not isinstance(body, dict):
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} sent {type(body).__name__} for GET {path}, "
                "expected a JSON object"
            )
        return body

    def _system_prompt(self) -> str | None:
        name = self._metadata.get("name")
        description = self._metadata.get("description")
        if not name and not description:
            return None
        text = f"You are acting in the OpenEnv environment {name or self.public_url}."
        if description:
            text += f" {description}"
        return text

    # -- WebSocket ------------------------------------------------------------------------

    def _open_session(self) -> None:
        try:
            self._ws = self._stack.enter_context(
                connect(
                    self.ws_url,
                    open_timeout=self.timeout,
                    close_timeout=_CLOSE_WAIT_S,
                    max_size=_MAX_MESSAGE_BYTES,
                )
            )
        except (WebSocketException, OSError) as exc:
            self._close_stack()
            raise EnvironmentFailure(
                f"cannot open an OpenEnv session at {self.ws_url}: {exc or type(exc).__name__}"
            ) from exc

    def _exchange(self, message: dict[str, Any], *, during: str) -> dict[str, Any]:
        """Send one message and return the server's reply, or raise ``EnvironmentFailure``."""
        ws = self._ws
        assert ws is not None
        try:
            # A refused session sends an error frame and closes: read that frame.
            with suppress(ConnectionClosed):
                ws.send(json.dumps(message))
            raw = ws.recv(timeout=self.timeout)
        except TimeoutError as exc:
            self._drop_session()
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} did not answer {during} "
                f"within {self.timeout:g}s"
            ) from exc
        except (WebSocketException, OSError) as exc:
            self._drop_session()
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} closed the connection during {during}: "
                f"{exc or type(exc).__name__}"
            ) from exc
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self._drop_session()
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} sent a malformed reply during {during}: "
                f"{str(raw)[:200]!r}"
            )
        return reply

    def _parse_observation(
        self, reply: Mapping[str, Any], *, during: str
    ) -> tuple[dict[str, Any], float | None, bool, dict[str, Any]]:
        """(observation, reward, done, metadata) from an ``observation`` reply."""
        data = reply.get("data")
        if reply.get("type") != "observation" or not isinstance(data, Mapping):
            self._drop_session()
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} sent an unexpected reply during {during}: "
                f"{json.dumps(reply)[:200]}"
            )
        nested = data.get("observation")
        if isinstance(nested, Mapping):
            observation = dict(nested)
        else:  # observation fields at the top level of ``data``
            excluded = ("reward", "done", "metadata")
            observation = {k: v for k, v in data.items() if k not in excluded}
        metadata: dict[str, Any] = {}
        for source in (observation.get("metadata"), data.get("metadata")):
            if isinstance(source, Mapping):
                metadata.update(source)
        reward = data.get("reward")
        if reward is not None and not isinstance(reward, int | float):
            self._drop_session()
            raise EnvironmentFailure(
                f"OpenEnv server at {self.public_url} sent a non-numeric reward during "
                f"{during}: {reward!r}"
            )
        return (
            observation,
            None if reward is None else float(reward),
            bool(data.get("done")),
            metadata,
        )

    def _refusal(self, reply: Mapping[str, Any], *, during: str) -> EnvironmentFailure:
        data = _error_data(reply)
        code = data.get("code", "UNKNOWN")
        message = data.get("message", "no message")
        if code == "CAPACITY_REACHED":
            return EnvironmentFailure(
                f"OpenEnv server at {self.public_url} refused the session during {during}: "
                f"{message} (CAPACITY_REACHED); close other clients or raise the server's "
                "max_concurrent_envs"
            )
        return EnvironmentFailure(
            f"OpenEnv server at {self.public_url} failed during {during}: {message} ({code})"
        )

    def _drop_session(self) -> None:
        self._ws = None
        self._close_stack()

    def _close_stack(self) -> None:
        with suppress(WebSocketException, OSError):
            self._stack.close()
        self._stack = ExitStack()
