"""The blast radius (issue 37 item 3): no run of wireup takes more than a set share of a node group
or of a Slurm partition out of service (default 10%, and an absolute cap). Above it the run drains
nothing more and says the cause is likely shared (a driver rollout, a switch, the fabric manager),
with the finding the nodes have in common.

The arithmetic is integers only: the limit of a group of n nodes at p percent is floor(n * p / 100),
at least 1 (one bad node can always be taken out, even in a group of 3 where 10% is 0.3), at most
the cap. "Out" counts the nodes wireup holds drained already (slurm.reason_owner's mark) plus those
this run would drain; a node drained by a person or another tool does not count against wireup's
budget (it is not wireup's to return) but it stays out of service either way.

Standard library only: wireup-check imports it on the node (check/run.py)."""

from __future__ import annotations

import re
from collections import Counter
from typing import TypedDict

SHARED_CAUSES = "a driver rollout, a switch, the fabric manager"
SETTINGS = {"wireup_drain_max_share": (0, 100), "wireup_drain_max_nodes": (0, 100000)}
_NUMBERS = re.compile(r"[^\s(),;]*[0-9][^\s(),;]*")  # a word with a digit: GPU3, a bus id, a figure


def limit(size: int, max_share: int, max_nodes: int) -> int:
    """How many of ``size`` nodes wireup may hold out at once: floor(size * max_share / 100), at
    least 1 when the group has a node, at most ``max_nodes``. ValueError for a share outside 0-100
    or a negative cap (preflight refuses those before; this guards the other callers)."""
    if not 0 <= int(max_share) <= 100 or int(max_nodes) < 0:
        raise ValueError(f"blast radius: share {max_share!r} must be 0-100 and the cap {max_nodes!r} >= 0")
    if size <= 0:
        return 0
    return min(int(max_nodes), max(1, size * int(max_share) // 100))


def common_finding(findings) -> tuple[str, int]:
    """The finding most of ``findings`` share once GPU indexes, bus ids, UUIDs and figures are set
    aside ('GPU3 (0000:19:00.0) row remap pending' and 'GPU0 (0000:07:00.0) row remap pending' are
    one), as (an example of it, how many have it); ('', 0) for none."""
    shapes = Counter(_NUMBERS.sub("#", str(f)) for f in findings)
    if not shapes:
        return "", 0
    shape, count = shapes.most_common(1)[0]
    example = next(str(f) for f in findings if _NUMBERS.sub("#", str(f)) == shape)
    return example, count


class Budget(TypedDict):
    """One group's answer: may the run drain ``wanted``?"""

    group: str  # "the node group gpu_nodes", "Slurm partition gpu"
    size: int
    limit: int
    out: list[str]  # held out by wireup already
    wanted: list[str]  # this run would take them out
    allowed: bool
    line: str


def check(group: str, members, out, wanted: dict, *, max_share: int, max_nodes: int) -> Budget:
    """Whether taking the nodes of ``wanted`` ({node: finding}) out of ``members`` keeps wireup's
    nodes out of service within the limit (``out``: the members wireup holds out already).
    Above it: not allowed, and the line names the share, the limit and the common finding."""
    members = sorted(set(members))
    held = sorted(set(out) & set(members))
    mine = sorted(n for n in wanted if n in members and n not in held)
    size, most = len(members), limit(len(members), max_share, max_nodes)
    total = len(held) + len(mine)
    allowed = not mine or total <= most
    line = ""
    if not allowed:
        example, count = common_finding([wanted[n] for n in mine])
        line = (
            f"wireup: blast radius: {total} of {size} nodes of {group} would be out of service "
            f"({len(held)} drained by wireup already, {len(mine)} now; the limit is {most}: "
            f"{max_share}%, at most {max_nodes}): nothing more is drained. The cause is likely "
            f"shared ({SHARED_CAUSES}): {count} of {len(mine)} have '{example}'"
        )
    return {
        "group": group,
        "size": size,
        "limit": most,
        "out": held,
        "wanted": mine,
        "allowed": allowed,
        "line": line,
    }


def groups_of(parsed: dict, nodes) -> dict:
    """{"Slurm partition P": [its nodes]} for every partition of ``nodes``, from
    slurm.parse_show_node's answer for the whole cluster (each node's "partitions")."""
    wanted = set(nodes)
    names = sorted({p for n in wanted for p in (parsed.get(n) or {}).get("partitions", [])})
    return {
        f"Slurm partition {p}": sorted(n for n, st in parsed.items() if p in st.get("partitions", []))
        for p in names
    }


def held_out(parsed: dict, owner) -> list[str]:
    """The nodes wireup holds drained (parse_show_node's answer; ``owner``: slurm.reason_owner)."""
    return sorted(n for n, st in parsed.items() if st.get("drain") and owner(st.get("reason"))["wireup"])


def verdict(groups: dict, out, wanted: dict, *, max_share: int, max_nodes: int) -> dict:
    """Every group's check (``groups``: {name: members}): {"allowed" (all are), "budgets", "lines"
    (one per group over its limit)}. No group at all (the state could not be read): not allowed,
    saying so (a gate that cannot read its input refuses)."""
    budgets = [
        check(name, members, out, wanted, max_share=max_share, max_nodes=max_nodes)
        for name, members in sorted(groups.items())
    ]
    lines = [b["line"] for b in budgets if not b["allowed"]]
    if wanted and not budgets:
        lines = ["wireup: blast radius: no node group or partition could be read: nothing is drained"]
    return {"allowed": (bool(budgets) and not lines) or not wanted, "budgets": budgets, "lines": lines}


def setting_errors(values: dict) -> list[str]:
    """preflight's check of wireup_drain_max_share (an integer 0-100) and wireup_drain_max_nodes
    (an integer, 0 or more): each error names the variable and the fix."""
    errors = []
    for name, (low, high) in SETTINGS.items():
        if name not in values:
            continue
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors.append(
                f"{name}={value!r} must be a whole number from {low} to {high} (group_vars/all.yml)"
            )
    return errors
