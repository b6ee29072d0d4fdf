"""``agentrunner resume``, ``fork``, ``replay`` and ``rm``: continue, branch, check, remove."""

from __future__ import annotations

import argparse
import json

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.render import EventRenderer
from agentrunner.cli.run_cmd import report, rollout_exit_code
from agentrunner.envs.factory import env_from_spec
from agentrunner.errors import AgentRunnerError, UsageError
from agentrunner.fork import fork_episode
from agentrunner.restore import StepCheck, replay_steps
from agentrunner.resume import resume_episode
from agentrunner.runner import MAX_TURNS_LIMIT, Rollout
from agentrunner.state import rebuild
from agentrunner.store import TraceStore

RESUMABLE_STATUSES = ("interrupted", "cancelled", "failed")


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "resume",
        resume,
        help="continue an interrupted, cancelled or failed episode",
        description="Continue an episode that was cancelled (Ctrl-C, a cancel request), "
        "interrupted (its process died) or failed on a retryable error, as a new attempt of "
        "the same episode. The history is rebuilt from the store; the environment from its "
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

    f = new_command(
        sub,
        "fork",
        fork,
        help="branch an episode at a model turn",
        description="Create a fork of EP at model turn K: a new episode that inherits EP's "
        "events up to just before that turn (nothing is copied; EP is never changed). The fork "
        "re-samples turn K (with --model, another model; with --message, after an injected "
        "user message) or replaces turn K's output with --action. Without --run the fork waits "
        "(status interrupted) until `agentrunner resume FORK`.",
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

    fo = new_command(
        sub,
        "fanout",
        fanout,
        help="fork K candidate actions x N continuations at a turn and rank them",
        description="Counterfactual fan-out: at model turn K of EP, run each candidate action "
        "(--action, repeatable; or -k K sampled from the model) N times from that point (to "
        "the end, or for --horizon more turns), then rank the candidates by mean reward with "
        "the spread. The forks are recorded as one fork group, for `export --format dpo|grpo`.",
    )
    fo.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    fo.add_argument("--turn", type=int, required=True, metavar="K", help="the model turn (1-based)")
    cands = fo.add_mutually_exclusive_group(required=True)
    cands.add_argument(
        "--action", action="append", metavar="JSON", help="a candidate action (repeatable)"
    )
    cands.add_argument("-k", type=int, metavar="K", help="sample K candidates from the model")
    fo.add_argument("-n", type=int, default=1, metavar="N", help="continuations per candidate")
    fo.add_argument("--horizon", type=int, metavar="H", help="turns to run after the fork point")
    fo.add_argument("--concurrency", type=int, default=4, metavar="N", help="forks at once")
    fo.add_argument("--model", help="sample with another model (PROVIDER:MODEL)")

    rm = new_command(
        sub,
        "rm",
        remove,
        help="remove an episode no fork depends on",
        description="Remove an episode and its events from the store. Refused while a fork "
        "depends on it or while it runs. Removal is always explicit, never automatic.",
    )
    rm.add_argument("episode", metavar="EP", help="episode id or unique prefix")


def _resume_one(store: TraceStore, episode_id: str, args: argparse.Namespace) -> Rollout:
    model_fn = None
    if args.model:
        from providers import get_model

        model_fn = get_model(args.model)
    if args.max_turns is not None and not 1 <= args.max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"--max-turns must be between 1 and {MAX_TURNS_LIMIT}")
    return resume_episode(
        store,
        episode_id,
        model_fn=model_fn,
        accept_divergence=args.accept_divergence,
        max_turns=args.max_turns,
        observer=EventRenderer(stderr_console(), verbose=args.verbose),
    )


def resume(args: argparse.Namespace) -> int:
    store = open_store(args)
    if args.all == bool(args.episode):
        raise UsageError("give an episode id or --all (not both)")
    if args.episode:
        return report(args, _resume_one(store, args.episode, args))
    targets = [e.episode_id for e in store.list_episodes() if e.status in RESUMABLE_STATUSES]
    rollouts: list[Rollout] = []
    skipped: list[dict[str, str]] = []
    for i, episode_id in enumerate(reversed(targets), 1):
        stderr_console().print(f"[bold]resume {i}/{len(targets)}[/] {episode_id}")
        try:
            rollouts.append(_resume_one(store, episode_id, args))
        except AgentRunnerError as exc:  # e.g. a divergence or a non-retryable failure: go on
            stderr_console().print(f"[yellow]skipped[/] {episode_id}: {exc}")
            skipped.append({"episode_id": episode_id, "reason": str(exc)})
            continue
        if rollouts[-1].status == "cancelled":  # Ctrl-C: stop here, not just this episode
            stderr_console().print("[yellow]cancelled[/]: the remaining episodes were not resumed")
            break
    if args.json:
        print_json({"resumed": [r.to_dict() for r in rollouts], "skipped": skipped})
    else:
        stdout_console().print(f"resumed {len(rollouts)} episode(s), skipped {len(skipped)}")
    codes = [rollout_exit_code(r) for r in rollouts]
    return max(codes, default=0)


def fork(args: argparse.Namespace) -> int:
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
            rollouts.append(_resume_one(store, fork_id, _run_args(args)))
            if rollouts[-1].status == "cancelled":  # Ctrl-C: leave the other forks unrun
                break
    if args.json:
        print_json({"forks": forks, "rollouts": [r.to_dict() for r in rollouts]})
    else:
        out = stdout_console()
        for fork_id in forks:
            out.print(
                f"fork [bold]{fork_id}[/] of {store.resolve(args.episode)} at turn {args.turn}"
            )
        for r in rollouts:
            out.print(f"  {r.episode_id[:10]} {r.status} · reward {r.total_reward:g}")
        if not args.run:
            out.print("run it with: agentrunner resume FORK")
    return max((rollout_exit_code(r) for r in rollouts), default=0)


def _run_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(
        model=None, accept_divergence=False, max_turns=None, verbose=args.verbose
    )


def fanout(args: argparse.Namespace) -> int:
    from agentrunner.fanout import score_actions

    actions = None
    if args.action:
        try:
            actions = [json.loads(a) for a in args.action]
        except json.JSONDecodeError as exc:
            raise UsageError(f"--action is not valid JSON: {exc.msg} at char {exc.pos}") from None
    store = open_store(args)
    stderr_console().print("[bold]fan-out[/]: running the forks…")
    result = score_actions(
        store,
        args.episode,
        turn=args.turn,
        actions=actions,
        k=args.k,
        n=args.n,
        horizon=args.horizon,
        concurrency=args.concurrency,
        model=args.model,
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    out = stdout_console()
    out.print(
        f"fork group [bold]{result.group_id}[/] at turn {result.turn} of {result.parent_episode_id}"
    )
    for rank, c in enumerate(result.ranked, 1):
        action = json.dumps(c.action, ensure_ascii=False)
        action = action if len(action) <= 70 else action[:69] + "…"
        rewards = ", ".join(f"{r:g}" for r in c.rewards)
        out.print(f"{rank:>2}. mean {c.mean:.3f} ± {c.spread:.3f} [{rewards}]  {action}")
    return 0


def replay(args: argparse.Namespace) -> int:
    store = open_store(args)
    state = rebuild(store, args.episode)
    console = stderr_console() if args.json else stdout_console()

    def show(check: StepCheck) -> None:
        mark = "[green]match[/]" if check.matched else "[bold red]DIVERGED[/]"
        console.print(f"step {check.step:>3} · seq {check.seq:>5} · {check.name:<12} {mark}")
        if not check.matched and args.verify:
            d = check.to_dict()
            console.print(f"    expected: {d['expected']!r} (reward {check.expected_reward})")
            console.print(f"    got:      {d['got']!r} (reward {check.got_reward})")

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
    removed = store.remove_episode(episode_id)
    if args.json:
        print_json({"episode_id": episode_id, "removed_events": removed})
    else:
        stdout_console().print(f"removed episode {episode_id} ({removed} events)")
    return 0
