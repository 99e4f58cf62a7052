#!/usr/bin/python
"""Ansible module: find the NCCL that nccl-tests builds against (system or venv wheel)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_nccl_info
short_description: Find nvcc, the NCCL to build nccl-tests against, and the last build, in one read
description:
  - For I(source=system), looks for C(nccl.h) and C(libnccl.so*) under I(nccl_home) when given, else in
    the compiler's usual places (/usr/include, /usr/lib/<triplet>, /usr/lib64, I(cuda_home)).
  - For I(source=venv), asks I(venv_python) where it imports C(nvidia.nccl) from (its own
    site-packages, or those of a base interpreter it reuses)
    (the nvidia-nccl-cu* wheel PyTorch depends on).
  - Reads the version from C(nccl.h), whether I(cuda_home) has an executable C(bin/nvcc), the CPUs
    this process may use, and, with I(build_dir), the last build's stamp and binary.
  - Changes nothing and fails only on bad arguments; what it could not find is reported in
    C(nccl.problem), which the nccl_tests role's plan (wireup.plans.nccl_tests.plan) turns into
    a message naming the variable to fix.
options:
  source:
    description: Which NCCL to use.
    type: str
    choices: [system, venv]
    required: true
  venv_python:
    description: Python of the venv (for I(source=venv)).
    type: path
  nccl_home:
    description: A directory holding include/nccl.h and lib/; overrides the search.
    type: path
  cuda_home:
    description: CUDA toolkit directory, searched last for system NCCL.
    type: path
    default: /usr/local/cuda
  build_dir:
    description: An nccl-tests build directory whose stamp (wireup-build.stamp) and all_reduce_perf to report.
    type: path
attributes:
  platform:
    support: full
    platforms: linux
    description: Linux nodes (it reads nccl.h, the NCCL libraries and the CUDA toolkit's files).
extends_documentation_fragment:
  - wireup.cluster.attributes
  - wireup.cluster.attributes.read_only
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Find the venv's NCCL and the last build
  wireup_nccl_info:
    source: venv
    venv_python: /opt/wireup/venv/bin/python
    build_dir: /opt/wireup/nccl-tests/build
"""

RETURN = r"""
cuda_home:
  description: The CUDA toolkit directory looked at.
  returned: always
  type: str
  sample: "/usr/local/cuda"
nvcc:
  description: Whether I(cuda_home)/bin/nvcc is an executable file.
  returned: always
  type: bool
  sample: true
nproc:
  description: CPUs this process may run on (for make -j).
  returned: always
  type: int
  sample: 16
nccl:
  description: What was found (only C(problem) when nothing usable was).
  returned: always
  type: dict
  contains:
    home: {description: "NCCL_HOME for the build, empty for system paths", type: str, sample: ""}
    include_dir: {description: Directory of nccl.h, type: str, sample: "/usr/include"}
    lib_dir: {description: Directory of libnccl.so.2, type: str, sample: "/usr/lib/x86_64-linux-gnu"}
    version:
      description: Version from nccl.h (empty when it has no NCCL_MAJOR/MINOR/PATCH defines).
      type: str
      sample: "2.28.9"
    has_dev_link:
      description: Whether lib_dir has libnccl.so (the linker needs it)
      type: bool
      sample: true
    problem:
      description: >-
        Why no NCCL was found: C(kind) (venv_python, venv_probe, wheel, home_header, home_lib or
        system), C(path) (what was looked at) and C(detail).
      type: dict
      sample: {"kind": "system", "path": "/usr/include/nccl.h", "detail": "no nccl.h: install libnccl-dev"}
build:
  description: The last build in I(build_dir) (absent without I(build_dir)).
  returned: when build_dir is given
  type: dict
  contains:
    stamp:
      description: Text of build_dir/wireup-build.stamp, null when missing
      type: str
      sample: |
        tag=v2.19.6
        arch=sm_90
        nccl=system 2.28.9 /usr/lib/x86_64-linux-gnu
        mpi=False
    binary: {description: Whether build_dir/all_reduce_perf exists, type: bool, sample: true}
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans.nccl_tests import BUILD_STAMP
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe.bench_output import (
    nccl_header_version,
)

SYSTEM_INCLUDES = ["/usr/include", "/usr/local/include"]
SYSTEM_LIBS = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
]


FIND_NCCL_WHEEL = (
    "import importlib.util\n"
    "try:\n"
    "    spec = importlib.util.find_spec('nvidia.nccl')\n"
    "except ModuleNotFoundError:\n"
    "    spec = None\n"
    "paths = list(spec.submodule_search_locations or []) if spec else []\n"
    "print(paths[0] if paths else '')\n"
)


def _first_lib(dirs):
    for directory in dirs:
        if glob.glob(os.path.join(directory, "libnccl.so*")):
            return directory
    return None


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _problem(kind, path="", detail=""):
    return {"problem": {"kind": kind, "path": path, "detail": detail}}


def venv_nccl_home(module, python):
    """(the venv's NCCL wheel folder, or a problem). The venv's Python says where it imports
    nvidia.nccl from: a venv that reuses a base interpreter's packages (system site packages, .pth
    files) has it outside its own folder."""
    if not python or not os.access(python, os.X_OK):
        return "", _problem("venv_python", python)
    rc, out, err = module.run_command([python, "-c", FIND_NCCL_WHEEL], environ_update={"LC_ALL": "C"})
    if rc != 0:
        return "", _problem("venv_probe", python, err.strip())
    home = out.strip()
    if not home or not os.path.isdir(home):
        return "", _problem("wheel", python)
    return home, None


def home_nccl(home):
    """{home, include_dir, lib_dir} of an NCCL_HOME holding include/nccl.h and lib/libnccl.so*."""
    include_dir, lib_dir = os.path.join(home, "include"), os.path.join(home, "lib")
    if not os.path.isfile(os.path.join(include_dir, "nccl.h")):
        return _problem("home_header", include_dir)
    if not glob.glob(os.path.join(lib_dir, "libnccl.so*")):
        return _problem("home_lib", lib_dir)
    return {"home": home, "include_dir": include_dir, "lib_dir": lib_dir}


def system_nccl(cuda_home):
    """{home: '', include_dir, lib_dir} of the system's NCCL (the usual folders, then CUDA's)."""
    includes = [*SYSTEM_INCLUDES, os.path.join(cuda_home, "include")]
    include_dir = next((d for d in includes if os.path.isfile(os.path.join(d, "nccl.h"))), None)
    lib_dir = _first_lib([*SYSTEM_LIBS, os.path.join(cuda_home, "lib64")])
    if include_dir is None or lib_dir is None:
        return _problem("system")
    return {"home": "", "include_dir": include_dir, "lib_dir": lib_dir}


def find_nccl(module, params):
    """{home, include_dir, lib_dir} of the NCCL to build against, or {problem: {kind, path, detail}}."""
    home = params["nccl_home"] or ""
    if not home and params["source"] == "venv":
        home, problem = venv_nccl_home(module, params["venv_python"] or "")
        if problem:
            return problem
    return home_nccl(home) if home else system_nccl(params["cuda_home"])


def main():
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "str", "choices": ["system", "venv"], "required": True},
            "venv_python": {"type": "path"},
            "nccl_home": {"type": "path"},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
            "build_dir": {"type": "path"},
        },
        supports_check_mode=True,
    )
    params = module.params
    nccl = find_nccl(module, params)
    if "problem" not in nccl:
        # nccl.h is read once, here.
        nccl["version"] = nccl_header_version(_read(os.path.join(nccl["include_dir"], "nccl.h")) or "")
        nccl["has_dev_link"] = os.path.exists(os.path.join(nccl["lib_dir"], "libnccl.so"))
    nvcc = os.path.join(params["cuda_home"], "bin", "nvcc")
    result = {
        "changed": False,
        "cuda_home": params["cuda_home"],
        "nvcc": os.path.isfile(nvcc) and os.access(nvcc, os.X_OK),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        "nccl": nccl,
    }
    if params["build_dir"]:
        result["build"] = {
            "stamp": _read(os.path.join(params["build_dir"], BUILD_STAMP)),
            "binary": os.path.exists(os.path.join(params["build_dir"], "all_reduce_perf")),
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
