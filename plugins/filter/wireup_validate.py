"""Filters for preflight: thin wrappers around wireup.validate and wireup.node (pure, unit-tested),
and the one inventory check (wireup_inventory_errors) that runs before any node is touched."""

from __future__ import annotations

import contextlib
import pathlib

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import node, validate
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import plain
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap

# Variables of these prefixes (and the renamed ones) are checked; the rest of a host's variables
# (ansible_*, the testbed's own) are not wireup's.
_PREFIXES = (
    "wireup_",
    "bench_",
    "nccl_",
    "cuda_repo_",
    "nvidia_driver_",
    "pytorch_venv_",
    "torchrun_launch_",
    "gpu_topology_",
    "gpu_trial_",
    "preflight_",
    "node_check_",
    "slurm_health_check_",
)


def wireup_cluster_errors(groups, node_group, master_host, addresses=None, hostnames=None):
    return validate.validate_cluster(
        dict(groups), node_group, master_host, addresses, dict(hostnames) if hostnames else None
    )


def wireup_master(members, master_host):
    return validate.master_of(list(members), master_host)


def wireup_node_summary(facts, master):
    return node.summary(dict(facts), str(master))


def _role_files(roles_dir, roles):
    """{role: (defaults, options)}: defaults/main.yml's values and every entry point's
    argument_specs options, for the roles present."""
    out = {}
    for role in roles:
        folder = pathlib.Path(roles_dir) / role
        specs = folder / "meta" / "argument_specs.yml"
        if not specs.is_file():
            continue
        defaults_file = folder / "defaults" / "main.yml"
        defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.is_file() else {}
        options = {}
        for entry in (yaml.safe_load(specs.read_text()) or {}).get("argument_specs", {}).values():
            options.update((entry or {}).get("options") or {})
        out[role] = (defaults or {}, options)
    return out


def _spec_errors(role, options, values):
    """argument_specs' types and choices for the variables set (not the roles' own defaults);
    `required` is left to each role's own entry point, which knows what its caller passes."""
    spec = {
        name: {k: v for k, v in option.items() if k not in ("required", "default", "description")}
        for name, option in options.items()
        if name in values
    }
    if not spec:
        return []
    result = ArgumentSpecValidator(spec).validate({name: values[name] for name in spec})
    return [f"{role} role: {message}" for message in result.error_messages]


def wireup_inventory_errors(hosts, hostvars, groups, node_group, master_host="", **kwargs):
    """Every inventory-only error at once (validate.inventory_errors plus each role's
    argument_specs), from the variables each host of ``hosts`` has before any node is touched.

    kwargs: roles_dir, roles (the roles whose defaults and argument_specs apply), ansible_core
    ((version, range))."""
    files = _role_files(kwargs["roles_dir"], kwargs.get("roles") or [])
    defaults = {}
    for role_defaults, _specs in files.values():
        # Defaults that are templates ("{{ wireup_base_dir }}/bench") are the roles' own, not checked.
        defaults.update((k, v) for k, v in role_defaults.items() if not (isinstance(v, str) and "{{" in v))
    values, spec_errors = {}, {}
    for host in hosts:
        hv = hostvars[host]
        names = [n for n in hv if str(n).startswith(_PREFIXES) or n in validate.RENAMED]
        given = {}
        for name in names:
            # A value that cannot be templated yet (it names a fact not gathered) is left to the
            # task that reads it.
            with contextlib.suppress(Exception):
                given[name] = plain(hv[name])
        for role, (_defaults, options) in files.items():
            for error in _spec_errors(role, options, given):
                spec_errors.setdefault(error, []).append(host)
        values[host] = {**defaults, **given}
    errors = validate.inventory_errors(
        values, dict(groups), node_group, master_host, kwargs.get("ansible_core")
    )
    for error, where in spec_errors.items():
        errors.append(error if len(where) == len(hosts) else f"{', '.join(where)}: {error}")
    return errors


class FilterModule:
    def filters(self):
        filters = {
            "wireup_inventory_errors": wireup_inventory_errors,
            "wireup_cluster_errors": wireup_cluster_errors,
            "wireup_master": wireup_master,
            "wireup_node_summary": wireup_node_summary,
        }
        return {name: _wrap(func) for name, func in filters.items()}
