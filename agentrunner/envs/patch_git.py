"""Running git isolated from the user's configuration, for the patch module.

No system or global config, no global attributes, no colour, external diff or textconv, no
``GIT_*`` variable of the caller's. In a target checkout, whose own config is whoever made it,
:func:`inert_config` switches off every external filter driver that config defines
(``filter.<name>.clean/smudge/process``) and points hooks nowhere, as the repository copy
does: ``git apply`` would otherwise run those programs on the files it reads and writes.
Built-in conversions (``text``, ``eol``, ``ident``) still apply.

The one exception is :func:`user_config_path`, which reads one setting of the user's own
config (system, global and a repository's) the way git in that repository would.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from agentrunner.values.errors import EnvironmentFailure

_ISOLATED = (
    *("-c", "core.quotePath=true"),
    *("-c", f"core.attributesFile={os.devnull}"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "diff.noprefix=false"),
    *("-c", "diff.mnemonicPrefix=false"),
    *("-c", "color.ui=never"),
)
_FILTER_OFF = {"clean": "", "smudge": "", "process": "", "required": "false"}
_TARGET_CONFIG = {"core.hooksPath": os.devnull, "core.fsmonitor": "false"}
_USER_CONFIG_VARIABLES = frozenset(
    {"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"}
)


def inert_config(target: Path) -> dict[str, str]:
    """Config under which git runs no program the target's own config names.

    Every filter driver the target's config (includes too) defines gets empty commands and
    ``required=false``, which git reads as "no filter"; keys go through ``GIT_CONFIG_KEY_*``
    so a driver name holding ``=`` cannot split them.
    """
    listing = git(["config", "-z", "--name-only", "--get-regexp", r"^filter\."], cwd=target)
    names = listing.stdout.decode("utf-8", "surrogateescape").split("\0")
    drivers = {key[len("filter.") : key.rindex(".")] for key in names if key.count(".") >= 2}
    off = {f"filter.{d}.{k}": v for d in sorted(drivers) for k, v in _FILTER_OFF.items()}
    return {**_TARGET_CONFIG, **off}


def user_config_path(key: str, *, cwd: Path | None) -> str | None:
    """The user's setting ``key``, a path (``~`` expanded, relative to ``cwd``), as git in the
    repository at ``cwd`` (or outside any, for None) reads it: system, global (the caller's
    ``GIT_CONFIG_GLOBAL`` and ``GIT_CONFIG_SYSTEM`` too) and the repository's own config.
    None when it is not set. Reading config runs no program."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") or k in _USER_CONFIG_VARIABLES
    }
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    try:
        found = subprocess.run(
            ["git", "config", "--path", "--get", key],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        raise EnvironmentFailure(f"cannot run git: {exc}") from exc
    value = os.fsdecode(found.stdout.rstrip(b"\n"))
    if found.returncode != 0 or not value:
        return None
    return os.path.join(cwd, value) if cwd is not None else value


def git(
    args: list[str],
    *,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    stdin: bytes | None = None,
    config: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            _command(args, git_dir),
            cwd=cwd,
            env=_environment(cwd, config or {}),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        raise EnvironmentFailure(f"cannot run git: {exc}") from exc


def spawn_git(args: list[str], *, git_dir: Path, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            _command(args, git_dir),
            env=_environment(None, {}),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    except OSError as exc:
        raise EnvironmentFailure(f"cannot run git: {exc}") from exc


def _command(args: list[str], git_dir: Path | None) -> list[str]:
    where = [f"--git-dir={git_dir}"] if git_dir is not None else []
    return ["git", *_ISOLATED, *where, *args]


def _environment(cwd: Path | None, config: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without any GIT_* or COLUMNS, plus the isolation settings
    and ``config`` (as ``GIT_CONFIG_KEY_*``/``GIT_CONFIG_VALUE_*``, above every file).

    With ``cwd`` (a target folder), repository discovery stops at ``cwd`` itself: a plain
    folder inside some other repository is treated as a plain folder.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "COLUMNS"}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        GIT_CONFIG_COUNT=str(len(config)),
    )
    for i, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    if cwd is not None:
        env["GIT_CEILING_DIRECTORIES"] = str(cwd.resolve().parent)
    return env


def checked(
    result: subprocess.CompletedProcess[bytes], what: str
) -> subprocess.CompletedProcess[bytes]:
    if result.returncode != 0:
        raise EnvironmentFailure(f"{what} failed: {first_line(result.stderr)}")
    return result


def first_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else "(no message)"
