"""Filters exposing plugins/module_utils/wireup/packages.py (package, version and URL choices).

Thin wrappers: the choices and checks live in wireup.packages; a PackageError becomes an
AnsibleFilterError carrying the same message (it names the variable and the fix).
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_packages
short_description: NVIDIA package, version and repository choices for wireup's bootstrap roles
description:
  - wireup_pkg_cuda_repo_url, wireup_pkg_cuda_repo_key_url, wireup_pkg_cuda_repo_source_name,
    wireup_pkg_cuda_toolkit_spec, wireup_pkg_cuda_home, wireup_pkg_apt_policy_has_source,
    wireup_pkg_apt_lists_prefix, wireup_pkg_apt_lists_have_source, wireup_pkg_cuda_repo_source_current,
    wireup_pkg_key_trusted, wireup_pkg_installed_key_trusted, wireup_pkg_installed_source_current,
    wireup_pkg_check_key, wireup_pkg_driver_plan, wireup_pkg_driver_install_specs,
    wireup_pkg_driver_report, wireup_pkg_nccl_plan,
    wireup_pkg_dpkg_status, wireup_pkg_dpkg_drift, wireup_pkg_torch_nccl_version,
    wireup_pkg_nccl_header_version, wireup_pkg_nccl_mismatch.
"""

import pathlib
import sys

from ansible.errors import AnsibleFilterError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "module_utils"))

from wireup import driver, packages
from wireup.node import parse_nccl_header


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ValueError as exc:  # PackageError and the parsers' ValueError
            raise AnsibleFilterError(str(exc)) from exc

    call.__name__ = func.__name__
    call.__doc__ = func.__doc__
    return call


class FilterModule:
    def filters(self):
        return {
            "wireup_pkg_cuda_repo_url": _wrap(packages.cuda_repo_url),
            "wireup_pkg_cuda_repo_key_url": _wrap(packages.cuda_repo_key_url),
            "wireup_pkg_cuda_repo_source_name": _wrap(packages.cuda_repo_source_name),
            "wireup_pkg_cuda_toolkit_spec": _wrap(packages.cuda_toolkit_spec),
            "wireup_pkg_cuda_home": _wrap(packages.cuda_home),
            "wireup_pkg_apt_policy_has_source": _wrap(packages.apt_policy_has_source),
            "wireup_pkg_check_key": _wrap(packages.check_key),
            "wireup_pkg_key_trusted": _wrap(packages.key_trusted),
            "wireup_pkg_installed_key_trusted": _wrap(packages.installed_key_trusted),
            "wireup_pkg_installed_source_current": _wrap(packages.installed_source_current),
            "wireup_pkg_apt_lists_prefix": _wrap(packages.apt_lists_prefix),
            "wireup_pkg_apt_lists_have_source": _wrap(packages.apt_lists_have_source),
            "wireup_pkg_cuda_repo_source_current": _wrap(packages.cuda_repo_source_current),
            # nvidia_driver: wireup.driver (one plan, the install specs, the run's one line)
            "wireup_pkg_driver_plan": _wrap(driver.plan),
            "wireup_pkg_driver_install_specs": _wrap(driver.install_specs),
            "wireup_pkg_driver_report": _wrap(driver.report),
            "wireup_pkg_nccl_plan": _wrap(packages.nccl_plan),
            "wireup_pkg_dpkg_status": _wrap(packages.parse_dpkg_status),
            "wireup_pkg_dpkg_drift": _wrap(packages.dpkg_drift),
            "wireup_pkg_torch_nccl_version": _wrap(packages.parse_torch_nccl_version),
            "wireup_pkg_nccl_header_version": _wrap(parse_nccl_header),
            "wireup_pkg_nccl_mismatch": _wrap(packages.nccl_mismatch),
        }
