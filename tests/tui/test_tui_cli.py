"""``agentrunner tui``: registered, with help text, and refusing bad input before the UI."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner.cli.main import command_names, main


def test_tui_is_a_command() -> None:
    assert "tui" in command_names()


def test_tui_help_names_the_keys_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["tui", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "--db" in out and "--keymap" in out and "EP" in out


def test_tui_with_an_unknown_episode_is_a_usage_error(
    tui_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tui", "--db", str(tui_db), "NOPE"]) == 2
    assert "no episode 'NOPE'" in capsys.readouterr().err


def test_tui_with_a_bad_keymap_is_a_usage_error(
    tui_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keymap = tmp_path / "keys.json"
    keymap.write_text('["not", "an", "object"]')
    assert main(["tui", "--db", str(tui_db), "--keymap", str(keymap)]) == 2
    assert "--keymap" in capsys.readouterr().err


def test_tui_with_unknown_keymap_ids_names_them_and_the_valid_ones(
    tui_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keymap = tmp_path / "keys.json"
    keymap.write_text('{"trace.forkk": "F", "trace.next_turn": "ctrl+n", "nope": "x"}')
    assert main(["tui", "--db", str(tui_db), "--keymap", str(keymap)]) == 2
    err = capsys.readouterr().err
    assert "unknown binding ids 'trace.forkk' (did you mean 'trace.fork'?), 'nope'" in err
    assert "valid ids (also listed by ? in the app): app.help, app.quit" in err
