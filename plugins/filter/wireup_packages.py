"""Filters exposing plugins/module_utils/wireup/cuda_repo.py (package, version and URL choices).

Thin wrappers: the choices and checks live in wireup.packages; a PackageError becomes an
AnsibleFilterError carrying the same message (it names the variable and the fix).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_packages
short_description: NVIDIA package, version and repository choices for wireup's bootstrap roles
description:
  - cuda_repo (one plan, the key check, the toolkit check) wireup_pkg_cuda_repo_plan,
    wireup_pkg_cuda_repo_source_path, wireup_pkg_verified_key, wireup_pkg_cuda_toolkit_problems;
    nccl (one plan, the install check, its report lines) wireup_pkg_nccl_plan,
    wireup_pkg_nccl_install_problems, wireup_pkg_nccl_torch_comparison;
    nccl_tests (one plan, the source check) wireup_pkg_nccl_tests_plan, wireup_pkg_nccl_tests_source_problems;
    nvidia_driver (wireup.driver - the read, one plan, the install specs, the run one-line report)
    wireup_pkg_driver_reads, wireup_pkg_driver_plan, wireup_pkg_driver_install_specs,
    wireup_pkg_driver_report;
    wireup_pkg_dpkg_status.
"""

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import cuda_repo as packages
from wireup import driver


class FilterModule:
    def filters(self):
        return {
            # cuda_repo
            "wireup_pkg_cuda_repo_plan": _wrap(packages.cuda_repo_plan),
            "wireup_pkg_cuda_repo_source_path": _wrap(packages.cuda_repo_source_path),
            "wireup_pkg_verified_key": _wrap(packages.verified_key),
            "wireup_pkg_cuda_toolkit_problems": _wrap(packages.cuda_toolkit_problems),
            # nvidia_driver: wireup.driver (one plan, the install specs, the run's one line)
            "wireup_pkg_driver_reads": _wrap(driver.reads),
            "wireup_pkg_driver_plan": _wrap(driver.plan),
            "wireup_pkg_driver_install_specs": _wrap(driver.install_specs),
            "wireup_pkg_driver_report": _wrap(driver.report),
            "wireup_pkg_dpkg_status": _wrap(packages.parse_dpkg_status),
            # nccl
            "wireup_pkg_nccl_plan": _wrap(packages.nccl_plan),
            "wireup_pkg_nccl_install_problems": _wrap(packages.nccl_install_problems),
            "wireup_pkg_nccl_torch_comparison": _wrap(packages.nccl_torch_comparison),
            # nccl_tests
            "wireup_pkg_nccl_tests_plan": _wrap(packages.nccl_tests_plan),
            "wireup_pkg_nccl_tests_source_problems": _wrap(packages.nccl_tests_source_problems),
        }
