"""Real OpenHands conversations for the importer's tests, persisted at test time by the real
OpenHands SDK (``openhands-sdk``) running offline against a loopback OpenAI-compatible server
that replays scripted answers.

The SDK is not a dependency of agentrunner and needs Python 3.12 or newer, so it lives in a venv
of its own outside the repository, ``$AGENTRUNNER_OPENHANDS_VENV`` (default
``~/.cache/agentrunner-openhands/venv``), built when missing (``.ci/run`` builds it first) with
the first Python 3.12+ found (``$AGENTRUNNER_OPENHANDS_PYTHON``, ``python3.12``/``python3.13`` on
the PATH, or pyenv's); a test that needs it is skipped with the reason when it cannot be had.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from sse_replay import Reply

OPENHANDS_VENV = Path(
    os.environ.get("AGENTRUNNER_OPENHANDS_VENV")
    or Path.home() / ".cache" / "agentrunner-openhands" / "venv"
)
OPENHANDS = "openhands-sdk==1.58.2"
PROGRAM = """
import sys
import uuid

from pydantic import SecretStr

from openhands.sdk import LLM, Agent, Conversation

base_url, persistence, workspace, conversation_id, pause, *prompts = sys.argv[1:]
llm = LLM(model="openai/m", base_url=base_url, api_key=SecretStr("sk-openhands-0123456789"),
          num_retries=0, usage_id="agent")
conversation = Conversation(
    agent=Agent(llm=llm, tools=[]), workspace=workspace, persistence_dir=persistence,
    conversation_id=uuid.UUID(conversation_id), visualizer=None, delete_on_close=False,
)
if pause == "pause":
    conversation.pause()
for prompt in prompts:
    conversation.send_message(prompt)
    conversation.run()
"""


def _python() -> str | None:
    """A Python 3.12 or newer to build the venv with (the SDK needs one)."""
    named = os.environ.get("AGENTRUNNER_OPENHANDS_PYTHON")
    found = [named] if named else []
    found += [p for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found += sorted(str(p) for p in pyenv.glob("3.1[2-9]*/bin/python"))
    for python in found:
        check = [python, "-c", "import sys, venv; assert sys.version_info >= (3, 12)"]
        if subprocess.run(check, capture_output=True).returncode == 0:
            return python
    return None


@functools.cache  # one build attempt per run: a failed install is not retried for every test
def prepare_openhands() -> str | None:
    """Builds the SDK's venv when it is missing; why it cannot be had, or None."""
    path = str(OPENHANDS_VENV)
    python = OPENHANDS_VENV / "bin" / "python"
    check = [str(python), "-c", "import openhands.sdk"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return None
    builder = _python()
    if builder is None:
        return "no Python 3.12 or newer to build the OpenHands SDK's venv with"
    try:
        for command in (
            [builder, "-m", "venv", "--clear", path],
            [str(python), "-m", "pip", "install", "-q", OPENHANDS],
        ):
            subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(path, ignore_errors=True)
        return f"cannot build the OpenHands SDK's venv at {path}: {exc.stderr.strip()[-300:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(path, ignore_errors=True)
        return f"cannot build the OpenHands SDK's venv at {path}: {exc}"
    return None


def answer(number: int, message: dict[str, Any], finish: str, *, usage: bool = True) -> Reply:
    """A chat completion (not streamed: the SDK's default), with usage or without."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{number}", "object": "chat.completion", "created": 1700000000,
        "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }  # fmt: skip
    if usage:
        body["usage"] = {"prompt_tokens": 100 + number, "completion_tokens": 10 + number,
                         "total_tokens": 110 + 2 * number}  # fmt: skip
    return Reply(body=body)


def tool_calls(number: int, *calls: tuple[str, dict[str, Any]]) -> Reply:
    """An answer with text, reasoning and the tool calls given (name, arguments)."""
    message = {
        "role": "assistant", "content": "Let me think.", "reasoning_content": "Short notes.",
        "tool_calls": [
            {"id": f"call_{number}_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }  # fmt: skip
    return answer(number, message, "tool_calls")


def first_run() -> list[Reply]:
    """A think call and a call of a tool the agent does not have in one answer, then finish."""
    think = ("think", {"thought": "The notes are short."})
    return [tool_calls(1, think, ("nope", {"x": 1})),
            tool_calls(2, ("finish", {"message": "All done."}))]  # fmt: skip


def second_run() -> list[Reply]:
    """A plain answer whose server sent no usage."""
    text = {"role": "assistant", "content": "Copied again."}
    return [answer(3, text, "stop", usage=False)]


def run_openhands(
    folder: Path, base_url: str, conversation: uuid.UUID, *prompts: str, pause: bool = False
) -> Path:
    """Run the real SDK once (the conversation resumed when it is persisted already); its
    ``base_state.json``. ``pause``: pause it before the first prompt (a ``PauseEvent``).
    Skip when the SDK cannot be had."""
    problem = prepare_openhands()
    if problem is not None:
        pytest.skip(problem)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "workspace").mkdir(exist_ok=True)
    script = folder / "run_openhands.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "*",
           "OPENHANDS_SUPPRESS_BANNER": "1", "HOME": str(folder)}  # fmt: skip
    persistence = folder / "conversations"
    done = subprocess.run(
        [str(OPENHANDS_VENV / "bin" / "python"), str(script), f"{base_url}/v1", str(persistence),
         str(folder / "workspace"), str(conversation), "pause" if pause else "-", *prompts],
        capture_output=True, text=True, timeout=600, env=env, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return persistence / conversation.hex / "base_state.json"
