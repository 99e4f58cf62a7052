"""Pairwise fabric tests that name the bad node (pure Python, stdlib only).

All nodes are tested in disjoint pairs at the same time (one two-node job per pair), each pair is
judged against the expected busbw (nics.expected_busbw) or, where there is none, against the
median of the first round's pairs; the members of failing pairs are then paired with nodes that
passed, which decides which member is bad. :func:`plan` takes every result so far and returns the
next round (or none), every node's state and the evidence; the tasks only run what it says.

Rounds for N reachable nodes (roles/bench_fabric/README.md repeats this):

* round 1: floor(N/2) pairs at once (sorted names, neighbours paired); with odd N one node waits.
* later rounds: each node still undecided (a member of a failed pair, or the odd one out) is
  paired with a distinct node that passed, as many at once as there are passing nodes.
* so: 1 round when N is even and every pair passes; 2 rounds while the undecided nodes are no
  more than the passing ones (fewer than half the nodes bad, odd N included); in general
  1 + ceil(undecided / passing). Time grows with rounds, not with N. Without any passing pair
  (N = 2 failing, or every pair failing an expectation) nothing can be decided: the nodes are
  ``undetermined`` and the evidence says so.
* then one round for the whole-group run (below), when it runs: 2 rounds in all for even N with
  every pair passing, 3 in the usual case.

A pair whose job failed or timed out counts as failed (its error is the evidence); a node Ansible
cannot reach is ``unreachable`` and takes no part.

A whole-group run follows the pairs (one more round, one job): every reachable node not named bad,
when they are two or more and not just a pair that already ran. Its result is marked
``kind: "group"``. It is judged like a pair, against the group's expectation where there is one
(``expected_gbs``: the one figure, or the entry for all members joined by "+"), else against the
slowest passing pair: busbw is normalised for the node count (nccl-tests doc/PERFORMANCE.md), so a
ring over the group crosses the same links as the pairs and cannot be faster than its slowest
link; a group below ``pass_ratio`` x the slowest passing pair shows what only the group shows (a
switch uplink, a node slowed by more peers). With no passing pair it passes on completing. Its
verdict is its own: it names no node (the pairs do that).
"""

import re
import statistics

from . import bandwidth

STATES = ("good", "bad", "undetermined", "unreachable", "untested")


def first_round(nodes):
    """Disjoint pairs of the sorted node names; the last one waits when N is odd."""
    names = sorted(nodes)
    return [[names[i], names[i + 1]] for i in range(0, len(names) - 1, 2)]


def pair_key(pair):
    return "+".join(sorted(pair))


def _reference(results, expected_gbs):
    if isinstance(expected_gbs, dict):
        return None, "expected"
    if expected_gbs:
        return float(expected_gbs), "expected"
    first = [
        r["busbw"]
        for r in results
        if r.get("round") == 1 and r.get("busbw") is not None and not r.get("error")
    ]
    if not first:
        return None, "none"
    return float(statistics.median(first)), "median"


def judge_pair(result, reference, pass_ratio):
    """'PASS' or 'FAIL' for one pair result {pair, busbw, error}; FAIL on error or no figure."""
    if result.get("error") or result.get("busbw") is None:
        return "FAIL"
    if reference is None:
        return "PASS"
    return "PASS" if result["busbw"] >= pass_ratio * reference else "FAIL"


def _judged(results, reference, expected_gbs, pass_ratio):
    """Each pair result with its reference (the run's, or its own from expected_gbs), ratio and verdict."""
    judged = []
    for r in results:
        ref = reference
        if isinstance(expected_gbs, dict):
            ref = expected_gbs.get(pair_key(r["pair"]))
            ref = float(ref) if ref else None
        judged.append(
            {
                "pair": sorted(r["pair"]),
                "round": r.get("round"),
                "busbw": r.get("busbw"),
                "reference_gbs": round(ref, 3) if ref else None,
                "ratio": bandwidth.ratio(r.get("busbw"), ref),
                "verdict": judge_pair(r, ref, pass_ratio),
                "error": r.get("error") or "",
            }
        )
    return judged


def _node_state(node, judged, good):
    """{state, evidence} of a reachable node: good (a passing pair), bad (a failing pair with a
    good partner), undetermined (failing pairs only with undecided partners) or untested."""
    mine = [j for j in judged if node in j["pair"]]
    evidence = [_say(j, node) for j in mine]
    if node in good:
        return {"state": "good", "evidence": evidence}
    if not mine:
        return {"state": "untested", "evidence": []}
    if any(_partner(j, node) in good for j in mine):
        return {"state": "bad", "evidence": evidence}
    return {"state": "undetermined", "evidence": evidence}


def _next_pairs(state, judged, good, live):
    """Each node still pending with a distinct good partner, preferring one it has not met yet
    (a second opinion)."""
    pending = [n for n in live if state[n]["state"] in ("undetermined", "untested")]
    free, pairs = list(good), []
    for n in pending:
        met = {_partner(j, n) for j in judged if n in j["pair"]}
        pick = next((g for g in free if g not in met), None) or (free[0] if free else None)
        if pick is None:
            break
        free.remove(pick)
        pairs.append(sorted([n, pick]))
    return pairs


def _close_states(state, live, good):
    """When no round follows: an untested node is undetermined (no pair could be formed), and an
    undetermined one says why when no pair passed."""
    for n in live:
        if state[n]["state"] == "untested":
            state[n] = {
                "state": "undetermined",
                "evidence": [
                    f"{n}: no pair could be formed (fewer than two reachable nodes, or no passing partner)"
                ],
            }
        elif state[n]["state"] == "undetermined" and not good:
            state[n]["evidence"].append("no pair passed: no known-good partner to decide which member is bad")


def _pairs(nodes, results, *, expected_gbs, pass_ratio, unreachable, max_rounds):
    """The pair rounds over the pair results: the next pairs and every node's state (see plan)."""
    lost = sorted(set(unreachable) & set(nodes))
    live = sorted(set(nodes) - set(lost))
    reference, kind = _reference(results, expected_gbs)
    judged = _judged(results, reference, expected_gbs, pass_ratio)
    good = sorted({n for j in judged if j["verdict"] == "PASS" for n in j["pair"]} & set(live))
    state = {n: _node_state(n, judged, good) for n in live}
    for n in lost:
        state[n] = {
            "state": "unreachable",
            "evidence": [f"{n}: unreachable (Ansible could not connect); not tested"],
        }
    rounds_done = max([r.get("round") or 0 for r in results] or [0])
    next_pairs = []
    if rounds_done == 0:
        next_pairs = first_round(live)
    elif rounds_done < max_rounds:
        next_pairs = _next_pairs(state, judged, good, live)
    if not next_pairs:
        _close_states(state, live, good)
    return {
        "errors": [],
        "round": rounds_done + 1,
        "next_pairs": next_pairs,
        "done": not next_pairs,
        "reference_gbs": round(reference, 3) if reference is not None else None,
        "reference_kind": kind,
        "pairs": judged,
        "nodes": state,
        "bad": sorted(n for n, s in state.items() if s["state"] == "bad"),
        "good": good,
        "unreachable": lost,
        "untested": sorted(set(live) - {n for j in judged for n in j["pair"]}),
        "rounds_for_n": rounds_for(len(live)),
    }


def job_name(round_no, members, kind="pair"):
    """The inventory group (and summary file) name of one job of a round: the pair's names, or
    "group" for the whole-group run (its member list can be long)."""
    tail = "group" if kind == "group" else "_".join(members)
    return re.sub(r"[^A-Za-z0-9_]", "_", f"wireup_fabric_r{round_no}_{tail}")


def _group_reference(pairs_judged, expected_gbs, members):
    """(reference GB/s or None, kind) of the whole-group run (the module docstring says why)."""
    if isinstance(expected_gbs, dict):
        figure = expected_gbs.get(pair_key(members))
        if figure:
            return float(figure), "expected"
    elif expected_gbs:
        return float(expected_gbs), "expected"
    passing = [j["busbw"] for j in pairs_judged if j["verdict"] == "PASS" and j["busbw"] is not None]
    if passing:
        return float(min(passing)), "slowest_pair"
    return None, "none"


def plan(nodes, results=(), *, expected_gbs=None, pass_ratio=0.7, unreachable=(), max_rounds=6):
    """Decide the next round and every node's state from the results so far.

    nodes: inventory names; results: [{round, pair: members, busbw (GB/s) or None, error: str,
    kind: "pair" (default, two members) or "group"}]; expected_gbs: one figure for every job, or
    {"a+b": figure} per job (sorted names joined by "+"; a job without one is judged on its
    figure alone, the group then against the slowest passing pair), or None (pairs: the first
    round's median); unreachable: names Ansible could not reach (left out); max_rounds: rounds of
    pairs at most (the whole-group run is one more). Returns {round (the next round's number),
    next_pairs (each job's members; [] when done), next_jobs [{members, kind, name}], done, phase
    ('pairs', 'group' or 'done'), reference_gbs, reference_kind ('expected', 'median' or 'none'),
    pairs [{pair, round, busbw, ratio, verdict, error}], group {members, round, busbw,
    reference_gbs, reference_kind ('expected', 'slowest_pair', 'none'), ratio, verdict (PASS, FAIL,
    PENDING or NOT RUN), error, note}, nodes {name: {state, evidence}}, bad, good, rounds_for_n
    (documented bound, pair rounds), errors}."""
    results = list(results)
    errors = _ratio_errors(pass_ratio) or _result_errors(nodes, results)
    if errors:
        return {"errors": errors}
    pair_results = [r for r in results if r.get("kind", "pair") == "pair"]
    out = _pairs(
        nodes,
        pair_results,
        expected_gbs=expected_gbs,
        pass_ratio=pass_ratio,
        unreachable=unreachable,
        max_rounds=max_rounds,
    )
    out["next_jobs"] = [
        {"members": m, "kind": "pair", "name": job_name(out["round"], m)} for m in out["next_pairs"]
    ]
    out["phase"] = "pairs"
    members = sorted(n for n, s in out["nodes"].items() if s["state"] in ("good", "undetermined"))
    out["group"] = _pending_group(members)
    if not out["done"]:
        return out
    group = next((r for r in results if r.get("kind") == "group"), None)
    if group:
        return _judge_group(out, group, expected_gbs, pass_ratio)
    return _plan_group(
        out, members, expected_gbs, max([r.get("round") or 0 for r in pair_results] or [0]) + 1
    )


def _ratio_errors(pass_ratio):
    if isinstance(pass_ratio, bool) or not isinstance(pass_ratio, (int, float)) or not 0 < pass_ratio <= 1:
        return [f"bench_fabric_pass_ratio must be a number in (0, 1], got {pass_ratio!r}"]
    return []


def _pending_group(members):
    """The whole-group run before it is planned or judged."""
    group = dict.fromkeys(("round", "busbw", "reference_gbs", "ratio"))
    return {
        "members": members,
        **group,
        "reference_kind": "none",
        "verdict": "PENDING",
        "error": "",
        "note": "",
    }


def _result_errors(nodes, results):
    """What makes the results unusable: a member outside the nodes, a pair that is not two nodes,
    a group of fewer than two, more than one group."""
    errors = []
    for r in results:
        members = r.get("pair") or []
        if any(p not in nodes for p in members):
            errors.append(f"pair result {members!r} names a node outside the nodes {sorted(nodes)}")
        elif r.get("kind", "pair") == "pair" and len(set(members)) != 2:
            errors.append(f"pair result {members!r} does not name two nodes")
        elif r.get("kind") == "group" and len(set(members)) < 2:
            errors.append(f"group result {members!r} names fewer than two nodes")
    groups = [r for r in results if r.get("kind") == "group"]
    if len(groups) > 1:
        errors.append(f"{len(groups)} whole-group results: a fabric run has one")
    return errors


def _judge_group(out, g, expected_gbs, pass_ratio):
    """The run is done: the whole-group result judged over the members it ran with (a node lost
    since is in its error, not left out)."""
    members = sorted(g["pair"])
    reference, kind = _group_reference(out["pairs"], expected_gbs, members)
    out["group"].update(
        members=members,
        round=g.get("round"),
        busbw=g.get("busbw"),
        reference_gbs=round(reference, 3) if reference else None,
        reference_kind=kind,
        ratio=bandwidth.ratio(g.get("busbw"), reference),
        verdict=judge_pair(g, reference, pass_ratio),
        error=g.get("error") or "",
    )
    out.update(phase="done", round=(g.get("round") or 0) + 1)
    return out


def _plan_group(out, members, expected_gbs, round_no):
    """The pairs are done: one more round, the whole group as one job, unless it is no group (fewer
    than two members) or just the pair that already ran."""
    group = out["group"]
    if len(members) < 2 or tuple(members) in {tuple(p["pair"]) for p in out["pairs"]}:
        group["verdict"] = "NOT RUN"
        group["note"] = (
            f"the group is the pair {' + '.join(members)}, judged above"
            if len(members) == 2
            else "fewer than two reachable nodes not named bad"
        )
        out["phase"] = "done"
        return out
    reference, kind = _group_reference(out["pairs"], expected_gbs, members)
    group.update(reference_gbs=round(reference, 3) if reference else None, reference_kind=kind)
    out.update(round=round_no, next_pairs=[members], done=False, phase="group")
    out["next_jobs"] = [{"members": members, "kind": "group", "name": job_name(round_no, members, "group")}]
    return out


def _partner(judged, node):
    return next(p for p in judged["pair"] if p != node)


def _say(j, node):
    figure = f"{j['busbw']:.3g} GB/s" if j["busbw"] is not None else "no figure"
    ratio = f" ({j['ratio']:.2f} of the reference)" if j["ratio"] is not None else ""
    err = f": {j['error']}" if j["error"] else ""
    return f"round {j['round']} with {_partner(j, node)}: {figure}{ratio} {j['verdict']}{err}"


def rounds_for(n, bad=0):
    """Rounds N reachable nodes take with ``bad`` bad nodes (see the module docstring)."""
    if n < 2:
        return 0
    pairs_bad = min(bad, n // 2)
    undecided = 2 * pairs_bad + (n % 2)
    good = n - undecided if bad < n else 0
    if undecided == 0:
        return 1
    if good <= 0:
        return 1
    return 1 + -(-undecided // good)
