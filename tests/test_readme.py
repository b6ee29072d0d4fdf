"""The README as a user reads it: its contents resolve, the first day fits in its first 150
lines, every command it prints is one the command line takes, and its Python example runs."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.cli.main import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SYNOPSIS = re.compile(r"[\[\]|]|\.\.\.|\bM\b")


def text() -> str:
    return README.read_text(encoding="utf-8")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the command line has no subcommands")


def commands_in_blocks() -> list[str]:
    """Each `agentrunner ...` line of the shell blocks, continuation lines joined."""
    found = []
    for lang, body in FENCE.findall(text()):
        if lang not in ("", "bash", "sh", "shell", "console"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ").removeprefix(".venv/bin/")
            if line.startswith("agentrunner "):
                found.append(line)
    return found


def commands_in_text() -> list[str]:
    """Each `` `agentrunner SUBCOMMAND ...` `` span of the prose and tables."""
    prose = FENCE.sub("", text())
    return [m for m in re.findall(r"`(?:\.venv/bin/)?(agentrunner [a-z][^`]*)`", prose)]


def words(command: str) -> list[str]:
    return shlex.split(command.replace("\\|", "|"), comments=True)[1:]


def test_every_link_in_the_contents_names_a_heading() -> None:
    headings = {anchor(h) for h in re.findall(r"^#{2,4} (.+)$", text(), re.M)}
    contents = text().split("## Contents", 1)[1].split("\n## ", 1)[0]
    links = re.findall(r"\]\(#([^)]+)\)", contents)
    assert links
    assert [link for link in links if link not in headings] == []


def test_what_a_user_needs_on_the_first_day_fits_in_the_first_150_lines() -> None:
    lines = text().splitlines()
    first_day = lines.index("## First day")
    reference = next(i for i, line in enumerate(lines) if i > first_day and line.startswith("## "))
    assert reference <= 150
    day = "\n".join(lines[first_day:reference])
    for topic in (
        "### Install",
        "--repo",
        "ls",
        "show",
        "tui",
        "resume",
        "fork",
        "record",
        "| command |",
    ):
        assert topic in day


def test_every_command_in_a_code_block_is_one_the_command_line_takes() -> None:
    parser = build_parser()
    checked = 0
    for command in commands_in_blocks():
        argv = words(command)
        if SYNOPSIS.search(command):
            assert_options_exist(command)
            continue
        try:
            parser.parse_args(argv)
        except SystemExit as exit_:
            pytest.fail(f"the README's `{command}` is refused by the command line ({exit_.code})")
        checked += 1
    assert checked >= 30


def test_every_command_the_text_names_has_the_options_it_shows() -> None:
    spans = commands_in_text()
    assert len(spans) >= 30
    for command in spans:
        assert_options_exist(command)


def assert_options_exist(command: str) -> None:
    known = subcommands()
    argv = [w for w in re.split(r"[\s\[\]|()]+", command.replace("\\|", "|"))[1:] if w]
    while argv and argv[0] in ("--db", "--json", "-v"):  # global options before the command
        argv = argv[2:] if argv[0] == "--db" else argv[1:]
    assert argv and argv[0] in known, (
        f"the README names `agentrunner {argv[0]}`, which is no command"
    )
    parser, name = known[argv[0]], argv[0]
    if "--" in argv:
        argv = argv[: argv.index("--")]
    nested = _subcommands_of(parser)
    if len(argv) > 1 and argv[1] in nested:  # `agentrunner db migrate ...`
        parser, name, argv = nested[argv[1]], f"{name} {argv[1]}", argv[1:]
    options = set(parser._option_string_actions)
    for word in argv[1:]:
        if word.startswith("-") and word not in ("-", "--"):
            flag = word.split("=", 1)[0].rstrip(",.")
            assert flag in options, f"`{command}`: `agentrunner {name}` has no option {flag}"


def _subcommands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_the_python_example_runs_as_printed(tmp_path: Path) -> None:
    section = text().split("\n## Python\n", 1)[1]
    example = FENCE.search(section)
    assert example is not None and example.group(1) == "python"
    env = dict(os.environ, AGENTRUNNER_SCRIPTED_PACE="0", AGENTRUNNER_SANDBOX="process")
    env["PYTHONPATH"] = str(README.parent)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            example.group(2) + "\nprint(rollout.stop_reason, rollout.total_reward)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["done", "1.0"]
