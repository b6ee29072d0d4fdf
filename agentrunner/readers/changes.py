"""An episode's change to its workspace: from the base it started on to the snapshot after a
turn (or after one step), as manifests, as a patch ``git apply`` accepts, or applied to a
checkout. Everything is read from the trace store alone (the snapshots live there), except
the ignore rules of the repository and the user, when they are on this machine.

The change is what ``git status`` would show in the workspace: files git ignores there that
the base did not hold (tool caches), ``__pycache__``, the agent's private ``.git`` and paths
an ``exclude`` pattern matches are left out (:mod:`agentrunner.envs.ignores`); the snapshots
keep them all."""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.envs import ignores, recorded
from agentrunner.envs.manifest import FileEntry, Manifest
from agentrunner.envs.patch import ApplyResult, PathFilter, apply_to, changed_paths, render_diff
from agentrunner.envs.snapshotter import load_manifest
from agentrunner.store import EventRow
from agentrunner.values.errors import ApplyRefused, EnvironmentFailure, UsageError
from agentrunner.values.events import EpisodeStart, MessageEvent, ToolResult
from agentrunner.values.specs import RecordedSpec, WorkspaceSpec, env_spec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def hide_git(path: str) -> bool:
    """The agent's private ``.git`` (``--with-git``) is never part of its change."""
    return path == ".git" or path.startswith(".git/")


@dataclass(frozen=True)
class WorkspaceChange:
    """The change between two snapshots of one episode's workspace."""

    episode_id: str
    base: dict[str, Any]
    """The recorded base: its snapshot id, and for a repository its path, commit, rev."""
    before: str
    after: str
    turn: int | None
    old: Manifest
    new: Manifest
    tracked: frozenset[str]
    """The base snapshot's paths: git tracks them, so no ignore rule leaves them out."""

    def left_out(self, store: StoreBackend, exclude: Sequence[str] = ()) -> frozenset[str]:
        """Paths that differ but are not part of the change: what ``git status`` would not
        show in the workspace, and what an ``exclude`` pattern (gitignore syntax) matches."""
        return ignores.left_out(
            changed_paths(self.old, self.new, hide_git),
            tracked=self.tracked,
            new=self.new,
            read_blob=store.read_blob,
            repo=self.base.get("repo"),
            patterns=exclude,
        )

    def paths(self, left_out: Set[str] = frozenset()) -> list[str]:
        """The paths the change touches, sorted (without those in ``left_out``)."""
        return changed_paths(self.old, self.new, _skipping(left_out))

    def patch(
        self,
        store: StoreBackend,
        *,
        stat: bool = False,
        exclude: Sequence[str] = (),
        left_out: Set[str] | None = None,
    ) -> str:
        """The change as a patch (``git diff --stat`` with ``stat``); ``left_out`` is what
        :meth:`left_out` gives for ``exclude``, when the caller has it already."""
        skip = self.left_out(store, exclude) if left_out is None else left_out
        return render_diff(self.old, self.new, store.read_blob, stat=stat, exclude=_skipping(skip))

    def apply(
        self,
        store: StoreBackend,
        target: Path,
        *,
        check_only: bool = False,
        exclude: Sequence[str] = (),
        left_out: Set[str] | None = None,
    ) -> ApplyResult:
        """Apply the change to the checkout at ``target``; refused (:class:`ApplyRefused`,
        nothing written) as :func:`agentrunner.envs.patch.apply_to` says."""
        skip = self.left_out(store, exclude) if left_out is None else left_out
        try:
            return apply_to(
                target,
                self.old,
                self.new,
                store.read_blob,
                base_commit=self.base.get("commit"),
                exclude=_skipping(skip),
                check_only=check_only,
            )
        except ApplyRefused as exc:  # a refusal that names a redacted file: say why
            redacted = [p for p in self.redacted_paths(store) if p in str(exc)]
            if not redacted:
                raise
            raise ApplyRefused(
                f"the change edits {', '.join(redacted[:3])}, which held a known secret: the"
                " store keeps such a file redacted ([redacted:NAME]), so its change applies only"
                " by hand (`agentrunner diff` shows it); the target is unchanged"
            ) from None

    def redacted_paths(self, store: StoreBackend) -> list[str]:
        """Files the change edits whose stored base holds a redaction marker (a known secret
        was there): their patch cannot apply to the real file."""
        return sorted(
            path
            for path, entry in self.old.items()
            if isinstance(entry, FileEntry)
            and self.new.get(path) != entry
            and not hide_git(path)
            and b"[redacted:" in store.read_blob(entry.sha256)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "base": {k: v for k, v in self.base.items() if k != "setup"},
            "before": self.before,
            "after": self.after,
            "turn": self.turn,
        }


def _skipping(left_out: Set[str]) -> PathFilter:
    return lambda path: hide_git(path) or path in left_out


def recorded_base(store: StoreBackend, episode_id: str) -> dict[str, Any]:
    """The base snapshot (and repository) an episode's workspace started from."""
    rows = store.events(episode_id, kinds=["episode.start"], limit=1)
    if not rows:
        raise UsageError(f"episode {episode_id} has no episode.start event")
    start = rows[0].typed()
    assert isinstance(start, EpisodeStart)
    env = start.env_spec
    base = env.base if isinstance(env, WorkspaceSpec | RecordedSpec) else None
    if env.kind == recorded.KIND and base is None:
        raise UsageError(
            f"episode {episode_id} was recorded without --snapshots: the store holds no "
            "snapshot of its folder (record it with `agentrunner record --snapshots`)"
        )
    if (not isinstance(env, WorkspaceSpec) and env.kind != recorded.KIND) or base is None:
        raise UsageError(
            f"episode {episode_id} has no workspace snapshots in the store (an OpenEnv "
            "episode, or one recorded before snapshots were kept in the store)"
        )
    return base


def workspace_spec(env: dict[str, Any]) -> dict[str, Any]:
    """The workspace an episode's change is verified in: its own environment, or for an
    agent recorded with ``record --snapshots``, a workspace whose one task starts from the
    recorded base snapshot of its folder (the store holds it: nothing is read from the
    folder itself)."""
    spec = env_spec(env)
    base = spec.base if isinstance(spec, RecordedSpec) and spec.kind == recorded.KIND else None
    if base is None:
        return env
    task = {"task_id": base["task_id"], "prompt": "(a recorded agent's task)", "split": "user"}
    return {"kind": "workspace", "tasks": "task", "task": task, "base": base}


def episode_change(
    store: StoreBackend, episode_id: str, *, turn: int | None = None
) -> WorkspaceChange:
    """The episode's change from its base to the end of model turn ``turn`` (or its end)."""
    if turn is not None and turn < 1:
        raise UsageError(f"`turn` counts model turns from 1 (got {turn})", param="turn")
    episode_id = store.resolve(episode_id)
    base = recorded_base(store, episode_id)
    after = str(base["snapshot"])
    old = _manifest(store, after)
    last_turn = 0
    for row in store.iter_events(episode_id, kinds=_CARRIERS):
        if turn is not None and row.turn > turn:
            break
        last_turn = row.turn
        snapshot = _snapshot_of(row)
        if snapshot:
            after = str(snapshot)
    return WorkspaceChange(
        episode_id=episode_id,
        base=base,
        before=str(base["snapshot"]),
        after=after,
        turn=turn if turn is not None else (last_turn or None),
        old=old,
        new=old if after == base["snapshot"] else _manifest(store, after),
        tracked=frozenset(old),
    )


_CARRIERS = ["tool.result", "message"]
"""The kinds that name a snapshot: a tool step's result; for an agent recorded with
``record --snapshots`` that acts on the model's words rather than through tool calls, the
message its next request adds (a recorder's extra field, as the answer it keeps)."""


def _snapshot_of(row: EventRow) -> str | None:
    """The workspace snapshot a ``tool.result`` (or recorded ``message``) row names, if any."""
    match row.typed():
        case ToolResult(snapshot=snapshot):
            return snapshot
        case MessageEvent() as message if message.model_extra:
            found = message.model_extra.get("snapshot")
            return found if isinstance(found, str) else None
        case _:
            return None


def step_change(store: StoreBackend, episode_id: str, seq: int) -> WorkspaceChange | None:
    """What the tool step recorded at ``seq`` changed (None when it recorded no snapshot)."""
    episode_id = store.resolve(episode_id)
    before: str | None = None
    for row in store.iter_events(episode_id, kinds=_CARRIERS):
        snapshot = _snapshot_of(row)
        if row.seq == seq:
            if not snapshot:
                return None
            base = recorded_base(store, episode_id)
            start = str(base["snapshot"])
            old = _manifest(store, before or start)
            return WorkspaceChange(
                episode_id=episode_id,
                base=base,
                before=before or start,
                after=str(snapshot),
                turn=row.turn,
                old=old,
                new=_manifest(store, str(snapshot)),
                tracked=frozenset(old if before in (None, start) else _manifest(store, start)),
            )
        if snapshot:
            before = str(snapshot)
    return None


def _manifest(store: StoreBackend, snapshot_id: str) -> Manifest:
    try:
        return load_manifest(store, snapshot_id)[0]
    except EnvironmentFailure as exc:
        raise UsageError(
            f"{exc}: the snapshot is not in {store.where} (an archive snapshot of an earlier "
            "version cannot be diffed)"
        ) from None
