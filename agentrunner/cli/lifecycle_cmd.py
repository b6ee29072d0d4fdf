"""``agentrunner resume``, ``fork``, ``replay`` and ``rm``: continue, branch, check, remove."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentrunner.cli import fanout_cmd
from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    reward_text,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.model_opts import (
    FLAGS,
    add_context_options,
    add_model_options,
    context_settings,
    given_options,
    model_options,
    recorded_model,
)
from agentrunner.cli.render import EventRenderer
from agentrunner.cli.run_cmd import report, resumable, rollout_exit_code
from agentrunner.envs import imported
from agentrunner.envs.factory import env_from_spec
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import RESUMABLE, can_resume, resume_episode
from agentrunner.readers.restore import StepCheck, replay_steps
from agentrunner.readers.state import rebuild
from agentrunner.runtime.runner import MAX_TURNS_LIMIT, Rollout
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import AgentRunnerError, UsageError
from agentrunner.values.events import Status
from agentrunner.values.model import Model
from agentrunner.values.safe_text import literal
from agentrunner.values.specs import ImportedSpec
from providers import get_model

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "resume",
        resume,
        help="continue an interrupted, cancelled or failed episode, or run a pending fork",
        description="Continue an episode that was cancelled (Ctrl-C, a cancel request), "
        "interrupted (its process died) or failed on a retryable error, as a new attempt of "
        "the same episode, or run a pending fork for the first time. The history is rebuilt "
        "from the store; the environment from its "
        "last snapshot or by replaying the recorded actions (a replay whose observations "
        "differ stops with a divergence report unless --accept-divergence). Dangling calls are "
        "re-issued and the resume event says what was done.",
    )
    p.add_argument("episode", metavar="EP", nargs="?", help="episode id or unique prefix")
    p.add_argument("--all", action="store_true", help="resume every resumable episode, one by one")
    p.add_argument(
        "--accept-divergence",
        action="store_true",
        help="continue even when replayed observations differ from the recorded ones",
    )
    p.add_argument("--model", help="continue with another model (PROVIDER:MODEL)")
    p.add_argument(
        "--max-turns", type=int, metavar="N", help="raise or lower the recorded turn limit"
    )
    add_model_options(p)
    add_context_options(p, keeps="the ones the episode runs with (given, the resume records them)")

    f = new_command(
        sub,
        "fork",
        fork,
        help="branch an episode at a model turn",
        description="Create a fork of EP at model turn K: a new episode that inherits EP's "
        "events up to just before that turn (nothing is copied; EP is never changed). The fork "
        "re-samples turn K (with --model, another model; with --message, after an injected "
        "user message) or replaces turn K's output with --action. Without --run the fork waits "
        "(status pending) until `agentrunner resume FORK` (or `resume --all`) runs it.",
    )
    f.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    f.add_argument(
        "--turn", type=int, required=True, metavar="K", help="the model turn to fork at (1-based)"
    )
    edit = f.add_mutually_exclusive_group()
    edit.add_argument("--message", metavar="TEXT", help="inject a user message before turn K")
    edit.add_argument(
        "--action",
        metavar="JSON",
        help='replace turn K\'s output: {"name": TOOL, "arguments": {...}}, a list of such '
        'calls, or {"message": TEXT, "tool_calls": [...]}',
    )
    f.add_argument("--model", help="sample the fork with another model (PROVIDER:MODEL)")
    f.add_argument(
        "-n", type=int, default=1, metavar="N", help="create N sibling forks (default 1)"
    )
    f.add_argument("--run", action="store_true", help="run the fork(s) now, one after another")
    add_model_options(f)
    add_context_options(f, keeps="the episode's (a fork may change them; with --run)")

    r = new_command(
        sub,
        "replay",
        replay,
        help="re-execute an episode's recorded actions and report divergence",
        description="Reset a fresh environment with the episode's task and seed, re-execute "
        "its recorded actions (no model calls) and report, step by step, whether each "
        "observation and reward matches the recorded one. Exit code 0 only when all match.",
    )
    r.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    r.add_argument(
        "--verify",
        action="store_true",
        help="stop at the first divergence and show the expected and actual observation",
    )

    fanout_cmd.register(sub)

    rm = new_command(
        sub,
        "rm",
        remove,
        help="remove an episode no fork depends on (or, with --tree, it and its forks)",
        description="Remove an episode and its events from the store. Refused while a fork "
        "depends on it or while it runs. With --tree, remove EP and every fork descending "
        "from it (children before parents, all or nothing), refused while any of them runs. "
        "Removal is always explicit, never automatic.",
    )
    rm.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    rm.add_argument("--tree", action="store_true", help="also remove every fork of EP, and theirs")


def _resume_one(
    store: StoreBackend,
    episode_id: str,
    args: argparse.Namespace,
    *,
    model: str | None = None,
    accept_divergence: bool = False,
    max_turns: int | None = None,
) -> Rollout:
    """Resume (or run a fork of) ``episode_id`` with ``model`` or the recorded one, and the
    model flags of ``args``, showing it live."""
    if max_turns is not None and not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"--max-turns must be between 1 and {MAX_TURNS_LIMIT}")
    episode_id = store.resolve(episode_id)
    model_fn: Model | None
    if model:
        model_fn = get_model(model, **model_options(args, model))
    else:
        model_fn = recorded_model(store, episode_id, args)
    renderer = EventRenderer(
        stderr_console(), verbose=args.verbose, store=store, episode_id=episode_id
    )
    return resume_episode(
        store,
        episode_id,
        model_fn=model_fn,
        accept_divergence=accept_divergence,
        max_turns=max_turns,
        observer=renderer,
        context=context_settings(args) or None,
    )


def _resume_targets(store: StoreBackend) -> tuple[list[str], list[dict[str, str]]]:
    """What ``resume --all`` resumes (oldest first): interrupted and cancelled episodes and
    those that failed on a retryable error; and the failed ones it cannot (with why)."""
    targets: list[str] = []
    not_resumable: list[dict[str, str]] = []
    for e in reversed(store.list_episodes()):
        if e.status not in RESUMABLE:
            continue
        why = can_resume(store, e)
        if why is not None:
            not_resumable.append({"episode_id": e.episode_id, "reason": why})
            continue
        targets.append(e.episode_id)
    return targets, not_resumable


def resume(args: argparse.Namespace) -> int:
    """Exit codes of ``--all``: 0 when there is nothing to resume or every episode resumed
    completed; 130 when Ctrl-C stopped it; 1 when any episode was skipped (it could not be
    resumed: a divergence, another writer, ...) or a resumed one did not complete."""
    store = open_store(args)
    if args.all == bool(args.episode):
        raise UsageError("give an episode id or --all (not both)")
    options = {
        "model": args.model,
        "accept_divergence": args.accept_divergence,
        "max_turns": args.max_turns,
    }
    if args.episode:
        return report(args, _resume_one(store, args.episode, args, **options), store)
    targets, not_resumable = _resume_targets(store)
    err = stderr_console()
    for entry in not_resumable:
        err.print(f"[dim]not resumable: {entry['episode_id']}: {literal(entry['reason'])}[/]")
    rollouts: list[Rollout] = []
    skipped: list[dict[str, str]] = []
    for i, episode_id in enumerate(targets, 1):
        if can_resume(store, store.episode(episode_id)) is not None:
            # finished meanwhile: a decision point's forks, by their main line's resume
            err.print(f"[dim]{episode_id}: finished meanwhile[/]")
            continue
        err.print(f"[bold]resume {i}/{len(targets)}[/] {episode_id}")
        try:
            rollouts.append(_resume_one(store, episode_id, args, **options))
        except AgentRunnerError as exc:  # e.g. a divergence, or another writer: go on
            err.print(f"[yellow]skipped[/] {episode_id}: {literal(exc)}")
            skipped.append({"episode_id": episode_id, "reason": str(exc)})
            continue
        if rollouts[-1].status == Status.CANCELLED:  # Ctrl-C: stop here, not just this episode
            err.print("[yellow]cancelled[/]: the remaining episodes were not resumed")
            break
    if args.json:
        print_json(
            {
                "resumed": [r.to_dict() for r in rollouts],
                "skipped": skipped,
                "not_resumable": not_resumable,
            }
        )
    else:
        _print_resumed(store, targets, rollouts, skipped)
    codes = [rollout_exit_code(r) for r in rollouts] + ([1] if skipped else [])
    return max(codes, default=0)


def _print_resumed(
    store: StoreBackend, targets: list[str], rollouts: list[Rollout], skipped: list[dict[str, str]]
) -> None:
    out = stdout_console()
    if not targets:
        out.print("nothing to resume: no interrupted, cancelled or retryably failed episode")
        return
    short = fmt.unique_prefixes(store.episode_ids())
    out.print(f"resumed {len(rollouts)} of {len(targets)} episode(s)")
    for r in rollouts:
        out.print(
            f"  {short.get(r.episode_id, r.episode_id)} {r.status} ({literal(r.stop_reason)}) · "
            f"reward {reward_text(r.total_reward)}"
        )
    if skipped:
        out.print(f"skipped {len(skipped)}:")
        for entry in skipped:
            episode = short.get(entry["episode_id"], entry["episode_id"])
            out.print(f"  {episode} {literal(entry['reason'])}")


def fork(args: argparse.Namespace) -> int:
    given = [FLAGS[name] for name in given_options(args)]
    given += [f"--{name.replace('_', '-')}" for name in context_settings(args)]
    if given and not args.run:
        flags = ", ".join(given)
        raise UsageError(
            f"{flags} apply when the fork runs: add --run, or give them to "
            "`agentrunner resume FORK`"
        )
    store = open_store(args)
    forks = fork_episode(
        store,
        args.episode,
        turn=args.turn,
        message=args.message,
        action=args.action,
        model=args.model,
        n=args.n,
    )
    rollouts = []
    if args.run:
        for fork_id in forks:
            rollouts.append(_resume_one(store, fork_id, args))
            if rollouts[-1].status == Status.CANCELLED:  # Ctrl-C: leave the other forks unrun
                break
    if args.json:
        print_json({"forks": forks, "rollouts": [r.to_dict() for r in rollouts]})
    else:
        _print_forks(store, args, forks, rollouts)
    return max((rollout_exit_code(r) for r in rollouts), default=0)


def _print_forks(
    store: StoreBackend, args: argparse.Namespace, forks: list[str], rollouts: list[Rollout]
) -> None:
    out = stdout_console()
    parent = store.resolve(args.episode)
    short = fmt.unique_prefixes(store.episode_ids())
    for fork_id in forks:
        out.print(
            f"fork [bold]{short.get(fork_id, fork_id)}[/] of {short.get(parent, parent)}"
            f" at turn {args.turn}"
        )
    for r in rollouts:
        out.print(
            f"  {short.get(r.episode_id, r.episode_id)} {r.status}"
            f" · reward {reward_text(r.total_reward)}"
        )
    ran = {r.episode_id for r in rollouts}
    waiting = [f for f in forks if f not in ran]
    waiting += [r.episode_id for r in rollouts if resumable(store, r)]
    if len(waiting) == 1:
        out.print(f"run it with: agentrunner resume {waiting[0]}")
    elif waiting:
        out.print("run them with:")
        for fork_id in waiting:
            out.print(f"  agentrunner resume {fork_id}")


def replay(args: argparse.Namespace) -> int:
    store = open_store(args)
    state = rebuild(store, args.episode)
    if isinstance(state.start.env_spec, ImportedSpec):
        why = imported.why_not_runnable(state.start.env)
        raise UsageError(f"episode {state.episode.episode_id} cannot be replayed: {why}")
    console = stderr_console() if args.json else stdout_console()

    def show(check: StepCheck) -> None:
        mark = "[green]match[/]" if check.matched else "[bold red]DIVERGED[/]"
        console.print(
            f"step {check.step:>3} · seq {check.seq:>5} · {literal(check.name):<12} {mark}"
        )
        if not check.matched and args.verify:
            d = check.to_dict()
            console.print(
                f"    expected: {literal(repr(d['expected']))} (reward {check.expected_reward})"
            )
            console.print(f"    got:      {literal(repr(d['got']))} (reward {check.got_reward})")

    env = env_from_spec(state.start.env, store)
    try:
        env.reset(state.start.task_id, state.start.seed)
        checks = replay_steps(env, state.env_steps, on_step=show, stop_on_divergence=args.verify)
    finally:
        env.close()
    diverged = [c for c in checks if not c.matched]
    summary = {
        "episode_id": state.episode.episode_id,
        "steps": len(state.env_steps),
        "replayed": len(checks),
        "matched": len(checks) - len(diverged),
        "diverged": [c.to_dict() for c in diverged],
        "ok": not diverged and len(checks) == len(state.env_steps),
    }
    if args.json:
        print_json(summary)
    else:
        verdict = (
            "[green]all steps match[/]" if summary["ok"] else f"[red]{len(diverged)} diverged[/]"
        )
        console.print(f"{len(checks)}/{len(state.env_steps)} steps replayed · {verdict}")
    return 0 if summary["ok"] else 1


def remove(args: argparse.Namespace) -> int:
    store = open_store(args)
    episode_id = store.resolve(args.episode)
    if args.tree:
        removed = store.remove_tree(episode_id)
    else:
        removed = [(episode_id, store.remove_episode(episode_id))]
    total = sum(n for _, n in removed)
    if args.json:
        value: dict[str, object] = {"episode_id": episode_id, "removed_events": total}
        if args.tree:
            value["removed"] = [{"episode_id": e, "removed_events": n} for e, n in removed]
        print_json(value)
    else:
        out = stdout_console()
        for removed_id, n in removed:
            out.print(f"removed episode {removed_id} ({n} events)")
        if args.tree:
            out.print(f"removed {len(removed)} episode(s), {total} events")
    return 0
