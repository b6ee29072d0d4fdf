"""Rule-based verification: conditions over a recorded trajectory, and their text form.

Each rule checks one thing and says why (the seq of the event that satisfied it, or what
was missing). A rule has a one-line text form, used by ``agentrunner verify --rule`` and
stored with every result::

    tool:NAME                   the model called tool NAME
    tool:NAME:KEY~REGEX         ... with argument KEY matching REGEX (re.search)
    tool:NAME:KEY=VALUE         ... with argument KEY equal to VALUE (repeat :KEY... to add)
    file:GLOB                   a write_file / str_replace call wrote a path matching GLOB
    command:REGEX               a shell command that ran matched REGEX (imported agents' too)
    reward>=X                   the episode's total reward (also >, <=, <, ==, !=)
    turns<=N                    the number of model turns (same comparisons)
    stop:REASON[,REASON...]     the episode ended with one of these stop reasons
    not:RULE                    the rule does not hold
"""

from __future__ import annotations

import fnmatch
import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentrunner.values.errors import UsageError
from agentrunner.verifiers.base import ToolUse, Trajectory, Verdict

RULE_FORMS = (
    "tool:NAME[:KEY~REGEX|:KEY=VALUE ...], file:GLOB, command:REGEX, reward>=X, turns<=N, "
    "stop:REASON[,REASON...], not:RULE"
)
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_COMPARISON = re.compile(r"^(reward|turns)\s*(>=|<=|==|!=|=|>|<)\s*(-?\d+(?:\.\d*)?|-?\.\d+)$")
_ARG_SPLIT = re.compile(r":(?=[A-Za-z_][\w-]*[~=])")


@dataclass(frozen=True)
class Check:
    """The outcome of one rule on one trajectory."""

    rule: str
    passed: bool
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "passed": self.passed, "evidence": self.evidence}


class Rule(Protocol):
    def check(self, trajectory: Trajectory) -> Check: ...

    def describe(self) -> str: ...


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class ToolCalled:
    """The model called tool ``name`` (with arguments matching every condition)."""

    name: str
    arguments: tuple[tuple[str, Literal["~", "="], str], ...] = ()

    def _matches(self, use: ToolUse) -> bool:
        if use.name != self.name:
            return False
        for key, op, want in self.arguments:
            if use.parsed is None or key not in use.parsed:
                return False
            got = _text(use.parsed[key])
            if (op == "=" and got != want) or (op == "~" and not re.search(want, got)):
                return False
        return True

    def check(self, trajectory: Trajectory) -> Check:
        hits = [u for u in trajectory.tool_uses if self._matches(u)]
        if hits:
            return Check(self.describe(), True, f"{len(hits)} call(s), first at seq {hits[0].seq}")
        return Check(self.describe(), False, f"no matching {self.name} call")

    def describe(self) -> str:
        return "tool:" + self.name + "".join(f":{k}{op}{v}" for k, op, v in self.arguments)


@dataclass(frozen=True)
class FileTouched:
    """A successful ``write_file`` / ``str_replace`` wrote a path matching ``pattern``."""

    pattern: str

    def check(self, trajectory: Trajectory) -> Check:
        hits = [p for p in trajectory.files_touched() if fnmatch.fnmatchcase(p, self.pattern)]
        if hits:
            return Check(self.describe(), True, "wrote " + ", ".join(hits[:5]))
        touched = ", ".join(trajectory.files_touched()[:5]) or "nothing"
        return Check(self.describe(), False, f"no write matches (wrote {touched})")

    def describe(self) -> str:
        return f"file:{self.pattern}"


@dataclass(frozen=True)
class CommandRun:
    """A shell command that ran (``bash``, or an imported agent's shell tool) matched
    ``pattern`` (re.search)."""

    pattern: str

    def check(self, trajectory: Trajectory) -> Check:
        for seq, command in trajectory.commands():
            if re.search(self.pattern, command):
                return Check(self.describe(), True, f"seq {seq}: {command[:80]}")
        return Check(self.describe(), False, f"{len(trajectory.commands())} command(s), none match")

    def describe(self) -> str:
        return f"command:{self.pattern}"


@dataclass(frozen=True)
class Compare:
    """The episode's total ``reward`` or its number of model ``turns`` compared with a value."""

    field: Literal["reward", "turns"]
    op: str
    value: float

    def check(self, trajectory: Trajectory) -> Check:
        got = (
            trajectory.episode.total_reward
            if self.field == "reward"
            else float(trajectory.episode.turns)
        )
        if got is None:  # nothing judged the episode: a reward rule cannot pass
            return Check(self.describe(), False, "reward unknown (not judged)")
        return Check(self.describe(), _OPS[self.op](got, self.value), f"{self.field} {got:g}")

    def describe(self) -> str:
        return f"{self.field}{self.op}{self.value:g}"


@dataclass(frozen=True)
class StoppedWith:
    """The episode ended with one of ``reasons`` (``done``, ``max_turns``, ``max_steps``, ...)."""

    reasons: tuple[str, ...]

    def check(self, trajectory: Trajectory) -> Check:
        got = trajectory.episode.stop_reason
        return Check(self.describe(), got in self.reasons, f"stop reason {got or 'none yet'}")

    def describe(self) -> str:
        return "stop:" + ",".join(self.reasons)


@dataclass(frozen=True)
class Not:
    """``rule`` does not hold."""

    rule: Rule

    def check(self, trajectory: Trajectory) -> Check:
        inner = self.rule.check(trajectory)
        return Check(self.describe(), not inner.passed, inner.evidence)

    def describe(self) -> str:
        return f"not:{self.rule.describe()}"


def parse_rule(text: str) -> Rule:
    """A rule from its text form (see the module docstring); raises :class:`UsageError`."""
    text = text.strip()
    kind, sep, rest = text.partition(":")
    if kind == "not" and sep:
        return Not(parse_rule(rest))
    if kind == "tool" and rest:
        name, *conditions = _ARG_SPLIT.split(rest)
        if not name or ":" in name:
            raise UsageError(f"rule {text!r}: write tool:NAME:KEY~REGEX or tool:NAME:KEY=VALUE")
        args = []
        for cond in conditions:
            key, op, want = re.split(r"([~=])", cond, maxsplit=1)
            if op == "~":
                _compile(want, text)
            args.append((key, "~" if op == "~" else "=", want))
        return ToolCalled(name, tuple(args))  # type: ignore[arg-type]
    if kind == "file" and rest:
        return FileTouched(rest)
    if kind == "command" and rest:
        _compile(rest, text)
        return CommandRun(rest)
    if kind == "stop" and rest:
        return StoppedWith(tuple(r.strip() for r in rest.split(",") if r.strip()))
    match = _COMPARISON.match(text)
    if match:
        field, op, value = match.groups()
        return Compare(field, "==" if op == "=" else op, float(value))  # type: ignore[arg-type]
    raise UsageError(f"cannot read rule {text!r}; rules look like: {RULE_FORMS}")


def _compile(pattern: str, rule: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"rule {rule!r}: bad regular expression ({exc})") from None


class RuleVerifier:
    """Passes when all (``match="all"``) or any (``match="any"``) of its rules hold.

    The score is the fraction of rules that hold.
    """

    def __init__(
        self,
        rules: Sequence[Rule | str],
        *,
        match: Literal["all", "any"] = "all",
        name: str = "rules",
    ) -> None:
        if not rules:
            raise UsageError("a rule verifier needs at least one rule")
        if match not in ("all", "any"):
            raise UsageError(f"match must be 'all' or 'any', not {match!r}")
        self.rules: list[Rule] = [parse_rule(r) if isinstance(r, str) else r for r in rules]
        self.match = match
        self.name = name

    def spec(self) -> dict[str, Any]:
        return {"kind": "rules", "match": self.match, "rules": [r.describe() for r in self.rules]}

    def verify(self, trajectory: Trajectory) -> Verdict:
        checks = [rule.check(trajectory) for rule in self.rules]
        held = [c.passed for c in checks]
        passed = all(held) if self.match == "all" else any(held)
        return Verdict(
            score=sum(held) / len(held),
            passed=passed,
            details={"spec": self.spec(), "checks": [c.to_dict() for c in checks]},
        )
