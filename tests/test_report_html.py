"""`agentrunner report --html FILE`: one self-contained page with the report's tables, its
inline SVG charts and each task's episodes, opened in a real headless Chromium with every
network request sent to a recording proxy on loopback.

The store: episodes written through the real runner by two scripted models on two tasks and
seeds 0 and 1. Model A gives up (reward 0) on paginate-off-by-one; the other model, whose spec
is hostile HTML, plays the demo script (reward 1) and fails (a model error with a hostile
message) on (demo-mean, 1). The scripted models cost nothing: every cost is $0.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cli_process import AGENTRUNNER, run_cli

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.errors import BadRequestError
from providers.scripted import ScriptedModel

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE_SPEC = 'scripted:<img src=x onerror="alert(1)"></script><script>alert(2)</script>'
HOSTILE_ERROR = "bad request <b>bold</b> <script>alert(3)</script>"
CHARTS = ("pass-rate", "turns")  # every cost is $0: no cost chart
COST_CHARTS = ("reward-cost", "cost-time")
BROWSER_SERVICES = {"update.googleapis.com", "accounts.google.com", "clients2.google.com"}
"""Hosts headless Chromium asks by itself, even for about:blank and with the background
networking flags (component updates, sign-in, network time); any other request is the page's."""


class _Fixed:
    """The demo script, giving up at once, or a model error, by (task, seed)."""

    provider = "scripted"

    def __init__(self, spec: str, fails: set[str], broken: set[tuple[str, int]]) -> None:
        self.model, self.params, self.fails, self.broken = spec, {}, fails, broken
        self.good = ScriptedModel("demo", pace=0)
        self.bad: ScriptedModel | None = None

    def spec(self) -> dict[str, Any]:
        return {"spec": self.model, "provider": "scripted", "model": self.model}

    def __call__(self, context: Any) -> Any:
        if (context.task_id, context.seed) in self.broken:
            raise BadRequestError(HOSTILE_ERROR)
        assert self.bad is not None
        return (self.bad if context.task_id in self.fails else self.good)(context)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-html")
    script = root / "give-up.json"
    turn = {"text": "Giving up.", "tool_calls": [{"name": "submit", "arguments": {}}]}
    script.write_text(json.dumps({"name": "give-up", "episodes": [{"match": "", "turns": [turn]}]}))
    path = root / "traces.db"
    models = [
        _Fixed("scripted:model-a", {"paginate-off-by-one"}, set()),
        _Fixed(HOSTILE_SPEC, set(), {("demo-mean", 1)}),
    ]
    mp = pytest.MonkeyPatch()
    mp.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
    with TraceStore(path) as store, WorkspaceEnv(snapshot_dir=root / "snaps") as env:
        for model in models:
            model.bad = ScriptedModel(str(script), pace=0)
            for task in ("demo-mean", "paginate-off-by-one"):
                for seed in (0, 1):
                    with contextlib.suppress(BadRequestError):  # recorded: a failed episode
                        run_agent_episode(
                            env=env, task_id=task, seed=seed, model_fn=model, store=store
                        )
    mp.undo()
    return path


@pytest.fixture(scope="module")
def page(db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    result = run_cli("report", "--db", str(db), "--json", "--html", str(out))
    assert result.returncode == 0, result.stderr
    return out


def _json_report(db: Path) -> Any:
    result = run_cli("report", "--db", str(db), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


class _Page(HTMLParser):
    """The tables' cells (a list of rows per table) and every tag's attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _parsed(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_html_report_is_written_beside_the_usual_json_report(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    with_html = run_cli("report", "--db", str(db), "--json", "--html", str(out))
    assert with_html.returncode == 0, with_html.stderr
    assert f"wrote {out}" in with_html.stderr
    assert json.loads(with_html.stdout.splitlines()[-1]) == _json_report(db)
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_html_report_loads_nothing_from_elsewhere(page: Path) -> None:
    parsed = _parsed(page)
    sources = [
        (tag, name, value)
        for tag, attrs in parsed.tags
        for name, value in attrs.items()
        if name in ("src", "href", "data", "srcset", "action", "poster") and value
    ]
    assert sources == []  # no file, address or data URL: everything is inline
    assert [attrs for tag, attrs in parsed.tags if tag == "script"] == []  # SVG, no script
    assert not [tag for tag, attrs in parsed.tags if tag in ("link", "img", "iframe")]


def _pct(value: float) -> str:
    return f"{value:.1%}"


def test_html_tables_show_the_numbers_of_the_json_report(db: Path, page: Path) -> None:
    made = _json_report(db)
    groups, tasks = _parsed(page).tables[:2]
    header, *rows = groups
    by_model = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    a = by_model["scripted:model-a"]
    assert a["pass rate [95%]"] == "50.0% [15.0%, 85.0%]"  # 2 of 4; Wilson by hand: .150, .850
    for group in [*made["groups"], {"key": {"model": "all"}, **made["overall"]}]:
        shown = by_model[group["key"]["model"]]
        low, high = group["pass_rate_ci95"]
        unjudged = f" (unjudged {group['unjudged']})" if group["unjudged"] else ""
        assert shown["episodes"] == f"{group['episodes']}{unjudged}"
        assert shown["passed"] == str(group["passed"])
        assert shown["pass rate [95%]"] == f"{_pct(group['pass_rate'])} [{_pct(low)}, {_pct(high)}]"
        assert shown["reward ± se"] == f"{group['reward_mean']:.3f} ± {group['reward_se']:.3f}"
        unknown = f" (+{group['cost_unknown']} unknown)" if group["cost_unknown"] else ""
        assert shown["cost"] == f"${group['cost_usd']:.4f}{unknown}"  # the failed one: no cost
        assert shown["tokens in / cached / out / reasoning"].startswith(
            f"{group['tokens']['input']:,} / "
        )
    task_header, *task_rows = tasks
    shown_tasks = {(r[0], r[1]): dict(zip(task_header, r, strict=True)) for r in task_rows}
    for task in made["tasks"]:
        for row in task["rows"]:
            shown = shown_tasks[(task["task_id"], row["model"])]
            assert shown["passed"] == str(row["passed"])
            assert shown["pass rate [95%]"].startswith(_pct(row["pass_rate"]))
    assert len(shown_tasks) == sum(len(t["rows"]) for t in made["tasks"]) == 4


def test_html_report_escapes_model_specs_and_error_messages(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert HOSTILE_SPEC not in text and HOSTILE_ERROR not in text
    assert html.escape(HOSTILE_SPEC) in text  # in the tables, shown as text
    assert f"BadRequestError: {html.escape(HOSTILE_ERROR)}" in text
    assert [tag for tag, _ in _parsed(page).tags if tag in ("img", "b")] == []


class _Recorder(BaseHTTPRequestHandler):
    """A proxy that forwards nothing: it notes each request and answers 502."""

    seen: list[str]

    def _refuse(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_error(502, "no network in this test")

    do_GET = do_POST = do_HEAD = do_CONNECT = _refuse

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _chromium(url: str, proxy: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """``url`` rendered by headless Chromium: its DOM once scripts settled (virtual time, so
    no wall-clock wait decides it) on stdout, its log with console messages on stderr."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; CI does)")
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--proxy-server={proxy}",
            "--proxy-bypass-list=<-loopback>",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=30000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def _host(request: str) -> str:
    """The host a proxied request was for: ``CONNECT host:443`` or ``GET http://host/...``."""
    method, target = request.split(" ", 1)
    if method == "CONNECT":
        return target.rsplit(":", 1)[0]
    return urlsplit(target).hostname or ""


def _page_requests(seen: list[str]) -> list[str]:
    return [request for request in seen if _host(request) not in BROWSER_SERVICES]


def _console(stderr: str) -> list[str]:
    """What the page said on its console (Chromium logs each message as ``CONSOLE``)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_html_report_renders_in_chromium_without_errors_or_network(
    page: Path, proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    address, seen = proxy
    shown = _chromium(page.as_uri(), address, tmp_path / "profile")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert _console(shown.stderr) == []
    assert _page_requests(seen) == []
    for chart in CHARTS:
        assert f'<svg id="{chart}" class="chart"' in shown.stdout
    assert shown.stdout.count('<g class="bar">') == 4  # a pass-rate bar per (task, model)
    live = _Page()
    live.feed(shown.stdout)
    assert [tag for tag, _ in live.tags if tag == "img"] == []  # the spec stayed text


def test_the_browser_check_sees_console_errors_and_network_requests(
    proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!doctype html><img src="http://example.invalid/x.png">'
        "<script>console.error('boom'); notDefined();</script>"
    )
    address, seen = proxy
    shown = _chromium(bad.as_uri(), address, tmp_path / "profile")
    said = "\n".join(_console(shown.stderr))
    assert "boom" in said and "Uncaught ReferenceError" in said
    assert [_host(r) for r in _page_requests(seen)] == ["example.invalid"]


def test_html_report_needs_no_plotly(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    blocked = (
        "import sys; sys.modules['plotly'] = None; from agentrunner.cli.main import main;"
        f" sys.exit(main(['report', '--db', {str(db)!r}, '--html', {str(out)!r}]))"
    )
    proc = subprocess.run(
        [AGENTRUNNER[0], "-c", blocked], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert '<svg id="pass-rate"' in out.read_text(encoding="utf-8")


def test_html_is_refused_with_compare(db: Path, tmp_path: Path) -> None:
    result = run_cli(
        "report", "--db", str(db), "--compare", "a", "b", "--html", str(tmp_path / "r.html")
    )
    assert result.returncode == 2 and "--html" in result.stderr


def test_report_help_describes_the_html_option() -> None:
    result = run_cli("report", "--help")
    assert result.returncode == 0
    assert re.search(r"--html FILE\s+also write the report", result.stdout)


def test_html_report_of_eight_episodes_stays_small(page: Path) -> None:
    assert page.stat().st_size < 150_000  # plotly.js inlined made it 4.85 MB


def test_all_zero_costs_draw_no_cost_axis(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for chart in COST_CHARTS:
        assert f'id="{chart}"' not in text
    assert "-$1" not in text and "$-1" not in text
    assert "Not drawn (nothing priced cost anything" in text


def test_the_page_names_the_store_by_its_file_name_only(db: Path, page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert str(db.parent) not in text
    assert "8 episodes from traces.db;" in text


def test_each_tasks_episodes_are_listed_failures_first_with_the_command_that_opens_each(
    db: Path, page: Path
) -> None:
    listed = run_cli("ls", "--db", str(db), "--json", "--limit", "100")
    assert listed.returncode == 0, listed.stderr
    episodes = json.loads(listed.stdout.splitlines()[-1])
    tables = [t for t in _parsed(page).tables if t and t[0][:2] == ["outcome", "episode"]]
    assert len(tables) == 2  # one per task, in task order
    for task, (_, *rows) in zip(("demo-mean", "paginate-off-by-one"), tables, strict=True):
        ids = {e["episode_id"] for e in episodes if e["task_id"] == task}
        assert {row[1] for row in rows} == ids
        assert [row[-1] for row in rows] == [f"agentrunner show {row[1]}" for row in rows]
        outcomes = [row[0] for row in rows]
        assert outcomes == sorted(outcomes, key=["failed", "unjudged", "passed"].index)
        assert outcomes.count("passed") == (3 if task == "demo-mean" else 2)
        assert outcomes[0] != "passed"  # model A gave up; the model error: failed or unjudged
