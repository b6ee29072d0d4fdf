"""The live OpenTelemetry options ``run`` and ``batch`` share: spans sent to an OTLP/HTTP
endpoint while the episodes run (:mod:`agentrunner.export.otlp_live`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from agentrunner.cli.common import stderr_console
from agentrunner.values.safe_text import literal

if TYPE_CHECKING:
    from agentrunner.export.otlp_live import LiveOtlp
    from agentrunner.store.protocol import StoreBackend


def add_otlp_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("live OpenTelemetry (needs the [otlp] extra)")
    group.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="also send the spans of each episode to this OTLP/HTTP endpoint as each one ends "
        "(e.g. http://127.0.0.1:6006 for Phoenix); a slow or dead endpoint never holds the run: "
        "what it missed is reported at the end, and `export --format otlp --endpoint` sends it "
        "again",
    )
    group.add_argument(
        "--otlp-no-content",
        action="store_true",
        help="with --otlp-endpoint: leave messages, tool arguments and results out of the spans",
    )


def live_otlp(args: argparse.Namespace, store: StoreBackend) -> LiveOtlp | None:
    """The live exporter the flags ask for (None: no --otlp-endpoint)."""
    if not args.otlp_endpoint:
        return None
    from agentrunner.export.otlp_live import LiveOtlp

    return LiveOtlp(store, args.otlp_endpoint, content=not args.otlp_no_content)


def close_live_otlp(live: LiveOtlp | None) -> None:
    """Send what is left and say in one line what went (or what did not)."""
    if live is not None:
        stderr_console().print(literal(live.close().line()), highlight=False)
