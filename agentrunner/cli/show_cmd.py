"""``agentrunner show``: one episode read back from the store: its summary, verifier results,
sub-agents, decision points and transcript (or raw events, a request diff, a live tail)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import TYPE_CHECKING

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    reward_text,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.ls_cmd import STATUS_STYLE
from agentrunner.cli.render import EventRenderer
from agentrunner.cli.subagents_view import spawner, tree_json, tree_lines
from agentrunner.store.verifications import (
    DISPUTED_MARK,
    DISPUTED_NOTE,
    StoredVerification,
    reward_reproduced,
)
from agentrunner.values import formatting as fmt
from agentrunner.values.safe_text import literal, one_line_visible, plain
from agentrunner.values.spec_text import env_kind
from agentrunner.values.statuses import Status

if TYPE_CHECKING:
    from agentrunner.lifecycle.decision_log import Decision
    from agentrunner.store import EpisodeSummary
    from agentrunner.store.protocol import StoreBackend

FOLLOW_POLL_S = 0.25
RESUME_GRACE_S = 30.0
"""How long ``show --follow`` stays on an interrupted batch member once nothing else of its
batch runs (a Ray actor restarting before its unit is submitted again)."""
RESUME_CHECK_S = 2.0
"""How often it looks whether the batch still runs meanwhile."""


def register(sub: argparse._SubParsersAction) -> None:
    show_p = new_command(
        sub,
        "show",
        show,
        help="show one episode",
        description="Show one episode: its summary, its verifier results and its transcript. "
        "EP is an episode id or a unique prefix of one. Decision points (`run --branch-every`) "
        "are shown at their turn: each candidate action with its value (mean reward of its "
        "continuations) ± spread over n, which was adopted, and the ids of its proposal and "
        "continuation forks (show them with `agentrunner show ID`).",
    )
    show_p.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    show_p.add_argument(
        "--events", action="store_true", help="list the raw events (seq, turn, kind, payload)"
    )
    show_p.add_argument(
        "--follow", action="store_true", help="tail a running episode until it ends"
    )
    show_p.add_argument(
        "--request-diff",
        metavar="K|A,B",
        help="what changed in the request of model call K against call K-1 (or call B against"
        " call A; each a turn number or a call id, or EP:K for a call of another episode, such"
        " as a fork's or a replay's against its original): model, parameters, system prompt,"
        " tools, messages added, removed or changed",
    )


def _print_verifications(results: list[StoredVerification]) -> None:
    """The latest result of each verifier (older results are counted, not shown)."""
    if not results:
        return
    out = stdout_console()
    latest: dict[str, StoredVerification] = {}
    for r in results:  # newest first
        latest.setdefault(r.verifier, r)
    out.print("  [bold]verifiers[/]")
    for name, r in sorted(latest.items()):
        mark = "[green]pass[/]" if r.passed else "[red]fail[/]"
        score = "-" if r.score is None else f"{r.score:.2f}"
        older = sum(1 for x in results if x.verifier == name) - 1
        again = f" · {older} earlier" if older else ""
        when = (r.created_at or "")[:16].replace("T", " ")
        out.print(
            f"    {mark} {literal(name)} · score {score} · {when}{again}",
            highlight=False,
        )
        for line in _why_lines(r):
            out.print(f"      [dim]{literal(line)}[/]", highlight=False)


def _why_lines(r: StoredVerification) -> list[str]:
    d = r.details
    lines = []
    for c in d.get("checks", []):
        lines.append(f"{'✓' if c['passed'] else '✗'} {c['rule']}: {c['evidence']}")
    for c in d.get("children", []):
        score = "-" if c["score"] is None else f"{c['score']:.2f}"
        lines.append(f"{'✓' if c['passed'] else '✗'} {c['verifier']}: score {score}")
    if "recorded" in d and "reproduced" in d:
        lines.append(f"recorded reward {d['recorded']:g}, reproduced {d['reproduced']:g}")
    if "error" in d:
        lines.append(str(d["error"]))
    answer = str(d.get("answer", "")).strip().splitlines()
    if answer:
        lines.append(f"judge: {answer[-1][:160]}")
    return lines


def _print_summary(e: EpisodeSummary) -> None:
    out = stdout_console()
    lines = [
        f"[bold]episode[/] {literal(e.episode_id)}",
        f"  task      {literal(e.task_id)} (seed {e.seed})",
        f"  model     {literal(e.model_text)}",
        f"  env       {literal(env_kind(e.env) or '?')}",
        f"  status    [{STATUS_STYLE.get(e.status, '')}]{e.status}[/]"
        + (f" ({literal(e.stop_reason)})" if e.stop_reason else ""),
        f"  turns     {e.turns} · attempt {e.attempt} · {e.last_seq} events",
        f"  reward    {reward_text(e.total_reward)}",
        f"  tokens    {_spend(e.tokens, e.cost_usd)}"
        + (" (its own calls, after the fork point)" if e.parent_episode_id else ""),
        f"  started   {e.created_at}",
    ]
    if e.parent_episode_id:
        lines.append(f"  parent    {e.parent_episode_id} at seq {e.fork_seq}")
        lines.append(
            f"  inherited {_spend(e.inherited_tokens, e.inherited_cost_usd)} (the parent's,"
            " up to the fork point)"
        )
    group = e.fork_group
    if group is not None:
        role = (
            f"proposal of candidate {group.candidate} (one re-sampled turn)"
            if group.proposal
            else f"candidate {group.candidate}, continuation {group.sample}"
        )
        lines.append(f"  fan-out   {role} · fork group {group.group_id}")
    for line in lines:
        out.print(line)


def _print_subagents(store: StoreBackend, episode_id: str) -> None:
    out = stdout_console()
    started = spawner(store, episode_id)
    if started is not None:
        parent, call = started
        by = f" (call {one_line_visible(call)})" if call else ""
        out.print(plain(f"  spawned   by {parent}{by}"))
    tree = tree_lines(store, episode_id)
    if tree is not None:
        out.print(tree)


def _spend(tokens: dict[str, int], cost: float | None) -> str:
    return f"{tokens.get('input', 0)} in · {tokens.get('output', 0)} out · cost {fmt.cost(cost)}"


def show(args: argparse.Namespace) -> int:
    store = open_store(args)
    summary = store.episode(args.episode)
    episode_id = summary.episode_id
    if args.follow:
        return _follow(store, episode_id, args)
    if args.request_diff:
        from agentrunner.cli.request_diff_view import show_request_diff

        return show_request_diff(store, episode_id, args)
    results = store.verifications(episode_id)
    if args.json:
        from agentrunner.lifecycle.decision_log import read_decisions, spend

        made = read_decisions(store, episode_id)
        value = summary.to_dict()
        value["verifications"] = [dataclasses.asdict(r) for r in results]
        value["reward_reproduced"] = reward_reproduced(results)
        value["decisions"] = [_decision_json(d) for d in made]
        value["branching"] = spend(store, episode_id)
        value["subagents"] = tree_json(store, episode_id)
        if args.events:
            value["events"] = [row.to_dict() for row in store.iter_events(episode_id)]
        print_json(value)
        return 0
    _print_summary(summary)
    _print_subagents(store, episode_id)
    if reward_reproduced(results) is False:
        stdout_console().print(f"  [bold red]{DISPUTED_MARK}[/] {DISPUTED_NOTE}")
    _print_verifications(results)
    out = stdout_console()
    if args.events:
        from rich.table import Table  # only here: a transcript need not import it

        table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
        for col in ("seq", "att", "turn", "kind", "ts", "payload"):
            table.add_column(col, overflow="fold" if col == "payload" else "ellipsis")
        for row in store.iter_events(episode_id):
            payload = row.payload_json if args.verbose else row.payload_json[:120]
            table.add_row(  # recorded text as Text: never markup, controls visible
                str(row.seq),
                str(row.attempt),
                str(row.turn),
                plain(one_line_visible(row.kind)),
                plain(one_line_visible(row.ts[11:23])),
                plain(one_line_visible(payload)),
            )
        out.print(table)
        return 0
    made = _decisions(store, episode_id)
    if made:
        out.print(f"  branching {_branching(store, episode_id, made)}")
    out.print()
    renderer = EventRenderer(
        out, verbose=args.verbose, store=store, episode_id=episode_id, decisions=made, batched=True
    )
    for row in store.iter_events(episode_id):
        renderer.row(row)
    renderer.flush()
    return 0


def _decisions(store: StoreBackend, episode_id: str) -> list[Decision]:
    """The episode's decision points. Their proposals are forks of it, recorded with their
    group in one transaction: an episode without forks made none, and its transcript is
    shown without loading the fork groups' models."""
    if not store.children(episode_id):
        return []
    from agentrunner.lifecycle.decision_log import read_decisions

    return read_decisions(store, episode_id)


def _decision_json(d: Decision) -> dict[str, object]:
    """A decision point as ``show --json`` lists it (``adopted``: null until it is made)."""
    candidates = []
    for c in d.candidates:
        action = {
            "message": c.message.content,
            "tool_calls": [
                {"name": t.name, "arguments": t.arguments} for t in c.message.tool_calls
            ],
        }
        candidates.append({**c.summary(), "action": action})
    return {
        "group_id": d.group_id,
        "turn": d.turn,
        "seq": d.seq,
        "adopt": d.adopt,
        "adopted": d.adopted if d.adopted_seq is not None else None,
        "adopted_seq": d.adopted_seq,
        "candidates": candidates,
        "pending": d.pending,
    }


def _branching(store: StoreBackend, episode_id: str, made: list[Decision]) -> str:
    """The summary line of an episode's decision points and what they cost."""
    from agentrunner.lifecycle.decision_log import spend

    spent = spend(store, episode_id)
    forks = sum(len(c.continuations) + 1 for d in made for c in d.candidates)
    forks += sum(len(d.pending) for d in made)
    return (
        f"{fmt.plural(len(made), 'decision point')} · {fmt.plural(forks, 'fork')} · "
        f"{_spend(spent['tokens'], spent['cost_usd'])} (the forks' own calls)"
    )


class _BatchResume:
    """Whether an interrupted episode that ``show --follow`` tails may yet go on: a batch
    (a Ray unit whose worker died is submitted again) resumes it while the batch runs. Kept
    on while another member of one of its batches runs (looked at every
    :data:`RESUME_CHECK_S`, a look reading the batch's members), and for
    :data:`RESUME_GRACE_S` after none does; said once on stderr."""

    def __init__(self, store: StoreBackend, episode_id: str) -> None:
        self._store = store
        self._episode_id = episode_id
        self.since: float | None = None
        """Since when nothing of its batches has been seen running (None: following)."""
        self._batches: list[str] | None = None
        self._checked_at = -RESUME_CHECK_S
        self._said = False

    def on(self, status: str) -> bool:
        if status != Status.INTERRUPTED:
            return False
        if self._batches is None:
            self._batches = self._store.batches_of([self._episode_id])
        if not self._batches:
            return False
        now = time.monotonic()
        if now - self._checked_at >= RESUME_CHECK_S:
            self._checked_at = now
            running = self._running()
            self.since = None if running else (self.since or now)
            self._say(running)
        return self.since is None or now - self.since < RESUME_GRACE_S

    def _running(self) -> int:
        from agentrunner.store.records import EpisodeFilter  # only for an interrupted episode

        assert self._batches is not None
        return sum(
            self._store.count_episodes(EpisodeFilter(batch_id=b, status=Status.RUNNING))
            for b in self._batches
        )

    def _say(self, running: int) -> None:
        if not self._said:
            self._said = True
            stderr_console().print(
                f"{self._episode_id} is interrupted; its batch may resume it"
                f" ({fmt.plural(running, 'other member')} running): following on"
                " until it ends or its batch stops (Ctrl-C stops following)",
                markup=False,
                highlight=False,
            )


def _follow(store: StoreBackend, episode_id: str, args: argparse.Namespace) -> int:
    console = stderr_console() if args.json else stdout_console()
    renderer = EventRenderer(console, verbose=args.verbose, store=store, episode_id=episode_id)
    after = 0
    segments = store.segments(episode_id)
    waiting = _BatchResume(store, episode_id)
    while True:
        batch = store.events(episode_id, after_seq=after, limit=500, segments=segments)
        for row in batch:
            renderer(row.seq, row.turn, row.typed())
            after = row.seq
        if len(batch) == 500:
            continue
        renderer.flush()
        summary = store.episode(episode_id)
        if summary.status == Status.RUNNING or summary.last_seq > after:
            waiting.since = None
        elif not waiting.on(summary.status):
            break
        time.sleep(FOLLOW_POLL_S)
    if args.json:
        print_json(summary.to_dict())
    else:
        console.print(f"[bold]{summary.status}[/] · reward {reward_text(summary.total_reward)}")
    return 0
