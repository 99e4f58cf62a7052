"""Filters for preflight: thin wrappers around wireup.plans.preflight and wireup.probe.node (pure,
unit-tested), and the one inventory check (wireup_inventory_errors) that runs before any node is touched."""

from __future__ import annotations

import contextlib
import pathlib

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import node
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import plain
from ansible_collections.wireup.cluster.plugins.plugin_utils.wireup_plugin import wrap as _wrap


def wireup_cluster_errors(groups, node_group, master_host, addresses=None, hostnames=None):
    return preflight.validate_cluster(
        dict(groups), node_group, master_host, addresses, dict(hostnames) if hostnames else None
    )


def wireup_master(members, master_host):
    return checks.master_of(list(members), master_host)


def wireup_node_summary(facts, master):
    return node.summary(dict(facts), str(master))


def _role_files(roles_dir):
    """{role: (defaults, options)} for every role under roles_dir with argument_specs:
    defaults/main.yml's values and every entry point's options."""
    out = {}
    for folder in sorted(p for p in pathlib.Path(roles_dir).iterdir() if p.is_dir()):
        specs = folder / "meta" / "argument_specs.yml"
        if not specs.is_file():
            continue
        defaults_file = folder / "defaults" / "main.yml"
        defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.is_file() else {}
        options = {}
        for entry in (yaml.safe_load(specs.read_text()) or {}).get("argument_specs", {}).values():
            options.update((entry or {}).get("options") or {})
        out[folder.name] = (defaults or {}, options)
    return out


def documented_variables(roles_dir):
    """Every variable a role under roles_dir documents (any entry point of its argument_specs)."""
    return {name for _defaults, options in _role_files(roles_dir).values() for name in options}


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


def _given(hv, names, prefixes):
    """The host's variables of wireup's prefixes that can be templated now; one naming a fact not
    gathered yet is left to the task that reads it."""
    given = {}
    for name in [n for n in names if n.startswith(prefixes)]:
        with contextlib.suppress(Exception):
            given[name] = plain(hv[name])
    return given


def _foreign(hv, default):
    """The host's preflight_foreign_variables (else the play's), and its error when it is no list
    of names."""
    value = default
    if "preflight_foreign_variables" in hv:
        with contextlib.suppress(Exception):
            value = hv["preflight_foreign_variables"]
    if value is None or (isinstance(value, list) and all(isinstance(n, str) for n in value)):
        return set(value or ()), []
    return set(), [
        "preflight_foreign_variables must be a list of variable names (e.g. [nvidia_driver_skip_reboot]), "
        f"not {str(value)[:80]!r}"
    ]


def _name_errors(names, foreign, files):
    """{error: [hosts]} for the names no role documents (preflight.unknown_variables), checked once
    over every host's names ({host: names}); {host: _foreign's answer} lets names through."""
    documented = {name for _defaults, options in files.values() for name in options}
    problems = preflight.unknown_variables(set().union(*names.values()), documented, sorted(files))
    out = {}
    for host, host_names in names.items():
        allowed, errors = foreign[host]
        errors = errors + [problems[n] for n in host_names if n in problems and n not in allowed]
        for error in errors:
            out.setdefault(error, []).append(host)
    return out


def wireup_inventory_errors(hosts, hostvars, groups, node_group, master_host="", **kwargs):
    """Every inventory-only error at once (preflight.inventory_errors plus each role's
    argument_specs and the names no role documents), from the variables each host of ``hosts``
    has before any node is touched; a missing inventory source alone, when one is missing.

    kwargs: roles_dir, roles (the roles whose defaults and argument_specs apply), ansible_core
    ((version, range)), inventory_sources (ansible_inventory_sources), foreign_variables (the
    play's preflight_foreign_variables)."""
    missing = preflight.inventory_source_errors(kwargs.get("inventory_sources") or [])
    if missing:
        return missing
    files = _role_files(kwargs["roles_dir"])
    checked = {role: files[role] for role in kwargs.get("roles") or [] if role in files}
    defaults = {}
    for role_defaults, _specs in checked.values():
        # Defaults that are templates ("{{ wireup_base_dir }}/bench") are the roles' own, not checked.
        defaults.update((k, v) for k, v in role_defaults.items() if not (isinstance(v, str) and "{{" in v))
    prefixes = preflight.variable_prefixes(files)
    values, by_error, names, foreign = {}, {}, {}, {}
    for host in hosts:
        hv = hostvars[host]  # each lookup makes the host's variables anew: once per host
        names[host] = [str(n) for n in hv]
        foreign[host] = _foreign(hv, kwargs.get("foreign_variables"))
        given = _given(hv, names[host], prefixes)
        for role, (_defaults, options) in checked.items():
            for error in _spec_errors(role, options, given):
                by_error.setdefault(error, []).append(host)
        values[host] = {**defaults, **given}
    for error, where in _name_errors(names, foreign, files).items():
        by_error.setdefault(error, []).extend(where)
    errors = preflight.inventory_errors(
        values, dict(groups), node_group, master_host, kwargs.get("ansible_core")
    )
    for error, where in by_error.items():
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
