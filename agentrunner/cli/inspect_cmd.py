"""``agentrunner ls`` and ``agentrunner show``: read episodes back from the store."""

from __future__ import annotations

import argparse
import time

from rich.table import Table

from agentrunner import formatting as fmt
from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    reward_text,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.render import EventRenderer
from agentrunner.cli.request_diff_view import show_request_diff
from agentrunner.cli.subagents_view import spawner, tree_json, tree_lines
from agentrunner.decisions import Decision, read_decisions, spend
from agentrunner.errors import StoreCorruptError, UsageError
from agentrunner.events import Status
from agentrunner.safe_text import literal, one_line_visible, plain
from agentrunner.store import EpisodeSummary, TraceStore
from agentrunner.store.records import BatchSummary, EpisodeFilter
from agentrunner.store.verifications import DISPUTED_MARK, DISPUTED_NOTE, reward_reproduced
from agentrunner.verifiers import VerificationResult, latest_verifications, verifications

STATUS_STYLE: dict[str, str] = {
    Status.PENDING: "cyan",
    Status.RUNNING: "bold blue",
    Status.COMPLETED: "green",
    Status.CANCELLED: "yellow",
    Status.INTERRUPTED: "magenta",
    Status.FAILED: "red",
}
FOLLOW_POLL_S = 0.25
_MIN_WIDTH = {
    "id": 8,
    "status": 11,
    "turns": 5,
    "reward": 6,
    "tokens": 6,
    "cost": 7,
    "verified": 8,
    "started": 11,
}


def register(sub: argparse._SubParsersAction) -> None:
    ls_p = new_command(
        sub,
        "ls",
        ls,
        help="list episodes",
        description="List episodes, newest first: id (the shortest prefix, at least 8 "
        "characters, that is unique in the store), parent (PARENT@FORK_SEQ; fan-out forks add "
        "`proposal C` or `cand C.S`), task, model, status, turns, reward, tokens and cost "
        "(a fork's own spend, without what it inherits), verifier results (passed/verified, "
        "latest per verifier; see `agentrunner verify`) and start time. Status is derived from "
        "the log and the writer's liveness: a running episode whose process died shows as "
        "interrupted, a fork made without --run as pending until it runs. A cut listing says "
        "so on stderr. --batches lists batch runs instead.",
    )
    ls_p.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="at most N rows (default 50, 0 = all)",
    )
    ls_p.add_argument(
        "--status", choices=sorted(STATUS_STYLE), help="only episodes with this status"
    )
    ls_p.add_argument("--task", metavar="ID", help="only this task (wildcards: 'csv-*')")
    ls_p.add_argument(
        "--model", metavar="SPEC", help="only this model spec (wildcards: 'openai:*')"
    )
    ls_p.add_argument(
        "--batch", metavar="ID", help="only this batch's episodes (id, unique prefix or name)"
    )
    ls_p.add_argument("--parent", metavar="EP", help="only the forks made directly of EP")
    ls_p.add_argument(
        "--batches",
        action="store_true",
        help="list batch runs instead: id, name, model, pairs, episodes, completed, "
        "mean reward (of the completed), cost, created",
    )
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
        " call A; each a turn number or a call id): model, parameters, system prompt, tools,"
        " messages added, removed or changed",
    )


def _filter(store: TraceStore, args: argparse.Namespace) -> EpisodeFilter:
    return EpisodeFilter(
        task_id=args.task,
        model=args.model,
        batch_id=store.resolve_batch(args.batch) if args.batch else None,
        parent_episode_id=store.resolve(args.parent) if args.parent else None,
        status=args.status,
    )


def _say_if_cut(shown: int, total: int, what: str) -> None:
    if total > shown:
        stderr_console().print(f"showing {shown} of {total} {what}; --limit 0 for all")


def _report_corrupt(corrupt: list[StoreCorruptError]) -> int:
    for problem in corrupt:  # the others are listed; the corrupt ones are named on stderr
        stderr_console().print(f"[bold red]error:[/] {literal(problem)}", soft_wrap=True)
    return 1 if corrupt else 0


def ls(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise UsageError("--limit must be 0 (all) or more")
    store = open_store(args)
    if args.batches:
        return _ls_batches(store, args)
    where = _filter(store, args)
    corrupt: list[StoreCorruptError] = []
    episodes = store.list_episodes(limit=args.limit or None, corrupt=corrupt, where=where)
    code = _report_corrupt(corrupt)
    total = len(episodes)
    if args.limit and len(episodes) + len(corrupt) >= args.limit:
        total = store.count_episodes(where)  # a corrupt one counts: it is named above
    verified = latest_verifications(store, [e.episode_id for e in episodes])
    if args.json:
        print_json(
            [
                {
                    **e.to_dict(),
                    "verifications": [_brief(r) for r in verified.get(e.episode_id, [])],
                    "reward_reproduced": reward_reproduced(verified.get(e.episode_id, [])),
                }
                for e in episodes
            ]
        )
        _say_if_cut(len(episodes), total, "episodes")
        return code
    if not episodes:
        if not corrupt:
            filtered = where != EpisodeFilter()
            stderr_console().print(
                f"no episodes in {store.where} match the filters"
                if filtered
                else f"no episodes in {store.where}; start one with `agentrunner run`"
            )
        return code
    prefixes = fmt.unique_prefixes(store.episode_ids(), minimum=8)
    table = _table(
        "id",
        "parent",
        "task",
        "model",
        "status",
        "turns",
        "reward",
        "tokens",
        "cost",
        "verified",
        "started",
    )
    disputed = 0
    for e in episodes:
        flag = reward_reproduced(verified.get(e.episode_id, [])) is False
        disputed += flag
        table.add_row(
            prefixes.get(e.episode_id, e.episode_id),
            _parent_cell(e, prefixes),
            _cell(e.task_id),
            _cell(e.model.get("spec", "?")),
            f"[{STATUS_STYLE.get(e.status, '')}]{e.status}[/]",
            str(e.turns),
            fmt.reward(e.total_reward) + (f" {DISPUTED_MARK}" if flag else ""),
            fmt.tokens(e.tokens),
            fmt.cost(e.cost_usd),
            _verified_cell(verified.get(e.episode_id, [])),
            fmt.started(e.created_at),
        )
    stdout_console().print(table)
    if disputed:
        stdout_console().print(f"{DISPUTED_MARK} {DISPUTED_NOTE}; see `agentrunner show EP`")
    _say_if_cut(len(episodes), total, "episodes")
    return code


_RIGHT = {"turns", "reward", "tokens", "cost", "verified", "pairs", "episodes", "done"}


def _table(*columns: str) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    for col in columns:
        table.add_column(
            col,
            justify="right" if col in _RIGHT else "left",
            no_wrap=True,
            overflow="ellipsis",
            min_width=_MIN_WIDTH.get(col),
            max_width=22 if col in ("task", "model", "name") else None,
        )
    return table


def _cell(value: object) -> str:
    """A recorded value in one table cell: on one line, controls visible, never markup."""
    return literal(one_line_visible(str(value)))


def _parent_cell(e: EpisodeSummary, prefixes: dict[str, str]) -> str:
    """``PARENT@FORK_SEQ``, and a fan-out fork's role: ``proposal C`` (the one-turn fork that
    proposed candidate C) or ``cand C.S`` (continuation S of candidate C)."""
    if e.parent_episode_id is None:
        return "-"
    parent = prefixes.get(e.parent_episode_id, e.parent_episode_id)
    cell = f"{parent}@{e.fork_seq}"
    group = e.fork_group
    if group is None:
        return cell
    if group.proposal:
        return f"{cell} [cyan]proposal {group.candidate}[/]"
    return f"{cell} cand {group.candidate}.{group.sample}"


def _ls_batches(store: TraceStore, args: argparse.Namespace) -> int:
    if any((args.task, args.model, args.batch, args.parent, args.status)):
        raise UsageError("--batches lists every batch; filters apply to episodes (--batch ID)")
    corrupt: list[StoreCorruptError] = []
    batches = store.list_batches(limit=args.limit or None, corrupt=corrupt)
    code = _report_corrupt(corrupt)
    total = store.count_batches() if args.limit and len(batches) >= args.limit else len(batches)
    if args.json:
        print_json([b.to_dict() for b in batches])
        _say_if_cut(len(batches), total, "batches")
        return code
    if not batches:
        stderr_console().print(f"no batches in {store.where}; start one with `agentrunner batch`")
        return code
    table = _table(
        "batch", "name", "model", "pairs", "episodes", "done", "reward", "cost", "started"
    )
    for b in batches:
        table.add_row(*_batch_cells(b))
    stdout_console().print(table)
    _say_if_cut(len(batches), total, "batches")
    return code


def _batch_cells(b: BatchSummary) -> tuple[str, ...]:
    return (
        b.batch_id,
        _cell(b.name or "-"),
        _cell(b.model or "?"),
        str(b.pairs),
        str(b.episodes),
        str(b.completed),
        "-" if b.mean_reward is None else f"{b.mean_reward:.3f}",
        fmt.cost(b.cost_usd),
        fmt.started(b.created_at),
    )


def _brief(r: VerificationResult) -> dict[str, object]:
    return {
        "verifier": r.verifier,
        "passed": r.passed,
        "score": r.score,
        "created_at": r.created_at,
    }


def _verified_cell(results: list[VerificationResult]) -> str:
    """``passed/verified`` over the latest result of each verifier (``-``: none)."""
    if not results:
        return "-"
    passed = sum(r.passed for r in results)
    style = "green" if passed == len(results) else "red"
    return f"[{style}]{passed}/{len(results)}[/]"


def _print_verifications(results: list[VerificationResult]) -> None:
    """The latest result of each verifier (older results are counted, not shown)."""
    if not results:
        return
    out = stdout_console()
    latest: dict[str, VerificationResult] = {}
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


def _why_lines(r: VerificationResult) -> list[str]:
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
        f"  model     {literal(e.model.get('spec', '?'))}",
        f"  env       {literal(e.env.get('kind', '?'))}",
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


def _print_subagents(store: TraceStore, episode_id: str) -> None:
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
        return show_request_diff(store, episode_id, args)
    results = verifications(store, episode_id)
    made = read_decisions(store, episode_id)
    if args.json:
        value = summary.to_dict()
        value["verifications"] = [r.to_dict() for r in results]
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
    if made:
        out.print(f"  branching {_branching(store, episode_id, made)}")
    out.print()
    renderer = EventRenderer(
        out, verbose=args.verbose, store=store, episode_id=episode_id, decisions=made
    )
    for row in store.iter_events(episode_id):
        renderer(row.seq, row.turn, row.typed())
    renderer.flush()
    return 0


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


def _branching(store: TraceStore, episode_id: str, made: list[Decision]) -> str:
    """The summary line of an episode's decision points and what they cost."""
    spent = spend(store, episode_id)
    forks = sum(len(c.continuations) + 1 for d in made for c in d.candidates)
    forks += sum(len(d.pending) for d in made)
    return (
        f"{fmt.plural(len(made), 'decision point')} · {fmt.plural(forks, 'fork')} · "
        f"{_spend(spent['tokens'], spent['cost_usd'])} (the forks' own calls)"
    )


def _follow(store: TraceStore, episode_id: str, args: argparse.Namespace) -> int:
    console = stderr_console() if args.json else stdout_console()
    renderer = EventRenderer(console, verbose=args.verbose, store=store, episode_id=episode_id)
    after = 0
    segments = store.segments(episode_id)
    while True:
        batch = store.events(episode_id, after_seq=after, limit=500, segments=segments)
        for row in batch:
            renderer(row.seq, row.turn, row.typed())
            after = row.seq
        if len(batch) == 500:
            continue
        renderer.flush()
        summary = store.episode(episode_id)
        if summary.status != Status.RUNNING and summary.last_seq <= after:
            break
        time.sleep(FOLLOW_POLL_S)
    if args.json:
        print_json(summary.to_dict())
    else:
        console.print(f"[bold]{summary.status}[/] · reward {reward_text(summary.total_reward)}")
    return 0
