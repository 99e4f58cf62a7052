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
    wireup_pkg_check_key, wireup_pkg_driver_plan, wireup_pkg_deb_upstream_version,
    wireup_pkg_fabricmanager_plan, wireup_pkg_kernel_headers, wireup_pkg_nccl_plan,
    wireup_pkg_dpkg_status, wireup_pkg_dpkg_drift, wireup_pkg_torch_nccl_version,
    wireup_pkg_nccl_header_version, wireup_pkg_nccl_mismatch.
"""

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import packages
from wireup.node import parse_nccl_header


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
            "wireup_pkg_driver_plan": _wrap(packages.driver_plan),
            "wireup_pkg_deb_upstream_version": _wrap(packages.deb_upstream_version),
            "wireup_pkg_fabricmanager_plan": _wrap(packages.fabricmanager_plan),
            "wireup_pkg_kernel_headers": _wrap(packages.kernel_headers_package),
            "wireup_pkg_nccl_plan": _wrap(packages.nccl_plan),
            "wireup_pkg_dpkg_status": _wrap(packages.parse_dpkg_status),
            "wireup_pkg_dpkg_drift": _wrap(packages.dpkg_drift),
            "wireup_pkg_torch_nccl_version": _wrap(packages.parse_torch_nccl_version),
            "wireup_pkg_nccl_header_version": _wrap(parse_nccl_header),
            "wireup_pkg_nccl_mismatch": _wrap(packages.nccl_mismatch),
        }
