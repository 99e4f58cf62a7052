"""Filters exposing the plans of the roles that install NVIDIA packages: wireup.plans.cuda_repo,
wireup.plans.nvidia_driver...  a PackageError becomes an
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
    wireup_pkg_nccl_install_problems, wireup_pkg_nccl_torch_lines;
    nccl_tests (one plan, the source check) wireup_pkg_nccl_tests_plan, wireup_pkg_nccl_tests_source_problems;
    nvidia_driver (wireup.plans.nvidia_driver - the read, one plan, the install specs, the run one-line
    report)
    wireup_pkg_driver_reads, wireup_pkg_driver_plan, wireup_pkg_driver_install_specs,
    wireup_pkg_driver_report;
    wireup_pkg_dpkg_status.
"""

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import (
    cuda_repo,
    nccl,
    nccl_tests,
    nvidia_driver,
)
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


class FilterModule:
    def filters(self):
        return {
            # cuda_repo
            "wireup_pkg_cuda_repo_plan": _wrap(cuda_repo.plan),
            "wireup_pkg_cuda_repo_source_path": _wrap(cuda_repo.cuda_repo_source_path),
            "wireup_pkg_verified_key": _wrap(cuda_repo.verified_key),
            "wireup_pkg_cuda_toolkit_problems": _wrap(cuda_repo.toolkit_problems),
            # nvidia_driver: wireup.plans.nvidia_driver (one plan, the install specs, the run's one line)
            "wireup_pkg_driver_reads": _wrap(nvidia_driver.reads),
            "wireup_pkg_driver_plan": _wrap(nvidia_driver.plan),
            "wireup_pkg_driver_install_specs": _wrap(nvidia_driver.install_specs),
            "wireup_pkg_driver_report": _wrap(nvidia_driver.report),
            "wireup_pkg_dpkg_status": _wrap(apt.parse_dpkg_status),
            # nccl
            "wireup_pkg_nccl_plan": _wrap(nccl.plan),
            "wireup_pkg_nccl_install_problems": _wrap(nccl.install_problems),
            "wireup_pkg_nccl_torch_lines": _wrap(nccl.torch_lines),
            # nccl_tests
            "wireup_pkg_nccl_tests_plan": _wrap(nccl_tests.plan),
            "wireup_pkg_nccl_tests_source_problems": _wrap(nccl_tests.source_problems),
        }
