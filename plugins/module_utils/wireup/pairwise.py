"""Pairwise fabric tests that name the bad node (pure Python, stdlib only).

All nodes are tested in disjoint pairs at the same time (one two-node job per pair), each pair is
judged against the expected busbw (fabric.expected_busbw) or, where there is none, against the
median of the first round's pairs; the members of failing pairs are then paired with nodes that
passed, which decides which member is bad. :func:`plan` takes every result so far and returns the
next round (or none), every node's state and the evidence; the tasks only run what it says.

Rounds for N reachable nodes (roles/bench/README.md repeats this):

* round 1: floor(N/2) pairs at once (sorted names, neighbours paired); with odd N one node waits.
* later rounds: each node still undecided (a member of a failed pair, or the odd one out) is
  paired with a distinct node that passed, as many at once as there are passing nodes.
* so: 1 round when N is even and every pair passes; 2 rounds while the undecided nodes are no
  more than the passing ones (fewer than half the nodes bad, odd N included); in general
  1 + ceil(undecided / passing). Time grows with rounds, not with N. Without any passing pair
  (N = 2 failing, or every pair failing an expectation) nothing can be decided: the nodes are
  ``undetermined`` and the evidence says so.

A pair whose job failed or timed out counts as failed (its error is the evidence); a node Ansible
cannot reach is ``unreachable`` and takes no part.
"""

import statistics

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


def plan(nodes, results=(), *, expected_gbs=None, pass_ratio=0.7, unreachable=(), max_rounds=6):
    """Decide the next round and every node's state from the results so far.

    nodes: inventory names; results: [{round, pair: [a, b], busbw (GB/s) or None, error: str}];
    expected_gbs: one figure for every pair, or {"a+b": figure} per pair (sorted names joined by
    "+"; a pair without one passes on a figure alone), or None for the first round's median;
    unreachable: names Ansible could not reach (left out). Returns {round (the next round's
    number), next_pairs ([] when done), done, reference_gbs, reference_kind ('expected', 'median'
    or 'none'), pairs [{pair, round, busbw, ratio, verdict, error}], nodes {name: {state,
    evidence}}, bad, good, rounds_for_n (documented bound), errors}."""
    if not isinstance(pass_ratio, (int, float)) or not 0 < pass_ratio <= 1:
        return {"errors": [f"bench_fabric_pass_ratio must be a number in (0, 1], got {pass_ratio!r}"]}
    lost = sorted(set(unreachable) & set(nodes))
    live = sorted(set(nodes) - set(lost))
    results = list(results)
    errors = []
    for r in results:
        pair = r.get("pair") or []
        if len(pair) != 2 or any(p not in nodes for p in pair):
            errors.append(f"pair result {pair!r} names a node outside the nodes {sorted(nodes)}")
    if errors:
        return {"errors": errors}
    reference, kind = _reference(results, expected_gbs)
    judged = []
    for r in results:
        ref = reference
        if isinstance(expected_gbs, dict):
            ref = expected_gbs.get(pair_key(r["pair"]))
            ref = float(ref) if ref else None
        verdict = judge_pair(r, ref, pass_ratio)
        judged.append(
            {
                "pair": sorted(r["pair"]),
                "round": r.get("round"),
                "busbw": r.get("busbw"),
                "reference_gbs": round(ref, 3) if ref else None,
                "ratio": round(r["busbw"] / ref, 3) if ref and r.get("busbw") is not None else None,
                "verdict": verdict,
                "error": r.get("error") or "",
            }
        )
    good = sorted({n for j in judged if j["verdict"] == "PASS" for n in j["pair"]})
    tested = {n for j in judged for n in j["pair"]}
    good = [n for n in good if n in live]
    state = {}
    for n in live:
        mine = [j for j in judged if n in j["pair"]]
        if n in good:
            state[n] = {"state": "good", "evidence": [_say(j, n) for j in mine]}
            continue
        if not mine:
            state[n] = {"state": "untested", "evidence": []}
            continue
        against_good = [j for j in mine if _partner(j, n) in good]
        if against_good:
            state[n] = {"state": "bad", "evidence": [_say(j, n) for j in mine]}
        else:
            state[n] = {"state": "undetermined", "evidence": [_say(j, n) for j in mine]}
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
        pending = [n for n in live if state[n]["state"] in ("undetermined", "untested")]
        # Prefer partners each pending node has not met yet (a second opinion).
        free = list(good)
        for n in pending:
            met = {_partner(j, n) for j in judged if n in j["pair"]}
            pick = next((g for g in free if g not in met), None) or (free[0] if free else None)
            if pick is None:
                break
            free.remove(pick)
            next_pairs.append(sorted([n, pick]))
    done = not next_pairs
    if done:
        for n in live:
            if state[n]["state"] == "untested":
                state[n] = {
                    "state": "undetermined",
                    "evidence": [
                        f"{n}: no pair could be formed "
                        "(fewer than two reachable nodes, or no passing partner)"
                    ],
                }
            elif state[n]["state"] == "undetermined" and not good:
                state[n]["evidence"].append(
                    "no pair passed: no known-good partner to decide which member is bad"
                )
    return {
        "errors": [],
        "round": rounds_done + 1,
        "next_pairs": next_pairs,
        "done": done,
        "reference_gbs": round(reference, 3) if reference is not None else None,
        "reference_kind": kind,
        "pairs": judged,
        "nodes": state,
        "bad": sorted(n for n, s in state.items() if s["state"] == "bad"),
        "good": good,
        "unreachable": lost,
        "untested": sorted(set(live) - tested),
        "rounds_for_n": rounds_for(len(live)),
    }


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
