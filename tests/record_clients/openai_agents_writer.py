"""An OpenAI Agents SDK agent as its users write one: a function tool that writes a file,
the default (Responses) model client, streamed, its endpoint taken from ``OPENAI_BASE_URL``.
Run by the agents' own venv (``tests/real_clients.py``), never by the project's."""

import asyncio
import sys
from pathlib import Path

from agents import Agent, Runner, function_tool  # type: ignore[import-not-found]


@function_tool
def write_file(path: str, content: str) -> str:
    """Write ``content`` to the file ``path`` in the working folder."""
    Path(path).write_text(content, encoding="utf-8")
    return f"wrote {len(content)} characters to {path}"


async def main(task: str) -> None:
    agent = Agent(
        name="writer",
        instructions="You change files in the working folder with your tools.",
        model="gpt-4.1",
        tools=[write_file],
    )
    result = Runner.run_streamed(agent, task)
    async for _ in result.stream_events():
        pass
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
