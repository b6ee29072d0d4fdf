"""An evaluation report from the store alone: what a set of runs says, per group and per task,
and two sets compared pair by pair.

An episode *passes* when its reward reaches ``threshold`` (default 1.0) or, with
``verifier``, when that verifier's latest result passed. An ended episode with no reward (an
imported session, a run with no test) or, with ``verifier``, no result of it is *unjudged*:
counted apart, and left out of pass rates, reward means and their intervals (unknown is not
0). Unknown usage likewise: token sums and costs are of what is known, and the report says
how many model calls had unknown token counts and how many episodes an unknown cost; a
prompt-cache hit ratio is of the episodes whose input tokens are known
(:mod:`agentrunner.report.cache`). Only root episodes count (forks and fan-out continuations
would count a task several times) unless ``include_forks``.
Numbers come from the episodes' summaries (status, reward, own tokens and cost, turns) and
one indexed pass over the log's tool calls, responses and errors: no streamed chunk is read.
Grouping or comparing by context policy also reads each episode's settings events
(:mod:`agentrunner.report.policy`).
They come out as the typed records of :mod:`agentrunner.report.records`, which every
rendering (text, HTML, JSON, the TUI's report screen) reads.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from agentrunner.export.select import Selection, known_reward, task_splits
from agentrunner.report.cache import cache_hits
from agentrunner.report.policy import NOT_RECORDED, policies
from agentrunner.report.records import (
    Comparison,
    ErrorCount,
    Group,
    Latency,
    Metrics,
    Report,
    SidePolicy,
    Spread,
    TaskMetrics,
    TaskRow,
    Tokens,
)
from agentrunner.report.stats import (
    mcnemar,
    mean_se,
    paired_difference,
    pass_at_k,
    percentile,
    wilson,
)
from agentrunner.store import EpisodeSummary
from agentrunner.store.records import EpisodeFilter
from agentrunner.store.reports import LogFacts
from agentrunner.store.verifications import REWARD_VERIFIER, StoredVerification
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Status

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

GROUP_KEYS = ("model", "task", "split", "batch", "context")
ENDED = (Status.COMPLETED, Status.CANCELLED, Status.FAILED)
TOP_ERRORS = 5


@dataclass(frozen=True)
class ReportFilter:
    """Which episodes a report reads (as ``export`` filters them)."""

    tasks: tuple[str, ...] = ()  # shell-style wildcards
    models: tuple[str, ...] = ()
    batches: tuple[str, ...] = ()  # batch ids, prefixes or names
    statuses: tuple[str, ...] = ()  # empty: any
    split: str | None = None  # the tasks file's split of each episode's task
    since: str | None = None  # ISO 8601 dates or times (UTC unless they say), vs created_at
    until: str | None = None
    include_forks: bool = False


@dataclass
class Facts:
    """One episode, as the report counts it."""

    summary: EpisodeSummary
    passed: bool | None
    """None: not judged (not ended yet, or never verified by ``--verifier``)."""
    log: LogFacts
    batches: list[str] = field(default_factory=list)
    split: str | None = None
    disputed: bool = False
    """Its latest reward check (``verify``) did not reproduce its recorded reward."""
    reward: float | None = None
    """Its reward; None when it has none (unjudged, never 0)."""
    context: str | None = None
    """The context policy it ran with (:mod:`agentrunner.report.policy`); None: not read
    (``collect`` reads it when ``need`` names ``context``)."""

    @property
    def model(self) -> str:
        return _spec(self.summary)

    def key(self, by: str) -> str:
        match by:
            case "model":
                return self.model
            case "task":
                return self.summary.task_id
            case "split":
                return self.split or "-"
            case "batch":
                return ",".join(self.batches) or "-"
            case "context":
                return self.context or NOT_RECORDED
        raise UsageError(f"cannot group by {by!r}; one of {', '.join(GROUP_KEYS)}")


def collect(
    store: StoreBackend,
    where: ReportFilter,
    *,
    threshold: float = 1.0,
    verifier: str | None = None,
    need: Sequence[str] = (),
) -> list[Facts]:
    """The episodes ``where`` keeps, oldest first, with what the report needs of each
    (``need``: the groupings asked for; ``split`` reads the tasks files, ``context`` each
    episode's settings events)."""
    batch_ids = [store.resolve_batch(b) for b in where.batches]
    window = (
        _instant(where.since, "since") if where.since else None,
        _instant(where.until, "until") if where.until else None,
    )
    roots = EpisodeFilter(roots_only=not where.include_forks)
    summaries = list(reversed(store.list_episodes(where=roots)))
    members = store.batch_memberships()
    chosen = [
        s
        for s in summaries
        if _keeps(where, s, members.get(s.episode_id, []), batch_ids)
        and _within(s.created_at, *window)
    ]
    splits: list[str] = [""] * len(chosen)
    if where.split is not None or "split" in need:  # tasks files are read only for splits
        splits = task_splits(Selection(statuses=()), chosen, [])
    if where.split is not None:
        chosen, splits = _only_split(chosen, splits, where.split)
    latest = store.latest_verifications()  # one query: --verifier's verdicts, reward checks
    verdicts = _verdicts(latest, verifier)
    disputed = {v.episode_id for v in latest if v.verifier == REWARD_VERIFIER and not v.passed}
    if verifier is not None and not verdicts:
        raise UsageError(f"no episode has a result of verifier {verifier!r}; see `verify`")
    logs, judged = store.log_facts(), store.rewarded_episodes()
    contexts = policies(store, [s.episode_id for s in chosen]) if "context" in need else {}
    out = []
    for s, split in zip(chosen, splits, strict=True):
        reward = known_reward(s, judged)
        if verifier:
            passed = verdicts.get(s.episode_id)
        else:
            passed = None if reward is None else reward >= threshold
        log, batches = logs.get(s.episode_id, LogFacts()), members.get(s.episode_id, [])
        disputes, context = s.episode_id in disputed, contexts.get(s.episode_id)
        out.append(Facts(s, passed, log, batches, split, disputes, reward, context))
    return out


def _only_split(
    episodes: list[EpisodeSummary], splits: list[str], split: str
) -> tuple[list[EpisodeSummary], list[str]]:
    kept = [(e, s) for e, s in zip(episodes, splits, strict=True) if s == split]
    return [e for e, _ in kept], [s for _, s in kept]


def _spec(s: EpisodeSummary) -> str:
    """The episode's model spec (empty when its record names none)."""
    model = s.model_spec
    return model.spec if model.named else ""


def _keeps(
    where: ReportFilter, s: EpisodeSummary, batches: list[str], wanted_batches: list[str]
) -> bool:
    if s.parent_episode_id is not None and not where.include_forks:
        return False
    if where.tasks and not any(fnmatch.fnmatchcase(s.task_id, t) for t in where.tasks):
        return False
    spec = _spec(s)
    if where.models and not any(fnmatch.fnmatchcase(spec, m) for m in where.models):
        return False
    if wanted_batches and not set(batches) & set(wanted_batches):
        return False
    return not where.statuses or s.status in where.statuses


def _instant(text: str, flag: str) -> datetime:
    """An ISO 8601 time or date (UTC when it names no zone); ``until`` a date: its end."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"`{flag}` must be an ISO 8601 date or time (2026-12-01, 2026-12-01T08:30), "
            f"not {text!r}",
            param=flag,
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    date_only = not any(c in text for c in "T :")
    if flag == "until" and date_only:  # a date (2026-12-01, 20261201): all of it
        value += timedelta(days=1) - timedelta(microseconds=1)
    return value


def _within(created_at: str, since: datetime | None, until: datetime | None) -> bool:
    if since is None and until is None:
        return True
    when = _instant(created_at, "created_at")
    return (since is None or when >= since) and (until is None or when <= until)


def _verdicts(latest: Iterable[StoredVerification], verifier: str | None) -> dict[str, bool]:
    if verifier is None:
        return {}
    return {v.episode_id: v.passed for v in latest if v.verifier == verifier}


def metrics(episodes: Sequence[Facts]) -> Metrics:
    """Everything a report says of a set of episodes."""
    n = len(episodes)
    statuses = Counter(e.summary.status for e in episodes)
    judged = [e for e in episodes if _judged(e)]
    passed = sum(bool(e.passed) for e in judged)
    reward_mean, reward_se = mean_se([e.reward for e in judged if e.reward is not None])
    priced = [e for e in episodes if e.summary.cost_usd is not None]
    cost = sum(float(e.summary.cost_usd or 0.0) for e in priced) if priced else None
    solved_priced = sum(bool(e.passed) for e in priced if _judged(e))
    turns = [float(e.summary.turns) for e in episodes]
    calls = [float(e.log.tool_calls) for e in episodes]
    latencies = [x for e in episodes for x in e.log.latencies]
    errors = Counter(x for e in episodes for x in e.log.errors)
    stops = Counter(e.summary.stop_reason or str(e.summary.status) for e in episodes)
    return Metrics(
        episodes=n,
        completed=statuses[Status.COMPLETED],
        cancelled=statuses[Status.CANCELLED],
        failed=statuses[Status.FAILED],
        interrupted=statuses[Status.INTERRUPTED],
        running=statuses[Status.RUNNING],
        pending=statuses[Status.PENDING],
        judged=len(judged),
        unjudged=_unjudged(episodes),
        passed=passed,
        reward_not_reproduced=sum(e.disputed for e in episodes),
        pass_rate=passed / len(judged) if judged else None,
        pass_rate_ci95=wilson(passed, len(judged)),
        reward_mean=reward_mean,
        reward_se=reward_se,
        pass_at_k=_pass_at_k(judged),
        tokens=_tokens(episodes),
        unknown_usage_calls=sum(e.log.unknown_usage for e in episodes),
        cost_usd=cost,
        cost_unknown=n - len(priced),
        cost_per_solved_usd=cost / solved_priced if cost is not None and solved_priced else None,
        turns=Spread(percentile(turns, 50), percentile(turns, 90)),
        tool_calls=Spread(percentile(calls, 50), percentile(calls, 90)),
        latency_s=Latency(percentile(latencies, 50), percentile(latencies, 90)),
        stop_reasons=dict(sorted(stops.items(), key=lambda kv: (-kv[1], kv[0]))),
        errors=tuple(
            ErrorCount(error, count)
            for error, count in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_ERRORS]
        ),
        cache_hits=cache_hits([e.summary.tokens for e in episodes]),
    )


def _tokens(episodes: Iterable[Facts]) -> Tokens:
    """The episodes' token sums (of what their summaries know)."""
    counts = [e.summary.tokens for e in episodes]  # the store's totals, by its names
    return Tokens(
        input=sum(int(t.get("input", 0)) for t in counts),
        cached=sum(int(t.get("cache_read", 0)) for t in counts),
        output=sum(int(t.get("output", 0)) for t in counts),
        reasoning=sum(int(t.get("reasoning", 0)) for t in counts),
    )


def _unjudged(episodes: Iterable[Facts]) -> int:
    """Ended episodes with no outcome (no reward, or no verdict of ``--verifier``)."""
    return sum(e.summary.status in ENDED and e.passed is None for e in episodes)


def _judged(e: Facts) -> bool:
    """Whether an episode counts in the pass rate: it ended (completed, cancelled or failed:
    one not run yet, running or interrupted has no outcome) and, with ``--verifier``, was
    verified."""
    return e.passed is not None and e.summary.status in ENDED


def _pass_at_k(episodes: Sequence[Facts]) -> dict[str, float]:
    """pass@k per (model, task) over its seeds (the latest episode of each), averaged over
    the (model, task) units that have at least k seeds, for k up to the most any has."""
    latest: dict[tuple[str, str, int], bool] = {}
    for e in episodes:  # oldest first: a seed run again counts once, as it last ended
        latest[(e.model, e.summary.task_id, e.summary.seed)] = bool(e.passed)
    units: dict[tuple[str, str], list[bool]] = {}
    for (model, task, _), passed in latest.items():
        units.setdefault((model, task), []).append(passed)
    if not units:
        return {}
    most = max(len(v) for v in units.values())
    out = {}
    for k in range(1, most + 1):
        enough = [v for v in units.values() if len(v) >= k]
        out[str(k)] = sum(pass_at_k(len(v), sum(v), k) for v in enough) / len(enough)
    return out


def report(
    episodes: Sequence[Facts],
    by: Sequence[str],
    *,
    threshold: float = 1.0,
    verifier: str | None = None,
) -> Report:
    """Per group (``by``: model, task, split, batch, context), overall, and per task a row
    per model; ``threshold`` and ``verifier`` say what passed (as :func:`collect` was
    told)."""
    groups = _grouped(episodes, lambda e: tuple(e.key(b) for b in by))
    tasks = _grouped(episodes, lambda e: (e.summary.task_id,))
    return Report(
        by=tuple(by),
        overall=metrics(episodes),
        reward_not_reproduced=tuple(e.summary.episode_id for e in episodes if e.disputed),
        groups=tuple(Group(key, metrics(members)) for key, members in groups),
        tasks=tuple(_task(task_id, members) for (task_id,), members in tasks),
        threshold=threshold,
        verifier=verifier,
    )


def _task(task_id: str, episodes: Iterable[Facts]) -> TaskMetrics:
    rows = _grouped(episodes, lambda e: (e.model,))
    return TaskMetrics(task_id, tuple(TaskRow(model, metrics(mine)) for (model,), mine in rows))


def _grouped(
    episodes: Iterable[Facts], key: Callable[[Facts], tuple[str, ...]]
) -> list[tuple[tuple[str, ...], list[Facts]]]:
    out: dict[tuple[str, ...], list[Facts]] = {}
    for e in episodes:
        out.setdefault(key(e), []).append(e)
    return sorted(out.items())


def compare(a: Sequence[Facts], b: Sequence[Facts], *, names: tuple[str, str]) -> Comparison:
    """A against B, paired by (task, seed) where both have an ended, judged episode (the
    latest of each side; unjudged ones are counted, never paired):
    pass rates and their difference with McNemar's exact test, mean reward and cost
    differences (B - A) with 95% intervals, and the tasks each solves that the other does
    not (a task is solved when any of its seeds passed); and each side's episodes by the
    context policy they ran with (``collect`` must have read it: ``need=("context",)``).
    ``names``: A's and B's, as the command gave them."""
    left, right = _latest_by_pair(a), _latest_by_pair(b)
    pairs = sorted(set(left) & set(right))
    only_a = sum(bool(left[p].passed) and not right[p].passed for p in pairs)
    only_b = sum(bool(right[p].passed) and not left[p].passed for p in pairs)
    n = len(pairs)
    rate_a = sum(bool(left[p].passed) for p in pairs) / n if n else None
    rate_b = sum(bool(right[p].passed) for p in pairs) / n if n else None
    rewarded_pairs = [p for p in pairs if None not in (left[p].reward, right[p].reward)]
    reward_diff, reward_ci = paired_difference(
        [float(left[p].reward or 0.0) for p in rewarded_pairs],
        [float(right[p].reward or 0.0) for p in rewarded_pairs],
    )
    priced = [p for p in pairs if None not in (left[p].summary.cost_usd, right[p].summary.cost_usd)]
    cost_diff, cost_ci = paired_difference(
        [float(left[p].summary.cost_usd or 0.0) for p in priced],
        [float(right[p].summary.cost_usd or 0.0) for p in priced],
    )
    solved_a = {p[0] for p in pairs if left[p].passed}
    solved_b = {p[0] for p in pairs if right[p].passed}
    return Comparison(
        a=names[0],
        b=names[1],
        pairs=n,
        unjudged_a=_unjudged(a),
        unjudged_b=_unjudged(b),
        pass_rate_a=rate_a,
        pass_rate_b=rate_b,
        pass_rate_difference=None if n == 0 else (rate_b or 0.0) - (rate_a or 0.0),
        mcnemar=mcnemar(only_a, only_b),
        reward_difference=reward_diff,
        reward_difference_ci95=reward_ci,
        cost_difference_usd=cost_diff,
        cost_difference_ci95=cost_ci,
        priced_pairs=len(priced),
        solved_only_by_a=tuple(sorted(solved_a - solved_b)),
        solved_only_by_b=tuple(sorted(solved_b - solved_a)),
        by_context=tuple(
            SidePolicy(side, context, metrics(mine))
            for side, episodes in (("A", a), ("B", b))
            for (context,), mine in _grouped(episodes, lambda e: (e.key("context"),))
        ),
    )


def _latest_by_pair(episodes: Iterable[Facts]) -> dict[tuple[str, int], Facts]:
    """The latest judged episode of each (task, seed)."""
    out: dict[tuple[str, int], Facts] = {}
    for e in episodes:  # oldest first: a later episode of the same pair replaces it
        if _judged(e):
            out[(e.summary.task_id, e.summary.seed)] = e
    return out
