"""Exports against what TRL's trainers and Hugging Face chat templates do with them.

Without installing TRL, torch or transformers, each test repeats the one step of theirs that
an export must survive, as their published source does it:

- ``GRPOTrainer._calculate_rewards`` (trl/trainer/grpo_trainer.py, TRL 1.9.0 and main): every
  dataset column but ``prompt``, ``completion`` and ``completion_ids`` becomes a keyword
  argument of each reward function, next to ``prompts``, ``completions``, ``completion_ids``
  passed by name and ``trainer_state``, ``log_extra``, ``log_metric`` (and ``environments``)
  set in the same keyword dict.
- ``DPOTrainer._prepare_dataset`` (trl/trainer/dpo_trainer.py) drops every example whose
  tokenized prompt alone reaches ``max_length``, which ``DPOConfig`` defaults to 1024.
- The chat templates' rendering of a tool call's ``arguments`` (TRL keeps the originals in
  trl/chat_templates/): Qwen2.5 writes ``"arguments": {{ arguments | tojson }}``, Llama 3.1
  ``"parameters": {{ arguments | tojson }}``, Qwen3 writes a string as it is and anything
  else through ``tojson``. The snippets below restate just that logic, rendered the way
  transformers compiles templates (a sandboxed Jinja environment, trim_blocks, lstrip_blocks,
  and a ``tojson`` that is ``json.dumps`` with ``ensure_ascii=False``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_export import make_fanout

from agentrunner import TraceStore
from agentrunner.export import ExportOptions, export, export_rows
from agentrunner.lifecycle.fanout import FanoutResult

# What GRPOTrainer._calculate_rewards passes to reward functions besides the dataset columns.
GRPO_REWARD_KEYWORDS = {
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
}
GRPO_DROPPED_COLUMNS = ("prompt", "completion", "completion_ids")

# A tool call's arguments as each template renders them (restated, not copied), and where
# the rendered call's JSON sits.
TEMPLATES = {
    "qwen2.5": "{% for m in messages %}{% for tc in m.tool_calls %}"
    "{% if tc.function is defined %}{% set tc = tc.function %}{% endif %}"
    '<tool_call>\n{"name": "{{ tc.name }}", "arguments": {{ tc.arguments | tojson }}}'
    "\n</tool_call>{% endfor %}{% endfor %}",
    "llama3.1": "{% for m in messages %}{% for c in m.tool_calls %}{% set tc = c.function %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{{ '{\"name\": \"' + tc.name + '\", ' }}{{ '\"parameters\": ' }}"
    "{{ tc.arguments | tojson }}{{ '}' }}<|eot_id|>{% endfor %}{% endfor %}",
    "qwen3": "{% for m in messages %}{% for tc in m.tool_calls %}"
    "{% if tc.function %}{% set tc = tc.function %}{% endif %}"
    '<tool_call>\n{"name": "{{ tc.name }}", "arguments": '
    "{% if tc.arguments is string %}{{ tc.arguments }}{% else %}{{ tc.arguments | tojson }}"
    "{% endif %}}\n</tool_call>{% endfor %}{% endfor %}",
}
CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>|<\|end_header_id\|>\n\n(.*?)<\|eot_id\|>")


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """transformers' ``tojson`` filter for chat templates (no HTML escaping, Unicode kept)."""
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


@pytest.fixture(scope="module")
def fanout(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TraceStore, FanoutResult]]:
    store, result = make_fanout(tmp_path_factory.mktemp("fanout"))
    yield store, result
    store.close()


def _rows(
    store: TraceStore, fmt: str, options: ExportOptions | None = None
) -> list[dict[str, Any]]:
    _, rows = export_rows(store, fmt, options=options)
    return list(rows)


def _rendered_calls(template: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool call's JSON as the template renders ``messages``, parsed."""
    sandbox = pytest.importorskip("jinja2.sandbox")
    env = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    text = env.from_string(template).render(messages=messages)
    return [json.loads(a or b) for a, b in CALL.findall(text)]


def _arguments(call: dict[str, Any]) -> Any:
    return call["arguments"] if "arguments" in call else call["parameters"]


# ------------------------------------------------------------------ GRPO and reward functions


def test_grpo_columns_are_none_of_the_keywords_grpo_trainer_gives_reward_functions(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    (row,) = _rows(store, "grpo")
    assert not (set(row) - set(GRPO_DROPPED_COLUMNS)) & GRPO_REWARD_KEYWORDS


def test_a_grpo_row_reaches_a_reward_function_the_way_grpo_trainer_calls_it(
    fanout: tuple[TraceStore, FanoutResult],
) -> None:
    store, _ = fanout
    inputs = _rows(store, "grpo")

    def best_recorded(
        prompts: list[Any], completions: list[Any], reference_rewards: list[list[float]], **_: Any
    ) -> list[float]:
        return [max(r) for r in reference_rewards]

    keys = [k for k in inputs[0] if k not in GRPO_DROPPED_COLUMNS]
    reward_kwargs: dict[str, Any] = {k: [example[k] for example in inputs] for k in keys}
    reward_kwargs.update(trainer_state=None, log_extra=print, log_metric=print)
    rewards = best_recorded(
        prompts=[x["prompt"] for x in inputs],
        completions=[[{"role": "assistant", "content": "done"}] for _ in inputs],
        completion_ids=[[1] for _ in inputs],
        **reward_kwargs,
    )
    assert rewards == [1.0]


# ------------------------------------------------------------------ DPO length


def test_a_dpo_export_notes_that_trl_drops_prompts_past_its_default_max_length(
    fanout: tuple[TraceStore, FanoutResult], tmp_path: Path
) -> None:
    store, _ = fanout
    result = export(store, "dpo", tmp_path / "pairs.jsonl")
    longest = max(len(json.dumps(r["prompt"], ensure_ascii=False)) for r in _rows(store, "dpo"))
    assert longest > 3 * 1024  # more than 1024 tokens at 3 characters a token
    (note,) = [n for n in result.notes if "max_length" in n]
    assert "DPOTrainer drops every row" in note and "max_length=None" in note


# ------------------------------------------------------------------ chat templates


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_default_tool_arguments_render_as_json_objects_under_the_chat_template(
    fanout: tuple[TraceStore, FanoutResult], template: str
) -> None:
    store, _ = fanout
    recorded = _rows(store, "sft", ExportOptions(tool_args="string"))
    for row, raw in zip(_rows(store, "sft"), recorded, strict=True):
        calls = _rendered_calls(TEMPLATES[template], row["messages"])
        expected = [
            json.loads(c["function"]["arguments"])
            for m in raw["messages"]
            for c in m.get("tool_calls", [])
        ]
        assert calls and [_arguments(c) for c in calls] == expected


@pytest.mark.parametrize(
    ("template", "takes_strings"), [("qwen2.5", False), ("llama3.1", False), ("qwen3", True)]
)
def test_only_qwen3_renders_raw_string_arguments_as_objects(
    fanout: tuple[TraceStore, FanoutResult], template: str, takes_strings: bool
) -> None:
    store, _ = fanout
    row = _rows(store, "sft", ExportOptions(tool_args="string"))[0]
    calls = _rendered_calls(TEMPLATES[template], row["messages"])
    kinds = {type(_arguments(c)) for c in calls}
    assert kinds == ({dict} if takes_strings else {str})
