"""``agentrunner fanout``: fork K candidate actions x N continuations at a turn, rank them."""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.cli.model_opts import (
    add_model_options,
    given_options,
    model_options,
    recorded_model,
)
from agentrunner.cli.ray_opts import add_ray_option, ray_executor
from agentrunner.cli.render import describe_message
from agentrunner.lifecycle.fanout import score_actions
from agentrunner.lifecycle.fork import parse_action
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import UsageError
from agentrunner.values.model import Model
from agentrunner.values.safe_text import line
from providers import get_model, model_from_spec


def register(sub: argparse._SubParsersAction) -> None:
    fo = new_command(
        sub,
        "fanout",
        fanout,
        help="fork K candidate actions x N continuations at a turn and rank them",
        description="Counterfactual fan-out: at model turn K of EP, run each candidate action "
        "(--action, repeatable; or -k K sampled from the model) N times from that point (to "
        "the end, or for --horizon more turns), then rank the candidates by mean reward with "
        "the spread. The forks are recorded as one fork group, for `export --format dpo|grpo`. "
        "With --ray the forks run on a Ray cluster.",
    )
    fo.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    fo.add_argument("--turn", type=int, required=True, metavar="K", help="the model turn (1-based)")
    cands = fo.add_mutually_exclusive_group(required=True)
    cands.add_argument(
        "--action", action="append", metavar="JSON", help="a candidate action (repeatable)"
    )
    cands.add_argument("-k", type=int, metavar="K", help="sample K candidates from the model")
    fo.add_argument(
        "-n", type=int, default=1, metavar="N", help="continuations per candidate (default 1)"
    )
    fo.add_argument(
        "--horizon",
        type=int,
        metavar="H",
        help="model turns each continuation runs after the fork point (default: to the end)",
    )
    fo.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="forks run at once (default 4)"
    )
    fo.add_argument("--model", help="sample with another model (PROVIDER:MODEL)")
    add_ray_option(fo)
    add_model_options(fo)


def fanout(args: argparse.Namespace) -> int:
    on_ray, address = ray_executor(args)
    actions = None
    if args.action:
        try:
            actions = [json.loads(a) for a in args.action]
        except json.JSONDecodeError as exc:
            raise UsageError(f"--action is not valid JSON: {exc.msg} at char {exc.pos}") from None
    store = open_store(args)
    model_fn: Model | None = None
    if args.model:
        if given_options(args):
            model_fn = get_model(args.model, **model_options(args, args.model))
    else:
        model_fn = recorded_model(store, store.resolve(args.episode), args)
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
        # On Ray, a worker builds the model again from its spec (its options included).
        model_fn=None if on_ray else model_fn,
        model_factory=functools.partial(model_from_spec, model_fn.spec())
        if on_ray and model_fn is not None
        else None,
        executor="ray" if on_ray else "threads",
        ray_address=address,
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    out = stdout_console()
    short = fmt.unique_prefixes(store.episode_ids())
    parent = short.get(result.parent_episode_id, result.parent_episode_id)
    out.print(f"fork group [bold]{result.group_id}[/] at turn {result.turn} of {parent}")
    for rank, c in enumerate(result.ranked, 1):
        rewards = ", ".join(f"{r:g}" for r in c.rewards)
        out.print(
            f"{rank:>2}. candidate {c.candidate} · mean {c.mean:.3f} ± {c.spread:.3f} · "
            f"rewards {rewards or '-'}"
        )
        out.print(line("    action: ", _describe_action(c.action, result.turn)))
        forks = ", ".join(short.get(e, e) for e in c.episodes)
        out.print(f"    forks:  {forks or '-'}")
    return 0


def _describe_action(action: Any, turn: int) -> str:
    """A candidate action in one line: its tool calls and text, not cut into JSON."""
    try:
        return describe_message(parse_action(action, turn), limit=100)
    except UsageError:
        return json.dumps(action, ensure_ascii=False)
