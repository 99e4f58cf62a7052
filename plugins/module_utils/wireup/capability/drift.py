"""Drift across the fleet (issue 37 item 5): one controller computation over every node's
DriftValues (probe/drift.py, from preflight's wireup_node), linear in the nodes (a Counter per
field, never pairs): per field the majority value and the nodes that differ.

* ``table``: the DriftTable of a run's nodes; ``differing`` and ``agreeing`` its two halves;
* ``refusals``: launch.yml's rule, one message per field where a mismatch hangs NCCL
  (HANG_FIELDS) unless the operator accepted it (wireup_launch_accept_drift);
* ``host_part`` / ``section`` / ``part_problem`` / ``report_sections``: the capability ``drift``
  of capability/registry.py: a host record's part (its values and where it is the outlier), a
  warning finding per outlier, and the report's table of the fields that differ.

A value UNKNOWN (a fact the node did not give or of the wrong grammar) is never an outlier and
never a majority; in a field launch.yml refuses on, a node whose value is unknown while others
are known refuses the job (a gate that cannot read its input fails closed).
"""

from __future__ import annotations

import collections
from typing import TypedDict

from ..core import shape
from ..probe import drift as probe_drift
from ..probe.health import finding

KIND = "drift"
# Where a mismatch between the nodes of one job hangs or breaks NCCL (docs/drift.md says why):
# NCCL's version (its wire protocol and the bootstrap differ between releases), whether a net
# plugin is there and which (NVIDIA/nccl#1634: a plugin on part of the nodes made NCCL hang), and
# the driver's branch (the CUDA IPC/P2P and the NVLink SHARP paths NCCL picks change with it), and
# the NCCL torch itself loads (the pip wheel's bundled one, not the system's: pytorch/pytorch#122571),
# for the same reason as nccl's.
HANG_FIELDS = ("nccl", "nccl_net_plugin", "driver_branch", "torch_nccl")


class FieldDrift(TypedDict):
    """One field across the nodes: the majority value (UNKNOWN when no node's value is known), how
    many nodes have it, the nodes whose known value differs ({host: value}) and those unknown."""

    field: str
    majority: str
    count: int
    outliers: dict[str, str]
    unknown: list[str]


class DriftTable(TypedDict):
    """Every field, in probe/drift.FIELDS' order, over ``hosts``."""

    hosts: list[str]
    fields: list[FieldDrift]


class DriftPart(TypedDict):
    """A host record's ``drift`` part: its values, and {field: {value, majority}} where it differs
    from the majority of the run's nodes."""

    values: dict[str, str]
    outliers: dict[str, dict[str, str]]


def _field(name: str, values: dict) -> FieldDrift:
    known = {host: v[name] for host, v in values.items() if v[name] != probe_drift.UNKNOWN}
    counts = collections.Counter(known.values())
    # The most common value; a tie goes to the smallest value, so the table is the same every run.
    majority, count = (
        min(counts.items(), key=lambda item: (-item[1], item[0])) if counts else (probe_drift.UNKNOWN, 0)
    )
    return {
        "field": name,
        "majority": majority,
        "count": count,
        "outliers": {host: value for host, value in sorted(known.items()) if value != majority},
        "unknown": sorted(set(values) - set(known)),
    }


def _kept(field, value):
    """A DriftValues value as it is when NONE, UNKNOWN or of its field's grammar, else UNKNOWN."""
    if value in (probe_drift.NONE, probe_drift.UNKNOWN):
        return value
    return value if probe_drift.checked(field, value) == value else probe_drift.UNKNOWN


def table(values_by_host: dict) -> DriftTable:
    """The DriftTable of {host: DriftValues}; a host's value that is not of its field's grammar
    (a hostile or damaged fact) is UNKNOWN here too, whatever made it."""
    values = {
        str(host): {
            f: _kept(f, v.get(f)) if isinstance(v, dict) else probe_drift.UNKNOWN for f in probe_drift.FIELDS
        }
        for host, v in values_by_host.items()
    }
    return {"hosts": sorted(values), "fields": [_field(name, values) for name in probe_drift.FIELDS]}


def table_of_facts(facts_by_host: dict) -> DriftTable:
    """The DriftTable of {host: wireup_node} (preflight's fact, any shape)."""
    return table({host: probe_drift.node_values(facts) for host, facts in facts_by_host.items()})


def differing(drift: DriftTable) -> list[FieldDrift]:
    """The fields where some node's known value differs from the majority."""
    return [f for f in drift["fields"] if f["outliers"]]


def agreeing(drift: DriftTable) -> int:
    """How many fields every node whose value is known agrees on."""
    return len(drift["fields"]) - len(differing(drift))


def _majority_hosts(drift: DriftTable, field: FieldDrift) -> list[str]:
    unknown = set(field["unknown"])
    return [h for h in drift["hosts"] if h not in field["outliers"] and h not in unknown]


def refusals(drift: DriftTable, accepted=()) -> list[str]:
    """launch.yml's messages, one per HANG_FIELDS field whose nodes differ (or that some node did
    not give while others did) and that ``accepted`` does not name; [] when the job may start."""
    messages = []
    for field in drift["fields"]:
        name = field["field"]
        if name not in HANG_FIELDS or name in accepted:
            continue
        if not field["outliers"] and not (field["unknown"] and field["count"]):
            continue
        majority = ", ".join(_majority_hosts(drift, field))
        messages.append(
            f"the nodes differ in {name} ({field['majority']} on {majority}"
            + "".join(f"; {value} on {host}" for host, value in field["outliers"].items())
            + "".join(f"; unknown on {host}" for host in field["unknown"])
            + f"): a job across them can hang in NCCL (docs/drift.md). Make the nodes agree (site.yml), "
            f"or accept it with -e wireup_launch_accept_drift={name}"
        )
    return messages


def accepted_fields(value) -> list[str]:
    """wireup_launch_accept_drift as a list of field names: a list, or one string of names
    separated by commas (-e wireup_launch_accept_drift=nccl,driver_branch). ValueError naming the
    variable for anything else or a name that is not a field launch.yml refuses on."""
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"wireup_launch_accept_drift must be a list of field names, got {type(value).__name__}: "
            f"set it to some of {', '.join(HANG_FIELDS)}"
        )
    names = [n.strip() for n in names if n.strip()]
    wrong = [n for n in names if n not in HANG_FIELDS]
    if wrong:
        raise ValueError(
            f"wireup_launch_accept_drift names {', '.join(repr(n) for n in wrong)}, not a field launch.yml "
            f"refuses on: use some of {', '.join(HANG_FIELDS)}"
        )
    return names


def launch_refusals(facts_by_host: dict, accept=None) -> list[str]:
    """launch.yml's pre-task: the refusals of {host: wireup_node} with the accepted fields."""
    return refusals(table_of_facts(facts_by_host), accepted_fields([] if accept is None else accept))


def _unknown_sets(drift: DriftTable) -> dict[str, set]:
    """Each field's hosts without a known value, as a set (a list's ``in`` per host would make
    the run's parts quadratic in the nodes)."""
    return {f["field"]: set(f["unknown"]) for f in drift["fields"]}


def host_part(drift: DriftTable, host: str, unknown: dict | None = None) -> DriftPart:
    """One host's DriftPart in the run's table (``unknown``: _unknown_sets of it, made once for a
    run's hosts)."""
    unknown = _unknown_sets(drift) if unknown is None else unknown
    return {
        "values": {
            f["field"]: f["outliers"].get(host, f["majority"])
            if host not in unknown[f["field"]]
            else probe_drift.UNKNOWN
            for f in drift["fields"]
        },
        "outliers": {
            f["field"]: {"value": f["outliers"][host], "majority": f["majority"]}
            for f in drift["fields"]
            if host in f["outliers"]
        },
    }


def attach(nodes: dict, facts_by_host: dict) -> dict:
    """The run's node data with each host's DriftPart as ``drift`` (the table over the hosts whose
    facts came: a host without them has no part)."""
    drift = table_of_facts(facts_by_host)
    unknown, judged = _unknown_sets(drift), set(drift["hosts"])
    return {
        host: dict(node, drift=host_part(drift, host, unknown)) if host in judged else node
        for host, node in nodes.items()
    }


def findings(part: DriftPart) -> list:
    """A warning per field where the host differs from the majority, naming both values."""
    return [
        finding(
            "warning",
            f"drift_{name}",
            f"{name} is {seen['value']} here, {seen['majority']} on most nodes of the run",
            source=KIND,
        )
        for name, seen in sorted(part["outliers"].items())
    ]


def section(node, record, ctx):
    """The record's drift part (the node data's ``drift``, attach's), a finding per outlier, no
    verdict of its own (drift warns; launch.yml refuses the fields that hang NCCL). Nothing when
    the node data has none. A part not of DriftPart's shape is shape.Malformed (DAMAGED)."""
    part = node.get("drift")
    if part is None:
        return {}, [], []
    shape.check(part, DriftPart, "drift")
    problem = _values_problem(part)
    if problem:
        raise shape.Malformed(problem)
    return dict(part), findings(part), []


def _values_problem(part) -> str:
    for name, value in {**part["values"], **{k: v.get("value") for k, v in part["outliers"].items()}}.items():
        if name not in probe_drift.GRAMMARS:
            return f"drift names {name!r}, not a field"
        if _kept(name, value) != value:
            return f"drift.{name} is not of its grammar"
    return ""


def part_problem(record) -> str:
    """What makes a stored record's drift part unusable ('' when nothing or none)."""
    part = record.get("drift")
    if not part:
        return ""
    if (
        not isinstance(part, dict)
        or not isinstance(part.get("values"), dict)
        or not isinstance(part.get("outliers"), dict)
    ):
        return "drift is not {values, outliers}"
    if not all(isinstance(v, dict) for v in part["outliers"].values()):
        return "drift.outliers is not a map of objects"
    return _values_problem(part)


def report_sections(records, plots=None):
    """The drift part of the report: the table over the records' values (only the fields that
    differ: field, majority, the nodes that differ and their values) and the count that agree.
    Nothing when no record has a drift part."""
    values = {
        h: r["drift"]["values"] for h, r in sorted(records.items()) if (r.get("drift") or {}).get("values")
    }
    if not values:
        return []
    drift = table(values)
    rows = [
        [f["field"], f["majority"], str(f["count"]), ", ".join(f"{h}: {v}" for h, v in f["outliers"].items())]
        for f in differing(drift)
    ]
    said = (
        f"{len(rows)} field(s) differ between the nodes, {agreeing(drift)} agree."
        if rows
        else f"All {agreeing(drift)} fields agree across the {len(values)} node(s)."
    )
    out = [("h", (2, "Drift across the nodes")), ("p", said)]
    if rows:
        out.append(("table", (["field", "majority", "nodes with it", "nodes that differ"], rows)))
    return out
