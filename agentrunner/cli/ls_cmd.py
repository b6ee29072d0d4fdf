"""``agentrunner ls``: list the store's episodes (filtered, with their verifier results) or
its batch runs, as a table or JSON."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.store.records import EpisodeFilter
from agentrunner.store.verifications import (
    DISPUTED_MARK,
    DISPUTED_NOTE,
    StoredVerification,
    reward_reproduced,
)
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import StoreCorruptError, UsageError
from agentrunner.values.safe_text import literal, one_line_visible
from agentrunner.values.statuses import Status

if TYPE_CHECKING:
    from rich.table import Table

    from agentrunner.store import EpisodeSummary
    from agentrunner.store.protocol import StoreBackend
    from agentrunner.store.records import BatchSummary

STATUS_STYLE: dict[str, str] = {
    Status.PENDING: "cyan",
    Status.RUNNING: "bold blue",
    Status.COMPLETED: "green",
    Status.CANCELLED: "yellow",
    Status.INTERRUPTED: "magenta",
    Status.FAILED: "red",
}
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


def _filter(store: StoreBackend, args: argparse.Namespace) -> EpisodeFilter:
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
    verified = _latest_verifications(store, {e.episode_id for e in episodes})
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
            _cell(e.model_text),
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
    from rich.table import Table  # a table only: --json loads no Rich

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


def _ls_batches(store: StoreBackend, args: argparse.Namespace) -> int:
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


def _latest_verifications(
    store: StoreBackend, episode_ids: set[str]
) -> dict[str, list[StoredVerification]]:
    """The latest result of each verifier of each of ``episode_ids`` (no details)."""
    out: dict[str, list[StoredVerification]] = {}
    for row in store.latest_verifications(details=False):
        if row.episode_id in episode_ids:
            out.setdefault(row.episode_id, []).append(row)
    return out


def _brief(r: StoredVerification) -> dict[str, object]:
    return {
        "verifier": r.verifier,
        "passed": r.passed,
        "score": r.score,
        "created_at": r.created_at,
    }


def _verified_cell(results: list[StoredVerification]) -> str:
    """``passed/verified`` over the latest result of each verifier (``-``: none)."""
    if not results:
        return "-"
    passed = sum(r.passed for r in results)
    style = "green" if passed == len(results) else "red"
    return f"[{style}]{passed}/{len(results)}[/]"
