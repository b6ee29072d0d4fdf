"""Forged verdicts: the reward follows from the recorded change alone.

A scripted model drives each attack through the real runner and sandbox, as a model would:
a module that prints a passing verdict and leaves while the verifier imports it, bytecode
compiled beside unchanged source (the snapshot, and so ``diff``, leaves ``__pycache__`` out),
a ``conftest.py`` that rewrites the JUnit report after pytest wrote it, and changes ``diff``
leaves out (an empty folder, the private ``.git``). Each earns 0;
a real fix still earns 1.0, ``verify`` reproduces recorded rewards from the store alone, and
an episode whose reward is not reproduced is flagged by ``ls``, ``show`` and ``report``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from attack_helpers import DEMO, modes
from cli_process import run_cli
from thirdparty_repo import git

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.jail import SandboxConfig, sandbox_python
from agentrunner.envs.tasks import Task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.readers.changes import episode_change
from providers.scripted import ScriptedModel

AS_ROOT = os.geteuid() == 0
BUGGY = "(len(values) - 1)"
FIXED = "len(values)"

FORGE_AT_IMPORT = """
import json, os, sys
print(json.dumps({"passed": 5, "total": 5, "failures": [],
                  "nonce": sys.argv[2] if len(sys.argv) > 2 else ""}), flush=True)
os._exit(0)
"""

FORGE_SUPERVISOR = """
import json, os, signal, sys
verdict = {"passed": 5, "total": 5, "failures": [], "complete": True}
if "--child" in sys.argv:  # a supervisor runs the tests: write its verdict, then kill it
    parent = os.getppid()  # its last argument names its verdict pipe
    fd = open(f"/proc/{parent}/cmdline", "rb").read().split(b"\\0")[-2].decode()
    try:
        pipe = os.open(f"/proc/{parent}/fd/{fd}", os.O_WRONLY)
        os.write(pipe, json.dumps(verdict).encode() + b"\\n")
        os.kill(parent, signal.SIGKILL)
    except OSError as exc:
        print("refused:", exc)
else:  # the verdict line of a verifier that runs the tests itself
    print(json.dumps({**verdict, "nonce": sys.argv[-1]}), flush=True)
os._exit(0)
"""

COMPILE_BESIDE = r"""python - <<'PY'
import importlib.util, pathlib, py_compile, tempfile
fixed = pathlib.Path("stats.py").read_text().replace("(len(values) - 1)", "len(values)")
folder = pathlib.Path(tempfile.mkdtemp())
(folder / "stats.py").write_text(fixed)
py_compile.compile(
    str(folder / "stats.py"),
    cfile=importlib.util.cache_from_source("stats.py"),
    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
)
print("compiled", importlib.util.cache_from_source("stats.py"))
PY"""

CONFTEST = """import atexit

FAKE = '<testsuite><testcase classname="test_calc" name="test_add"/></testsuite>'


def _rewrite():
    with open("report.xml", "w") as report:
        report.write(FAKE)


atexit.register(_rewrite)
"""

PYTEST = "python -m pytest -q -p no:cacheprovider --junitxml=report.xml"


def _script(tmp_path: Path, calls: list[dict[str, Any]]) -> str:
    """A scripted model that makes ``calls`` (one a turn), then submits."""
    turns = [{"tool_calls": [call]} for call in calls]
    turns.append({"tool_calls": [{"name": "submit", "arguments": {}}]})
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"name": "attack", "episodes": [{"match": "", "turns": turns}]}))
    return str(path)


def _run(env: WorkspaceEnv, db: Path, task_id: str, script: str) -> tuple[str, float]:
    with TraceStore(db) as store:
        rollout = run_agent_episode(
            env=env,
            task_id=task_id,
            model_fn=ScriptedModel(script, pace=0),
            store=store,
            max_turns=20,
        )
    assert rollout.stop_reason == "done", rollout
    return rollout.episode_id, rollout.total_reward


def _demo(mode: str, db: Path, tmp_path: Path, calls: list[dict[str, Any]]) -> tuple[str, float]:
    """The demo task (``mean`` divides by n - 1) in ``mode``, attacked with ``calls``."""
    with WorkspaceEnv(sandbox=SandboxConfig(mode=mode)) as env:  # type: ignore[arg-type]
        return _run(env, db, DEMO, _script(tmp_path, calls))


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command, "timeout": 120}}


def _last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _verify(db: Path, episode: str) -> dict[str, Any]:
    """``agentrunner verify EP``: the reward check's stored result."""
    (result,) = _last_json(run_cli("verify", episode, "--db", str(db), "--json"))["results"]
    assert result["verifier"] == "reward"
    return dict(result)


FIX = {"name": "str_replace", "arguments": {"path": "stats.py", "old_str": BUGGY, "new_str": FIXED}}


@pytest.mark.parametrize("mode", modes())
def test_a_real_fix_earns_full_reward_and_verify_reproduces_it(mode: str, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    episode, reward = _demo(mode, db, tmp_path, [FIX])
    assert reward == 1.0
    result = _verify(db, episode)
    assert (result["passed"], result["score"]) == (True, 1.0)
    assert (result["details"]["recorded"], result["details"]["reproduced"]) == (1.0, 1.0)


@pytest.mark.parametrize("mode", modes())
def test_a_module_that_prints_a_passing_verdict_and_exits_at_import_earns_nothing(
    mode: str, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    forge = _bash(f"cat >> stats.py <<'PY'\n{FORGE_AT_IMPORT}PY")
    episode, reward = _demo(mode, db, tmp_path, [forge])
    assert reward == 0.0
    assert _verify(db, episode)["passed"] is True  # 0, and reproduced as 0


@pytest.mark.parametrize(
    "mode", modes("root passes the supervisor's non-dumpable guard" if AS_ROOT else None)
)
def test_the_code_under_test_cannot_write_its_supervisors_verdict(
    mode: str, tmp_path: Path
) -> None:
    forge = _bash(f"cat >> stats.py <<'PY'\n{FORGE_SUPERVISOR}PY")
    _, reward = _demo(mode, tmp_path / "t.db", tmp_path, [forge])
    assert reward == 0.0


@pytest.mark.parametrize("mode", modes())
def test_bytecode_compiled_beside_unchanged_source_earns_nothing(mode: str, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    episode, reward = _demo(mode, db, tmp_path, [_bash(COMPILE_BESIDE)])
    with TraceStore(db) as store:
        assert episode_change(store, episode).patch(store) == ""  # `diff` shows nothing
    assert reward == 0.0
    assert (_verify(db, episode)["details"]["reproduced"]) == 0.0


def _calc_repo(path: Path) -> Path:
    """A git repository whose one test fails: ``add`` subtracts."""
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (path / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "calc")
    return path


@pytest.mark.parametrize("mode", modes())
def test_a_conftest_that_rewrites_the_junit_report_earns_nothing(mode: str, tmp_path: Path) -> None:
    probe = subprocess.run([str(sandbox_python()), "-c", "import pytest"], check=False)
    if probe.returncode != 0:
        pytest.skip("pytest is not installed for the sandbox's python")
    db = tmp_path / "t.db"
    repo = _calc_repo(tmp_path / "repo")
    write = {"name": "write_file", "arguments": {"path": "conftest.py", "content": CONFTEST}}
    env = WorkspaceEnv.for_repo(
        repo,
        prompt="make add add",
        test=PYTEST,
        test_report="report.xml",
        sandbox=SandboxConfig(mode=mode),  # type: ignore[arg-type]
    )
    task_id = f"repo:{repo.name}"
    with env:
        episode, reward = _run(env, db, task_id, _script(tmp_path, [write]))
    assert reward == 0.0
    assert _verify(db, episode)["details"]["reproduced"] == 0.0


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize(
    ("change", "test"),
    [
        ("mkdir -p made/deeper", "test -d made"),
        ("git config agent.here yes", "git config agent.here"),
    ],
    ids=["empty-folder", "git-config"],
)
def test_what_the_diff_leaves_out_never_reaches_the_verification(
    mode: str, change: str, test: str, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    repo = _calc_repo(tmp_path / "repo")
    config = SandboxConfig(mode=mode)  # type: ignore[arg-type]
    env = WorkspaceEnv.for_repo(repo, prompt="p", test=test, with_git=True, sandbox=config)
    with env:
        episode, reward = _run(env, db, f"repo:{repo.name}", _script(tmp_path, [_bash(change)]))
    with TraceStore(db) as store:
        assert episode_change(store, episode).patch(store) == ""
    assert reward == 0.0


def test_an_episode_whose_reward_is_not_reproduced_is_flagged_by_ls_show_and_report(
    tmp_path: Path,
) -> None:
    # A test command that depends on a file outside the recorded change: once it is gone,
    # the recorded change no longer earns the recorded reward.
    outside = tmp_path / "outside"
    outside.write_text("x")
    task = Task(task_id="outside", prompt="p", files={"a.txt": "a\n"}, test=f"test -e {outside}")
    db = tmp_path / "t.db"
    with WorkspaceEnv(task=task, sandbox=SandboxConfig(mode="process")) as env:
        episode, reward = _run(env, db, "outside", _script(tmp_path, []))
    assert reward == 1.0
    outside.unlink()
    assert _verify(db, episode)["passed"] is False
    (listed,) = _last_json(run_cli("ls", "--db", str(db), "--json"))
    assert listed["reward_reproduced"] is False
    assert "not reproduced" in run_cli("ls", "--db", str(db)).stdout
    assert "not reproduced" in run_cli("show", episode, "--db", str(db)).stdout
    assert "not reproduced" in run_cli("report", "--db", str(db)).stdout
    page = tmp_path / "report.html"
    assert run_cli("report", "--db", str(db), "--html", str(page)).returncode == 0
    assert "reward not reproduced" in page.read_text()
