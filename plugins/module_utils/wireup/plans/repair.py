"""repair.yml (issue 37 item 1): recheck the nodes wireup drained, and return them to service.

One read of every node's Slurm state (``scontrol show node -o``) decides per host of the play:
- not drained: nothing to do;
- drained by a person or another tool (no "wireup: " mark): never touched, its reason kept;
- drained by wireup for a job's problem (``[user_problem] job``): returned without a hardware
  recheck (the node was never at fault);
- drained by wireup for the node's problem (hardware or software, or an older untagged wireup
  drain): the quick check runs again (node_check's wireup-check) and the node is returned only
  when it now PASSes; a node the bench drained (launch.yml's gate) is returned only by a passing
  bench, which repair.yml does not run: it says so;
- state unknown (scontrol failed, the node not in its answer): nothing is done (fails closed).

Nothing changes unless ``repair_resume`` is true (a dry run by default) and not in check mode."""

from __future__ import annotations

import shlex
from typing import TypedDict

from ..core import checks
from ..launch import slurm

ACTIONS = ("in_service", "not_ours", "clear", "recheck", "bench", "unread")


class NodeRepair(TypedDict):
    node: str  # the Slurm node name
    action: str  # ACTIONS
    state: str
    reason: str  # Slurm's Reason= (without who and when)
    whose: str  # slurm.reason_owner's
    check: str
    since: str  # when the reason was set (Slurm's [USER@TIME]), "" when unknown
    by: str


class RepairPlan(TypedDict):
    """``__repair_plan``: what repair.yml does with each host of the play."""

    nodes: dict[str, NodeRepair]
    recheck: list[str]  # the hosts node_check's quick check runs on
    show: list[str]
    errors: list[str]


def _entry(node: str, st: dict | None) -> NodeRepair:
    owner = slurm.reason_owner(st.get("reason") if st else None)
    return {
        "node": node,
        "action": _action(st, owner),
        "state": (st or {}).get("state") or "",
        "reason": (st or {}).get("reason") or "",
        "whose": owner["whose"],
        "check": owner["check"],
        "since": (st or {}).get("reason_time") or "",
        "by": (st or {}).get("reason_user") or "",
    }


def _action(st: dict | None, owner: dict) -> str:
    if st is None:
        return "unread"
    if not st["drain"]:
        return "in_service"
    if not owner["wireup"]:
        return "not_ours"
    if owner["whose"] == "job":
        return "clear"
    return "bench" if owner["check"] == "bench" else "recheck"


_SAID = {
    "in_service": "in service (State={state}): nothing to do",
    "not_ours": "drained by a person or another tool (Reason={reason}): left alone",
    "clear": "drained by wireup for a job's problem (Reason={reason}): returned without a hardware recheck",
    "recheck": "drained by wireup for the node's problem (Reason={reason}): the quick check runs again",
    "bench": (
        "drained by wireup's launch gate after a bench (Reason={reason}): the quick check runs again, "
        "but only a passing bench.yml returns it (.venv/bin/ansible-playbook bench.yml --limit {host})"
    ),
    "unread": "its Slurm state could not be read ({why}): nothing is done",
}


def plan(show_result, nodes: dict) -> RepairPlan:
    """Every decision before the recheck. ``show_result``: the registered ``scontrol show node -o``
    (stdout, rc, stderr); ``nodes``: {inventory host: its wireup_node facts} (the Slurm name is
    the hostname: slurm.node_name). A Slurm name that is not a host name is an error (it would
    reach scontrol's argv)."""
    result = show_result if isinstance(show_result, dict) else {}
    parsed = slurm.parse_show_node(result.get("stdout", ""))
    stderr = str(result.get("stderr") or result.get("msg") or "").strip().splitlines()
    why = f"scontrol: {stderr[0][:200]}" if stderr else "not in scontrol's answer"
    out: RepairPlan = {"nodes": {}, "recheck": [], "show": [], "errors": []}
    for host in sorted(nodes or {}):
        node = slurm.node_name(host, (nodes or {}).get(host))
        out["errors"] += slurm.node_name_errors(host, node)
        if not checks.is_host_name(node):
            continue
        entry = _entry(node, parsed.get(node))
        out["nodes"][host] = entry
        if entry["action"] in ("recheck", "bench"):
            out["recheck"].append(host)
        said = _SAID[entry["action"]].format(host=host, why=why, **entry)
        out["show"].append(f"Repair: {host} ({node}) {said}")
    return out


class ReturnPlan(TypedDict):
    """``__repair_return``: the nodes returned to service now (or that would be)."""

    resume: list[dict]  # {host, node, argv, why}
    nodes: dict  # host -> {action (resume, would_resume, kept), verdict, why}
    show: list[str]


def _verdict(entry: NodeRepair, found: dict | None) -> tuple[bool, str]:
    """(may it return, why) for one drained node, from its recheck (node_check.result's answer)."""
    if entry["action"] == "clear":
        return True, "a job's problem: no hardware recheck needed"
    if not isinstance(found, dict) or "verdict" not in found:
        return False, "no recheck result (the quick check did not run on it)"
    verdict, line = found["verdict"], found.get("line") or ""
    if verdict != "PASS":
        return False, f"the quick check says {verdict}: {line}"
    if entry["action"] == "bench":
        return False, f"the quick check passes ({line}), but the bench drained it: run bench.yml on it"
    return True, f"the quick check passes now: {line}"


def returns(repair: RepairPlan, results: dict, *, resume: bool, check_mode: bool) -> ReturnPlan:
    """Which drained nodes go back to service. ``results``: {host: node_check.result's answer}
    for the hosts rechecked. Only a wireup drain is ever resumed; with ``resume`` false (the
    default) or in check mode the lines say what would be done."""
    out: ReturnPlan = {"resume": [], "nodes": {}, "show": []}
    for host, entry in sorted(repair["nodes"].items()):
        if entry["action"] not in ("clear", "recheck", "bench"):
            continue
        ok, why = _verdict(entry, (results or {}).get(host))
        argv = slurm.resume_argv(entry["node"])
        if not ok:
            action, said = "kept", f"stays drained: {why}"
        elif resume and not check_mode:
            action, said = "resume", f"returned to service ({why}): {shlex.join(argv)}"
            out["resume"].append({"host": host, "node": entry["node"], "argv": argv, "why": why})
        else:
            held = "check mode" if check_mode else "dry run: -e repair_resume=true returns it"
            action, said = "would_resume", f"would return to service ({why}; {held}): {shlex.join(argv)}"
        out["nodes"][host] = {"action": action, "why": why, "node": entry["node"]}
        out["show"].append(f"Repair: {host} ({entry['node']}) {said}")
    return out


def batch_plan(repair: RepairPlan, hosts) -> RepairPlan:
    """The plan of one remediation batch: only ``hosts`` (those rechecked after their action), so
    returns() decides for them alone from their new recheck."""
    wanted = set(hosts or [])
    nodes = {h: e for h, e in repair["nodes"].items() if h in wanted}
    return {"nodes": nodes, "recheck": sorted(nodes), "show": [], "errors": []}
