"""wireup_nccl_info (plugins/modules): nccl_tests' one read of a node, run here through ansible
(local connection): nvcc, the NCCL to build against (or why none was found, for the plan's
message), the CPUs and the last build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import busy

REPO = Path(__file__).resolve().parents[2]
HEADER = "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n"


def _info(tmp_path, **args):
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOME=str(tmp_path / "home"),
    )
    cmd = [
        str(Path(sys.executable).parent / "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-o",
        "-e", f"ansible_python_interpreter={sys.executable}",
        "-m", "wireup.cluster.wireup_nccl_info", "-a", json.dumps(args),
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=busy.HANG_S, check=False, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.split("=>", 1)[1])


@pytest.fixture
def tree(tmp_path):
    home, cuda, build = tmp_path / "nccl", tmp_path / "cuda", tmp_path / "build"
    (home / "include").mkdir(parents=True)
    (home / "include/nccl.h").write_text(HEADER)
    (home / "lib").mkdir()
    (home / "lib/libnccl.so.2").write_bytes(b"")
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin/nvcc").write_text("#!/bin/sh\n")
    (cuda / "bin/nvcc").chmod(0o755)
    build.mkdir()
    (build / "wireup-build.stamp").write_text("tag=v2.19.6\n")
    (build / "all_reduce_perf").write_bytes(b"")
    return home, cuda, build


def test_one_read_reports_nvcc_nccl_and_the_last_build(tmp_path, tree):
    home, cuda, build = tree
    got = _info(tmp_path, source="system", nccl_home=str(home), cuda_home=str(cuda), build_dir=str(build))
    assert got["nvcc"] is True and got["cuda_home"] == str(cuda) and got["nproc"] >= 1
    assert got["nccl"] == {
        "home": str(home), "include_dir": str(home / "include"), "lib_dir": str(home / "lib"),
        "version": "2.28.9", "has_dev_link": False,
    }  # fmt: skip
    assert got["build"] == {"stamp": "tag=v2.19.6\n", "binary": True}
    assert got["changed"] is False


def test_what_is_missing_is_reported_not_failed(tmp_path, tree):
    home, _cuda, _build = tree
    (home / "lib/libnccl.so.2").unlink()
    got = _info(tmp_path, source="system", nccl_home=str(home), cuda_home=str(tmp_path / "none"))
    assert got["nvcc"] is False and "build" not in got
    assert got["nccl"] == {"problem": {"kind": "home_lib", "path": str(home / "lib"), "detail": ""}}
    venv = _info(tmp_path, source="venv", venv_python=str(tmp_path / "no-venv/bin/python"))
    assert venv["nccl"]["problem"]["kind"] == "venv_python"
