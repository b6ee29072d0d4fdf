"""``agentrunner ls`` and ``agentrunner show``: read episodes back from the store."""

from __future__ import annotations

import argparse
import time

from rich.markup import escape
from rich.table import Table

from agentrunner import formatting as fmt
from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.render import EventRenderer
from agentrunner.errors import StoreCorruptError
from agentrunner.store import EpisodeSummary, TraceStore
from agentrunner.verifiers import VerificationResult, latest_verifications, verifications

STATUS_STYLE = {
    "running": "bold blue",
    "completed": "green",
    "cancelled": "yellow",
    "interrupted": "magenta",
    "failed": "red",
}
FOLLOW_POLL_S = 0.25
_MIN_WIDTH = {
    "id": 10,
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
        description="List episodes, newest first: id, parent, task, model, status, turns, "
        "reward, tokens, cost, verifier results (passed/verified, latest per verifier; see "
        "`agentrunner verify`) and start time. Status is derived from the log and the "
        "writer's liveness: a running episode whose process died shows as interrupted.",
    )
    ls_p.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="at most N episodes (default 50, 0 = all)",
    )
    ls_p.add_argument(
        "--status", choices=sorted(STATUS_STYLE), help="only episodes with this status"
    )
    show_p = new_command(
        sub,
        "show",
        show,
        help="show one episode",
        description="Show one episode: its summary, its verifier results and its transcript. "
        "EP is an episode id or a unique prefix of one.",
    )
    show_p.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    show_p.add_argument(
        "--events", action="store_true", help="list the raw events (seq, turn, kind, payload)"
    )
    show_p.add_argument(
        "--follow", action="store_true", help="tail a running episode until it ends"
    )


def _ls_rows(
    store: TraceStore, args: argparse.Namespace, corrupt: list[StoreCorruptError]
) -> list[EpisodeSummary]:
    episodes = store.list_episodes(
        limit=None if args.status else (args.limit or None), corrupt=corrupt
    )
    if args.status:
        episodes = [e for e in episodes if e.status == args.status]
        episodes = episodes[: args.limit] if args.limit else episodes
    return episodes


def ls(args: argparse.Namespace) -> int:
    store = open_store(args)
    corrupt: list[StoreCorruptError] = []
    episodes = _ls_rows(store, args, corrupt)
    for problem in corrupt:  # the others are listed; the corrupt ones are named on stderr
        stderr_console().print(f"[bold red]error:[/] {escape(str(problem))}", soft_wrap=True)
    code = 1 if corrupt else 0
    verified = latest_verifications(store, [e.episode_id for e in episodes])
    if args.json:
        print_json(
            [
                {
                    **e.to_dict(),
                    "verifications": [_brief(r) for r in verified.get(e.episode_id, [])],
                }
                for e in episodes
            ]
        )
        return code
    if not episodes:
        if not corrupt:
            stderr_console().print(
                f"no episodes in {store.path}; start one with `agentrunner run`"
            )
        return code
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    for col in (
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
    ):
        table.add_column(
            col,
            justify="right" if col in ("turns", "reward", "tokens", "cost", "verified") else "left",
            no_wrap=True,
            overflow="ellipsis",
            min_width=_MIN_WIDTH.get(col),
            max_width=22 if col in ("task", "model") else None,
        )
    for e in episodes:
        parent = (
            "-"
            if e.parent_episode_id is None
            else f"{fmt.short_id(e.parent_episode_id, 8)}@{e.fork_seq}"
        )
        table.add_row(
            fmt.short_id(e.episode_id),
            parent,
            e.task_id,
            str(e.model.get("spec", "?")),
            f"[{STATUS_STYLE.get(e.status, '')}]{e.status}[/]",
            str(e.turns),
            f"{e.total_reward:g}",
            fmt.tokens(e.tokens),
            fmt.cost(e.cost_usd),
            _verified_cell(verified.get(e.episode_id, [])),
            e.created_at[5:16].replace("T", " "),
        )
    stdout_console().print(table)
    return code


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
            f"    {mark} {escape(name)} · score {score} · {when}{again}",
            highlight=False,
        )
        for line in _why_lines(r):
            out.print(f"      [dim]{escape(line)}[/]", highlight=False)


def _why_lines(r: VerificationResult) -> list[str]:
    d = r.details
    lines = []
    for c in d.get("checks", []):
        lines.append(f"{'✓' if c['passed'] else '✗'} {c['rule']}: {c['evidence']}")
    for c in d.get("children", []):
        score = "-" if c["score"] is None else f"{c['score']:.2f}"
        lines.append(f"{'✓' if c['passed'] else '✗'} {c['verifier']}: score {score}")
    if "error" in d:
        lines.append(str(d["error"]))
    answer = str(d.get("answer", "")).strip().splitlines()
    if answer:
        lines.append(f"judge: {answer[-1][:160]}")
    return lines


def _print_summary(e: EpisodeSummary) -> None:
    out = stdout_console()
    lines = [
        f"[bold]episode[/] {e.episode_id}",
        f"  task      {e.task_id} (seed {e.seed})",
        f"  model     {e.model.get('spec', '?')}",
        f"  env       {e.env.get('kind', '?')}",
        f"  status    [{STATUS_STYLE.get(e.status, '')}]{e.status}[/]"
        + (f" ({e.stop_reason})" if e.stop_reason else ""),
        f"  turns     {e.turns} · attempt {e.attempt} · {e.last_seq} events",
        f"  reward    {e.total_reward:g}",
        f"  tokens    {e.tokens.get('input', 0)} in · {e.tokens.get('output', 0)} out"
        f" · cost {fmt.cost(e.cost_usd)}",
        f"  started   {e.created_at}",
    ]
    if e.parent_episode_id:
        lines.append(f"  parent    {e.parent_episode_id} at seq {e.fork_seq}")
    for line in lines:
        out.print(line)


def show(args: argparse.Namespace) -> int:
    store = open_store(args)
    summary = store.episode(args.episode)
    episode_id = summary.episode_id
    if args.follow:
        return _follow(store, episode_id, args)
    results = verifications(store, episode_id)
    if args.json:
        value = summary.to_dict()
        value["verifications"] = [r.to_dict() for r in results]
        if args.events:
            value["events"] = [row.to_dict() for row in store.iter_events(episode_id)]
        print_json(value)
        return 0
    _print_summary(summary)
    _print_verifications(results)
    out = stdout_console()
    if args.events:
        table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
        for col in ("seq", "att", "turn", "kind", "ts", "payload"):
            table.add_column(col, overflow="fold" if col == "payload" else "ellipsis")
        for row in store.iter_events(episode_id):
            payload = row.payload_json if args.verbose else row.payload_json[:120]
            table.add_row(
                str(row.seq), str(row.attempt), str(row.turn), row.kind, row.ts[11:23], payload
            )
        out.print(table)
        return 0
    out.print()
    renderer = EventRenderer(out, verbose=args.verbose)
    for row in store.iter_events(episode_id):
        renderer(row.seq, row.turn, row.typed())
    return 0


def _follow(store: TraceStore, episode_id: str, args: argparse.Namespace) -> int:
    console = stderr_console() if args.json else stdout_console()
    renderer = EventRenderer(console, verbose=args.verbose)
    after = 0
    segments = store.segments(episode_id)
    while True:
        batch = store.events(episode_id, after_seq=after, limit=500, segments=segments)
        for row in batch:
            renderer(row.seq, row.turn, row.typed())
            after = row.seq
        if len(batch) == 500:
            continue
        summary = store.episode(episode_id)
        if summary.status != "running" and summary.last_seq <= after:
            break
        time.sleep(FOLLOW_POLL_S)
    if args.json:
        print_json(summary.to_dict())
    else:
        console.print(f"[bold]{summary.status}[/] · reward {summary.total_reward:g}")
    return 0
