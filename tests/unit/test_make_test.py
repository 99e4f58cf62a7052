"""`make test` sets up what it needs, as the README says (issue 12, item 4).

CI's machine is a fresh Debian 12 without the packages; this machine has them, and uninstalling
system packages here is not safe, so the wiring is checked by make's dry run (-n) and by running the
skip rule on a throw-away test, not by a real fresh install.
"""

from __future__ import annotations

import os
import pathlib
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
    deps = _first(lines, "-m tests.testbed deps --tests")
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
echo "${ANSIBLE_STDOUT_CALLBACK:-default}" >> callbacks.log
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
        # Each play's banner once, above its output (plugins/callback/wireup_run.py).
        assert set((tmp_path / "callbacks.log").read_text().split()) == {"wireup.cluster.wireup_run"}
        for phase in ("site.yml (bootstrap)", "bench.yml (wiring proof)", "launch.yml (Example 2)"):
            assert [line for line in summary if line.startswith(f"  {phase}  ") and " ok " in line], out
        assert summary[-1].startswith("Next: your own job: `.venv/bin/ansible-playbook -i inv launch.yml")
    else:
        assert result.returncode != 0
        assert [line.split()[-1] for line in ran] == ["site.yml", "bench.yml"]
        assert [line for line in summary if line.startswith("  bench.yml (wiring proof)  FAILED (exit 1)")], (
            out
        )
        assert not (run_dir / "launch.log").exists() and "ran launch.yml" not in out
        assert "Next: read bench.log, fix the cause" in out


# Issue 38, item 4: `make run` installs only what the run needs, and apt's output goes to the run's
# kept log, not the terminal.
FAKE_PYTHON = """#!/bin/bash
# Stands in for python3 and the venv's python: the testbed's commands are noted, the rest runs.
case "$*" in
  *tests.testbed*) echo "python $*" >> calls.log; echo "testbed $3 done" ;;
  *) exec python3 "$@" ;;
esac
"""


def test_make_run_installs_only_the_run_s_packages_with_apt_s_output_in_its_log(tmp_path):
    """The testbed phase of `make run` (no INVENTORY): `deps` without the checks' tools, apt's output
    into results/run-RUN/apt.log; `make test` installs the checks' tools too."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "ansible-playbook"):
        (bin_dir / name).write_text(FAKE_PYTHON if name == "python" else FAKE_PLAYBOOK)
        (bin_dir / name).chmod(0o755)
    _venv_is_made(tmp_path)
    result = subprocess.run(
        ["make", "-f", str(REPO / "Makefile"), "--no-print-directory", "run", f"BIN={bin_dir}",
         f"PYTHON={bin_dir / 'python'}", "TESTBED=unit"],
        cwd=tmp_path, env=dict(os.environ, FAIL_AT="site.yml"), capture_output=True, text=True, check=False,
    )  # fmt: skip
    [run_dir] = (tmp_path / "results").glob("run-*")
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls == [
        f"python -m tests.testbed deps --apt-log {run_dir.relative_to(tmp_path)}/apt.log",
        "python -m tests.testbed up --name unit --nodes 3",
        "ansible-playbook -i .testbed/unit/inventory.yml site.yml",
    ], result.stdout + result.stderr
    assert "testbed deps done" in (run_dir / "testbed.log").read_text()
    test = "\n".join(_dry_run("-W", "requirements.txt", "test"))
    assert "-m tests.testbed deps --tests" in test


def test_the_run_s_packages_leave_out_the_checks_tools(monkeypatch):
    from tests.testbed import system

    monkeypatch.setattr(system.shutil, "which", lambda command: None)
    run_only, with_checks = system.missing_packages(), system.missing_packages(checks=True)
    assert {"chromium", "prometheus", "shellcheck"}.isdisjoint(run_only)
    assert {"chromium", "prometheus", "shellcheck"} <= set(with_checks)
    assert {"mmdebstrap", "systemd-container", "iptables", "gnupg"} <= set(run_only)
    # The golden tree is made with mmdebstrap; nothing runs debootstrap.
    assert "debootstrap" not in with_checks


APT_GET = """#!/bin/bash
# Stands in for apt-get: -s prints a simulation, the rest prints what apt prints, and fails on demand.
if [ "$2" = "-s" ] || [ "$1" = "-s" ]; then
  printf 'Inst systemd [252.38-1~deb12u1] (252.39-1~deb12u2 Debian:12.15/oldstable [amd64])\\n'
  printf 'Inst mmdebstrap (1.3.5-7 Debian:12.15/oldstable [amd64])\\n'
  printf 'Inst arch-test (0.20-1 Debian:12.15/oldstable [all])\\n'
  exit 0
fi
for i in $(seq 1 40); do echo "Get:$i http://deb.debian.org/debian bookworm/main pkg$i"; done
[ "$1" != "${APT_FAIL:-none}" ]
"""


def _fake_apt(tmp_path, monkeypatch):
    from tests.testbed import system

    (tmp_path / "apt-get").write_text(APT_GET)
    (tmp_path / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(system.os, "geteuid", lambda: 0)
    monkeypatch.setattr(system, "missing_packages", lambda checks=False: ["mmdebstrap"])
    monkeypatch.setattr(system, "POLICY_RC_D", tmp_path / "policy-rc.d")
    return system


def test_deps_writes_apt_s_output_to_the_log_and_says_what_it_installs(tmp_path, monkeypatch, capfd):
    system = _fake_apt(tmp_path, monkeypatch)
    said = []
    log = tmp_path / "run" / "apt.log"
    assert system.install_deps(log=said.append, apt_log=str(log)) == ["mmdebstrap"]
    out, err = capfd.readouterr()
    assert "Get:" not in out + err
    assert said == [
        f"testbed deps: apt-get install mmdebstrap (2 new packages; apt's output: {log})",
        "testbed deps: this also UPGRADES packages already installed on this machine: "
        "systemd 252.38-1~deb12u1 -> 252.39-1~deb12u2",
    ]
    text = log.read_text()
    assert "$ apt-get update -q\n" in text
    assert "$ apt-get install -y -q --no-install-recommends mmdebstrap\n" in text
    assert text.count("Get:") == 80
    assert not (tmp_path / "policy-rc.d").exists()


def test_a_failed_apt_shows_its_last_lines_on_the_terminal(tmp_path, monkeypatch):
    system = _fake_apt(tmp_path, monkeypatch)
    monkeypatch.setenv("APT_FAIL", "install")
    log = tmp_path / "apt.log"
    with pytest.raises(system.TestbedError) as err:
        system.install_deps(log=lambda msg: None, apt_log=str(log))
    message = str(err.value)
    assert f"its output is in {log}" in message and "Get:40 " in message and "Get:20 " not in message


def test_down_deletes_the_nodes_files_at_the_same_time(tmp_path, monkeypatch):
    """`make testbed-down` after `make run` took 55 s (issue 38) and 140 s here: nearly all of it the
    deletion of the nodes' files (each node's 968 MB torch venv), which is bound by the disk's
    latency; three node trees at once took 6-8 s where one after the other took 20-27 s."""
    import shutil
    import threading

    from tests.testbed import testbed

    monkeypatch.setattr(testbed, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setattr(testbed, "RUN_DIR", tmp_path / "run")
    bed = testbed.Testbed("unit-down", log=lambda msg: None)
    for k in (1, 2, 3):
        venv = bed.dir / "nodes" / f"node{k}" / "upper" / "opt" / "venv"
        venv.mkdir(parents=True)
        (venv / "torch.py").write_text("x")
    together = threading.Barrier(3, timeout=20)
    removed, real = [], shutil.rmtree

    def rmtree(path, *args, **kwargs):
        removed.append(pathlib.Path(path))
        if pathlib.Path(path).parent.name == "nodes":
            together.wait()  # each node's tree is being deleted while the others are
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    bed.down()
    assert not bed.dir.exists()
    assert sorted(p.name for p in removed if p.parent.name == "nodes") == ["node1", "node2", "node3"]
