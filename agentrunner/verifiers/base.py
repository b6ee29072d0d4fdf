"""What every verifier shares: the trajectory it reads, the verdict it gives, the protocol.

A :class:`Trajectory` is read from the store once per episode (its tool calls with their
results, and the tip of its final message chain) and handed to each verifier, so a
composite of many verifiers reads the log once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentrunner.readers.history import NOT_CHUNKS, fold
from agentrunner.store import EpisodeSummary
from agentrunner.values.specs import ImportedSpec
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

FILE_TOOLS = ("write_file", "str_replace")  # workspace tools whose `path` argument is written
COMMAND_TOOLS = ("bash", "Bash", "shell", "exec_command")
"""Shell tools whose ``command`` argument is a command: ours, and those of imported agents
(Claude Code's ``Bash``, Codex's ``shell`` / ``exec_command``, whose command may be a list)."""


@dataclass(frozen=True)
class ToolUse:
    """One tool call the model made, with what became of it."""

    seq: int
    turn: int
    call_id: str
    name: str
    arguments: str  # raw, as the model wrote it
    parsed: dict[str, Any] | None  # None when the arguments were not a JSON object
    ran: bool = False  # the environment executed it (a step was taken)
    error: str | None = None
    observation: str | None = None


@dataclass
class Trajectory:
    """An episode as verifiers see it: summary, tool calls, and (lazily) its messages."""

    store: StoreBackend
    episode: EpisodeSummary
    tool_uses: list[ToolUse]
    final_tip: str | None

    @cached_property
    def messages(self) -> list[Message]:
        """The episode's whole conversation, tool results included."""
        return self.store.message_chain(self.final_tip)

    def files_touched(self) -> list[str]:
        """Paths written by successful ``write_file`` / ``str_replace`` calls, in order."""
        out: list[str] = []
        for use in self.tool_uses:
            if use.name in FILE_TOOLS and use.ran and use.error is None and use.parsed:
                path = str(use.parsed.get("path", "")).removeprefix("./")
                if path and path not in out:
                    out.append(path)
        return out

    def commands(self) -> list[tuple[int, str]]:
        """``(seq, command)`` of every shell command the environment ran."""
        out = []
        for use in self.tool_uses:
            if use.name in COMMAND_TOOLS and use.ran and use.parsed:
                command = use.parsed.get("command", "")
                words = command if isinstance(command, list) else [command]
                out.append((use.seq, " ".join(str(w) for w in words)))
        return out


def load_trajectory(store: StoreBackend, episode_id: str) -> Trajectory:
    """Read what verifiers need from an episode's full history (inherited events included),
    through the one fold of the log: every tool call, judged per assistant message."""
    episode = store.episode(episode_id)
    history = fold(store.iter_events(episode.episode_id, kinds=NOT_CHUNKS))
    # an imported session's tools ran in its agent's environment, not in one of ours
    imported = isinstance(episode.env_spec, ImportedSpec)
    uses = [
        ToolUse(
            seq=use.seq,
            turn=use.turn,
            call_id=use.call.call_id,
            name=use.call.name,
            arguments=use.call.arguments,
            parsed=use.call.parsed,
            ran=use.ran or (imported and use.result is not None),
            error=use.result.error if use.result is not None else None,
            observation=use.result.observation if use.result is not None else None,
        )
        for use in history.tool_uses
    ]
    return Trajectory(store, episode, uses, history.tip)


@dataclass(frozen=True)
class Verdict:
    """What a verifier says about one episode: a score in [0, 1] (or None), pass/fail, why."""

    score: float | None
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "passed": self.passed, "details": self.details}


@runtime_checkable
class Verifier(Protocol):
    """Scores a recorded episode after the fact."""

    name: str

    def spec(self) -> dict[str, Any]:
        """A JSON description of the verifier (stored with each result)."""
        ...

    def verify(self, trajectory: Trajectory) -> Verdict: ...


@dataclass(frozen=True)
class VerificationResult:
    """A verdict on one episode, as stored in the ``verifications`` table."""

    episode_id: str
    verifier: str
    score: float | None
    passed: bool
    details: dict[str, Any]
    id: int | None = None
    created_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "episode_id": self.episode_id,
            "verifier": self.verifier,
            "score": self.score,
            "passed": self.passed,
            "details": self.details,
            "created_at": self.created_at,
        }
