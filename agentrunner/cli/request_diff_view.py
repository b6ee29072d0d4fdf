"""``agentrunner show EP --request-diff K``: a request diff printed for people (or as JSON).

Everything shown from the store is recorded text and goes through ``safe_text``: a system
prompt or message that holds escape sequences prints them visibly.
"""

from __future__ import annotations

import argparse
import difflib
import json
from typing import Any

from rich.text import Text

from agentrunner.cli.common import print_json, stdout_console
from agentrunner.formatting import plural
from agentrunner.request_diff import RequestDiff, brief, diff, pick
from agentrunner.safe_text import one_line_visible, plain
from agentrunner.store import TraceStore


def show_request_diff(store: TraceStore, episode_id: str, args: argparse.Namespace) -> int:
    before, after = pick(store, episode_id, args.request_diff)
    found = diff(before, after)
    if args.json:
        print_json({"episode_id": episode_id, **found.to_dict()})
        return 0
    for line in render(found, verbose=args.verbose):
        stdout_console().print(line)
    return 0


def _value(value: Any) -> str:
    return one_line_visible(json.dumps(value, ensure_ascii=False))


def render(found: RequestDiff, *, verbose: bool = False) -> list[Text]:
    a, b = found.before, found.after
    lines = [Text(f"call {b.turn} ({b.call_id}) against call {a.turn} ({a.call_id})", "bold")]
    if found.unchanged:
        lines.append(Text("  the two requests are the same"))
        return lines
    if found.model:
        lines.append(plain(f"  model     {one_line_visible(found.model[0])} → "
                           f"{one_line_visible(found.model[1])}"))  # fmt: skip
    for key, value in found.params_added.items():
        lines.append(plain(f"  param   + {one_line_visible(key)} = {_value(value)}"))
    for key, value in found.params_removed.items():
        lines.append(plain(f"  param   - {one_line_visible(key)} (was {_value(value)})"))
    for key, (old, new) in found.params_changed.items():
        lines.append(plain(f"  param   ~ {one_line_visible(key)}: {_value(old)} → {_value(new)}"))
    if found.system:
        old, new = found.system
        changed = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1))
        lines.append(Text(f"  system    changed ({plural(len(changed), 'diff line')})"))
        for row in changed[2:] if verbose else changed[2:12]:
            lines.append(plain(f"            {one_line_visible(row)}"))
    for label, names in (
        ("+", found.tools_added),
        ("-", found.tools_removed),
        ("~", found.tools_changed),
    ):
        if names:
            shown = ", ".join(one_line_visible(n) for n in names)
            lines.append(plain(f"  tools   {label} {shown}"))
    lines.append(
        Text(
            f"  messages  {found.kept} kept, "
            + ", ".join(
                f"{sum(c.kind == kind for c in found.messages)} {kind}"
                for kind in ("added", "removed", "changed")
            )
        )
    )
    limit = 10_000 if verbose else 200
    for change in found.messages:
        sign = {"added": "+", "removed": "-", "changed": "~"}[change.kind]
        message = change.after or change.before
        assert message is not None
        text = brief(message, limit)
        lines.append(
            plain(f"    {sign} [{change.index}] {message.role:<9} {one_line_visible(text)}")
        )
        if change.kind == "changed" and change.before is not None:
            was = brief(change.before, limit)
            lines.append(plain(f"        was {one_line_visible(was)}"))
    return lines
