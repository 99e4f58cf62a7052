"""`make test` sets up what it needs, as the README says (issue 12, item 4).

CI's machine is a fresh Debian 12 without the packages; this machine has them, and uninstalling
system packages here is not safe, so the wiring is checked by make's dry run (-n) and by running the
skip rule on a throw-away test, not by a real fresh install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(*args):
    # -W requirements.txt: as if the venv were missing or stale (a fresh clone).
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def _first(lines, fragment):
    return next(i for i, line in enumerate(lines) if fragment in line)


def test_make_test_installs_before_it_checks():
    lines = _dry_run("-W", "requirements.txt", "test")
    venv = _first(lines, "-m venv .venv")
    deps = _first(lines, "-m tests.testbed deps")
    unit = _first(lines, "pytest -q tests/unit")
    # The unit suite again on the newest ansible-core, sanity on each, the artifact as Galaxy imports it.
    newest = _first(lines, ".venv-2.21/bin/pytest -q")
    sanity = [_first(lines, f".ci/sanity {venv} results/") for venv in (".venv", ".venv-2.20", ".venv-2.21")]
    importer = _first(lines, ".ci/importer .venv-importer results/")
    integration = _first(lines, "pytest -q tests/integration")
    assert venv < deps < unit < newest < sanity[0] < sanity[1] < sanity[2] < importer < integration, lines
    # python3-venv comes first on a machine without it.
    assert "import ensurepip" in lines[_first(lines, "ensurepip")] and _first(lines, "ensurepip") < venv


def test_make_test_makes_skips_fail():
    database = subprocess.run(
        ["make", "-p", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "test: WIREUP_NO_SKIP := 1" in database
    # ... and only there: `make unit` (no root, nothing installed) may still skip, visibly.
    unit_db = subprocess.run(
        ["make", "-p", "-n", "unit"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout
    assert "unit: WIREUP_NO_SKIP" not in unit_db


def test_ci_runs_make_test_and_nothing_else():
    commands = [
        line.strip()
        for line in (REPO / ".ci/run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-1] == "make test"
    assert not [c for c in commands if c.startswith(("apt-get", "make venv", "make deps"))], commands


def test_deps_installs_the_check_tools_too():
    from tests.testbed import system

    assert system.CHECK_COMMANDS["shellcheck"] == "shellcheck"
    assert system.CHECK_COMMANDS["chromium"] == "chromium"
    assert {"gpg", "dpkg-deb"} <= set(system.HOST_COMMANDS)


SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("frobnicate is not installed")
"""


@pytest.mark.parametrize(("no_skip", "outcome"), [("1", "1 failed"), ("", "1 skipped")])
def test_a_skip_fails_under_make_test(tmp_path, no_skip, outcome):
    (tmp_path / "test_tool.py").write_text(SKIPPING)
    env = dict(os.environ, WIREUP_NO_SKIP=no_skip, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "tests.conftest", "--rootdir", str(tmp_path),
         "-c", os.devnull, str(tmp_path / "test_tool.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert outcome in result.stdout, result.stdout + result.stderr
    assert "frobnicate is not installed" in result.stdout


def _venv_is_made(folder):
    """The venv's inputs, older than the stand-in venv: make leaves it as it is."""
    for name in ("requirements.txt", "requirements-tools.txt", "constraints.txt"):
        (folder / name).write_text("")
        os.utime(folder / name, (1, 1))


FAKE_PLAYBOOK = """#!/bin/bash
echo "ansible-playbook $*" >> calls.log
echo "ran $3"
[ "$3" != "${FAIL_AT:-none}" ]
"""


@pytest.mark.parametrize("fail_at", ["", "bench.yml"])
def test_make_run_keeps_each_phase_s_log_and_ends_with_the_summary(tmp_path, fail_at):
    """`make run` on an inventory, with a stand-in ansible-playbook: each playbook's output on the
    terminal and in results/run-RUN/PHASE.log, then the summary (issue 28): each phase's result
    and time, the logs' folder, what to run next; a failed phase stops the run, still summarised."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _venv_is_made(tmp_path)
    fake = bin_dir / "ansible-playbook"
    fake.write_text(FAKE_PLAYBOOK)
    fake.chmod(0o755)
    result = subprocess.run(
        ["make", "-f", str(REPO / "Makefile"), "--no-print-directory", "run",
         f"BIN={bin_dir}", "INVENTORY=inv"],
        cwd=tmp_path, env=dict(os.environ, FAIL_AT=fail_at or "none"), capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    out = result.stdout
    ran = (tmp_path / "calls.log").read_text().splitlines()
    [run_dir] = (tmp_path / "results").glob("run-*")
    summary = out.split("== make run: summary ==")[1].splitlines()
    assert [line for line in summary if line.startswith(f"Full output:  {run_dir}/ (site.log, bench.log")]
    assert (run_dir / "site.log").read_text() == "ran site.yml\n"
    assert "ran site.yml" in out  # the terminal still sees the play output as it comes
    if not fail_at:
        assert result.returncode == 0, out + result.stderr
        assert [line.split()[-1] for line in ran] == ["site.yml", "bench.yml", "launch.yml"]
        for phase in ("site.yml (bootstrap)", "bench.yml (wiring proof)", "launch.yml (Example 2)"):
            assert [line for line in summary if line.startswith(f"  {phase}  ") and " ok " in line], out
        assert summary[-1].startswith("Next: your own job: ansible-playbook -i inv launch.yml")
    else:
        assert result.returncode != 0
        assert [line.split()[-1] for line in ran] == ["site.yml", "bench.yml"]
        assert [line for line in summary if line.startswith("  bench.yml (wiring proof)  FAILED (exit 1)")], (
            out
        )
        assert not (run_dir / "launch.log").exists() and "ran launch.yml" not in out
        assert "Next: read bench.log, fix the cause" in out
