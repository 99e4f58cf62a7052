"""wireup.plans.nccl_tests: the nccl_tests role's plan, from wireup_nccl_info's one read."""

from __future__ import annotations

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import nccl_tests as p

# --- nccl_tests' plan: from wireup_nccl_info's one read -------------------------------------------
INFO = {
    "cuda_home": "/usr/local/cuda",
    "nvcc": True,
    "nproc": 16,
    "nccl": {
        "home": "",
        "include_dir": "/usr/include",
        "lib_dir": "/usr/lib/x86_64-linux-gnu",
        "version": "2.28.9",
    },
    "build": {"stamp": None, "binary": False},
}
H200 = {"gpu": {"compute_capabilities": ["9.0", "9.0"]}}
NT_VARS = {
    "host": "gpu1",
    "version": "v2.19.6",
    "commit": "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432",
    "git_url": "https://github.com/NVIDIA/nccl-tests.git",
    "source": "",
    "source_kind": "git",
    "strip_components": 1,
    "nccl_source": "system",
    "mpi": False,
    "mpi_home": "/usr/lib/x86_64-linux-gnu/openmpi",
    "make_jobs": 0,
    "base_dir": "/opt/wireup/nccl-tests",
}
STAMP = "tag=v2.19.6\narch=90\nnccl=system 2.28.9 /usr/lib/x86_64-linux-gnu\nmpi=False\n"


def test_nccl_tests_plan_first_build():
    plan = p.plan(INFO, H200, **NT_VARS)
    assert plan["build"] and plan["stamp"] == STAMP  # the stamp text the role wrote before issue 14
    assert plan["make_argv"] == [
        "make", "-j16", "MPI=0", "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90",
        "CUDA_HOME=/usr/local/cuda", "BUILDDIR=/opt/wireup/nccl-tests/build",
    ]  # fmt: skip
    assert plan["paths"] == [
        {"path": "/opt/wireup/nccl-tests/build", "state": "absent"},
        {"path": "/opt/wireup/nccl-tests/src-v2.19.6", "state": "directory"},
    ]
    assert plan["stamp_path"] == "/opt/wireup/nccl-tests/build/wireup-build.stamp"
    assert plan["fact"] == {
        "bin_dir": "/opt/wireup/nccl-tests/build", "version": "v2.19.6", "json": True, "arch": "90",
        "mpi": False, "nccl_source": "system", "nccl_version": "2.28.9", "ld_library_path": "",
    }  # fmt: skip


def test_nccl_tests_plan_rebuilds_only_when_the_stamp_or_binary_differ():
    built = INFO | {"build": {"stamp": STAMP, "binary": True}}
    assert not p.plan(built, H200, **NT_VARS)["build"]
    assert p.plan(INFO | {"build": {"stamp": STAMP, "binary": False}}, H200, **NT_VARS)["build"]
    assert p.plan(built, {"gpu": {"compute_capabilities": ["10.0"]}}, **NT_VARS)["build"]
    assert p.plan(built, H200, **NT_VARS | {"mpi": True})["build"]
    assert p.plan(built, H200, **NT_VARS | {"version": "v2.19.7"})["build"]


def test_nccl_tests_plan_venv_wheel_gets_a_private_nccl_home():
    wheel = "/opt/wireup/venv/lib/python3.12/site-packages/nvidia/nccl"
    info = INFO | {
        "nccl": {
            "home": wheel,
            "include_dir": wheel + "/include",
            "lib_dir": wheel + "/lib",
            "version": "2.27.7",
        }
    }
    plan = p.plan(info, H200, **NT_VARS | {"nccl_source": "venv", "mpi": True, "make_jobs": 4})
    home = "/opt/wireup/nccl-tests/nccl-home"
    assert plan["make_argv"][1] == "-j4" and plan["make_argv"][-2:] == [
        f"NCCL_HOME={home}", "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi",
    ]  # fmt: skip
    assert [(x["path"], x.get("src")) for x in plan["paths"][2:]] == [
        (f"{home}/lib", None),
        (f"{home}/include", wheel + "/include"),
        (f"{home}/lib/libnccl.so.2", wheel + "/lib/libnccl.so.2"),
        (f"{home}/lib/libnccl.so", wheel + "/lib/libnccl.so.2"),
    ]
    assert plan["fact"]["ld_library_path"] == wheel + "/lib" and plan["fact"]["nccl_version"] == "2.27.7"


def test_nccl_tests_plan_archive_source():
    plan = p.plan(INFO, H200, **NT_VARS | {"source": "/srv/nccl-tests.tar.gz", "source_kind": "archive"})
    assert plan["unarchive_opts"] == ["--strip-components=1"]
    zipped = NT_VARS | {"source": "/srv/nccl-tests.zip", "source_kind": "archive"}
    assert p.plan(INFO, H200, **zipped)["unarchive_opts"] == []


def _missing(kind, path=""):
    """wireup_nccl_info's answer when it found no NCCL to build against."""
    return INFO | {"nccl": {"problem": {"kind": kind, "path": path, "detail": ""}}}


@pytest.mark.parametrize(
    ("info", "node", "change", "match"),
    [
        (INFO | {"nvcc": False}, H200, {}, "bin/nvcc not found on gpu1.*nccl_tests_cuda_home"),
        (_missing("system"), H200, {}, "no system NCCL.*nccl_tests_nccl_source=venv or nccl_tests_nccl_home"),
        (_missing("venv_python", "/v/bin/python"), H200, {},
         "nccl_tests_venv_python '/v/bin/python' is not an executable Python"),
        (_missing("wheel", "/v/bin/python"), H200, {}, "pip install nvidia-nccl-cu13"),
        (_missing("home_lib", "/n/lib"), H200, {}, "no libnccl.so. in /n/lib: nccl_tests_nccl_home"),
        (INFO, H200, {"source": "/n.tgz", "source_kind": "missing"}, "nccl_tests_source=/n.tgz does not"),
        (INFO, {"gpu": {"compute_capabilities": []}}, {}, "compute_capabilities is empty"),
        (INFO, H200, {"nccl_source": "conda"}, "nccl_tests_nccl_source"),
    ],
)  # fmt: skip
def test_nccl_tests_plan_errors_name_the_fix(info, node, change, match):
    with pytest.raises(ValueError, match=match):
        p.plan(info, node, **NT_VARS | change)


def test_nccl_tests_source_problems():
    plan = p.plan(INFO, H200, **NT_VARS)
    assert p.source_problems(plan, {"after": NT_VARS["commit"]}, True, False) == []
    [moved] = p.source_problems(plan, {"after": "f" * 40}, True, False)
    assert f"is commit {'f' * 40}, not the pinned nccl_tests_commit {NT_VARS['commit']}" in moved
    [tree] = p.source_problems(plan | {"source_kind": "archive"}, {"skipped": True}, False, False)
    assert "src/Makefile is missing" in tree and "nccl_tests_source_strip_components" in tree
    assert p.source_problems(plan, {}, False, True) == []  # --check: nothing fetched
