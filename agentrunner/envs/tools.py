"""The workspace's tools: their specs (a contract: recorded traces name them), the system
prompt that explains them, argument validation against the specs, and the five file and
shell tools themselves (``submit`` is the environment's own)."""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrunner.envs import paths, sandbox
from agentrunner.envs.sandbox import ToolError, cap_text, numbered, shown_path, split_lines
from agentrunner.values.environment import StepResult
from agentrunner.values.types import ToolSpec

MAX_BASH_TIMEOUT = 3600.0
MAX_COMMAND_BYTES = 128 * 1024 - 1
"""The longest command ``bash -c`` can be given (Linux refuses longer single arguments)."""
MAX_LISTED = 1000
MAX_FILE_BYTES = 32 * 1024 * 1024
"""The largest file ``read_file`` and ``str_replace`` will load."""
SKIP_LISTING = frozenset({"__pycache__", ".git"})

SYSTEM_PROMPT = """\
You are working in a code repository, shown as /workspace. Use the tools to inspect and \
change it.

- bash(command, timeout?): runs `bash -c command` in the workspace root. Each call is a \
fresh shell (cd and variables do not persist) and background processes are killed when \
the command returns. Default timeout {timeout:g} s. stdout and stderr are merged; long \
output is cut in the middle. Use relative paths in commands: /workspace in output stands \
for the workspace root.
- read_file(path, start_line?, end_line?): a file with line numbers (1-based, inclusive).
- write_file(path, content): create or overwrite a file (parent folders are created).
- str_replace(path, old_str, new_str): replace the single exact occurrence of old_str.
- list_files(path?): files under a folder (default: the whole workspace), recursively.
- submit(): run the hidden tests and end the episode. Call it when you are done.

File paths are relative to the workspace root; absolute paths and paths leading outside \
the workspace are refused. You have at most {max_steps} tool calls.
"""


_PATH = ("string", "Path relative to the workspace root.")
_TOOLS: dict[str, tuple[str, dict[str, tuple[str, str]], list[str]]] = {
    "bash": (
        "Run a bash command in the workspace root; returns its output and exit code.",
        {
            "command": ("string", "The command, run with `bash -c`."),
            "timeout": ("number", "Seconds before the command is killed."),
        },
        ["command"],
    ),
    "read_file": (
        "Show a text file with line numbers, optionally only a range of lines.",
        {
            "path": _PATH,
            "start_line": ("integer", "First line to show (1-based)."),
            "end_line": ("integer", "Last line to show (inclusive)."),
        },
        ["path"],
    ),
    "write_file": (
        "Create or overwrite a file with the given content.",
        {"path": _PATH, "content": ("string", "The complete new file content.")},
        ["path", "content"],
    ),
    "str_replace": (
        "Replace the one exact occurrence of old_str in a file with new_str.",
        {
            "path": _PATH,
            "old_str": ("string", "Text to replace; must occur exactly once."),
            "new_str": ("string", "Replacement text."),
        },
        ["path", "old_str", "new_str"],
    ),
    "list_files": (
        "List files recursively under a folder (default: the workspace root).",
        {"path": ("string", "Folder relative to the workspace root.")},
        [],
    ),
    "submit": ("Run the hidden tests and end the episode.", {}, []),
}
TOOL_SPECS: tuple[ToolSpec, ...] = tuple(
    ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
            "required": required,
            "additionalProperties": False,
        },
    )
    for name, (description, props, required) in _TOOLS.items()
)
_SPECS = {spec.name: spec for spec in TOOL_SPECS}
_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float)}
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_TYPES.update({list: "array", dict: "object", type(None): "null"})


def validate(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments checked against the tool's schema (nulls for optional ones dropped)."""
    spec = _SPECS.get(name)
    if spec is None:
        raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(_SPECS)}")
    props: dict[str, Any] = spec.parameters["properties"]
    required: list[str] = spec.parameters["required"]
    args = {k: v for k, v in arguments.items() if v is not None or k in required}
    for key in required:
        if key not in args:
            raise ToolError(f"{name}: missing required parameter {key!r}")
    for key, value in args.items():
        if key not in props:
            known = ", ".join(props) or "none"
            raise ToolError(f"{name}: unknown parameter {key!r} (parameters: {known})")
        want = props[key]["type"]
        if want == "integer" and isinstance(value, float) and value.is_integer():
            args[key] = value = int(value)
        if isinstance(value, bool) or not isinstance(value, _TYPES[want]):
            got = _JSON_TYPES.get(type(value), type(value).__name__)
            raise ToolError(f"{name}: parameter {key!r} must be {want}, got {got}")
        if isinstance(value, str) and not _encodable(value, allow_nul=key == "content"):
            raise ToolError(f"{name}: parameter {key!r} holds a NUL byte or a lone surrogate")
    return args


def _encodable(text: str, *, allow_nul: bool) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return allow_nul or "\0" not in text


class WorkspaceTools:
    """The file and shell tools, over the workspace the environment prepared."""

    bash_timeout: float
    output_cap: int
    _mask: Callable[[str], str]

    @property
    def workspace(self) -> Path:
        raise NotImplementedError

    @property
    def workdir(self) -> str | None:
        """The folder (relative to the workspace) commands and relative paths start in;
        None: the workspace itself."""
        return None

    def shell(self, command: str) -> list[str]:
        """``bash -c command``, started in :attr:`workdir`."""
        if self.workdir:
            command = f"cd -- {shlex.quote(self.workdir)} || exit 1\n{command}"
        return ["bash", "-c", command]

    def _at(self, path: str) -> str:
        """A tool's path, relative to :attr:`workdir` (absolute ones are refused later)."""
        if not self.workdir or path.startswith("/"):
            return path
        return posixpath.join(self.workdir, path)

    def _run(
        self,
        argv: list[str],
        *,
        timeout: float,
        extra_ro: tuple[tuple[Path, str], ...] = (),
        network: bool | None = None,
    ) -> sandbox.CommandResult:
        raise NotImplementedError

    def _submit(self) -> StepResult:
        raise NotImplementedError

    def tool(self, name: str) -> Callable[..., StepResult]:
        """The tool called ``name`` (names already validated against the specs)."""
        tools: dict[str, Callable[..., StepResult]] = {
            "bash": self._bash,
            "read_file": self._read_file,
            "write_file": self._write_file,
            "str_replace": self._str_replace,
            "list_files": self._list_files,
            "submit": self._submit,
        }
        return tools[name]

    def _bash(self, command: str, timeout: float | None = None) -> StepResult:
        limit = self.bash_timeout if timeout is None else float(timeout)
        if not 0 < limit <= MAX_BASH_TIMEOUT:
            raise ToolError(f"bash: timeout must be between 0 and {MAX_BASH_TIMEOUT:g} seconds")
        size = len(command.encode("utf-8"))
        if size > MAX_COMMAND_BYTES:
            raise ToolError(
                f"bash: the command is {size} bytes; the limit is {MAX_COMMAND_BYTES} bytes. "
                "Write long scripts to a file with write_file and run the file."
            )
        result = self._run(self.shell(command), timeout=limit)
        text = result.text(self._mask)
        error = None
        if result.flooded:
            error = f"output exceeded {sandbox.FLOOD_LIMIT} bytes; the process group was killed"
        elif result.timed_out:
            error = f"timed out after {limit:g} s; the process group was killed"
        status = f"[{error}]" if error else f"[exit code {result.exit_code}]"
        observation = text + ("\n" if text and not text.endswith("\n") else "") + status
        return StepResult(
            observation=observation, error=error, info={"exit_code": result.exit_code}
        )

    def _read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> StepResult:
        lines = split_lines(self._read_text(path, strict=False))
        start = 1 if start_line is None else start_line
        end = len(lines) if end_line is None else end_line
        if start < 1:
            raise ToolError(f"start_line must be 1 or more, got {start}")
        if end_line is not None and end < start:
            raise ToolError(f"end_line ({end}) is before start_line ({start})")
        if not lines:
            return StepResult(observation=f"({shown_path(path)} is empty)")
        if start > len(lines):
            msg = f"start_line {start} is past the end of {shown_path(path)} ({len(lines)} lines)"
            raise ToolError(msg)
        body = numbered(lines, start, min(end, len(lines)))
        return StepResult(observation=cap_text(self._mask(body), self.output_cap))

    def _read_text(self, path: str, *, strict: bool) -> str:
        """A workspace text file's content; ``strict`` refuses bytes that are not UTF-8."""
        data = paths.read_bytes(self.workspace, self._at(path), MAX_FILE_BYTES)
        shown = shown_path(path)
        if b"\0" in data[:8192]:
            raise ToolError(
                f"{shown} is a binary file ({len(data)} bytes); inspect it with bash "
                "(file, xxd, head -c)"
            )
        try:
            return data.decode("utf-8", "strict" if strict else "replace")
        except UnicodeDecodeError:
            raise ToolError(f"{shown} is not UTF-8 text") from None

    def _write_file(self, path: str, content: str) -> StepResult:
        data = content.encode("utf-8")
        paths.write_bytes(self.workspace, self._at(path), data)
        return StepResult(observation=f"wrote {len(data)} bytes to {shown_path(path)}")

    def _str_replace(self, path: str, old_str: str, new_str: str) -> StepResult:
        text = self._read_text(path, strict=True)
        shown = shown_path(path)
        if not old_str:
            raise ToolError("old_str must not be empty")
        count = text.count(old_str)
        if count == 0:
            raise ToolError(f"old_str not found in {shown}; it must match exactly, whitespace too")
        if count > 1:
            raise ToolError(
                f"old_str occurs {count} times in {shown}; include more context to make it unique"
            )
        at = text.index(old_str)
        new_text = text[:at] + new_str + text[at + len(old_str) :]
        paths.write_bytes(self.workspace, self._at(path), new_text.encode("utf-8"))
        lines = split_lines(new_text)
        first = text.count("\n", 0, at) + 1
        start, end = max(1, first - 3), min(len(lines), first + new_str.count("\n") + 3)
        head = f"edited {shown}: replaced 1 occurrence; lines {start}-{end} now read:\n"
        body = numbered(lines, start, end) if lines else ""
        return StepResult(observation=cap_text(self._mask(head + body), self.output_cap))

    def _list_files(self, path: str | None = None) -> StepResult:
        listed = paths.list_tree(self.workspace, self._at(path or "."), SKIP_LISTING)
        inside = f"{self.workdir}/" if self.workdir else ""
        entries = [_shown_name(e.removeprefix(inside)) for e in listed]  # as the paths it takes
        if not entries:
            return StepResult(observation="(no files)")
        shown = entries[:MAX_LISTED]
        if len(entries) > MAX_LISTED:
            shown.append(f"[... {len(entries) - MAX_LISTED} more entries not shown ...]")
        return StepResult(observation=cap_text(self._mask("\n".join(shown)), self.output_cap))


def _shown_name(name: str) -> str:
    """A listed path as text: bytes of a name that is not UTF-8 shown as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
