"""Model options on the command line (``run``, ``batch``, ``fork``, ``fanout``, ``resume``):
reasoning effort, thinking, temperature, output tokens, price provider and a system prompt.

The flags are provider-neutral; :func:`providers.adapter_options` turns them into each
adapter's own option names. The adapter records them: the request parameters in every
``model.request`` (``params``), and the options themselves in its spec (``options``), from
which a resume or a fork builds the same model again.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.cli.common import stderr_console
from agentrunner.runtime.context import POLICY_HELP, parse_policy
from agentrunner.values.errors import UsageError
from agentrunner.values.model import Model
from providers import PROVIDERS, adapter_options, model_from_spec, unsupported_options

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

FLAGS = {
    "reasoning_effort": "--reasoning-effort",
    "thinking": "--thinking",
    "temperature": "--temperature",
    "max_output_tokens": "--max-output-tokens",
    "price_provider": "--price-provider",
}
HINTS = {
    "reasoning_effort": "for Anthropic models use --thinking",
    "thinking": "for OpenAI models use --reasoning-effort",
}
SYSTEM_PROMPT_HELP = (
    "text added to the environment's own system prompt, after it (that prompt names the tools "
    "and how the episode ends, so it is never replaced); recorded as the episode's system "
    "message, so resume and fork keep it"
)


def _thinking(text: str) -> str | int:
    if text == "adaptive":
        return text
    try:
        budget = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"use 'adaptive' or a budget in tokens (e.g. 8000), not {text!r}"
        ) from None
    if budget < 1024:
        raise argparse.ArgumentTypeError("a thinking budget is at least 1024 tokens")
    return budget


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 2:
        raise argparse.ArgumentTypeError("the temperature is between 0 and 2")
    return value


def _tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1 token")
    return value


def add_model_options(parser: argparse.ArgumentParser, *, system_prompt: bool = False) -> None:
    """The model option flags; with ``system_prompt`` also ``--system-prompt[-file]``."""
    group = parser.add_argument_group(
        "model options",
        "Passed to the model adapter and recorded (model.request params, the model spec). "
        "An option the provider does not take is refused; the scripted model ignores them "
        "(with a warning)." + (" A system prompt works with any model." if system_prompt else ""),
    )
    group.add_argument(
        "--reasoning-effort",
        metavar="LEVEL",
        help="how hard a reasoning model thinks, e.g. minimal, low, medium, high "
        "(openai, openai-chat)",
    )
    group.add_argument(
        "--thinking",
        type=_thinking,
        metavar="BUDGET",
        help="extended thinking: 'adaptive' or a budget in tokens, at least 1024 (anthropic)",
    )
    group.add_argument(
        "--temperature", type=_temperature, metavar="T", help="sampling temperature, 0 to 2"
    )
    group.add_argument(
        "--max-output-tokens",
        type=_tokens,
        metavar="N",
        help="output tokens at most per model call, reasoning included (openai: "
        "max_output_tokens; openai-chat: max_completion_tokens; anthropic: max_tokens, "
        "default 16384)",
    )
    group.add_argument(
        "--price-provider",
        metavar="ID",
        help="price usage as this genai-prices provider (openai, anthropic, deepseek, ...): "
        "for a proxy or a local server whose base URL genai-prices does not know, whose "
        "cost is unknown (-) otherwise",
    )
    if system_prompt:
        prompt = group.add_mutually_exclusive_group()
        prompt.add_argument("--system-prompt", metavar="TEXT", help=SYSTEM_PROMPT_HELP)
        prompt.add_argument(
            "--system-prompt-file", type=Path, metavar="FILE", help="the same, from a file"
        )


def _policy(text: str) -> str:
    try:
        return str(parse_policy(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_context_options(parser: argparse.ArgumentParser, *, keeps: str) -> None:
    """``--context`` and ``--context-window``; ``keeps`` says what a command does without
    them (a run: ``none`` and the model table's window; a fork: the episode's)."""
    group = parser.add_argument_group(
        "context window",
        "Before each request the runner estimates its input tokens (the last reported count "
        "plus what was added since) and never sends one that passes the window; the settings "
        f"are recorded with the episode. Without these flags: {keeps}.",
    )
    group.add_argument("--context", type=_policy, metavar="POLICY", help=POLICY_HELP)
    group.add_argument(
        "--context-window",
        type=_tokens,
        metavar="N",
        help="the model's context window in tokens (default: genai-prices' model table's; "
        "a model it does not know has no limit)",
    )


def context_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The context settings the flags give (those not given are left out)."""
    names = ("context", "context_window")
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The neutral model options the flags give (those not given are left out)."""
    return {name: getattr(args, name) for name in FLAGS if getattr(args, name, None) is not None}


def model_options(args: argparse.Namespace, spec: str) -> dict[str, Any]:
    """The adapter options for ``spec`` from the flags, ``--base-url`` included.

    The scripted model takes none of them: it warns and ignores them, as it does the base
    URL. An option another provider does not take is a usage error naming the flag.
    """
    given = given_options(args)
    base_url = getattr(args, "base_url", None)
    provider = spec.partition(":")[0]
    if provider == "scripted":
        ignored = [FLAGS[name] for name in given] + (["--base-url"] if base_url else [])
        if ignored:
            stderr_console().print(
                f"[yellow]warning:[/] {', '.join(ignored)} ignored by the scripted model"
            )
        return {}
    if provider not in PROVIDERS:  # get_model says which providers there are
        return {"base_url": base_url} if base_url else {}
    refused = unsupported_options(spec, given)
    if refused:
        hints = [HINTS[name] for name in refused if name in HINTS]
        raise UsageError(
            f"{', '.join(FLAGS[name] for name in refused)}: not an option of {provider} "
            "models" + (f" ({'; '.join(hints)})" if hints else "")
        )
    options = adapter_options(spec, **given)
    if base_url:
        options["base_url"] = base_url
    return options


def system_prompt(args: argparse.Namespace) -> str | None:
    """The ``--system-prompt`` text (or the file's), ``None`` when not given."""
    path: Path | None = getattr(args, "system_prompt_file", None)
    text: str | None = getattr(args, "system_prompt", None)
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --system-prompt-file {path}: {exc}") from None
    if text is not None and not text.strip():
        raise UsageError("the system prompt is empty")
    return text


def recorded_model(store: StoreBackend, episode_id: str, args: argparse.Namespace) -> Model | None:
    """The model ``episode_id`` was recorded with, built again with its recorded options
    (its spec's ``options``) and the model flags on top; ``None`` when nothing differs from
    what ``resume_episode`` builds itself (or when it was not a provider's model: resume
    then says what it needs)."""
    episode = store.episode(episode_id)
    recorded = episode.model_spec
    given = given_options(args)
    if not recorded.named or recorded.provider not in PROVIDERS:
        if given:
            flags = ", ".join(FLAGS[name] for name in given)
            raise UsageError(f"{flags}: episode {episode_id} was not run with a provider model")
        return None
    if not recorded.options and not given:
        return None
    return model_from_spec(episode.model, **model_options(args, recorded.spec))
