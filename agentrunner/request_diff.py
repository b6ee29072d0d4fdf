"""What changed between two model calls' requests, as a structured diff: the model, the
parameters, the system prompt, the tools and the messages (kept, added, removed, changed).

Both requests are rebuilt from the store (``reconstruct_request``), so it works for native,
imported and recorded episodes alike. Messages are aligned by their content (difflib over
each message's canonical form, without the marks whose placement moves from call to call):
a conversation that grew shows only what was added; a compaction shows what it removed and
what replaced it.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.text import Text

from agentrunner.record.conversations import normal
from agentrunner.store.records import ModelInput
from agentrunner.values.errors import UsageError
from agentrunner.values.events import ModelRequest
from agentrunner.values.formatting import plural
from agentrunner.values.hashing import canonical_json
from agentrunner.values.safe_text import one_line_visible, plain
from agentrunner.values.types import Message, ToolSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


@dataclass(frozen=True)
class Call:
    """One model call of an episode: its turn, its call id, the input it was sent."""

    turn: int
    call_id: str
    request: ModelInput
    episode_id: str = ""

    def named(self, other: Call) -> str:
        """How a line names this call beside ``other`` (its episode too when they differ)."""
        where = f"{self.episode_id} " if self.episode_id != other.episode_id else ""
        return f"{where}call {self.turn} ({self.call_id})"


@dataclass
class MessageChange:
    kind: str
    """``added``, ``removed`` or ``changed``."""
    index: int
    """Position in the later request (in the earlier one for ``removed``)."""
    before: Message | None = None
    after: Message | None = None


@dataclass
class RequestDiff:
    """Call ``after`` against call ``before``."""

    before: Call
    after: Call
    model: tuple[str, str] | None = None
    params_added: dict[str, Any] = field(default_factory=dict)
    params_removed: dict[str, Any] = field(default_factory=dict)
    params_changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    system: tuple[str, str] | None = None
    tools_added: list[str] = field(default_factory=list)
    tools_removed: list[str] = field(default_factory=list)
    tools_changed: list[str] = field(default_factory=list)
    kept: int = 0
    messages: list[MessageChange] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        return not (
            self.model
            or self.params_added
            or self.params_removed
            or self.params_changed
            or self.system
            or self.tools_added
            or self.tools_removed
            or self.tools_changed
            or self.messages
        )

    def to_dict(self) -> dict[str, Any]:
        def message(m: Message | None) -> dict[str, Any] | None:
            return None if m is None else m.model_dump(mode="json", exclude_none=True)

        return {
            "before": {
                "episode_id": self.before.episode_id,
                "turn": self.before.turn,
                "call_id": self.before.call_id,
            },
            "after": {
                "episode_id": self.after.episode_id,
                "turn": self.after.turn,
                "call_id": self.after.call_id,
            },
            "model": list(self.model) if self.model else None,
            "params": {
                "added": self.params_added,
                "removed": self.params_removed,
                "changed": {k: list(v) for k, v in self.params_changed.items()},
            },
            "system": list(self.system) if self.system else None,
            "tools": {
                "added": self.tools_added,
                "removed": self.tools_removed,
                "changed": self.tools_changed,
            },
            "messages": {
                "kept": self.kept,
                "changes": [
                    {
                        "kind": c.kind,
                        "index": c.index,
                        "before": message(c.before),
                        "after": message(c.after),
                    }
                    for c in self.messages
                ],
            },
        }


def calls(store: StoreBackend, episode_id: str) -> list[tuple[int, str]]:
    """(turn, call id) of each model call in the episode's history, in order."""
    seen: dict[int, str] = {}
    for row in store.iter_events(episode_id, kinds=["model.request"]):
        request = row.typed()
        if isinstance(request, ModelRequest):
            seen[row.turn] = request.call_id  # a retry: its last request
    return sorted(seen.items())


def pick(store: StoreBackend, episode_id: str, spec: str) -> tuple[Call, Call]:
    """The two calls ``spec`` names: ``K`` (call K against K-1) or ``A,B`` (each a turn
    number or a call id of the episode, or ``EP:K`` for one of another episode: a fork or a
    replay against its original)."""
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) == 1:
        known = _calls(store, episode_id)
        later = _turn(parts[0], known, episode_id)
        earlier = max((t for t, _ in known if t < later), default=None)
        if earlier is None:
            raise UsageError(
                f"call {later} is the first model call of episode {episode_id}: nothing came"
                " before it (name two calls: --request-diff A,B)"
            )
        return _call(store, episode_id, earlier, known), _call(store, episode_id, later, known)
    if len(parts) == 2:
        a, b = (_side(store, episode_id, part) for part in parts)
        return a, b
    raise UsageError(f"--request-diff takes K, A,B or A,EP:B, not {spec!r}")


def _side(store: StoreBackend, episode_id: str, part: str) -> Call:
    """One side of ``A,B``: a call of ``episode_id``, or of the episode ``EP:`` names."""
    if ":" in part:
        named, part = part.split(":", 1)
        episode_id = store.resolve(named)
    known = _calls(store, episode_id)
    return _call(store, episode_id, _turn(part, known, episode_id), known)


def _calls(store: StoreBackend, episode_id: str) -> list[tuple[int, str]]:
    known = calls(store, episode_id)
    if not known:
        raise UsageError(f"episode {episode_id} has no model call")
    return known


def _call(store: StoreBackend, episode_id: str, turn: int, known: list[tuple[int, str]]) -> Call:
    request = store.reconstruct_request(episode_id, turn)
    return Call(turn, dict(known)[turn], request, episode_id)


def _turn(part: str, known: list[tuple[int, str]], episode_id: str) -> int:
    if part.isdigit():
        turn = int(part)
        if turn not in dict(known):
            last = known[-1][0]
            raise UsageError(f"episode {episode_id} has no model call {turn} (calls 1-{last})")
        return turn
    matches = [t for t, call_id in known if call_id == part or call_id.startswith(part)]
    if len(matches) != 1:
        raise UsageError(
            f"{part!r} names {'no' if not matches else 'more than one'} model call of"
            f" episode {episode_id}: give a turn number or a call id"
        )
    return matches[0]


def diff(before: Call, after: Call) -> RequestDiff:
    a, b = before.request, after.request
    out = RequestDiff(before=before, after=after)
    if (a.provider, a.model) != (b.provider, b.model):
        out.model = (_model(a), _model(b))
    for key in sorted(set(a.params) | set(b.params)):
        if key not in a.params:
            out.params_added[key] = b.params[key]
        elif key not in b.params:
            out.params_removed[key] = a.params[key]
        elif canonical_json(a.params[key]) != canonical_json(b.params[key]):
            out.params_changed[key] = (a.params[key], b.params[key])
    system_a, rest_a = _system(a.messages)
    system_b, rest_b = _system(b.messages)
    if system_a != system_b:
        out.system = (system_a, system_b)
    _tools(out, a.tools, b.tools)
    _messages(out, rest_a, rest_b, offset=len(b.messages) - len(rest_b))
    return out


def _model(request: ModelInput) -> str:
    return f"{request.provider}:{request.model}" if request.provider else request.model


def _system(messages: list[Message]) -> tuple[str, list[Message]]:
    """The system prompt's text (the leading system messages) and the messages after it."""
    n = 0
    while n < len(messages) and messages[n].role == "system":
        n += 1
    return "\n\n".join(m.content or "" for m in messages[:n]), messages[n:]


def _tools(out: RequestDiff, a: list[ToolSpec], b: list[ToolSpec]) -> None:
    before = {t.name: _form(t) for t in a}
    after = {t.name: _form(t) for t in b}
    out.tools_added = [n for n in after if n not in before]
    out.tools_removed = [n for n in before if n not in after]
    out.tools_changed = [n for n in after if n in before and before[n] != after[n]]


def _form(value: Message | ToolSpec) -> str:
    """How two messages or tools are compared: as the client means them (a recorded
    message's ``cache_control`` marks move from call to call; they are no change)."""
    return canonical_json(normal(value.model_dump(mode="json", exclude_none=True)))


def _messages(out: RequestDiff, a: list[Message], b: list[Message], *, offset: int) -> None:
    matcher = difflib.SequenceMatcher(
        a=[_form(m) for m in a], b=[_form(m) for m in b], autojunk=False
    )
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.kept += i2 - i1
            continue
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for k in range(pairs):
            out.messages.append(MessageChange("changed", offset + j1 + k, a[i1 + k], b[j1 + k]))
        for i in range(i1 + pairs, i2):
            out.messages.append(MessageChange("removed", offset + i, before=a[i]))
        for j in range(j1 + pairs, j2):
            out.messages.append(MessageChange("added", offset + j, after=b[j]))


def brief(message: Message, limit: int = 200) -> str:
    """One line for a message: its text, else its tool calls, else its raw form."""
    text = message.content or ""
    if not text and message.tool_calls:
        text = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    if not text and message.raw is not None:
        text = json.dumps(message.raw, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: Any) -> str:
    return one_line_visible(json.dumps(value, ensure_ascii=False))


def describe(found: RequestDiff, *, verbose: bool = False) -> list[Text]:
    """The diff as lines for a terminal or the TUI (recorded text shown, never obeyed)."""
    a, b = found.before, found.after
    lines = [Text(f"{b.named(a)} against {a.named(b)}", "bold")]
    if found.unchanged:
        lines.append(Text("  the two requests are the same"))
        return lines
    if found.model:
        lines.append(plain(f"  model     {one_line_visible(found.model[0])} → "
                           f"{one_line_visible(found.model[1])}"))  # fmt: skip
    for key, value in found.params_added.items():
        lines.append(plain(f"  param   + {one_line_visible(key)} = {_value(value)}"))
    for key, value in found.params_removed.items():
        lines.append(plain(f"  param   - {one_line_visible(key)} (was {_value(value)})"))
    for key, (old, new) in found.params_changed.items():
        lines.append(plain(f"  param   ~ {one_line_visible(key)}: {_value(old)} → {_value(new)}"))
    if found.system:
        old, new = found.system
        changed = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1))
        lines.append(Text(f"  system    changed ({plural(len(changed), 'diff line')})"))
        for row in changed[2:] if verbose else changed[2:12]:
            lines.append(plain(f"            {one_line_visible(row)}"))
    for label, names in (
        ("+", found.tools_added),
        ("-", found.tools_removed),
        ("~", found.tools_changed),
    ):
        if names:
            shown = ", ".join(one_line_visible(n) for n in names)
            lines.append(plain(f"  tools   {label} {shown}"))
    lines.append(
        Text(
            f"  messages  {found.kept} kept, "
            + ", ".join(
                f"{sum(c.kind == kind for c in found.messages)} {kind}"
                for kind in ("added", "removed", "changed")
            )
        )
    )
    limit = 10_000 if verbose else 200
    for change in found.messages:
        sign = {"added": "+", "removed": "-", "changed": "~"}[change.kind]
        message = change.after or change.before
        assert message is not None
        text = brief(message, limit)
        lines.append(
            plain(f"    {sign} [{change.index}] {message.role:<9} {one_line_visible(text)}")
        )
        if change.kind == "changed" and change.before is not None:
            was = brief(change.before, limit)
            lines.append(plain(f"        was {one_line_visible(was)}"))
    return lines
