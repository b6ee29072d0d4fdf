"""ATIF export: an episode's full history as one Agent Trajectory Interchange Format document.

ATIF (Harbor framework, RFC 0001) is the trajectory format other agent tools read. This
writes schema version ``ATIF-v1.7`` (what Harbor's own converters write), one JSON document
per episode, read in one pass over the episode's events through the one fold of the log
(:class:`agentrunner.readers.history.History`; chunks are left out, responses hold what streamed).

Steps, in history order; a fork's history includes what it inherits, those steps marked
``is_copied_context: true``:

- a ``message`` event of role system / user (system prompt, task prompt, continuation, a
  fork's injected message): a ``system`` / ``user`` step;
- a model's answer (a complete ``model.response``): an ``agent`` step with ``message``,
  ``reasoning_content``, ``tool_calls`` (``arguments`` the parsed object, ``{}`` when they do
  not parse), ``model_name`` (the model that answered), ``reasoning_effort`` (when the request
  asked for one), ``metrics`` and ``llm_call_count``: the model calls that led to the answer
  (a broken stream retried on resume is one more; their usage is summed);
- an assistant message a fork put in the model's place (a ``message`` of reason ``edit``):
  an ``agent`` step with ``llm_call_count: 0``, and so no ``metrics``, no
  ``reasoning_content``;
- the results of an agent step's tool calls: its ``observation.results``, each with the
  ``source_call_id`` of its call and the observation exactly as the model saw it;
- model calls after the last answer that never completed (the stream broke and the episode
  stopped): a last ``agent`` step with the partial message and their usage, marked
  ``incomplete``.

Usage: ``prompt_tokens`` = input tokens (cached ones included), ``cached_tokens`` = cache
reads, ``completion_tokens`` = output tokens, ``cost_usd`` when known; ``metrics.extra``
holds ``cache_write_tokens`` and ``reasoning_tokens``. ``final_metrics`` holds the totals
over all steps (``extra``: ``total_cache_write_tokens``, ``total_reasoning_tokens``).
Tool definitions (OpenAI function shape) are ``agent.tool_definitions``.

What ATIF has no field for is under ``extra["agentrunner"]``, with these keys:

- trajectory: ``episode_id``, ``task_id``, ``seed``, ``created_at``, ``status``,
  ``stop_reason``, ``total_reward`` (null: unjudged, no event of its own holds a reward),
  ``turns``, ``attempts``, ``parent_episode_id``, ``parent_trajectory`` (the parent's
  ``session_id`` and ``trajectory_id``), ``spawned_by`` (a sub-agent's: the ``episode_id``
  and ``call_id`` that started it, that episode's ``session_id`` and ``trajectory_id``),
  ``fork_seq``, ``ancestors`` (parent first),
  ``fork_group`` (``group_id``, ``candidate``,
  ``sample``, ``proposal``; null outside a fan-out), ``batches`` (batch ids),
  ``verifications`` (newest first: ``verifier``, ``score``, ``passed``, ``details``,
  ``created_at``), and ``resumes`` / ``cancels`` / ``errors``: those events' fields with
  ``episode_id``, ``seq``, ``turn``, ``attempt`` and ``ts``;
- agent: ``model`` and ``env`` (the specs the episode ran with), ``config`` (the runner's);
- every step: ``episode_id`` (the episode whose log holds it: an ancestor for copied steps),
  ``seq``, ``turn``, ``attempt``; a step made from a ``message`` event: ``reason``
  (``system``, ``prompt``, ``continue``, ``fork``, ``edit``); a model's step: ``stop_reason``
  and ``calls`` (per model call: ``call_id``, ``seq``, ``stop_reason``,
  ``provider_request_id``, ``latency_s``); when there is one: ``refusal``, ``opaque``
  (provider-opaque parts, verbatim), ``reasoning`` (of an edited message), ``incomplete``;
- tool call, when its arguments do not parse: ``raw_arguments`` (the string the model
  wrote) and ``parse_error``;
- observation result: ``seq``, ``reward``, ``done``, ``truncated``, ``error``, ``step`` (the
  environment step; null when the environment did not run the call) and ``duration_s``.

The ATIF import reads these back (:mod:`agentrunner.imports.atif_fields`): a trajectory
exported and imported again is the same episode (task, seed, model, results' rewards, its end
and total reward, edits as edits), and a fork whose parent's export was imported first is
imported as its fork. A sub-agent (a recorded agent's ``env.spawned_by``, an imported
session's subagent) is linked from the result of the call that started it by a
``subagent_trajectory_ref`` in the file form: ``trajectory_path`` ``<episode_id>.json``, the
file an export into a directory writes beside this one. ``agent.version`` is agentrunner's, or
an imported session's source's; ``unknown`` when the source named none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner import __version__
from agentrunner.export.atif_steps import (
    NS,
    Read,
    Said,
    answer_step,
    read_episode,
    said_step,
)
from agentrunner.export.chat import tool_schemas
from agentrunner.export.writer import RecordableRows, check_output, write_jsonl
from agentrunner.store import EpisodeSummary
from agentrunner.values.errors import EpisodeNotFoundError, UsageError
from agentrunner.values.events import EpisodeStart
from agentrunner.values.specs import ImportedSpec, RecordedSpec
from agentrunner.values.types import Message, ToolSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

SCHEMA_VERSION = "ATIF-v1.7"
AGENT_NAME = "agentrunner"
UNKNOWN_VERSION = "unknown"
"""``agent.version`` of an imported session whose source names no version."""


# ------------------------------------------------------------------ trajectory


def _imported(store: StoreBackend, episode: EpisodeSummary) -> bool:
    """Whether the episode is an imported session (a root, or a fork an ATIF import made):
    its own rows begin with its own ``episode.start``, where a fork made here inherits it."""
    if not isinstance(episode.env_spec, ImportedSpec):
        return False
    return episode.parent_episode_id is None or store.has_own_event(
        episode.episode_id, "episode.start"
    )


def _atif_header(store: StoreBackend, episode: EpisodeSummary) -> dict[str, Any]:
    """What an imported ATIF trajectory's header said (its ids, notes), for an episode
    imported from one (empty for any other, forks made of one included)."""
    env = episode.env_spec
    atif = isinstance(env, ImportedSpec) and env.format == "atif" and _imported(store, episode)
    header = env.extra if isinstance(env, ImportedSpec) and atif else None
    return header or {}


def session_ids(store: StoreBackend, episode: EpisodeSummary) -> tuple[str, str]:
    """The trajectory's session and trajectory ids: the episode's own, or for an imported
    session the ones its source gave (so that an ATIF file imported and exported again keeps
    its ids)."""
    own = (episode.episode_id, episode.episode_id)
    if not _imported(store, episode):
        return own
    source = _atif_header(store, episode)
    if isinstance(source.get("session_id"), str):
        tid = source.get("trajectory_id")
        return (source["session_id"], tid if isinstance(tid, str) else episode.episode_id)
    env = episode.env_spec
    session = env.session_id if isinstance(env, ImportedSpec) else None
    return (session or episode.episode_id, episode.episode_id)


def _agent(
    store: StoreBackend, episode: EpisodeSummary, start: EpisodeStart | None
) -> dict[str, Any]:
    """ATIF's ``agent`` name and version: agentrunner's, or for an imported session its
    source's (a Claude Code session says Claude Code); ``unknown`` when the source named no
    version (ATIF requires one, and an empty one is refused)."""
    if not _imported(store, episode):
        return {"name": AGENT_NAME, "version": start.version if start else __version__}
    env = episode.env_spec
    agent, version = (
        (env.agent, env.agent_version) if isinstance(env, ImportedSpec) else (None, None)
    )
    return {"name": agent or AGENT_NAME, "version": version or UNKNOWN_VERSION}


def _link_the_rest(
    steps: list[dict[str, Any]], links: dict[str | None, list[dict[str, Any]]]
) -> None:
    """Sub-agents whose starting call no step's results hold (or that name none): linked
    from a result of the first step that names no call."""
    linked = {
        r.get("source_call_id")
        for step in steps
        for r in (step.get("observation") or {}).get("results", [])
        if "subagent_trajectory_ref" in r
    }
    rest = [ref for call, refs in links.items() if call not in linked for ref in refs]
    if rest:
        observation = steps[0].setdefault("observation", {"results": []})
        observation["results"].append({"subagent_trajectory_ref": rest})
        steps[0]["extra"] = steps[0].pop("extra")  # extra stays last


def _tool_definitions(store: StoreBackend, hashes: list[str]) -> list[dict[str, Any]]:
    """Every tool the episode's requests offered (the first definition of each name)."""
    tools: dict[str, ToolSpec] = {}
    for digest in hashes:
        for tool in store.tools(digest):
            tools.setdefault(tool.name, tool)
    return tool_schemas(list(tools.values()))


def sub_agents(store: StoreBackend) -> dict[str, list[tuple[str | None, EpisodeSummary]]]:
    """Every sub-agent episode by the id of the episode that started it, with the call that
    did (None when unknown): a recorded agent's (``env.spawned_by``) and an imported
    session's subagents (``env.parent_episode``, ``env.parent_call_id``). Forks of a
    sub-agent are not sub-agents of their own."""
    out: dict[str, list[tuple[str | None, EpisodeSummary]]] = {}
    for episode in reversed(store.list_episodes()):
        spawner = _spawner(episode)
        if spawner is not None:
            out.setdefault(spawner[0], []).append((spawner[1], episode))
    return out


def _spawner(episode: EpisodeSummary) -> tuple[str, str | None] | None:
    """The episode that started this sub-agent and the call that did (see :func:`sub_agents`);
    None for any other episode."""
    env = episode.env_spec
    if episode.parent_episode_id is not None:
        return None
    spawned = env.spawned_by if isinstance(env, ImportedSpec | RecordedSpec) else None
    if spawned is not None:
        parent, call = spawned.episode_id, spawned.call_id
    elif isinstance(env, ImportedSpec):
        parent, call = env.parent_episode, env.parent_call_id
    else:
        return None
    return (parent, call) if parent is not None else None


def _spawned_by(store: StoreBackend, episode: EpisodeSummary) -> dict[str, Any] | None:
    """A sub-agent's spawner: its ``episode_id``, the ``call_id`` that started it, and its
    trajectory's ``session_id`` and ``trajectory_id`` (what an import of its export is found
    by, to link this one to it again)."""
    spawner = _spawner(episode)
    if spawner is None:
        return None
    ids: tuple[str | None, str | None] = (None, None)
    with contextlib.suppress(EpisodeNotFoundError):
        ids = session_ids(store, store.episode(spawner[0]))
    return {
        "episode_id": spawner[0],
        "call_id": spawner[1],
        "session_id": ids[0],
        "trajectory_id": ids[1],
    }


def _links(
    store: StoreBackend, children: list[tuple[str | None, EpisodeSummary]]
) -> dict[str | None, list[dict[str, Any]]]:
    """``subagent_trajectory_ref`` s (the file-reference form: the ``<episode_id>.json`` an
    export into a directory writes beside this one) by the call that started each."""
    out: dict[str | None, list[dict[str, Any]]] = {}
    for call, child in children:
        ref = {
            "session_id": session_ids(store, child)[0],
            "trajectory_path": f"{child.episode_id}.json",
            "extra": {NS: {"episode_id": child.episode_id}},
        }
        out.setdefault(call, []).append(ref)
    return out


def _trajectory(
    store: StoreBackend,
    episode: EpisodeSummary,
    children: list[tuple[str | None, EpisodeSummary]],
) -> dict[str, Any] | None:
    episode_id = episode.episode_id
    links = _links(store, children)
    by_call = {call: refs for call, refs in links.items() if call is not None}
    read = read_episode(store, episode_id)
    hashes = [e.event.message_hash if isinstance(e, Said) else e.message_hash for e in read.entries]
    found = store.messages(h for h in hashes if h is not None)
    steps: list[dict[str, Any]] = []
    for step_id, (entry, digest) in enumerate(zip(read.entries, hashes, strict=True), 1):
        message = Message(role="assistant")
        if digest is not None:
            message = found.get(digest) or store.message(digest)
        if isinstance(entry, Said):
            step = said_step(entry, message)
        else:
            step = answer_step(entry, message, by_call)
        extra = step.pop("extra")
        if entry.row.episode_id != episode_id:  # inherited from an ancestor
            step["is_copied_context"] = True
        steps.append({"step_id": step_id, **step, "extra": extra})
    if not steps:
        return None
    _link_the_rest(steps, links)
    start = read.history.start
    session_id, trajectory_id = session_ids(store, episode)
    agent = _agent(store, episode, start)
    model_name = episode.model_spec.model or episode.model_spec.spec
    if model_name:
        agent["model_name"] = model_name
    tools = _tool_definitions(store, read.tools_hashes)
    if tools:
        agent["tool_definitions"] = tools
    agent["extra"] = {
        NS: {"model": episode.model, "env": episode.env, "config": start.config if start else {}}
    }
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": trajectory_id,
        "agent": agent,
        "steps": steps,
    }
    copied = sum(1 for s in steps if s.get("is_copied_context"))
    notes = _atif_header(store, episode).get("notes")
    if isinstance(notes, str):
        doc["notes"] = notes
    elif episode.parent_episode_id is not None:
        doc["notes"] = (
            f"A fork of episode {episode.parent_episode_id} at seq {episode.fork_seq}: its "
            f"first {copied} step(s) are the history it inherits (is_copied_context)."
        )
    totals = read.history.totals
    final: dict[str, Any] = {
        "total_prompt_tokens": totals.tokens["input"],
        "total_completion_tokens": totals.tokens["output"],
        "total_cached_tokens": totals.tokens["cache_read"],
    }
    if totals.cost_usd is not None:
        final["total_cost_usd"] = totals.cost_usd
    final["total_steps"] = len(steps)
    final["extra"] = {
        "total_cache_write_tokens": totals.tokens["cache_write"],
        "total_reasoning_tokens": totals.tokens["reasoning"],
    }
    doc["final_metrics"] = final
    doc["extra"] = {NS: _episode_extra(store, episode, read)}
    return doc


def _episode_extra(store: StoreBackend, episode: EpisodeSummary, read: Read) -> dict[str, Any]:
    episode_id = episode.episode_id
    return {
        "episode_id": episode_id,
        "task_id": episode.task_id,
        "seed": episode.seed,
        "created_at": episode.created_at,
        "status": str(episode.status),
        "stop_reason": episode.stop_reason,
        "total_reward": episode.total_reward if read.judged else None,
        "turns": episode.turns,
        "attempts": episode.attempt,
        "parent_episode_id": episode.parent_episode_id,
        "parent_trajectory": _parent_trajectory(store, episode),
        "spawned_by": _spawned_by(store, episode),
        "fork_seq": episode.fork_seq,
        "ancestors": store.ancestors(episode_id),
        "fork_group": episode.fork_group.to_dict() if episode.fork_group else None,
        "batches": store.batches_of([episode_id]),
        "verifications": [
            {k: v for k, v in asdict(result).items() if k not in ("id", "episode_id")}
            for result in store.verifications(episode_id)
        ],
        **read.log,
    }


def _parent_trajectory(store: StoreBackend, episode: EpisodeSummary) -> dict[str, str] | None:
    """A fork's parent's ``session_id`` and ``trajectory_id`` (what an import of the parent's
    export is found by, to import this one as its fork)."""
    if episode.parent_episode_id is None:
        return None
    session_id, trajectory_id = session_ids(store, store.episode(episode.parent_episode_id))
    return {"session_id": session_id, "trajectory_id": trajectory_id}


def atif_trajectory(
    store: StoreBackend,
    episode_id: str,
    *,
    subs: dict[str, list[tuple[str | None, EpisodeSummary]]] | None = None,
) -> dict[str, Any] | None:
    """An episode's full history as an ATIF trajectory (a JSON-ready dict), read from one
    state of the store; None when it has no step yet (ATIF needs at least one). ``subs``:
    the store's :func:`sub_agents`, when the caller exports many (read here otherwise)."""
    with store.read_snapshot():
        episode = store.episode(episode_id)
        found = sub_agents(store) if subs is None else subs
        return _trajectory(store, episode, found.get(episode.episode_id, []))


def atif_target(output: Path | None, directory: bool | None = None) -> bool:
    """Whether ``output`` is a directory to write ``<episode_id>.json`` files into (asked
    for with ``directory``, or an existing one) rather than one file; checked before
    anything is read."""
    if output is None:
        if directory:
            raise UsageError("a directory output needs a path: -o DIR/")
        return False
    if directory is None:
        directory = output.is_dir()
    if not directory:
        check_output(output)
    elif output.exists() and not output.is_dir():
        raise UsageError(f"{output} is not a directory: give -o a directory or a file name")
    return directory


def write_atif(
    store: StoreBackend, episodes: Sequence[EpisodeSummary], output: Path | None, *, directory: bool
) -> tuple[int, list[str]]:
    """Write one trajectory per episode: to ``output`` (a file, or stdout when None; one
    episode only) or into the directory ``output`` as ``<episode_id>.json``. Returns how many
    were written and notes on the episodes left out."""
    if not directory and len(episodes) > 1:
        where = "stdout" if output is None else f"one file ({output})"
        raise UsageError(
            f"{len(episodes)} episodes selected, but ATIF is one JSON document per trajectory "
            f"and {where} holds one: give -o DIR/ to write <episode_id>.json for each, or "
            "select one episode"
        )
    if directory:
        assert output is not None
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create directory {output}: {exc.strerror or exc}") from None
    written, notes, recordable = 0, [], RecordableRows()
    subs = sub_agents(store)
    for episode in episodes:
        doc = atif_trajectory(store, episode.episode_id, subs=subs)
        if doc is None:
            notes.append(f"episode {episode.episode_id} has no steps yet: left out")
            continue
        path = output / f"{episode.episode_id}.json" if directory and output else output
        write_jsonl(recordable.rows([doc]), path)
        written += 1
    return written, [*notes, *recordable.notes()]
