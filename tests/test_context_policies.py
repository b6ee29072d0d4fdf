"""Context policies: the budget checked before each request, ``none`` stopping with
``context_exhausted`` instead of sending an over-limit request, ``mask:K`` keeping a long
episode under the window with placeholders that name their originals, recorded exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentrunner import AgentContext, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.readers.state import rebuild
from agentrunner.runtime.context import mask_cutoff
from agentrunner.runtime.runner import RunConfig
from providers.scripted import ScriptedModel
from tests.cli_process import run_cli

OUTPUT_CHARS = 2000
PLACEHOLDER_SEQ = re.compile(r"kept in event seq (\d+)\]")


def _printing_turns(n: int, chars: int = OUTPUT_CHARS) -> list[dict[str, Any]]:
    """``n`` turns, each a bash call that prints ``chars`` characters."""
    command = f"python -c \"print('x' * {chars})\""
    return [
        {"text": f"step {i}", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}
        for i in range(n)
    ]


def _script(tmp_path: Path, turns: list[dict[str, Any]]) -> Path:
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"name": "long", "episodes": [{"match": "", "turns": turns}]}))
    return path


class Received:
    """The scripted model, keeping what each call received (the model's side of a request)."""

    def __init__(self, path: Path) -> None:
        self.scripted = ScriptedModel(str(path), pace=0)
        self.calls: list[AgentContext] = []

    def __call__(self, context: AgentContext) -> AgentTurn:
        self.calls.append(context)
        return self.scripted(context)


def _run(store: TraceStore, env: WorkspaceEnv, model: Received, **settings: Any) -> tuple[str, str]:
    config = RunConfig(max_turns=40, **settings)
    rollout = run_agent_episode(
        env=env, task_id="demo-mean", model_fn=model, store=store, config=config
    )
    return rollout.episode_id, rollout.stop_reason


def _payloads(store: TraceStore, episode_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.iter_events(episode_id) if e.kind == kind]


def test_none_stops_with_context_exhausted_before_sending_an_over_limit_request(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    model = Received(_script(tmp_path, _printing_turns(20)))
    episode_id, stop = _run(store, env, model, context="none", context_window=2500)
    reported = [u["input_tokens"] for u in _payloads(store, episode_id, "usage")]
    kinds = [e.kind for e in store.iter_events(episode_id) if e.kind != "model.chunk"]
    assert (stop, kinds[-2:]) == ("context_exhausted", ["tool.result", "episode.end"])
    assert len(model.calls) == len(reported) < 20
    assert max(reported) <= 2500


def test_the_estimate_starts_from_the_reported_input_tokens(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    turns = _printing_turns(3, chars=10)
    turns[0]["usage"] = {"input_tokens": 5000}  # the scripted model reports a huge prompt
    model = Received(_script(tmp_path, turns))
    _, stop = _run(store, env, model, context="none", context_window=4000)
    assert (stop, len(model.calls)) == ("context_exhausted", 1)


def test_each_request_records_an_estimate_within_ten_percent_of_the_reported_count(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    model = Received(_script(tmp_path, _printing_turns(8)))
    episode_id, _ = _run(store, env, model)
    estimates = [r["input_tokens_estimate"] for r in _payloads(store, episode_id, "model.request")]
    reported = [u["input_tokens"] for u in _payloads(store, episode_id, "usage")]
    assert all(abs(e - r) <= 0.1 * r for e, r in zip(estimates[1:], reported[1:], strict=True))


def test_resume_of_an_exhausted_episode_says_why_and_how_to_go_on(tmp_path: Path) -> None:
    script, db = _script(tmp_path, _printing_turns(20)), str(tmp_path / "t.db")
    ran = run_cli("--db", db, "--json", "run", "--model", f"scripted:{script}",
                  "--context-window", "2500")  # fmt: skip
    episode_id = json.loads(ran.stdout)["episode_id"]
    resumed = run_cli("--db", db, "resume", episode_id)
    assert resumed.returncode != 0
    assert "context window (context_exhausted)" in resumed.stderr
    assert "--context mask:10" in resumed.stderr


def _masked_episode(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> tuple[str, str, Received]:
    model = Received(_script(tmp_path, _printing_turns(16)))
    episode_id, stop = _run(store, env, model, context="mask:2", context_window=2500)
    return episode_id, stop, model


def test_mask_keeps_a_long_episode_under_the_window(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, stop, _ = _masked_episode(store, env, tmp_path)
    reported = [u["input_tokens"] for u in _payloads(store, episode_id, "usage")]
    assert (stop, len(reported)) == ("done", 17)
    assert max(reported) <= 2500


def test_a_placeholder_names_the_seq_of_the_tool_result_that_holds_the_original(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, _, _ = _masked_episode(store, env, tmp_path)
    last = store.reconstruct_request(episode_id, 17).messages
    full = rebuild(store, episode_id).messages
    pairs = [
        (int(m.group(1)), full[i].content)
        for i, sent in enumerate(last)
        if (m := PLACEHOLDER_SEQ.search(sent.content)) is not None
    ]
    events = {e.seq: e.payload for e in store.iter_events(episode_id)}
    assert pairs
    assert all(events[seq]["observation"] == original for seq, original in pairs)


def test_the_rebuilt_request_equals_what_the_model_received(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, _, model = _masked_episode(store, env, tmp_path)
    received = [list(call.messages) for call in model.calls]
    rebuilt = [store.reconstruct_request(episode_id, t + 1).messages for t in range(17)]
    assert rebuilt == received
    assert any(PLACEHOLDER_SEQ.search(m.content) for m in received[-1])


def test_masking_changes_only_at_block_boundaries(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, _, _ = _masked_episode(store, env, tmp_path)
    sent = [store.reconstruct_request(episode_id, t).messages for t in range(1, 18)]
    changed = [t for t in range(2, 18) if sent[t - 1][: len(sent[t - 2])] != sent[t - 2]]
    boundaries = [t for t in range(2, 18) if mask_cutoff(t, 2) != mask_cutoff(t - 1, 2)]
    assert changed == boundaries != []


def test_a_fork_with_another_policy_records_its_own(tmp_path: Path) -> None:
    script, db = _script(tmp_path, _printing_turns(6)), str(tmp_path / "t.db")
    ran = run_cli("--db", db, "--json", "run", "--model", f"scripted:{script}")
    parent = json.loads(ran.stdout)["episode_id"]
    forked = run_cli("--db", db, "--json", "fork", parent, "--turn", "4",
                     "--context", "mask:1", "--run")  # fmt: skip
    fork_id = json.loads(forked.stdout)["forks"][0]
    store = TraceStore(db)
    resumes = [e.payload for e in store.iter_events(fork_id) if e.kind == "resume"]
    start = next(e.payload for e in store.iter_events(fork_id) if e.kind == "episode.start")
    assert (start["config"]["context"], resumes[-1]["config"]["context"]) == ("none", "mask:1")


def test_an_unknown_policy_is_refused_with_the_ones_there_are(tmp_path: Path) -> None:
    ran = run_cli("--db", str(tmp_path / "t.db"), "run", "--context", "summarise")
    assert ran.returncode == 2
    assert "unknown context policy 'summarise': give none, mask, mask:K" in ran.stderr


def test_resuming_a_pending_fork_takes_the_context_flags_and_records_them(
    tmp_path: Path,
) -> None:
    script, db = _script(tmp_path, _printing_turns(6)), str(tmp_path / "t.db")
    ran = run_cli("--db", db, "--json", "run", "--model", f"scripted:{script}")
    parent = json.loads(ran.stdout)["episode_id"]
    forked = run_cli("--db", db, "--json", "fork", parent, "--turn", "4")
    fork_id = json.loads(forked.stdout)["forks"][0]
    resumed = run_cli("--db", db, "--json", "resume", fork_id,
                      "--context", "mask:1", "--context-window", "9000")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    store = TraceStore(db)
    config = [e.payload for e in store.iter_events(fork_id) if e.kind == "resume"][-1]["config"]
    requests = _payloads(store, fork_id, "model.request")
    assert (config["context"], config["context_window"]) == ("mask:1", 9000)
    assert requests[-1]["context_window"] == 9000


def test_resume_with_mask_continues_an_episode_none_stopped(tmp_path: Path) -> None:
    script, db = _script(tmp_path, _printing_turns(12)), str(tmp_path / "t.db")
    ran = run_cli("--db", db, "--json", "run", "--model", f"scripted:{script}",
                  "--context-window", "2500", "--context", "none")  # fmt: skip
    episode_id = json.loads(ran.stdout)["episode_id"]
    assert json.loads(ran.stdout)["stop_reason"] == "context_exhausted"
    resumed = run_cli("--db", db, "--json", "resume", episode_id, "--context", "mask:2")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["stop_reason"] == "done"


def test_the_commands_that_take_a_policy_show_their_help(tmp_path: Path) -> None:
    for command in ("run", "fork", "resume"):
        shown = run_cli("--db", str(tmp_path / "t.db"), command, "--help")
        assert shown.returncode == 0, shown.stderr
        assert "summarize[:MODEL] (at 80% of the window" in " ".join(shown.stdout.split())


def test_a_batch_runs_its_episodes_with_the_context_flags_and_records_them(
    tmp_path: Path,
) -> None:
    script, db = _script(tmp_path, _printing_turns(16)), str(tmp_path / "t.db")
    ran = run_cli("--db", db, "--json", "batch", "--model", f"scripted:{script}",
                  "--task", "demo-mean", "--seeds", "0-1", "--max-turns", "40",
                  "--context", "mask:2", "--context-window", "2500")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    store = TraceStore(db)
    for episode in json.loads(ran.stdout)["episodes"]:
        episode_id = episode["episode_id"]
        start = next(e.payload for e in store.iter_events(episode_id) if e.kind == "episode.start")
        reported = [u["input_tokens"] for u in _payloads(store, episode_id, "usage")]
        assert (start["config"]["context"], start["config"]["context_window"]) == ("mask:2", 2500)
        assert (episode["status"], max(reported) <= 2500) == ("completed", True)
