#!/usr/bin/python
"""Ansible module: find the NCCL that nccl-tests builds against (system or venv wheel)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_nccl_info
short_description: Locate NCCL headers and library (system or a venv's NCCL wheel), read the version
description:
  - For I(source=system), looks for C(nccl.h) and C(libnccl.so*) under I(nccl_home) when given, else in
    the compiler's usual places (/usr/include, /usr/lib/<triplet>, /usr/lib64, I(cuda_home)).
  - For I(source=venv), asks I(venv_python) where it imports C(nvidia.nccl) from (its own
    site-packages, or those of a base interpreter it reuses)
    (the nvidia-nccl-cu* wheel PyTorch depends on).
  - Reads the version from C(nccl.h). Changes nothing.
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
author: wireup
"""

EXAMPLES = r"""
- name: Find the venv's NCCL
  wireup_nccl_info:
    source: venv
    venv_python: /opt/wireup/venv/bin/python
"""

RETURN = r"""
nccl:
  description: What was found.
  returned: success
  type: dict
  contains:
    home: {description: NCCL_HOME for the build, empty for system paths, type: str}
    include_dir: {description: Directory of nccl.h, type: str}
    lib_dir: {description: Directory of libnccl.so.2, type: str}
    version: {description: Version from nccl.h, type: str, sample: "2.28.9"}
    has_dev_link: {description: Whether lib_dir has libnccl.so (the linker needs it), type: bool}
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.wireup.nccltests import nccl_header_version

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


def main():
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "str", "choices": ["system", "venv"], "required": True},
            "venv_python": {"type": "path"},
            "nccl_home": {"type": "path"},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
        },
        supports_check_mode=True,
    )
    params = module.params
    home = params["nccl_home"] or ""
    if not home and params["source"] == "venv":
        python = params["venv_python"]
        if not python or not os.access(python, os.X_OK):
            module.fail_json(
                msg=f"nccl_tests_venv_python {python!r} is not an executable Python: run site.yml "
                "(pytorch_venv) first, or point nccl_tests_venv_python at the venv whose NCCL to use"
            )
        # Ask the venv's Python where it imports nvidia.nccl from: a venv that reuses a base
        # interpreter's packages (system site packages, .pth files) has it outside its own folder.
        rc, out, err = module.run_command([python, "-c", FIND_NCCL_WHEEL], environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg=f"{python} could not look for the NCCL wheel: {err.strip()}")
        home = out.strip()
        if not home or not os.path.isdir(home):
            module.fail_json(
                msg=f"no NCCL wheel importable by {python} (nvidia.nccl): pip install nvidia-nccl-cu13 "
                "into that venv, or set nccl_tests_nccl_source=system"
            )
    if home:
        include_dir = os.path.join(home, "include")
        lib_dir = os.path.join(home, "lib")
        if not os.path.isfile(os.path.join(include_dir, "nccl.h")):
            module.fail_json(
                msg=f"{include_dir}/nccl.h is missing: nccl_tests_nccl_home must hold include/nccl.h"
            )
        if not glob.glob(os.path.join(lib_dir, "libnccl.so*")):
            module.fail_json(
                msg=f"no libnccl.so* in {lib_dir}: nccl_tests_nccl_home must hold lib/libnccl.so.2"
            )
    else:
        includes = [*SYSTEM_INCLUDES, os.path.join(params["cuda_home"], "include")]
        include_dir = next((d for d in includes if os.path.isfile(os.path.join(d, "nccl.h"))), None)
        lib_dir = _first_lib([*SYSTEM_LIBS, os.path.join(params["cuda_home"], "lib64")])
        if include_dir is None or lib_dir is None:
            module.fail_json(
                msg="no system NCCL (nccl.h and libnccl.so) found: run site.yml (the nccl role installs "
                "libnccl-dev), or set nccl_tests_nccl_source=venv or nccl_tests_nccl_home"
            )
    with open(os.path.join(include_dir, "nccl.h"), encoding="utf-8", errors="replace") as handle:
        version = nccl_header_version(handle.read())
    module.exit_json(
        changed=False,
        nccl={
            "home": home,
            "include_dir": include_dir,
            "lib_dir": lib_dir,
            "version": version,
            "has_dev_link": os.path.exists(os.path.join(lib_dir, "libnccl.so")),
        },
    )


if __name__ == "__main__":
    main()
