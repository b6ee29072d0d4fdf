"""``agentrunner view`` shows what ``agentrunner verify`` stored with an episode: the latest
result of each verifier and its details, all of it as text (a judge's answer and a rule's
evidence are the model's words, and a hostile episode's words are data, never markup).

The store: the demo episode (``run`` with the scripted model), verified three ways through the
CLI as a user does: the reward check, a rule naming a hostile pattern, and a scripted judge
whose answer is hostile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import last_json
from test_view import HOSTILE, _dom, _run, _shown, cli, proxy, resources

from agentrunner.values.safe_text import visible

__all__ = ["proxy"]  # the Chromium test's fixture, from the view tests

HOSTILE_RULE = "command:<script>alert(7)</script>"


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The store and its demo episode, verified by the reward check, a rule and a judge."""
    root = tmp_path_factory.mktemp("view-verify")
    db = root / "t.db"
    demo = _run(db, "run")
    judge = root / "judge.json"
    answer = f"Looks fine. {HOSTILE}\nSCORE: 0.8"
    judge.write_text(json.dumps({"episodes": [{"match": "", "turns": [{"text": answer}]}]}))
    for how in (
        (),
        ("--rule", HOSTILE_RULE),
        ("--judge", f"scripted:{judge}", "--rubric", "fixes the bug"),
    ):
        done = cli("verify", demo, *how, "--json", db=db)
        assert done.returncode in (0, 1), done.stderr
    return db, demo


def _page(verified: tuple[Path, str]) -> str:
    db, demo = verified
    out = db.parent / "page.html"
    made = cli("view", demo, "-o", str(out), db=db)
    assert made.returncode == 0, made.stderr
    return out.read_text(encoding="utf-8")


def _results(verified: tuple[Path, str]) -> list[dict[str, object]]:
    db, demo = verified
    shown = cli("show", demo, "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    results: list[dict[str, object]] = last_json(shown.stdout)["verifications"]
    return results


def test_the_page_shows_each_verifiers_verdict_and_score_as_show_lists_them(
    verified: tuple[Path, str],
) -> None:
    page = _page(verified)
    block = page.split('<div class="blk verify">')[1].split("</div>")[0]
    results = _results(verified)
    assert len(results) == 3
    for result in results:
        score = "-" if result["score"] is None else f"{result['score']:.2f}"
        verdict = "✓ pass" if result["passed"] else "✗ fail"
        row = f"<tr><td>{result['verifier']}</td><td><span class="
        assert row in block, result["verifier"]
        assert f"{verdict}</span></td><td>{score}</td>" in block, result["verifier"]
    assert "0.80" in block  # the judge's score


def test_the_details_of_each_result_are_on_the_page(verified: tuple[Path, str]) -> None:
    text = "".join(_dom(_page(verified)).text)
    assert "details of reward" in text and "recorded" in text and "reproduced" in text
    assert f"✗ {HOSTILE_RULE}" not in text  # a check is a row: rule, passed, evidence
    assert HOSTILE_RULE in text and "✗" in text
    assert f"Looks fine. {visible(HOSTILE)}" in text  # the judge's answer, as text


def test_a_hostile_judge_answer_and_rule_render_inert(
    verified: tuple[Path, str], proxy: tuple[str, list[str]], tmp_path: Path
) -> None:
    page = _page(verified)
    assert "\x1b" not in page and resources(page) == []
    out = tmp_path / "page.html"
    out.write_text(page, encoding="utf-8")
    dom = _dom(_shown(out, proxy, tmp_path))
    tags = [tag for tag, _ in dom.tags]
    assert {"img", "iframe", "b"}.isdisjoint(tags)
    assert tags.count("script") == 1  # the page's own find script
    assert not [name for _, attrs in dom.tags for name in attrs if name.startswith("on")]
    assert "alert(7)" in "".join(dom.text)


def test_an_episode_nobody_verified_has_no_verification_block(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    demo = _run(db, "run")
    out = tmp_path / "p.html"
    assert cli("view", demo, "-o", str(out), db=db).returncode == 0
    assert 'class="blk verify"' not in out.read_text(encoding="utf-8")
