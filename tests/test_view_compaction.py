"""``agentrunner view`` marks what a context policy did: a compaction call is a block of its
own (not a model turn) with the tokens before and after it, what it dropped, its summary and,
folded, the messages it replaced; a ``mask`` placeholder shows as a masked output naming the
seq that holds its original; a hostile summary renders inert in headless Chromium.

The episodes are real ``run --context summarize`` and ``run --context mask:2`` runs of the
scripted model (its compaction calls answer with the script's ``summary``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import test_view
from cli_process import last_json
from test_view import HOSTILE, _dom, _shown, cli

from agentrunner import TraceStore
from agentrunner.values.safe_text import visible

COMMAND = "python -c \"print('x' * 2000)\""
TURNS = [
    {"text": f"step {i}", "tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]}
    for i in range(12)
]
SUMMARY = f"So far: twelve prints. {HOSTILE}"
proxy = test_view.proxy  # the fixture: a loopback proxy noting every request


def _episode(root: Path, name: str, *flags: str, summary: str | None = None) -> str:
    script = root / f"{name}.json"
    episode: dict[str, Any] = {"match": "", "turns": TURNS}
    if summary is not None:
        episode["summary"] = summary
    script.write_text(json.dumps({"name": name, "episodes": [episode]}))
    ran = cli("run", "--model", f"scripted:{script}", "--max-turns", "12", *flags, "--json",
              db=root / "t.db")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return str(last_json(ran.stdout)["episode_id"])


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("compaction")
    summarize = ("--context", "summarize", "--context-window", "4000")
    ids = {
        "summarize": _episode(root, "summarize", *summarize, summary=SUMMARY),
        "mask": _episode(root, "mask", "--context", "mask:2", "--context-window", "2500"),
    }
    return root / "t.db", ids


def _page(episodes: tuple[Path, dict[str, str]], name: str) -> Path:
    db, ids = episodes
    out = db.parent / f"{name}.html"
    made = cli("view", ids[name], "-o", str(out), db=db)
    assert made.returncode == 0, made.stderr
    return out


def _payloads(db: Path, episode: str, kind: str) -> list[tuple[int, int, dict[str, Any]]]:
    with TraceStore(db) as store:
        return [(e.seq, e.turn, e.payload) for e in store.iter_events(episode) if e.kind == kind]


def _blocks(markup: str, cls: str) -> list[str]:
    return re.findall(rf'<div class="blk {cls}".*?(?=<div class="blk |</section>)', markup, re.S)


def test_each_compaction_call_is_a_block_of_its_own_not_a_model_turn(
    episodes: tuple[Path, dict[str, str]],
) -> None:
    db, ids = episodes
    requests = _payloads(db, ids["summarize"], "model.request")
    compactions = [r for r in requests if r[2]["purpose"] == "compaction"]
    markup = _page(episodes, "summarize").read_text(encoding="utf-8")
    assert compactions
    assert len(_blocks(markup, "compaction summarized")) == len(compactions)
    assert len(_blocks(markup, "turn")) == len(requests) - len(compactions)


def test_a_compaction_block_shows_the_tokens_before_and_after_and_what_it_dropped(
    episodes: tuple[Path, dict[str, str]],
) -> None:
    db, ids = episodes
    requests = _payloads(db, ids["summarize"], "model.request")
    usage = {
        u["call_id"]: u["input_tokens"] for _, _, u in _payloads(db, ids["summarize"], "usage")
    }
    at = next(i for i, r in enumerate(requests) if r[2]["purpose"] == "compaction")
    (_, turn, compaction), before, after = requests[at], requests[at - 1][2], requests[at + 1][2]
    markup = _page(episodes, "summarize").read_text(encoding="utf-8")
    text = " ".join(_dom(_blocks(markup, "compaction summarized")[0]).text)
    covers = compaction["covers"]
    assert f"turn {turn} · context compacted: summary of {covers} messages" in text
    assert f"tokens before {usage[before['call_id']]:,} (turn {turn - 1}'s request)" in text
    assert f"tokens after {usage[after['call_id']]:,} (turn {turn}'s request)" in text
    assert f"summarized {usage[compaction['call_id']]:,} tokens in the call" in text
    assert f"dropped {covers - 2} message(s) replaced by the summary" in text


def test_the_messages_a_compaction_replaced_are_folded_under_it(
    episodes: tuple[Path, dict[str, str]],
) -> None:
    db, ids = episodes
    with TraceStore(db) as store:
        request = next(
            e.payload
            for e in store.iter_events(ids["summarize"])
            if e.kind == "model.request" and e.payload["purpose"] == "compaction"
        )
        sent = store.message_chain(request["tip_hash"])
    markup = _page(episodes, "summarize").read_text(encoding="utf-8")
    block = _blocks(markup, "compaction summarized")[0]
    (folded,) = re.findall(r'<details class="replaced">.*?</details>', block, re.S)
    said = " ".join(_dom(folded).text)
    replaced = sent[2:-1]  # the system prompt and the task are kept; the last is the ask
    assert f"the {len(replaced)} message(s) it replaced" in said
    assert [m.content for m in replaced if m.role == "assistant"] == re.findall(r"step \d+", said)
    assert said.count("x" * 2000) == sum(m.role == "tool" for m in replaced)


def test_a_hostile_summary_renders_inert_with_its_text_visible(
    episodes: tuple[Path, dict[str, str]], proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    shown = _shown(_page(episodes, "summarize"), proxy, tmp_path)
    dom = _dom(shown)
    summaries = ["".join(_dom(b).text) for b in _blocks(shown, "compaction summarized")]
    assert {tag for tag, _ in dom.tags}.isdisjoint({"img", "iframe", "b"})
    assert [tag for tag, _ in dom.tags].count("script") == 1  # the page's own find script
    assert summaries and all(visible(SUMMARY) in s for s in summaries)


def test_a_masked_tool_output_shows_as_masked_naming_the_seq_of_its_original(
    episodes: tuple[Path, dict[str, str]],
) -> None:
    db, ids = episodes
    results = {seq for seq, _, _ in _payloads(db, ids["mask"], "tool.result")}
    masked = {t: r["masked"] for _, t, r in _payloads(db, ids["mask"], "model.request")}
    markup = _page(episodes, "mask").read_text(encoding="utf-8")
    text = "".join(_dom(markup).text)
    named = re.findall(r"⊘ masked bash output · 2,014 characters · original at seq (\d+)", text)
    heads = re.findall(r"turn (\d+) · scripted:[^·]*· (\d+) tool output\(s\) masked", text)
    assert named and {int(seq) for seq in named} <= results
    assert "tool outputs masked" in text
    assert {int(t): int(n) for t, n in heads} == {t: n for t, n in masked.items() if n}
