"""`agentrunner report --html` on a store with priced, free and unjudged episodes: the cost
charts are drawn on axes from $0, only judged, priced episodes are points, and the page
says which episodes are unjudged.

The store: a scripted model charged $0.002 a call, run through the real runner on demo-mean
(seeds 0 and 1: reward 1) and on paginate-off-by-one (it gives up: reward 0), beside two
real sessions imported from the shared fixtures (a Claude Code session that cost $0.09, a
Codex rollout with no token counts and no cost), which have no reward.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.types import AgentTurn
from providers.scripted import ScriptedModel

TRACES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "foreign-traces"
CLAUDE = TRACES / "claude-code" / "short.jsonl"
CODEX = TRACES / "codex" / "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
PRICE = 0.002


class _Priced:
    """A scripted model whose every call costs :data:`PRICE`."""

    provider = "scripted"

    def __init__(self, script: str) -> None:
        self.model, self.params = "priced", {}
        self.inner = ScriptedModel(script, pace=0)

    def spec(self) -> dict[str, Any]:
        return {"spec": "scripted:priced", "provider": "scripted", "model": "priced"}

    def __call__(self, context: Any) -> AgentTurn:
        turn = self.inner(context)
        usage = turn.usage.model_copy(update={"cost_usd": PRICE, "price_source": "test"})
        return turn.model_copy(update={"usage": usage})


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not (CLAUDE.is_file() and CODEX.is_file()):
        pytest.skip(f"the shared foreign-trace fixtures are absent ({TRACES})")
    root = tmp_path_factory.mktemp("report-costs")
    path = root / "traces.db"
    give_up = root / "give-up.json"
    turn = {"text": "Giving up.", "tool_calls": [{"name": "submit", "arguments": {}}]}
    script = {"name": "give-up", "episodes": [{"match": "", "turns": [turn]}]}
    give_up.write_text(json.dumps(script))
    with TraceStore(path) as store, WorkspaceEnv(snapshot_dir=root / "snaps") as env:
        for task, seed, script in (
            ("demo-mean", 0, "demo"),
            ("demo-mean", 1, "demo"),
            ("paginate-off-by-one", 0, str(give_up)),
        ):
            model = _Priced(script)
            run_agent_episode(env=env, task_id=task, seed=seed, model_fn=model, store=store)
    for trace in (CLAUDE, CODEX):
        done = run_cli("import", "--db", str(path), str(trace))
        assert done.returncode == 0, done.stderr
    out = root / "report.html"
    made = run_cli("report", "--db", str(path), "--html", str(out))
    assert made.returncode == 0, made.stderr
    return out.read_text(encoding="utf-8")


def _chart(page: str, name: str) -> str:
    found = re.search(rf'<svg id="{name}".*?</svg>', page)
    assert found is not None, f"no chart {name}"
    return found.group(0)


def _ticks(chart: str) -> list[str]:
    return re.findall(r'class="tick"[^>]*>([^<]*)<', chart)


def test_priced_episodes_draw_both_cost_charts_on_axes_from_zero(page: str) -> None:
    money = [t for t in _ticks(_chart(page, "reward-cost")) if t.startswith("$")]
    assert money[0] == "$0" and len(money) >= 2  # the cost axis
    assert _ticks(_chart(page, "cost-time"))[0] == "$0"  # cumulative cost axis
    assert "-$" not in page and "$-" not in page


def test_only_judged_priced_episodes_are_points_of_reward_against_cost(page: str) -> None:
    points = re.findall(r'<circle class="point"', _chart(page, "reward-cost"))
    assert len(points) == 3  # the three priced runs; the imported ones have no reward


def test_the_cumulative_cost_adds_every_known_cost(page: str) -> None:
    total = re.search(r"all models: \$([0-9.]+) in all", _chart(page, "cost-time"))
    assert total is not None
    runs = re.findall(r"reward [01], \$([0-9.]+)", _chart(page, "reward-cost"))
    assert len(runs) == 3
    assert float(total.group(1)) == pytest.approx(sum(map(float, runs)) + 0.09256625, rel=1e-3)


def test_the_page_says_how_many_episodes_are_unjudged_and_lists_them_so(page: str) -> None:
    assert "unjudged 2: ended with no reward" in page
    assert page.count('<td class="key unjudged">unjudged</td>') == 2
    assert page.count('<td class="key failed">failed</td>') == 1
