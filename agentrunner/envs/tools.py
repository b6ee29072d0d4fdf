"""The workspace's tools: their specs (a contract: recorded traces name them), the system
prompt that explains them, and argument validation against the specs."""

from __future__ import annotations

from typing import Any

from agentrunner.envs.sandbox import ToolError
from agentrunner.types import ToolSpec

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
