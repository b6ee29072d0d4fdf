"""``agentrunner verify``: check that recorded episodes reproduce their reward, or score them
with rules, an LLM judge or a test command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.values import formatting as fmt
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Status
from agentrunner.values.safe_text import literal
from agentrunner.verifiers import (
    CompositeVerifier,
    JudgeVerifier,
    RuleVerifier,
    VerificationResult,
    Verifier,
    latest_verifications,
    verify_episode,
)
from agentrunner.verifiers.command import TestVerifier
from agentrunner.verifiers.reward import REWARD_VERIFIER, RewardVerifier
from agentrunner.verifiers.rules import RULE_FORMS

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

SCRIPTED_JUDGE_HELP = (
    "A scripted judge (offline and deterministic, for tests and CI) is --judge "
    "scripted:judge.json, where judge.json is a script for the scripted model, e.g. "
    '{"episodes": [{"match": "", "turns": [{"text": "Fixed and tested. SCORE: 0.9"}]}]}: '
    "the judge's prompt is the rubric followed by the transcript, the first episode whose "
    "match text occurs in it answers with its first turn, and the last SCORE: x line of that "
    "answer is the score (x from 0 to 1, or x/10). Match on words of the rubric or of the "
    "task to give episodes different scores; a script with no SCORE line fails every episode "
    "(scripted:demo is the demo agent, not a judge)."
)
_RULE_HELP = (
    "a condition over the trajectory (repeatable): tool:NAME, tool:NAME:KEY~REGEX, "
    "tool:NAME:KEY=VALUE, file:GLOB (written by write_file/str_replace), command:REGEX "
    "(a bash command run), reward>=X, turns<=N, stop:REASON[,REASON], not:RULE"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "verify",
        verify,
        help="check recorded rewards; score episodes (rules, LLM judge, tests)",
        description="Without a verifier option: check that each episode's recorded reward "
        "follows from its recorded change (its own check, the task's hidden tests or test "
        "command, runs again on a clean copy of what `diff` shows, restored from the store "
        "alone); the result is stored as 'reward', and `ls`, `show` and `report` flag an "
        "episode whose reward was not reproduced. "
        "Or score recorded episodes after the fact with rule-based conditions over "
        "the trajectory (--rule), an LLM judge grading the transcript against a rubric "
        "(--judge MODEL --rubric TEXT), or both (combined with --combine), or a test command "
        "run on a clean copy of its recorded change (--test CMD). Each result is "
        "stored with the episode (the verifications table) under the verifier's name and "
        "shown by `agentrunner show` and `agentrunner ls`; `agentrunner export --verifier "
        "NAME` filters by it. Example: agentrunner verify --all --rule 'tool:bash:command~"
        "unittest' --rule 'file:*.py' --rule 'reward>=1' --name fixed-and-tested. "
        f"{SCRIPTED_JUDGE_HELP}",
    )
    p.add_argument("episodes", nargs="*", metavar="EP", help="episode ids or unique prefixes")
    p.add_argument(
        "--all", action="store_true", help="every episode that is not running (see --status)"
    )
    p.add_argument(
        "--status",
        action="append",
        metavar="S",
        help="with --all: only episodes with this status (repeatable; default: all but running)",
    )
    rules = p.add_argument_group("rules")
    rules.add_argument("--rule", action="append", metavar="RULE", help=_RULE_HELP)
    rules.add_argument(
        "--any-rule",
        action="store_true",
        help="the rules pass when any one holds (default: all must hold); the score is "
        "always the fraction that hold",
    )
    test = p.add_argument_group("test command (workspace episodes)")
    test.add_argument(
        "--test",
        metavar="CMD",
        help="run CMD in a sandbox on a clean copy of the episode's recorded change (what "
        "`diff` shows, restored from the store): score 1 on exit status 0",
    )
    test.add_argument(
        "--test-report",
        metavar="PATH",
        help="JUnit XML file CMD writes (relative to the workspace): score = fraction passed",
    )
    judge = p.add_argument_group("LLM judge")
    judge.add_argument(
        "--judge",
        metavar="MODEL",
        help="PROVIDER:MODEL of the judge (e.g. openai:gpt-5); offline: scripted:PATH.json, "
        "a script for the scripted model that answers a line SCORE: x (see above)",
    )
    judge.add_argument("--rubric", metavar="TEXT", help="what a good episode does")
    judge.add_argument("--rubric-file", type=Path, metavar="PATH", help="read the rubric here")
    judge.add_argument("--base-url", metavar="URL", help="the judge provider's base URL")
    p.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        metavar="X",
        help="pass mark for the judge's score and for --combine mean (default 0.5)",
    )
    p.add_argument(
        "--combine",
        choices=("all", "any", "mean"),
        default="all",
        help="with rules and a judge: pass when both pass (all, default), either passes "
        "(any), or their mean score reaches --threshold (mean)",
    )
    p.add_argument(
        "--name",
        help="store the results under this verifier name (default: rules, judge:MODEL or "
        "composite); give one per distinct check, since ls shows the latest per name",
    )
    p.add_argument(
        "--skip-verified",
        action="store_true",
        help="skip episodes that already have a result under this verifier name",
    )
    p.add_argument(
        "--require-all",
        action="store_true",
        help="exit 1 unless every verified episode passed (for CI gates)",
    )


def build_verifier(args: argparse.Namespace) -> Verifier:
    """The verifier the flags describe."""
    if args.test_report and not args.test:
        raise UsageError("--test-report needs --test CMD")
    if args.test:
        if args.rule or args.judge:
            raise UsageError("--test runs on its own; verify rules or a judge separately")
        return TestVerifier(args.test, report=args.test_report, name=args.name or "test")
    rule_verifier = None
    if args.rule:
        rule_verifier = RuleVerifier(
            args.rule, match="any" if args.any_rule else "all", name="rules"
        )
    judge_verifier = None
    if args.judge:
        rubric = args.rubric
        if args.rubric_file is not None:
            try:
                rubric = args.rubric_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot read --rubric-file: {exc}") from None
        if not rubric:
            raise UsageError("--judge needs --rubric TEXT or --rubric-file PATH")
        options = {"base_url": args.base_url} if args.base_url else {}
        if args.judge.startswith("scripted:") and args.base_url:
            stderr_console().print(
                "[yellow]warning:[/] --base-url is ignored by the scripted model"
            )
            options = {}
        judge_verifier = JudgeVerifier(
            args.judge, rubric, threshold=args.threshold, model_options=options
        )
    elif args.rubric or args.rubric_file:
        raise UsageError("--rubric needs --judge MODEL")
    if rule_verifier and judge_verifier:
        return CompositeVerifier(
            [rule_verifier, judge_verifier],
            mode=args.combine,
            threshold=args.threshold,
            name=args.name or "composite",
        )
    single: Verifier | None = rule_verifier or judge_verifier
    if single is None:
        if args.name or args.any_rule:
            raise UsageError(
                f"give --rule RULE (rules look like: {RULE_FORMS}), --judge MODEL or --test CMD;"
                f" without them verify checks the recorded reward (stored as {REWARD_VERIFIER!r})"
            )
        return RewardVerifier()
    if args.name:
        single.name = args.name
    return single


def _targets(store: StoreBackend, args: argparse.Namespace, name: str) -> list[str]:
    if args.all == bool(args.episodes):
        raise UsageError("give episode ids or --all (not both)")
    if args.episodes:
        ids = [store.resolve(e) for e in args.episodes]
    else:
        episodes = store.list_episodes()
        ids = [
            e.episode_id
            for e in reversed(episodes)  # oldest first
            if (e.status in args.status if args.status else e.status != Status.RUNNING)
        ]
    if args.skip_verified:
        done = latest_verifications(store, ids)
        ids = [i for i in ids if not any(r.verifier == name for r in done.get(i, []))]
    return ids


def _why(result: VerificationResult) -> str:
    details = result.details
    if "error" in details:
        return str(details["error"])
    if "checks" in details:
        failed = [c for c in details["checks"] if not c["passed"]]
        shown = failed or details["checks"]
        return "; ".join(f"{c['rule']}: {c['evidence']}" for c in shown[:3])
    if "recorded" in details and "reproduced" in details:
        return f"recorded reward {details['recorded']:g}, reproduced {details['reproduced']:g}"
    if "note" in details:
        return str(details["note"])
    if "command" in details and "exit_code" in details:
        return f"exit code {details['exit_code']}" + (
            f", {details['passed']}/{details['total']} test cases" if details.get("total") else ""
        )
    if "children" in details:
        return " · ".join(
            f"{c['verifier']} {'pass' if c['passed'] else 'fail'}"
            + (f" {c['score']:.2f}" if c["score"] is not None else "")
            for c in details["children"]
        )
    answer = str(details.get("answer", "")).strip().splitlines()
    return answer[-1] if answer else ""


def verify(args: argparse.Namespace) -> int:
    verifier = build_verifier(args)
    store = open_store(args)
    targets = _targets(store, args, verifier.name)
    results: list[VerificationResult] = []
    for episode_id in targets:
        results.append(verify_episode(store, episode_id, verifier))
    failed = [r for r in results if not r.passed]
    if args.json:
        print_json(
            {
                "verifier": verifier.name,
                "spec": verifier.spec(),
                "verified": len(results),
                "passed": len(results) - len(failed),
                "failed": len(failed),
                "results": [r.to_dict() for r in results],
            }
        )
    else:
        _print_table(results, fmt.unique_prefixes(store.episode_ids()))
    err = stderr_console()
    if not results:
        err.print("no episodes to verify")
    else:
        err.print(
            f"{verifier.name}: {len(results) - len(failed)} of {len(results)} episode(s) passed"
        )
    return 1 if args.require_all and failed else 0


def _print_table(results: list[VerificationResult], short: dict[str, str]) -> None:
    if not results:
        return
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    for col in ("episode", "verifier", "result", "score", "why"):
        table.add_column(col, overflow="fold" if col == "why" else "ellipsis")
    for r in results:
        table.add_row(
            short.get(r.episode_id, r.episode_id),
            literal(r.verifier),
            "[green]pass[/]" if r.passed else "[red]fail[/]",
            "-" if r.score is None else f"{r.score:.2f}",
            literal(_why(r)),
        )
    stdout_console().print(table)
