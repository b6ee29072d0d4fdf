"""The episodes a recording proxy writes: opened per conversation, forked for a call that
goes live, found again after a killed proxy (an agent calling again continues its episode),
kept alive by their leases, and ended when the proxy stops."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner import __version__
from agentrunner.envs import recorded
from agentrunner.readers.state import rebuild
from agentrunner.record.conversations import Conversation, Conversations, keys
from agentrunner.record.dialects.base import Dialect
from agentrunner.record.snapshots import base as folder_base
from agentrunner.runtime.recorder import Observer, Recorder
from agentrunner.store.leases import Leases
from agentrunner.values import events as ev
from agentrunner.values.errors import StoreError, UsageError
from agentrunner.values.hashing import canonical_json, message_hash, message_json
from agentrunner.values.redaction import Redactor, known_secrets, scrub
from agentrunner.values.specs import RecordedSpec
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import EventWriter, StoreBackend


@dataclass(frozen=True)
class Origin:
    """Who is calling: what ``episode.start`` says of a recorded agent."""

    command: list[str] | None = None
    cwd: str | None = None
    upstreams: dict[str, str] = field(default_factory=dict)
    kind: str = recorded.KIND
    """``recorded``, or ``replay`` for an agent served a recording back."""
    links: dict[str, str] = field(default_factory=dict)
    """Named links to other episodes (``replay_of``)."""
    run: str | None = None
    """The ``record`` run (one agent's run: its main conversation and its side calls, such as
    a title or a summary asked on the side), in every episode's ``env.record_run``."""


SCRUB_CACHE = 20_000
"""Scrubbed messages kept (a bound on memory; past it the cache starts again)."""


class Episodes:
    """The recorded episodes of one proxy (used from the journal's thread only)."""

    def __init__(
        self,
        store: StoreBackend,
        origin: Origin,
        problem: Callable[[str], None],
        *,
        observer_factory: Callable[[], Observer] | None = None,
    ) -> None:
        self.store = store
        self.observer_factory = observer_factory
        self.origin = origin
        self.problem = problem
        self.secrets = known_secrets()
        self.redactor = Redactor(self.secrets)
        self.scrubbed: dict[str, Message] = {}
        """Messages as recorded, by a hash of what the client sent (see :meth:`scrub`)."""
        self.conversations = Conversations()
        self.leases = Leases(store)
        """The writer leases of the episodes this proxy writes, released when it stops."""
        self._dormant: dict[tuple[str | None, str], str] = {}
        """Recorded episodes a killed proxy left, by (session, place of their last request)."""

    def _recorder(self, writer: EventWriter, tip: str | None = None) -> Recorder:
        observer = self.observer_factory() if self.observer_factory is not None else None
        return Recorder(self.store, writer, secrets=self.secrets, tip=tip, observer=observer)

    def learn_secret(self, name: str, value: str) -> None:
        """A credential seen in a request: never recorded from here on, wherever it shows."""
        if value and value not in self.secrets.values() and len(value) >= 8:
            self.secrets[f"{name}:{len(self.secrets)}"] = value
            self.redactor = Redactor(self.secrets)
            self.scrubbed.clear()
            for conversation in self.conversations.all:
                conversation.recorder.redactor = Redactor(self.secrets)

    def scrub(self, message: Message, deep: bool) -> Message:
        """A message as it may be recorded: known secrets out (with ``deep``, the costlier
        forms too: a message carrying tool results), verbatim otherwise. Each distinct
        message is scrubbed once: a conversation's requests repeat all that came before."""
        data = message.model_dump()
        key = hashlib.sha256(f"{deep}{canonical_json(data)}".encode()).hexdigest()
        found = self.scrubbed.get(key)
        if found is None:
            if len(self.scrubbed) >= SCRUB_CACHE:
                self.scrubbed.clear()
            clean = scrub(data, self.redactor)[0]
            found = Message.model_validate(self.redactor.deep_value(clean) if deep else clean)
            self.scrubbed[key] = found
        return found

    def heartbeat(self) -> None:
        for conversation in self.conversations.all:
            try:
                self.store.heartbeat(conversation.episode_id)
            except (StoreError, OSError) as exc:
                self.problem(f"heartbeat of {conversation.episode_id}: {exc}")

    def open(
        self,
        wire: Dialect,
        model: str,
        session: str | None,
        agent: str | None,
        messages: list[Message],
        *,
        snapshot: str | None = None,
        parent_session: str | None = None,
    ) -> Conversation:
        """A new recorded episode for a conversation's first request; ``snapshot``: the
        agent's folder as that request arrived (``record --snapshots``), its ``env.base``;
        ``parent_session``: the session its client says started it (a sub-agent's)."""
        spawner = self.conversations.spawner((session, parent_session), messages)
        redactor = Redactor(self.secrets)
        env: dict[str, Any] = {
            **self.origin.links,
            "kind": self.origin.kind,
            "agent": agent or "unknown agent",
            "api": wire.api,
            "command": self.origin.command,
            "cwd": self.origin.cwd,
            "upstreams": self.origin.upstreams,
            "session_id": session,
        }
        if parent_session is not None:
            env["parent_session_id"] = parent_session
        if self.origin.run is not None:
            env["record_run"] = self.origin.run
        if spawner is not None:
            env["spawned_by"] = {"episode_id": spawner[0], "call_id": spawner[1]}
        env = scrub(env, redactor)[0]
        task = " ".join(self.origin.command) if self.origin.command else f"{env['agent']} via proxy"
        task_id = redactor.text(task)[:500]
        if snapshot is not None:
            env["base"] = folder_base(task_id, snapshot, str(env.get("cwd") or ""))
        start = ev.EpisodeStart(
            task_id=task_id,
            seed=0,
            env=env,
            model={"spec": f"{wire.provider}:{model}", "provider": wire.provider, "model": model},
            config={"recorded_by": f"agentrunner {__version__}"},
            version=__version__,
        )
        episode_id = self.store.create_episode(
            task_id=start.task_id,
            seed=0,
            env=start.env,
            model=start.model,
            first_event=(0, start),
            claim=True,
        )
        self.leases.hold(episode_id, claimed=True)
        rec = self._recorder(self.store.writer(episode_id))
        conversation = Conversation(episode_id=episode_id, recorder=rec, session=session)
        self.conversations.add(conversation)
        return conversation

    def reload(self) -> None:
        """The recorded episodes a killed proxy left interrupted: each waits, unclaimed, for
        its agent to retry its last call (or make its next one) through this proxy."""
        for episode in self.store.list_episodes():
            env = episode.env_spec
            if not isinstance(env, RecordedSpec) or env.kind != recorded.KIND:
                continue
            if episode.status != ev.Status.INTERRUPTED:
                continue
            places = keys(self._last_request(episode.episode_id)[1])
            if places and places[-1]:
                self._dormant[(env.session_id, places[-1])] = episode.episode_id

    def _last_request(self, episode_id: str) -> tuple[int, list[Message]]:
        """The turn and messages of an episode's last request (turn 0: the messages recorded
        before its first request went out)."""
        last = self.store.last_of_kind(episode_id, "model.request")
        if last is None:
            return 0, rebuild(self.store, episode_id).messages
        return last.turn, list(self.store.reconstruct_request(episode_id, last.turn).messages)

    def wake(self, session: str | None, places: list[str]) -> Conversation | None:
        """The interrupted recording a request continues, claimed and resumed (or None).

        A request that repeats the last recorded one is the agent retrying a call whose answer
        the killed proxy did not finish recording: same turn. One that goes beyond it means
        the agent got that answer (only its recording was lost) and went on: the next turn."""
        at = next(
            (i for i in range(len(places) - 1, -1, -1) if (session, places[i]) in self._dormant),
            None,
        )
        if at is None:
            return None
        found = self._dormant.pop((session, places[at]))
        try:
            self.leases.hold(found)
        except UsageError:  # another live writer (another proxy) has it
            return None
        state = rebuild(self.store, found)
        writer = self.store.writer(found, attempt=state.episode.attempt + 1)
        rec = self._recorder(writer, tip=state.tip)
        rec.totals, rec.turn = state.totals, state.turn
        lost = state.open_request
        retried = at == len(places) - 1
        done = "called again by the agent" if retried else "answered, the agent went on"
        rec.resume(
            from_seq=state.last_seq,
            env_restore="none: the agent kept its own state and called through a restarted proxy",
            dangling=[{"call_id": lost["call_id"], "kind": "model.request", "done": done}]
            if lost
            else [],
        )
        if lost is not None:
            rec.failure(
                "generate",
                "proxy stopped",
                f"the proxy stopped before this call's answer was recorded; {done}",
                retryable=True,
            )
        conversation = Conversation(episode_id=found, recorder=rec, session=session)
        last_turn, messages = self._last_request(found)
        conversation.calls = last_turn - 1 if lost and retried else last_turn
        self.conversations.advance(conversation, chain_of(messages), keys(messages))
        conversation.open_calls = {p.call.call_id: p.call.name for p in state.pending}
        self.conversations.add(conversation)
        return conversation

    def fork(self, episode_id: str, turn: int, *, session: str | None) -> Conversation:
        """A fork of a recorded episode for the live call that takes the place of its call
        ``turn``: it inherits everything up to the model's answer of the call before (the live
        request brings the results of that answer's tool calls, and any words added to them)."""
        parent = self.store.episode(episode_id)
        if self.store.last_at_turn(parent.episode_id, "model.request", turn) is None:
            raise UsageError(f"episode {parent.episode_id} has no recorded call {turn}")
        fork_id = self.store.create_episode(
            task_id=parent.task_id,
            seed=parent.seed,
            env={**parent.env, "forked_at_call": turn},
            model=parent.model,
            parent_episode_id=parent.episode_id,
            fork_seq=self.answered_through(parent.episode_id, turn - 1),
            claim=True,
        )
        self.leases.hold(fork_id, claimed=True)
        rec = self._recorder(self.store.writer(fork_id))
        conversation = Conversation(episode_id=fork_id, recorder=rec, session=session)
        conversation.calls = rec.turn = turn - 1
        if turn > 1:
            inherited = list(self.store.reconstruct_request(parent.episode_id, turn - 1).messages)
            self.conversations.advance(conversation, chain_of(inherited), keys(inherited))
            rec.tip = conversation.chain[-1] if conversation.chain else None
            for row in self.store.events(parent.episode_id, kinds=["tool.call"]):
                call = row.typed() if row.turn == turn - 1 else None
                if isinstance(call, ev.ToolCall):
                    conversation.open_calls[call.call_id] = call.name
        self.conversations.add(conversation)
        return conversation

    def answered_through(self, episode_id: str, turn: int) -> int:
        """The seq of the last event of the model's answer at ``turn`` (turn 0: the
        ``episode.start``, seq 1)."""
        last = 1
        for row in self.store.events(episode_id, kinds=["model.response", "usage", "tool.call"]):
            if row.turn <= turn:
                last = row.seq
        return last

    def end_all(self, stop_reason: str, end: dict[str, Any]) -> None:
        for conversation in self.conversations.all:
            rec = conversation.recorder
            rec.record(
                ev.EpisodeEnd(
                    stop_reason=stop_reason,
                    turns=conversation.calls,
                    total_reward=0.0,
                    totals=rec.totals.as_dict(),
                    **end,
                )
            )
        self.leases.release_all()
        self.conversations = Conversations()


def chain_of(messages: list[Message]) -> list[str]:
    """The stored hashes of a request's messages, in order (each names its place)."""
    chain: list[str] = []
    for m in messages:
        chain.append(message_hash(chain[-1] if chain else None, message_json(m)))
    return chain
