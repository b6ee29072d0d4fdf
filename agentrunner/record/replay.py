"""A recorded agent served back: which recorded call an incoming request is, and its answer.

Requests are matched by their conversation: the messages they carry (tool results
included), in order, with what legitimately changes between two runs of the same agent left
out: system prompts sent as a body field (they name dates, folders, session ids),
``cache_control`` marks, whose placement moves, and what the client's adapter names as
changing from run to run in its text (``volatile``: Gemini CLI's process ids in every shell
result). Identical conversations (a retry) are served
in the order they were recorded. A request that matches nothing is a divergence: the report
names the recorded episode and turn it is closest to and the first message that differs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.record.bodies import request_body
from agentrunner.record.conversations import compared, normal
from agentrunner.record.dialects import dialect
from agentrunner.record.proxied import proxied_answer, proxied_request
from agentrunner.values.errors import UsageError
from agentrunner.values.hashing import canonical_json
from agentrunner.values.specs import EnvSpec, ImportedSpec, RecordedSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


@dataclass(frozen=True)
class Answer:
    """One recorded call: where it was, the conversation it answered, its bytes."""

    episode_id: str
    turn: int
    messages: tuple[Any, ...]
    status: int
    content_type: str | None
    body: bytes
    latency_s: float


@dataclass(frozen=True)
class Divergence:
    """Where a replayed agent's request left the recording."""

    episode_id: str
    turn: int
    index: int
    recorded: str
    now: str

    def report(self) -> str:
        return (
            f"the agent's request differs from the recording at turn {self.turn} of episode "
            f"{self.episode_id}: message {self.index} was {self.recorded}, now {self.now}"
        )


class Replay:
    """The answers of a recorded episode and of the sub-agents it spawned."""

    def __init__(self, store: StoreBackend, episode_id: str, volatile: Volatile = ()) -> None:
        root = store.episode(episode_id)
        if not isinstance(root.env_spec, RecordedSpec):
            raise UsageError(
                f"episode {root.episode_id} was not recorded through the proxy: only recorded"
                " agents can be replayed this way (`agentrunner replay` re-runs native episodes)"
            )
        self.root = root.episode_id
        self.volatile = volatile
        self.episodes = _family(store, self.root)
        self.answers: list[Answer] = []
        for episode in self.episodes:
            self.answers.extend(_answers(store, episode, volatile))
        if not self.answers:
            raise UsageError(f"episode {self.root} has no recorded answer to serve")
        self._queues: dict[str, deque[Answer]] = {}
        for answer in self.answers:
            self._queues.setdefault(_key(answer.messages), deque()).append(answer)

    def find(self, api: str, body: bytes) -> Answer | Divergence:
        """The recorded answer to serve for a request, or where it diverged."""
        messages = conversation(api, json.loads(body), self.volatile)
        waiting = self._queues.get(_key(messages))
        if waiting:
            return waiting.popleft() if len(waiting) > 1 else waiting[0]
        return self._closest(messages)

    def _closest(self, messages: tuple[Any, ...]) -> Divergence:
        def shared(answer: Answer) -> int:
            n = 0
            for a, b in zip(answer.messages, messages, strict=False):
                if a != b:
                    break
                n += 1
            return n

        best = max(self.answers, key=lambda a: (shared(a), -a.turn))
        index = shared(best)
        was = best.messages[index] if index < len(best.messages) else None
        now = messages[index] if index < len(messages) else None
        return Divergence(best.episode_id, best.turn, index, _brief(was), _brief(now))


Volatile = tuple[tuple[str, str], ...]
"""(pattern, replacement) pairs: text a client writes differently on every run."""


def conversation(api: str, body: dict[str, Any], volatile: Volatile = ()) -> tuple[Any, ...]:
    """A request's messages as replay compares them (system fields and volatile marks out)."""
    split = dialect(api).split(body)
    return tuple(_steady(normal(m.raw), volatile) for m in split.messages if compared(m))


def _steady(value: Any, volatile: Volatile) -> Any:
    """``value`` with each string's run-to-run parts replaced."""
    if not volatile:
        return value
    if isinstance(value, str):
        for pattern, replacement in volatile:
            value = re.sub(pattern, replacement, value)
        return value
    if isinstance(value, dict):
        return {k: _steady(v, volatile) for k, v in value.items()}
    if isinstance(value, list):
        return [_steady(v, volatile) for v in value]
    return value


def _family(store: StoreBackend, root: str) -> list[str]:
    """``root``, the episodes the same ``record`` run made (its side calls), and the episodes
    their calls spawned (sub-agents), recursively."""
    found = [root]
    children: dict[str, list[str]] = {}
    run = _record_run(store.episode(root).env_spec)
    for episode in store.list_episodes():
        env = episode.env_spec
        spawner = env.spawned_by if isinstance(env, ImportedSpec | RecordedSpec) else None
        parent = spawner.episode_id if spawner is not None else None
        if parent:
            children.setdefault(parent, []).append(episode.episode_id)
        elif run and _record_run(env) == run and episode.episode_id != root:
            found.append(episode.episode_id)
    i = 0
    while i < len(found):
        found.extend(sorted(children.get(found[i], [])))
        i += 1
    return found


def _record_run(env: EnvSpec) -> str | None:
    """The ``record`` run that made a recorded episode (None for any other)."""
    return env.record_run if isinstance(env, RecordedSpec) else None


def _answers(store: StoreBackend, episode_id: str, volatile: Volatile) -> list[Answer]:
    """The calls of an episode that got an answer the proxy kept (one per turn)."""
    out: list[Answer] = []
    for row in store.iter_events(episode_id, kinds=["model.response", "error"]):
        kept = proxied_answer(row.payload)
        answer = kept.answer
        if answer is None:
            continue
        request = store.last_at_turn(episode_id, "model.request", row.turn)
        assert request is not None, "an answer recorded without its request"
        api = proxied_request(request.payload).api
        assert api is not None, "an answer kept for a request the proxy did not record"
        out.append(
            Answer(
                episode_id=episode_id,
                turn=row.turn,
                messages=conversation(api, request_body(store, episode_id, row.turn), volatile),
                status=answer.status or 200,
                content_type=answer.content_type,
                body=store.read_blob(answer.body),
                latency_s=kept.latency_s or 0.0,
            )
        )
    return out


def _key(messages: tuple[Any, ...]) -> str:
    return hashlib.sha256(canonical_json(list(messages)).encode()).hexdigest()


def _brief(message: Any) -> str:
    if message is None:
        return "absent"
    text = json.dumps(message, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def pieces(answer: Answer) -> list[bytes]:
    """The answer's bytes in the pieces a stream sends (its events), or whole."""
    if not (answer.content_type or "").startswith("text/event-stream"):
        return [answer.body]
    parts = answer.body.split(b"\n\n")
    out = [part + b"\n\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def answer_file(path: Path) -> tuple[bytes, str]:
    """A file holding a model's answer (``record --fork --response``): its bytes and their
    type, an SSE stream (its first line an ``event:`` or ``data:`` field) or a JSON body."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the answer file {path}: {exc.strerror or exc}") from None
    first = data.lstrip().split(b"\n", 1)[0]
    if first.startswith((b"event:", b"data:")):
        return data, "text/event-stream"
    try:
        json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise UsageError(
            f"the answer file {path} is neither an SSE stream (lines of event: and data:)"
            " nor a JSON body"
        ) from None
    return data, "application/json"
