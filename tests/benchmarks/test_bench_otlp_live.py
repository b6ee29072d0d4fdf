"""A run's time with live OTLP export to a working endpoint and to a dead one, beside the
same run with no exporter (issue 28: a failing endpoint must not slow a run).

Run on demand: ``pytest tests/benchmarks/test_bench_otlp_live.py -m benchmark -s``. The
three variants alternate, 7 runs each, of the scripted demo episode (paced chunks, as a
streaming model sends them); prints the medians and each variant's median ratio to no
exporter. It asserts only that every run completed and the live runs' spans arrived.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from openenv_server import free_port

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

pytest.importorskip("opentelemetry.proto", reason="the [otlp] extra is not installed")

from agentrunner.export.otlp_live import LiveOtlp

pytestmark = pytest.mark.benchmark
RUNS = 7


class _Accepting(BaseHTTPRequestHandler):
    requests = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).requests += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accepting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _one(tmp_path: Path, n: int, endpoint: str | None) -> float:
    with TraceStore(tmp_path / f"bench-{n}.db") as store, WorkspaceEnv() as env:
        live = LiveOtlp(store, endpoint) if endpoint else None
        started = time.perf_counter()
        rollout = run_agent_episode(
            env=env,
            task_id="demo-mean",
            seed=0,
            model_fn=ScriptedModel("demo", pace=0.002),
            store=store,
            observer=live.observer() if live else None,
        )
        elapsed = time.perf_counter() - started
        if live is not None:
            live.close()
    assert rollout.status == "completed"
    return elapsed


def test_a_dead_endpoint_does_not_slow_a_run(tmp_path: Path, collector: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    variants = {"no exporter": None, "live endpoint": collector, "dead endpoint": dead}
    times: dict[str, list[float]] = {name: [] for name in variants}
    n = 0
    for _ in range(RUNS):
        for name, endpoint in variants.items():
            n += 1
            times[name].append(_one(tmp_path, n, endpoint))
    base = statistics.median(times["no exporter"])
    print()
    for name, runs in times.items():
        ratios = [t / b for t, b in zip(runs, times["no exporter"], strict=True)]
        print(
            f"{name:14} median {statistics.median(runs) * 1000:7.1f} ms"
            f"  ratio {statistics.median(ratios):.2f}x (no exporter {base * 1000:.1f} ms)"
        )
    assert _Accepting.requests > 0
