"""Filters for preflight: thin wrappers around wireup.validate and wireup.node (pure, unit-tested)."""

from __future__ import annotations

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup import node, validate


def wireup_pin_errors(values):
    """Errors in the pinned versions found in ``values`` (a dict of variables)."""
    return validate.validate_pins(dict(values))


def wireup_cluster_errors(groups, node_group, master_host, addresses=None):
    return validate.validate_cluster(dict(groups), node_group, master_host, addresses)


def wireup_nproc_errors(value):
    return validate.validate_nproc(value)


def wireup_settings_errors(values):
    """Errors in the cluster-wide wireup_* settings found in ``values`` (a dict of variables)."""
    return validate.validate_settings(dict(values))


def wireup_version_in(version, spec):
    return validate.check_version_range(str(version), str(spec))


def wireup_master(members, master_host):
    return validate.master_of(list(members), master_host)


def wireup_node_summary(facts, master):
    return node.summary(dict(facts), str(master))


class FilterModule:
    def filters(self):
        return {
            "wireup_pin_errors": wireup_pin_errors,
            "wireup_cluster_errors": wireup_cluster_errors,
            "wireup_nproc_errors": wireup_nproc_errors,
            "wireup_settings_errors": wireup_settings_errors,
            "wireup_version_in": wireup_version_in,
            "wireup_master": wireup_master,
            "wireup_node_summary": wireup_node_summary,
        }
