"""`agentrunner report`'s outputs (text, ``--json``, ``--compare``, ``--html``) stay the same
for the same store, whatever shape the report takes inside.

The store: the unjudged store of :mod:`unjudged_support` (a Claude Code session and a Codex
rollout imported, with no reward; one scripted demo run to reward 1), beside a scripted
model charged $0.002 a call run on demo-mean (seeds 0 and 1: reward 1) and on
paginate-off-by-one (it gives up: reward 0), and a fork of that give-up run that the demo
script finishes. What depends on the clock (episode ids, times, latencies) is masked; the
rest is compared as it was printed when this test was written, or against numbers read
from the store by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from unjudged_support import unjudged_store

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.types import AgentTurn
from providers.scripted import ScriptedModel

PRICE = 0.002
PRICED = "scripted:priced"


class _Priced:
    """A scripted model whose every call costs :data:`PRICE`."""

    provider = "scripted"

    def __init__(self, script: str) -> None:
        self.model, self.params = "priced", {}
        self.inner = ScriptedModel(script, pace=0)

    def spec(self) -> dict[str, Any]:
        return {"spec": PRICED, "provider": "scripted", "model": "priced"}

    def __call__(self, context: Any) -> AgentTurn:
        turn = self.inner(context)
        usage = turn.usage.model_copy(update={"cost_usd": PRICE, "price_source": "test"})
        return turn.model_copy(update={"usage": usage})


def build_store(root: Path) -> Path:
    """The store described above, in ``root``."""
    path = unjudged_store(root)
    give_up = root / "give-up.json"
    turn = {"text": "Giving up.", "tool_calls": [{"name": "submit", "arguments": {}}]}
    give_up.write_text(
        json.dumps({"name": "give-up", "episodes": [{"match": "", "turns": [turn]}]})
    )
    runs = (("demo-mean", 0, "demo"), ("demo-mean", 1, "demo"), ("paginate-off-by-one", 0, ""))
    with TraceStore(path) as store, WorkspaceEnv(snapshot_dir=root / "snaps") as env:
        for task, seed, script in runs:
            model = _Priced(script or str(give_up))
            gave_up = run_agent_episode(
                env=env, task_id=task, seed=seed, model_fn=model, store=store
            )
    forked = run_cli(
        "fork", "--db", str(path), gave_up.episode_id, "--turn", "1", "--model", "scripted:demo",
        "--run",
    )  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("report-outputs"))


def _out(*args: str) -> str:
    done = run_cli(*args, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _json(db: Path, *args: str) -> Any:
    return json.loads(_out("report", "--db", str(db), *args, "--json").splitlines()[-1])


SNAPSHOTS = Path(__file__).parent / "report_outputs"
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def masked_text(text: str) -> str:
    """A text report with its latencies (``0.01s/0.02s``: the clock's) masked, width kept."""
    return re.sub(r"[-\d.]+s/[-\d.]+s", lambda m: "~" * len(m.group()), text)


def masked_json(value: Any) -> Any:
    """A JSON report with every ``latency_s`` (the clock's) set to null."""
    if isinstance(value, dict):
        return {k: None if k == "latency_s" else masked_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked_json(v) for v in value]
    return value


def masked_page(page: str) -> str:
    """An HTML report with episode ids, latencies and the chart drawn against start times
    masked."""
    page = re.sub(r'<svg id="cost-time".*?</svg>', "(cost over time)", page)
    page = re.sub(r"<td>[-\d.]+ / [-\d.]+</td></tr>", "<td>(latency)</td></tr>", page)
    return ULID.sub("(episode)", page)


# (snapshot file, arguments after `report --db DB`)
TEXT = {
    "text.txt": (),
    "text-forks.txt": ("--include-forks", "--by", "model", "--by", "task"),
    "compare.txt": ("--include-forks", "--compare", "scripted:d*", "scripted:priced"),
    "compare-unjudged.txt": ("--compare", "claude*", "scripted:demo"),
}
JSON = {
    "report.json": (),
    "report-forks.json": ("--include-forks", "--by", "task", "--by", "split"),
    "compare.json": ("--include-forks", "--compare", "scripted:d*", "scripted:priced"),
    "compare-unjudged.json": ("--compare", "codex*", "scripted:priced"),
}


@pytest.mark.parametrize("name", sorted(TEXT))
def test_the_text_report_reads_as_it_did(db: Path, name: str) -> None:
    printed = _out("report", "--db", str(db), *TEXT[name])
    assert masked_text(printed) == (SNAPSHOTS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(JSON))
def test_the_json_report_has_the_keys_and_values_it_had(db: Path, name: str) -> None:
    printed = _out("report", "--db", str(db), *JSON[name], "--json").splitlines()[-1]
    expected = (SNAPSHOTS / name).read_text(encoding="utf-8").strip()
    assert json.dumps(masked_json(json.loads(printed)), ensure_ascii=False) == expected


def test_the_html_page_reads_as_it_did(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    _out("report", "--db", str(db), "--include-forks", "--by", "task", "--html", str(out))
    page = masked_page(out.read_text(encoding="utf-8"))
    assert page == (SNAPSHOTS / "page.html").read_text(encoding="utf-8")


def test_the_json_numbers_follow_from_the_store(db: Path) -> None:
    """What the snapshots hold, read from the store by hand: per model, the episodes, the
    ones with a reward, those that passed, and the known costs."""
    with TraceStore(db) as store:
        roots = [s for s in store.list_episodes() if s.parent_episode_id is None]
    made = _json(db)
    for group in made["groups"]:
        mine = [s for s in roots if s.model.get("spec") == group["key"]["model"]]
        priced = [s.cost_usd for s in mine if s.cost_usd is not None]
        scripted = [s for s in mine if str(s.model.get("spec")).startswith("scripted:")]
        assert group["episodes"] == len(mine)
        assert group["judged"] == len(scripted)  # the imported sessions have no reward
        assert group["unjudged"] == len(mine) - len(scripted)
        assert group["passed"] == sum((s.total_reward or 0) >= 1.0 for s in scripted)
        assert group["cost_unknown"] == len(mine) - len(priced)
        assert group["cost_usd"] == (pytest.approx(sum(priced)) if priced else None)
    assert made["overall"]["episodes"] == len(roots) == 6
    assert made["overall"]["cost_usd"] == pytest.approx(0.0926 + 7 * PRICE * 2 + PRICE, abs=1e-4)
