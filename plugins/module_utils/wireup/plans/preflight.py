"""Inventory and variable validation for preflight: pure functions returning error messages.

Every message names the variable (or inventory item) and says how to fix it, so preflight can
stop the play before any node changes.
"""

from __future__ import annotations

import ipaddress
import os
import re

from ..capability.registry import CAPABILITIES
from ..core import apt
from ..core.checks import (
    PIN_FORMATS,
    check_version_range,
    inventory_host_errors,
    is_digits,
    is_shell_name,
    kind_name,
    node_hostname_errors,
    program_args_errors,
    shell_name_errors,
    slurm_option_errors,
    validate_abs_paths,
    validate_nproc,
    validate_port,
)
from ..core.watchsettings import errors as continuous_errors
from ..launch.blast import setting_errors as blast_errors
from .remediate import setting_errors as remediate_errors


def secret_env_errors(value, var: str = "wireup_secret_env") -> list[str]:
    """Errors of the list of variable names whose values are secret (redact.is_secret_name's
    extra names): a list of shell variable names (the whole name, nothing around it)."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        return [f"{var} must be a list of variable names (e.g. [GITHUB_PAT]), not {kind_name(value)}"]
    return [
        f"{var}: {name!r} is not a shell variable name (letters, digits, '_', not starting with a digit)"
        for name in value
        if not is_shell_name(name)
    ]


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
        elif not re.fullmatch(pattern, value):
            errors.append(f"{name}={value!r} is malformed: expected a value like {example}")
    if errors:
        return errors
    pkg, cuda = values.get("nccl_package_version"), values.get("cuda_repo_version")
    errors.extend(apt.nccl_pin_errors(pkg, values.get("nccl_version"), cuda))
    return errors


def validate_cluster(
    groups: dict,
    node_group: str,
    master_host: str,
    addresses: dict | None = None,
    hostnames: dict | None = None,
) -> list[str]:
    """Check the inventory's shape.

    ``groups``: Ansible's ``groups`` magic variable; ``addresses``: {host: address} once facts
    are known (None before); ``hostnames``: {host: the node's own host name} once read.
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
    errors.extend(node_hostname_errors(dict(hostnames or {})))
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


def validate_serial(name: str, value) -> list[str]:
    """A play's `serial`: a whole number of hosts >= 1, or a percentage from 1% to 100%."""
    if _is_batch_size(value):
        return []
    return [
        f"{name}={value!r} is not a batch size: use a whole number of nodes (e.g. 2) or a "
        f"percentage (e.g. '25%')"
    ]


def _is_batch_size(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return False
    text = str(value).strip()
    if is_digits(text):
        return int(text) >= 1
    return text.endswith("%") and is_digits(text[:-1]) and 1 <= int(text[:-1]) <= 100


def validate_settings(values: dict) -> list[str]:
    """The cluster-wide wireup_* settings every entry playbook reads that argument_specs cannot
    fully check (ranges, absolute paths): one list of errors, each naming the variable and the fix."""
    errors = []
    if "wireup_master_port" in values:
        errors.extend(validate_port("wireup_master_port", values["wireup_master_port"]))
    # Read by site.yml's driver play as its `serial` keyword, before that play's roles run.
    # ... and bench.yml's node-alone torch play as its `serial` (issue 39).
    for name in ("nvidia_driver_serial", "bench_single_serial"):
        if name in values:
            errors.extend(validate_serial(name, values[name]))
    errors.extend(
        validate_abs_paths({k: values[k] for k in ("wireup_base_dir", "wireup_venv_path") if k in values})
    )
    return errors


# ---------------------------------------------------------------- names wireup does not know
# Ansible reads any variable and never says that a name is read by nothing: `-e
# torchrun_lauch_action=stop` ran jobs.yml's default action with rc 0 (issue 38). A name that
# carries a prefix of wireup (a role's name + '_', or 'wireup_') must be documented (a role's
# argument_specs); so must one that starts like such a prefix and is a slip or two from a
# documented name. Anything else belongs to another tool and passes.
# Facts wireup's roles and modules set (outputs, so in no argument_specs); a fact cache can bring
# them back into hostvars before preflight runs (tests/unit/test_validate.py keeps the list whole).
FACTS = frozenset(
    {
        "wireup_node",
        "wireup_master",
        "gpu_topology_facts",
        "gpu_topology_nics",
        "gpu_trial_node",
        "gpu_trial_run",
        "nccl_tests_build",
        "pytorch_venv_info",
    }
)
# Slips a name may have from a documented one (insert, delete, change or swap one character).
NAME_SLIPS = 2


def variable_prefixes(roles, *, registry=CAPABILITIES) -> tuple[str, ...]:
    """Every role's name + '_', every capability's prefix (capability/registry.py) and 'wireup_',
    longest first (a name's owner is its most specific)."""
    prefixes = {f"{role}_" for role in roles} | {cap.prefix for cap in registry if cap.prefix} | {"wireup_"}
    return tuple(sorted(prefixes, key=lambda p: (-len(p), p)))


def _slips(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance of a and b (a swap of neighbours is one slip), or
    limit + 1 once it must exceed limit."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before, row = None, list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, other in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (char != other))
            if before is not None and i > 1 and j > 1 and char == b[j - 2] and a[i - 2] == other:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, row = row, current
    return row[-1]


def _starts_like(name: str, words) -> bool:
    """True when name begins within one slip of a prefix's first word and its '_' (torchrn_,
    torchrunlaunch_ and wirup_ do; foo_ does not)."""
    return any(_slips(name[: len(word) + cut], word, 1) <= 1 for word in words for cut in (-1, 0, 1))


def _nearest(name: str, candidates) -> str:
    """The candidate most like name, or "" when none is much like it (difflib's ratio under 0.8:
    names sharing a long prefix score 0.7 with nothing else in common)."""
    import difflib

    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.8)
    return close[0] if close else ""


def _unknown_message(name: str, nearest: str, owner: str) -> str:
    if nearest:
        hint = f"did you mean {nearest}?"
    elif owner == "wireup_":
        hint = "none of wireup's cluster-wide variables is close (group_vars/all.yml lists them)."
    else:
        role = owner.removesuffix("_")
        hint = f"none of the {role} role's variables is close (roles/{role}/README.md lists them)."
    return (
        f"{name} is not a wireup variable: {hint} Fix the name where it is set (-e, the inventory, "
        "group_vars or host_vars); a variable of another tool that looks like wireup's goes in "
        "preflight_foreign_variables"
    )


def unknown_variables(names, documented, roles, *, registry=CAPABILITIES) -> dict[str, str]:
    """{name: error} for every name that carries a prefix of ``roles`` or of the registry's
    capabilities (variable_prefixes) or starts like one within NAME_SLIPS of a documented name,
    but is not ``documented`` (the roles' argument_specs) or a fact wireup sets (FACTS).
    Registers (``__*``) and Ansible's own (``ansible_*``) pass."""
    documented = frozenset(documented)
    prefixes = variable_prefixes(roles, registry=registry)
    words = {prefix.split("_", 1)[0] + "_" for prefix in prefixes}
    out = {}
    for name in sorted({str(n) for n in names}):
        if name in documented or name in FACTS or name.startswith(("__", "ansible_")):
            continue
        owner = next((p for p in prefixes if name.startswith(p)), "")
        if owner:
            out[name] = _unknown_message(name, _nearest(name, documented), owner)
        elif _starts_like(name, words):
            slips = {d: _slips(name, d, NAME_SLIPS) for d in documented}
            fewest = min(slips.values(), default=NAME_SLIPS + 1)
            if fewest <= NAME_SLIPS:
                close = sorted(d for d, n in slips.items() if n == fewest)
                out[name] = _unknown_message(name, _nearest(name, close) or close[0], "")
    return out


def inventory_source_errors(sources, exists=os.path.exists) -> list[str]:
    """An error for every inventory source (Ansible's ansible_inventory_sources) that names a path
    that is not there: Ansible goes on with the implicit localhost alone and the run stops at
    "group 'gpu_nodes' does not exist". A host list (``-i node1,node2,``) is not a path."""
    return [
        f"the inventory {source} does not exist: give -i a file or folder that does (copy "
        "inventory/example/ to inventory/mycluster and put your nodes in it, README step 2)"
        for source in sources
        if "," not in str(source) and not exists(str(source))
    ]


# ---------------------------------------------------------------- the one inventory check
# Env mappings exported by bash scripts; each key must be a shell name. The bench role's
# (bench_env, bench_fabric_env) are checked with its other variables, in bench_errors.
ENV_MAPPINGS = ("wireup_job_env", "torchrun_launch_env")


def _capability_errors(values: dict, registry) -> list[str]:
    """Each capability's settings rule (capability/registry.py: the bench role's for links, torch
    and stepcost; gpu_trial's, issue 25), given the variables of its prefix."""
    errors = []
    for cap in registry:
        if cap.preflight:
            errors += cap.preflight({k: v for k, v in values.items() if k.startswith(cap.prefix)})
    return errors


def host_errors(values: dict, *, registry=CAPABILITIES) -> list[str]:
    """Every check of one host's variables that needs no node (values: its variables as the
    inventory, group_vars, host_vars and -e set them, over the roles' defaults); registry: the
    capabilities whose settings rules run (capability/registry.py)."""
    errors = validate_pins(values)
    if "wireup_nproc_per_node" in values:
        errors += validate_nproc(values["wireup_nproc_per_node"])
    errors += validate_settings(values)
    for name in ENV_MAPPINGS:
        if name in values:
            errors += shell_name_errors(name, values[name])
    if "wireup_secret_env" in values:
        errors += secret_env_errors(values["wireup_secret_env"])
    if "torchrun_launch_slurm_options" in values:
        errors += slurm_option_errors(values["torchrun_launch_slurm_options"])
    if "torchrun_launch_args" in values:
        errors += program_args_errors(values["torchrun_launch_args"])
    errors += _capability_errors(values, registry)
    errors += blast_errors(values)  # issue 37: the blast radius
    errors += remediate_errors(values)  # issue 37: repair.yml's remediation (repair_act, repair_batch)
    # Issue 26's continuous checks (node_check_*, slurm_health_check_*): their own module.
    errors += continuous_errors(values)
    return errors


def inventory_errors(
    hosts: dict,
    groups: dict,
    node_group: str,
    master_host: str = "",
    ansible_core: tuple[str, str] | None = None,
) -> list[str]:
    """Every inventory-only check, run once before any node is touched (as kubespray's
    validate_inventory): the cluster's shape, then each host's variables (pins, processes per
    node, ports, paths, env names, bench settings), then the control node's
    ansible-core. An error every host shares is given once; else it names its hosts.

    hosts: {host: {variable: value}}; ansible_core: (version, wireup_ansible_core_range)."""
    errors = validate_cluster(dict(groups), node_group, master_host)
    # Before anything runs: a name that cannot be a path or a word of a script would otherwise
    # fail only when results are written, after every benchmark ran.
    errors += inventory_host_errors(sorted(set(hosts) | set(dict(groups).get(node_group) or [])))
    seen: dict[str, list[str]] = {}
    for host in sorted(hosts):
        for error in host_errors(dict(hosts[host])):
            seen.setdefault(error, []).append(host)
    for error, where in seen.items():
        errors.append(error if len(where) == len(hosts) else f"{', '.join(where)}: {error}")
    if ansible_core:
        version, spec = ansible_core
        if not check_version_range(str(version), str(spec)):
            errors.append(
                f"ansible-core {version} is outside wireup_ansible_core_range ({spec}): run wireup from "
                f"its venv (make venv; .venv/bin/ansible-playbook)"
            )
    return errors
