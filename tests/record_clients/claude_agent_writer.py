"""A Claude Agent SDK program as its users write one: ``query`` with options allowing Bash in
the working folder, no permission prompts. Its endpoint is what the SDK's Claude Code reads
(the environment, or ``env`` in ``~/.claude/settings.json``). Run by the agents' own venv
(``tests/real_clients.py``), never by the project's."""

import asyncio
import sys
from pathlib import Path

from claude_agent_sdk import (  # type: ignore[import-not-found]
    ClaudeAgentOptions,
    ResultMessage,
    query,
)


async def main(task: str) -> int:
    options = ClaudeAgentOptions(
        cwd=str(Path.cwd()), allowed_tools=["Bash"], permission_mode="bypassPermissions"
    )
    status = 1
    async for message in query(prompt=task, options=options):
        if isinstance(message, ResultMessage):
            print(message.result)
            status = 1 if message.is_error else 0
    return status


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
