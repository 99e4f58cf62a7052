"""Inventory and variable validation for preflight: pure functions returning error messages.

Every message names the variable (or inventory item) and says how to fix it, so preflight can
stop the play before any node changes.
"""

from __future__ import annotations

import ipaddress
import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

# variable -> (pattern, example). Pins are strings: YAML turns 580 or 13.0 into numbers, and
# 13.10 would silently become 13.1, so numbers are refused with the fix spelled out.
PIN_FORMATS = {
    "nvidia_driver_branch": (r"^\d{3}$", '"580"'),
    "cuda_repo_version": (r"^\d{2}\.\d$", '"13.0"'),
    "nccl_version": (r"^\d+\.\d+\.\d+$", '"2.28.9"'),
    "nccl_package_version": (r"^\d+\.\d+\.\d+-\d+\+cuda\d+\.\d+$", '"2.28.9-1+cuda13.0"'),
    "nccl_tests_version": (r"^v\d+\.\d+\.\d+$", '"v2.19.6"'),
    "nccl_tests_commit": (r"^[0-9a-f]{40}$", '"a0b82b2260cf5152b9f8c061bbf7eaf0ba096432" (a full commit id)'),
    "pytorch_venv_torch_version": (r"^\d+\.\d+\.\d+$", '"2.13.0"'),
}


def validate_pins(values: dict) -> list[str]:
    """Check the pinned versions' formats and their agreement with each other."""
    errors = []
    for name, (pattern, example) in PIN_FORMATS.items():
        if name not in values:
            continue
        value = values[name]
        if not isinstance(value, str):
            errors.append(
                f"{name}={value!r} is a number, not a string: quote it in YAML, e.g. {name}: {example}"
            )
        elif not re.match(pattern, value):
            errors.append(f"{name}={value!r} is malformed: expected a value like {example}")
    if errors:
        return errors
    pkg = values.get("nccl_package_version")
    if pkg and values.get("nccl_version") and not pkg.startswith(values["nccl_version"] + "-"):
        errors.append(
            f"nccl_package_version={pkg!r} does not match nccl_version={values['nccl_version']!r}: "
            f"set both to the same NCCL release"
        )
    cuda = values.get("cuda_repo_version")
    if pkg and cuda and not pkg.endswith("+cuda" + cuda):
        errors.append(
            f"nccl_package_version={pkg!r} is built for another CUDA than cuda_repo_version={cuda!r}: "
            f"use the '+cuda{cuda}' build of libnccl2"
        )
    return errors


def check_version_range(version: str, spec: str) -> bool:
    """True when ``version`` satisfies the PEP 440 range ``spec`` ('>=2.19.0,<2.20.0', '~=2.19',
    '==2.11.*'), decided by packaging.specifiers (installed with ansible-core; this runs on the
    controller only). A pre-release, post-release or local label counts as its release
    (2.11.0a0+git12 and 2.11.0+cu130 are 2.11.0). ValueError when either does not parse."""
    try:
        wanted = SpecifierSet(str(spec))
        release = Version(Version(str(version)).base_version)
    except (InvalidSpecifier, InvalidVersion) as exc:
        raise ValueError(f"bad version range {spec!r} or version {version!r}: {exc}") from exc
    return wanted.contains(release, prereleases=True)


def validate_nproc(value) -> list[str]:
    if value == "auto":
        return []
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        return [f"wireup_nproc_per_node={value!r} is not 'auto' or a positive whole number: fix it"]
    if int(value) < 1:
        return [f"wireup_nproc_per_node={value!r} must be at least 1 (or 'auto')"]
    return []


def validate_cluster(
    groups: dict,
    node_group: str,
    master_host: str,
    addresses: dict | None = None,
) -> list[str]:
    """Check the inventory's shape.

    ``groups``: Ansible's ``groups`` magic variable; ``addresses``: {host: address} once facts
    are known (None before).
    """
    errors = []
    members = groups.get(node_group) or []
    if node_group not in groups:
        errors.append(
            f"inventory group '{node_group}' (wireup_node_group) does not exist: add the cluster's "
            f"nodes under it, or run with -e wireup_node_group=<your group>"
        )
    elif not members:
        errors.append(
            f"inventory group '{node_group}' (wireup_node_group) has no hosts: add the cluster's nodes "
            f"under it, or run with -e wireup_node_group=<the group that holds them>"
        )
    if master_host and members and master_host not in members:
        errors.append(
            f"wireup_master_host={master_host!r} is not a host of group '{node_group}': name one of "
            f"{', '.join(sorted(members))}, or leave it empty for the first"
        )
    # A one-node cluster talks to itself: it needs no address others can reach.
    if addresses is not None and len(addresses) > 1:
        errors.extend(_address_errors(addresses))
    return errors


def _address_errors(addresses: dict) -> list[str]:
    errors = []
    seen: dict[str, str] = {}
    for host in sorted(addresses):
        address = addresses[host]
        if not address:
            errors.append(
                f"host {host} has no address for the cluster network: set wireup_address for it in "
                f"host_vars, or give it a default route"
            )
            continue
        try:
            ipaddress.ip_address(address)
        except ValueError:
            errors.append(f"host {host}: wireup_address={address!r} is not an IP address")
            continue
        if ipaddress.ip_address(address).is_loopback:
            errors.append(
                f"host {host}: its cluster address {address} is a loopback address other nodes cannot "
                f"reach: set wireup_address"
            )
        if address in seen:
            errors.append(
                f"hosts {seen[address]} and {host} share the address {address}: every node needs its "
                f"own (check ansible_host / wireup_address)"
            )
        else:
            seen[address] = host
    return errors


def master_of(members: list[str], master_host: str) -> str:
    """The rendezvous master: the named host, else the group's first in sorted order."""
    if master_host:
        return master_host
    return sorted(members)[0] if members else ""


def validate_port(name: str, value) -> list[str]:
    """A TCP port others connect to: a whole number from 1024 to 65535 (no privileged ports:
    the jobs run as the launch user, and a port below 1024 needs root to bind)."""
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, int | str) or not text.isdigit():
        return [
            f"{name}={value!r} is not a port number: use a whole number from 1024 to 65535, "
            f"e.g. {name}: 29500"
        ]
    if not 1024 <= int(text) <= 65535:
        return [f"{name}={value!r} must be a TCP port from 1024 to 65535, e.g. {name}: 29500"]
    return []


def validate_abs_paths(values: dict) -> list[str]:
    """Paths the roles join others onto (``{{ wireup_base_dir }}/jobs``): empty or relative values
    would put files into the connection user's working directory, so both are refused."""
    examples = {"wireup_base_dir": "/opt/wireup", "wireup_venv_path": "/opt/wireup/venv"}
    errors = []
    for name in sorted(values):
        value = values[name]
        if not isinstance(value, str) or not value.startswith("/"):
            example = examples.get(name, "/opt/wireup")
            errors.append(
                f"{name}={value!r} must be an absolute path (starting with /), e.g. {name}: {example}"
            )
    return errors


def validate_serial(name: str, value) -> list[str]:
    """A play's `serial`: a whole number of hosts >= 1, or a percentage from 1% to 100%."""
    text = str(value).strip()
    if not isinstance(value, bool) and isinstance(value, int | str):
        if text.isdigit() and int(text) >= 1:
            return []
        if text.endswith("%") and text[:-1].isdigit() and 1 <= int(text[:-1]) <= 100:
            return []
    return [
        f"{name}={value!r} is not a batch size: use a whole number of nodes (e.g. 2) or a "
        f"percentage (e.g. '25%')"
    ]


def validate_settings(values: dict) -> list[str]:
    """The cluster-wide wireup_* settings every entry playbook reads that argument_specs cannot
    fully check (ranges, absolute paths): one list of errors, each naming the variable and the fix."""
    errors = []
    if "wireup_master_port" in values:
        errors.extend(validate_port("wireup_master_port", values["wireup_master_port"]))
    # Read by site.yml's driver play as its `serial` keyword, before that play's roles run.
    if "nvidia_driver_serial" in values:
        errors.extend(validate_serial("nvidia_driver_serial", values["nvidia_driver_serial"]))
    errors.extend(
        validate_abs_paths({k: values[k] for k in ("wireup_base_dir", "wireup_venv_path") if k in values})
    )
    return errors
