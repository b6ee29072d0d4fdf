"""The report benchmark's baseline: a plain reader of the rows ``agentrunner report`` reads,
with ``sqlite3`` and ``json`` only (no agentrunner import), grouped by model: episodes,
passes, mean reward, tokens, cost, tool calls, errors and model latency percentiles.

Run as ``python plain_report.py DB KIND_CODES`` (``KIND_CODES``: the store's kind → code map
as JSON): prints the groups as JSON on stdout, then its own time and peak memory (read from
``/proc/self/status``) as JSON on stderr.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

from peak_memory import peak_rss_mb

SEQ_BITS = 32


def report(db: str, codes: dict[str, int]) -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    model_of = {
        key: json.loads(model).get("spec", "")
        for key, model in conn.execute(
            "SELECT key, model FROM episodes WHERE parent_episode_id IS NULL"
        )
    }
    groups: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "episodes": 0,
            "passed": 0,
            "rewards": [],
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "tool_calls": 0,
            "errors": 0,
            "latencies": [],
        }
    )
    kinds = ("episode.end", "model.response", "usage", "tool.call", "error")
    end, response, usage, call = (codes[k] for k in kinds[:4])
    wanted = ", ".join(str(codes[k]) for k in kinds)
    rows = conn.execute(
        f"SELECT id >> {SEQ_BITS}, kind, payload FROM event_log WHERE kind IN ({wanted})"
        f" AND kind <> {codes['model.chunk']}"
    )
    for key, kind, payload in rows:
        model = model_of.get(key)
        if model is None:
            continue
        group = groups[model]
        if kind == call:
            group["tool_calls"] += 1
            continue
        body = json.loads(payload)
        if kind == end:
            reward = body.get("total_reward")
            group["episodes"] += 1
            if reward is not None:
                group["rewards"].append(reward)
                group["passed"] += reward >= 1.0
        elif kind == response:
            if body.get("latency_s") is not None:
                group["latencies"].append(body["latency_s"])
        elif kind == usage:
            group["input_tokens"] += body.get("input_tokens") or 0
            group["output_tokens"] += body.get("output_tokens") or 0
            group["cost_usd"] += body.get("cost_usd") or 0.0
        else:
            group["errors"] += 1
    conn.close()
    out = {}
    for model, group in sorted(groups.items()):
        rewards, latencies = group.pop("rewards"), sorted(group.pop("latencies"))
        cuts = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else [0.0] * 19
        out[model] = {
            **group,
            "mean_reward": statistics.fmean(rewards) if rewards else None,
            "latency_p50": cuts[9],
            "latency_p95": cuts[18],
        }
    return out


if __name__ == "__main__":
    started = time.perf_counter()
    groups = report(sys.argv[1], json.loads(sys.argv[2]))
    took = time.perf_counter() - started
    print(json.dumps(groups))
    print(json.dumps({"seconds": took, "peak_rss_mb": peak_rss_mb()}), file=sys.stderr)
