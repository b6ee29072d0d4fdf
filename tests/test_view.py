"""``agentrunner view``: episodes as one self-contained HTML page, opened in a real headless
Chromium with every network request sent to a recording proxy on loopback (as the report
page's test does).

The store: the demo episode (``run`` with the scripted model), a fork of it made at turn 3
with an injected message and run, and a hostile episode whose scripted model writes HTML,
script tags, ANSI and OSC sequences in its reasoning, its text, a command and a file.
``view`` is driven as a user runs it, in a subprocess.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_process import last_json
from test_report_html import _chromium, _console, _page_requests, _Recorder

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.errors import BadRequestError
from agentrunner.values.events import ModelRequest, ModelResponse, ToolCall, ToolResult
from agentrunner.values.safe_text import visible
from agentrunner.values.types import Message
from agentrunner.view import assets

HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> \x1b[31mred\x1b[0m"
    " \x1b]8;;http://x\x07link\x1b]8;;\x07 <b>bold</b>"
)
HOSTILE_COMMAND = "printf '%s' '<script>alert(3)</script><iframe src=http://x></iframe>'"
HOSTILE_FILE = "<script>alert(4)</script>\n<img src=x onerror=alert(5)>\n"
REFUSED = "bad request <b>bold</b> <script>alert(6)</script>"
INJECTED = "Check the tests first."
RESOURCE_ATTRIBUTES = ("src", "href", "data", "srcset", "action", "poster", "xlink:href")


def cli(*args: str, db: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``agentrunner ARGS --db DB``, in a subprocess."""
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0", "AGENTRUNNER_SANDBOX": "process"}
    env.pop("AGENTRUNNER_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run(db: Path, *args: str) -> str:
    done = cli(*args, "--json", db=db)
    assert done.returncode == 0, done.stderr
    found = last_json(done.stdout)
    return str(found["forks"][0] if "forks" in found else found["episode_id"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The store and its episodes by role: demo, fork (of the demo), hostile."""
    root = tmp_path_factory.mktemp("view")
    turns = [
        {"reasoning": f"thinking {HOSTILE}", "text": f"said {HOSTILE}",
         "tool_calls": [{"name": "bash", "arguments": {"command": HOSTILE_COMMAND}}]},
        {"text": "writing", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "evil.html", "content": HOSTILE_FILE}}]},
    ]  # fmt: skip
    script = root / "hostile.json"
    script.write_text(json.dumps({"name": "hostile", "episodes": [{"match": "", "turns": turns}]}))
    db = root / "t.db"
    demo = _run(db, "run")
    fork = _run(db, "fork", demo, "--turn", "3", "--message", INJECTED, "--run")
    hostile = _run(db, "run", "--model", f"scripted:{script}")
    return db, {"demo": demo, "fork": fork, "hostile": hostile}


def _page(store: tuple[Path, dict[str, str]], *names: str, extra: tuple[str, ...] = ()) -> Path:
    db, ids = store
    out = db.parent / f"{'-'.join(names)}{'-'.join(extra)}.html"
    made = cli("view", *(ids[n] for n in names), *extra, "-o", str(out), db=db)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(out)
    return out


class _Dom(HTMLParser):
    """Every element with its attributes, and the text (references resolved)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _dom(markup: str) -> _Dom:
    parsed = _Dom()
    parsed.feed(markup)
    return parsed


def resources(markup: str) -> list[str]:
    """What a page would load: any URL-bearing attribute but a link within the page, and
    any ``url(...)`` or ``@import`` in its styles."""
    found = [
        f"{tag} {name}={value}"
        for tag, attrs in _dom(markup).tags
        for name, value in attrs.items()
        if name in RESOURCE_ATTRIBUTES and value is not None and not value.startswith("#")
    ]
    styles = re.findall(r"<style[^>]*>(.*?)</style>", markup, flags=re.S)
    found += [m for css in styles for m in re.findall(r"url\([^)]*\)|@import[^;]*", css)]
    return found


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    """A loopback proxy that forwards nothing and notes every request (the report test's)."""
    seen: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Rec", (_Recorder,), {"seen": seen}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _shown(page: Path, proxy: tuple[str, list[str]], tmp_path: Path) -> str:
    """The page's DOM after Chromium ran it; no console message, no request made."""
    address, seen = proxy
    shown = _chromium(page.as_uri(), address, tmp_path / "profile")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert _console(shown.stderr) == []
    assert _page_requests(seen) == []
    return shown.stdout


def test_the_demo_page_renders_in_chromium_with_no_console_message_or_request(
    store: tuple[Path, dict[str, str]], proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    dom = _dom(_shown(_page(store, "demo"), proxy, tmp_path))
    _, ids = store
    assert [a.get("id") for t, a in dom.tags if t == "section"] == [f"ep-{ids['demo']}"]
    assert "Files changed" in dom.text


def test_every_model_turn_and_tool_call_of_the_store_is_on_the_page(
    store: tuple[Path, dict[str, str]],
) -> None:
    db, ids = store
    page = _page(store, "demo").read_text(encoding="utf-8")
    turns, calls, results = 0, 0, 0
    with TraceStore(db) as opened:
        for row in opened.iter_events(ids["demo"]):
            match row.typed():
                case ModelRequest():
                    turns += 1
                    assert f'id="ep-{ids["demo"]}-{row.seq}"><h4>turn {row.turn} ' in page
                case ToolCall(call_id=call_id, name=name):
                    calls += 1
                    assert f'▶ {name} <span class="meta">{call_id}</span>' in page
                case ToolResult(observation=observation):
                    results += 1
                    assert html.escape(visible(observation)) in page
    assert (turns, calls, results) == (7, 6, 6)
    assert page.count('<div class="blk turn"') == turns
    assert page.count("usage: ") == turns


def test_the_demo_page_holds_the_change_as_the_diff_command_prints_it(
    store: tuple[Path, dict[str, str]],
) -> None:
    db, ids = store
    patch = cli("diff", ids["demo"], db=db)
    assert patch.returncode == 0 and patch.stdout, patch.stderr
    text = "".join(_dom(_page(store, "demo").read_text(encoding="utf-8")).text)
    assert patch.stdout.rstrip("\n") in text
    assert "-    return total / (len(values) - 1)" in text


def test_the_demo_page_is_small(store: tuple[Path, dict[str, str]]) -> None:
    size = _page(store, "demo").stat().st_size
    assert size < 100_000, size  # 7 turns, 149 events: about 13 kB


def test_a_fork_and_its_parent_link_to_each_other_in_one_page(
    store: tuple[Path, dict[str, str]],
) -> None:
    _, ids = store
    page = _page(store, "demo", "fork").read_text(encoding="utf-8")
    demo, fork = ids["demo"], ids["fork"]
    parent_part, fork_part = page.split(f'<section class="episode" id="ep-{fork}">')
    assert f'fork <a href="#ep-{fork}">' in parent_part  # its lineage and the fork point
    assert f'fork of <a href="#ep-{demo}">' in fork_part
    assert f'inherited from <a href="#ep-{demo}">' in fork_part  # not repeated
    assert INJECTED in fork_part
    assert '<nav class="index">' in page  # two episodes: an index first


def test_forks_brings_the_forks_below_an_episode_into_its_page(
    store: tuple[Path, dict[str, str]],
) -> None:
    _, ids = store
    page = _page(store, "demo", extra=("--forks",)).read_text(encoding="utf-8")
    assert f'<section class="episode" id="ep-{ids["fork"]}">' in page


def test_a_fork_outside_the_page_is_named_but_not_linked(
    store: tuple[Path, dict[str, str]],
) -> None:
    _, ids = store
    alone = _page(store, "fork").read_text(encoding="utf-8")
    assert 'href="#ep-' + ids["demo"] not in alone
    assert f'fork of <code title="not in this page">{ids["demo"][:8]}' in alone
    assert '<details class="inherited">' in alone  # the inherited turns, folded


def test_a_hostile_episode_renders_inert_with_its_text_visible(
    store: tuple[Path, dict[str, str]], proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    page = _page(store, "hostile")
    assert "\x1b" not in page.read_text(encoding="utf-8")
    dom = _dom(_shown(page, proxy, tmp_path))
    made = {tag for tag, _ in dom.tags}
    assert made.isdisjoint({"img", "iframe", "b"})
    assert [tag for tag, _ in dom.tags].count("script") == 1  # the page's own find script
    assert not [name for _, attrs in dom.tags for name in attrs if name.startswith("on")]
    text = "".join(dom.text)
    shown = visible(HOSTILE)  # ESC as ^[, BEL as ^G
    assert f"thinking {shown}" in text and f"said {shown}" in text
    assert "^[[31mred^[[0m" in text and "^[]8;;http://x^Glink" in text
    assert HOSTILE_COMMAND in text
    assert "+<script>alert(4)</script>" in text  # the file it wrote, in the diff


def test_the_pages_reference_no_url_as_a_resource(store: tuple[Path, dict[str, str]]) -> None:
    for names in (("demo",), ("hostile",), ("demo", "fork")):
        markup = _page(store, *names).read_text(encoding="utf-8")
        assert resources(markup) == []
        values = [v for _, attrs in _dom(markup).tags for v in attrs.values() if v]
        assert [v for v in values if re.search(r"https?:|//", v)] == []  # in no attribute


def test_the_resource_check_finds_what_a_page_would_load() -> None:
    bad = (
        '<link rel="stylesheet" href="https://cdn.example/x.css"><img src="x.png">'
        '<style>body { background: url(http://example.invalid/a.png) }</style><a href="#ok">'
    )
    assert resources(bad) == [
        "link href=https://cdn.example/x.css",
        "img src=x.png",
        "url(http://example.invalid/a.png)",
    ]


def test_the_page_allows_only_its_own_style_and_script() -> None:
    policy = assets.policy()
    assert policy.startswith("default-src 'none';")
    assert policy.count("'sha256-") == 2 and "unsafe" not in policy


def test_the_find_script_reads_text_and_never_writes_markup() -> None:
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in assets.SCRIPT
    assert "textContent" in assets.SCRIPT


def test_the_page_goes_to_the_episode_id_in_the_working_folder_by_default(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, ids = store
    made = cli("view", ids["demo"][:10], db=db, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"{ids['demo']}.html"
    assert (tmp_path / f"{ids['demo']}.html").read_text(encoding="utf-8").startswith("<!doctype")


def test_json_names_the_page_its_episodes_and_its_size(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, ids = store
    out = tmp_path / "p.html"
    made = cli("view", ids["demo"], ids["fork"], "-o", str(out), "--json", db=db)
    assert made.returncode == 0, made.stderr
    assert last_json(made.stdout) == {
        "path": str(out),
        "episodes": [ids["demo"], ids["fork"]],
        "bytes": out.stat().st_size,
    }


def test_an_unknown_episode_is_a_one_line_usage_error(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, _ = store
    made = cli("view", "NOSUCHEPISODE", db=db, cwd=tmp_path)
    assert made.returncode == 2
    assert made.stderr.strip().splitlines() == [f"error: no episode 'NOSUCHEPISODE' in {db}"]
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_file_is_a_one_line_error_naming_it(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, ids = store
    target = tmp_path / "missing-folder" / "p.html"
    made = cli("view", ids["demo"], "-o", str(target), db=db)
    assert made.returncode == 2
    (said,) = made.stderr.strip().splitlines()
    assert said.startswith(f"error: cannot write the page to {target}: ")


def test_view_without_an_episode_or_batch_is_a_usage_error(
    store: tuple[Path, dict[str, str]],
) -> None:
    made = cli("view", db=store[0])
    assert made.returncode == 2 and "name an episode (EP) or a batch" in made.stderr


def test_view_help_describes_the_page() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "view", "--help"],
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0
    assert "self-contained HTML page" in shown.stdout and "--batch B" in shown.stdout


class _Refused:
    """A model whose every call fails with a provider error (recorded: a failed episode)."""

    provider, model, params = "scripted", "refused", {}

    def spec(self) -> dict[str, Any]:
        return {"spec": "scripted:refused", "provider": "scripted", "model": "refused"}

    def __call__(self, context: Any) -> Any:
        raise BadRequestError(REFUSED)


def test_a_model_error_and_the_end_it_caused_are_shown_escaped(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with TraceStore(db) as opened, WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        with contextlib.suppress(BadRequestError):
            run_agent_episode(
                env=env, task_id="demo-mean", seed=0, model_fn=_Refused(), store=opened
            )
        (episode,) = [e.episode_id for e in opened.list_episodes()]
    out = tmp_path / "p.html"
    assert cli("view", episode, "-o", str(out), db=db).returncode == 0
    dom = _dom(out.read_text(encoding="utf-8"))
    text = "".join(dom.text)
    assert f"error in generate: BadRequestError: {REFUSED}" in text
    assert "end: error after 1 turn(s)" in text
    assert "b" not in {tag for tag, _ in dom.tags}


def test_a_batch_page_indexes_its_episodes_and_links_each(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    ran = cli("batch", "--task", "demo-mean", "--seeds", "0-1", "--json", db=db)
    assert ran.returncode == 0, ran.stderr
    batch = last_json(ran.stdout)
    made = cli("view", "--batch", batch["batch_id"], db=db, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"{batch['batch_id']}.html"
    page = (tmp_path / made.stdout.strip()).read_text(encoding="utf-8")
    index = page.split('<nav class="index">')[1].split("</nav>")[0]
    for episode in batch["episodes"]:
        assert f'href="#ep-{episode["episode_id"]}"' in index
        assert f'<section class="episode" id="ep-{episode["episode_id"]}">' in page


def test_element_ids_are_unique_in_every_page(store: tuple[Path, dict[str, str]]) -> None:
    for names in (("demo", "fork"), ("hostile",)):
        markup = _page(store, *names).read_text(encoding="utf-8")
        ids = [attrs["id"] for _, attrs in _dom(markup).tags if attrs.get("id")]
        assert len(ids) == len(set(ids))


def test_decision_points_show_their_candidates_and_link_their_forks(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    ran = cli("run", "--branch-every", "3", "--actions", "2", "--samples", "1",
              "--horizon", "1", "--json", db=db)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    episode = last_json(ran.stdout)["episode_id"]
    shown = cli("show", episode, "--json", db=db)
    decisions = last_json(shown.stdout)["decisions"]
    out = tmp_path / "p.html"
    assert cli("view", episode, "--forks", "-o", str(out), db=db).returncode == 0
    page = out.read_text(encoding="utf-8")
    assert page.count('<div class="blk decision"') == len(decisions) == 2
    assert page.count("★ adopted") == 2
    for decision in decisions:
        assert f"turn {decision['turn']} · decision point at seq {decision['seq']}" in page
        for candidate in decision["candidates"]:
            for fork in [candidate["proposal"], *candidate["continuations"]]:
                assert f'<a href="#ep-{fork}">' in page


def test_a_compaction_shows_what_it_removed_and_added(tmp_path: Path) -> None:
    """A request whose message chain does not extend the previous request's (a context
    policy replaced the conversation with a summary), written through the store's API."""
    db = tmp_path / "t.db"
    summary = "Summary: asked 2+2, answered 4. Now: 3+3?"
    with TraceStore(db) as opened:
        episode = opened.create_episode(task_id="t", seed=0, env={"kind": "x"}, model={})
        first = opened.put_message(None, Message(role="user", content="What is 2+2?"))
        answer = opened.put_message(first, Message(role="assistant", content="4"))
        ask = opened.put_message(answer, Message(role="user", content="And 3+3?"))
        short = opened.put_message(None, Message(role="user", content=summary))
        tools = opened.put_tools([])
        writer = opened.writer(episode)
        for turn, call, tip in ((1, "c1", ask), (2, "c2", short)):
            writer.append(turn, ModelRequest(call_id=call, tip_hash=tip, tools_hash=tools,
                                             provider="p", model="m"))  # fmt: skip
            writer.append(turn, ModelResponse(call_id=call, message_hash=answer, latency_s=0.1))
    out = tmp_path / "p.html"
    assert cli("view", episode, "-o", str(out), db=db).returncode == 0
    page = out.read_text(encoding="utf-8")
    (part,) = re.findall(r'<div class="blk compaction".*?</div>', page, flags=re.S)
    text = "".join(_dom(part).text)
    assert "turn 2 · context compacted" in text
    assert "0 message(s) kept; 2 removed, 1 changed" in text
    for before in ("user: What is 2+2?", "assistant: 4", "user: And 3+3?", f"user: {summary}"):
        assert before in text


def _blocks(dom: str) -> list[tuple[str, bool]]:
    """(id, hidden) of each block the find box filters."""
    return [
        (attrs.get("id") or "", "hidden" in attrs)
        for _, attrs in _dom(dom).tags
        if "blk" in (attrs.get("class") or "").split()
    ]


def test_find_in_the_address_keeps_only_the_blocks_holding_the_text(
    store: tuple[Path, dict[str, str]], proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    address, _ = proxy
    page = _page(store, "hostile")
    shown = _chromium(page.as_uri() + "#find=%3Cscript%3Ealert(3)", address, tmp_path / "p")
    assert shown.returncode == 0 and _console(shown.stderr) == []
    blocks = _blocks(shown.stdout)
    kept = [name for name, hidden in blocks if not hidden]
    _, ids = store
    assert kept == [f"ep-{ids['hostile']}-{seq}" for seq in _turn_seqs(store, ids["hostile"])[:1]]
    assert len(blocks) > len(kept) > 0
    assert '<span id="found" class="meta">1 of ' in shown.stdout


def _turn_seqs(store: tuple[Path, dict[str, str]], episode: str) -> list[int]:
    with TraceStore(store[0]) as opened:
        return [r.seq for r in opened.iter_events(episode, kinds=["model.request"])]
