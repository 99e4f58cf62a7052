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
  every pair passing, 3 in the usual case (one bad node; 4 with its confirmation, below).

Confirmation before naming (issue 35): a node is named bad only when a pair of it with a
known-good node (one that passed another pair) fails twice running. Such a failing pair is run
once more, in the very next round, before anything is decided from it (``confirms``: the round of
the figure it reruns), and nobody in it is named until then; that round runs only the failing
pairs of the round before, so the confirmation jobs are never more than the failing ones,
whatever N. A failing pair of two undecided nodes (round 1's, usually) is not run again when the
next round pairs both members with nodes that passed: those pairs are their second test; when
they cannot be (no free partner, the last round of new pairs, no pair passed at all) it is
confirmed too. A failing whole-group run is run once more as well. The verdict is the
confirmation's (``used``: "confirmation"); both figures stay in the entry (``first``,
``confirmation``), so a transient dip names nobody and a real fault fails twice. A job whose
member became unreachable is not run again (its note says why). So each round of new pairs is
followed by at most one confirmation round, the whole-group run by at most one: at most
``round_limit(max_rounds)`` = 2 x max_rounds + 2 rounds. Usual case with one bad node: round 1,
the re-pairing, its confirmation, the whole-group run: 4 rounds (3 before confirmation).

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

On CPU (gloo, ``cpu_bound``) a figure is the CPUs' more than the link's: every byte is copied
and summed by the rank's CPU (busbw x time is the same CPU work per rank for a pair and a group,
all-reduce's 2(n-1)/n). Where the nodes share CPUs (the testbed's nodes on one 2-core machine),
a job's figure follows the CPU share of each rank, that is how many nodes run at once: a pair
run alone gets the CPUs two ways, a group of three three ways. So on CPU each passing pair's
figure is scaled to the group's share before it is the reference: x min(1, nodes busy in that
pair's round / group size) (``cpu_share``: the factor of the pair that set the reference). It is
1 whenever the pairs kept at least as many nodes busy as the group has (round 1 with even N); the
testbed's CI failure was the other case, node4 down: pairs alone, a group of three at 0.69 of the
slowest pair, what two cores shared three ways allow (2/3). A link fault is far below that (a
200 Mbit/s shaped link read 0.024 GB/s against 0.2-0.6 healthy).
"""

from __future__ import annotations

import dataclasses
import re
import statistics

from ..core import checks
from . import bandwidth

STATES = ("good", "bad", "undetermined", "unreachable", "untested")


def first_round(nodes):
    """Disjoint pairs of the sorted node names; the last one waits when N is odd."""
    names = sorted(nodes)
    return [[names[i], names[i + 1]] for i in range(0, len(names) - 1, 2)]


def pair_key(pair):
    return "+".join(sorted(pair))


def _reference(results, expected_gbs):
    """(reference GB/s or None, kind) of the pairs: the expectation, else the median of round 1's
    first figures (results: first figures only, never a confirmation)."""
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


def _figure(result, ref, pass_ratio):
    """One job's figure judged: {round, busbw, ratio, verdict, error}."""
    return {
        "round": result.get("round"),
        "busbw": result.get("busbw"),
        "ratio": bandwidth.ratio(result.get("busbw"), ref),
        "verdict": judge_pair(result, ref, pass_ratio),
        "error": result.get("error") or "",
    }


def _pair_ref(pair, reference, expected_gbs):
    """A pair's reference: its own from expected_gbs {pair key: figure}, else the run's."""
    if isinstance(expected_gbs, dict):
        ref = expected_gbs.get(pair_key(pair))
        return float(ref) if ref else None
    return reference


def _judged(firsts, confirmations, judging):
    """Each pair's entry: its first figure, its confirmation (confirmations {(round, key): result})
    and the verdict used (the confirmation's when there is one). judging: (reference,
    expected_gbs, pass_ratio, why_not), why_not(first figure, pair) -> (status, note) for a pair
    without a confirmation: 'first' (final) or 'pending' (its rerun is next)."""
    reference, expected_gbs, pass_ratio, why_not = judging
    judged = []
    for r in firsts:
        ref = _pair_ref(r["pair"], reference, expected_gbs)
        first = _figure(r, ref, pass_ratio)
        again = confirmations.get((r.get("round"), pair_key(r["pair"])))
        if again and first["verdict"] == "PASS":
            raise ValueError(
                f"round {again.get('round')}'s {' + '.join(sorted(r['pair']))} confirms round "
                f"{r.get('round')}'s {' + '.join(sorted(r['pair']))}, which did not fail"
            )
        confirmation = _figure(again, ref, pass_ratio) if again else None
        used, note = ("confirmation", "") if again else why_not(first, r["pair"])
        judged.append(_entry(sorted(r["pair"]), ref, (first, confirmation), used, note))
    return judged


def _entry(members, ref, figures, used, note):
    """A judged job: the figure the verdict used at the top (busbw, ratio, verdict, error), both
    figures apart (figures: first, confirmation or None), which one was used ('first',
    'confirmation' or 'pending': its rerun is next) and why there is no rerun (note)."""
    first, confirmation = figures
    top = confirmation if used == "confirmation" else first
    return {
        "pair": members,
        "round": first["round"],
        "busbw": top["busbw"],
        "reference_gbs": round(ref, 3) if ref else None,
        "ratio": top["ratio"],
        "verdict": top["verdict"],
        "error": top["error"],
        "used": used,
        "first": first,
        "confirmation": confirmation,
        "confirmation_note": note,
    }


def _why_not_rerun(live, last_round, firsts):
    """why_not for _judged: a failing first figure of the last round whose members are all still
    reachable is to be confirmed next ('pending', unless _paired_again says otherwise); one of an
    earlier round was not confirmed because both members were paired again in the next round
    (_paired_again), or its second run gave no result; one whose member was lost is final; a
    passing one needs no second run."""
    ran = {}
    for r in firsts:
        ran.setdefault(r.get("round"), set()).update(r["pair"])

    def why_not(first, members):
        if first["verdict"] == "PASS":
            return "first", ""
        lost = [m for m in sorted(members) if m not in live]
        if lost:
            return "first", f"not confirmed: {', '.join(lost)} unreachable"
        if first["round"] == last_round:
            return "pending", f"to be confirmed in round {last_round + 1}"
        if set(members) <= ran.get(first["round"] + 1, set()):
            return "first", _paired_note(first["round"] + 1)
        return "first", "not confirmed: its second run gave no result"

    return why_not


def _paired_note(round_no):
    return f"not confirmed: both paired again with nodes that passed (round {round_no})"


def _paired_again(judged, good, live, next_round):
    """Failing pairs that name nobody (no member passed elsewhere) are not confirmed when the next
    round pairs every member of each again with a node that passed: those new pairs are their
    second test, and a node is named only by a confirmed failure with a known-good partner.
    Round 1's failing pairs in the usual case. When a confirmation round comes anyway (a failing
    pair with a known-good member, which would name the other) or some member would not be paired
    again (no free partner, the last round of new pairs), every failing pair is confirmed."""
    pending = [j for j in judged if j["used"] == "pending"]
    if not pending or any(m in good for j in pending for m in j["pair"]):
        return
    state = {n: _node_state(n, judged, good) for n in live}
    again = {n for pair in _next_pairs(state, judged, good, live) for n in pair}
    if all(m in again for j in pending for m in j["pair"]):
        for j in pending:
            j["used"] = "first"
            j["confirmation_note"] = _paired_note(next_round)


def _node_state(node, judged, good):
    """{state, evidence} of a reachable node: good (a passing pair), bad (a failing pair with a
    good partner whose confirmation failed too), undetermined (failing pairs only with undecided
    partners or never confirmed, or a confirmation of one of its pairs still to come: nobody is
    named before it) or untested."""
    mine = [j for j in judged if node in j["pair"]]
    evidence = [_say(j, node) for j in mine]
    if node in good:
        return {"state": "good", "evidence": evidence}
    if not mine:
        return {"state": "untested", "evidence": []}
    if any(j["used"] == "pending" for j in mine):
        return {"state": "undetermined", "evidence": evidence}
    if any(j["used"] == "confirmation" and _partner(j, node) in good for j in mine):
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


def _confirmations(results):
    """{(round confirmed, pair key): result} of the reruns."""
    return {(r["confirms"], pair_key(r["pair"])): r for r in results if r.get("confirms")}


def _last_round(results):
    return max([r.get("round") or 0 for r in results] or [0])


def _pairs(nodes, results, settings):
    """The pair rounds over the pair results (first figures and reruns): the next jobs and every
    node's state (see plan). settings: plan's Settings."""
    expected_gbs, pass_ratio = settings.expected_gbs, settings.pass_ratio
    lost = sorted(set(settings.unreachable) & set(nodes))
    live = sorted(set(nodes) - set(lost))
    firsts = [r for r in results if not r.get("confirms")]
    reference, kind = _reference(firsts, expected_gbs)
    last = _last_round(results)
    judging = (reference, expected_gbs, pass_ratio, _why_not_rerun(set(live), last, firsts))
    judged = _judged(firsts, _confirmations(results), judging)
    good = sorted({n for j in judged if j["verdict"] == "PASS" for n in j["pair"]} & set(live))
    pair_rounds = len({r.get("round") for r in firsts})
    if pair_rounds < settings.max_rounds:
        _paired_again(judged, good, live, last + 1)
    state = {n: _node_state(n, judged, good) for n in live}
    for n in lost:
        state[n] = {
            "state": "unreachable",
            "evidence": [f"{n}: unreachable (Ansible could not connect); not tested"],
        }
    jobs, phase = _next_pair_jobs(judged, state, good, live, (last, pair_rounds, settings.max_rounds))
    if not jobs:
        _close_states(state, live, good)
    return {
        "errors": [],
        "round": last + 1,
        "next_jobs": jobs,
        "phase": phase,
        "done": not jobs,
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


def _next_pair_jobs(judged, state, good, live, rounds):
    """(the next round's jobs, its phase): round 1's pairs, else the reruns of the last round's
    failing pairs, else new pairs while fewer than max_rounds rounds of them ran. rounds: (the
    last round, rounds of new pairs so far, max_rounds)."""
    last, pair_rounds, max_rounds = rounds
    if last == 0:
        return _jobs(last + 1, first_round(live)), "pairs"
    again = [j for j in judged if j["used"] == "pending"]
    if again:
        return _jobs(last + 1, [j["pair"] for j in again], confirms=last), "confirm"
    if pair_rounds < max_rounds:
        return _jobs(last + 1, _next_pairs(state, judged, good, live)), "pairs"
    return [], "pairs"


def _jobs(round_no, members_list, kind="pair", confirms=0):
    """The round's jobs: {members, kind, name (its inventory group), confirms (the round whose
    figure it reruns; 0 for a first measurement)}."""
    return [
        {"members": m, "kind": kind, "name": job_name(round_no, m, kind), "confirms": confirms}
        for m in members_list
    ]


def job_name(round_no, members, kind="pair"):
    """The inventory group (and summary file) name of one job of a round: the pair's names, or
    "group" for the whole-group run (its member list can be long)."""
    tail = "group" if kind == "group" else "_".join(members)
    return re.sub(r"[^A-Za-z0-9_]", "_", f"wireup_fabric_r{round_no}_{tail}")


def _busy(results):
    """{round: how many nodes ran a job in it} (pairs, reruns and the group alike)."""
    busy = {}
    for r in results:
        busy.setdefault(r.get("round"), set()).update(r.get("pair") or [])
    return {k: len(v) for k, v in busy.items()}


def _group_reference(pairs_judged, expected_gbs, members, share):
    """(reference GB/s or None, kind, cpu share) of the whole-group run (the module docstring
    says why). share(pair entry) -> the factor its figure takes (1 unless cpu_bound)."""
    if isinstance(expected_gbs, dict):
        figure = expected_gbs.get(pair_key(members))
        if figure:
            return float(figure), "expected", 1.0
    elif expected_gbs:
        return float(expected_gbs), "expected", 1.0
    passing = [
        (j["busbw"] * share(j, len(members)), share(j, len(members)))
        for j in pairs_judged
        if j["verdict"] == "PASS" and j["busbw"] is not None
    ]
    if passing:
        figure, factor = min(passing)
        return float(figure), "slowest_pair", round(factor, 3)
    return None, "none", 1.0


def _cpu_share(results, cpu_bound):
    """share(pair entry, group size) for _group_reference: on CPU, min(1, nodes busy in the round
    of the figure the pair's verdict used / the group's size); 1 elsewhere."""
    busy = _busy(results)

    def share(j, size):
        if not cpu_bound:
            return 1.0
        used_round = j["confirmation"]["round"] if j["used"] == "confirmation" else j["round"]
        return min(1.0, busy.get(used_round, size) / max(size, 1))

    return share


@dataclasses.dataclass(frozen=True)
class Settings:
    """How plan judges and how far it goes (plan's keyword arguments, by name: a misspelt one
    fails). expected_gbs: one figure for every job, or {"a+b": figure} per job (sorted names
    joined by "+"; a job without one is judged on its figure alone, the group then against the
    slowest passing pair), or None (pairs: the first round's median); pass_ratio: a job passes at
    this fraction of its reference; unreachable: names Ansible could not reach (left out);
    max_rounds: rounds of new pairs at most (each may be followed by its confirmation round; the
    whole-group run and its confirmation are two more: round_limit); cpu_bound: the figures are
    CPU (gloo) ones (the group's reference then takes the CPU share)."""

    expected_gbs: float | dict | None = None
    pass_ratio: float = 0.7
    unreachable: tuple | list = ()
    max_rounds: int = 6
    cpu_bound: bool = False


def plan(nodes, results=(), **settings):
    """Decide the next round and every node's state from the results so far.

    nodes: inventory names; results: [{round, pair: members, busbw (GB/s) or None, error: str,
    kind: "pair" (default, two members) or "group", confirms: the round whose failing figure this
    reruns (0 or absent: a first figure)}]; settings: Settings' fields by name. Returns {round
    (the next round's number), next_pairs (each job's members; [] when done), next_jobs [{members,
    kind, name, confirms}], done, phase ('pairs', 'confirm', 'group' or 'done': what the next round runs),
    reference_gbs, reference_kind ('expected', 'median' or 'none'), pairs [{pair, round, busbw,
    reference_gbs, ratio, verdict, error, used ('first', 'confirmation' or 'pending'), first,
    confirmation ({round, busbw, ratio, verdict, error} or None), confirmation_note}], group
    {members, round, busbw, reference_gbs, reference_kind ('expected', 'slowest_pair', 'none'),
    cpu_share, ratio, verdict (PASS, FAIL, PENDING or NOT RUN), error, note, used, first,
    confirmation, confirmation_note}, nodes {name: {state, evidence}}, bad, good, rounds_for_n
    (documented bound, rounds of new pairs), errors}."""
    settings = Settings(**settings)
    results = list(results)
    errors = _ratio_errors(settings.pass_ratio) or _result_errors(nodes, results)
    if errors:
        return {"errors": errors}
    try:
        out = _pairs(nodes, [r for r in results if r.get("kind", "pair") == "pair"], settings)
        share = _cpu_share(results, settings.cpu_bound)
        out = _group(out, results, (settings.expected_gbs, settings.pass_ratio, share))
    except ValueError as err:
        return {"errors": [str(err)]}
    out["next_pairs"] = [j["members"] for j in out["next_jobs"]]
    return out


def _group(out, results, judging):
    """The whole-group run once the pairs are done: planned, judged, or rerun."""
    members = sorted(n for n, s in out["nodes"].items() if s["state"] in ("good", "undetermined"))
    out["group"] = _pending_group(members)
    if not out["done"]:
        return out
    expected_gbs, pass_ratio, share = judging
    groups = [r for r in results if r.get("kind") == "group"]
    if not groups:
        return _plan_group(out, members, expected_gbs, share)
    reachable = set(out["nodes"]) - set(out["unreachable"])
    return _judge_group(out, groups, (expected_gbs, pass_ratio, reachable, _last_round(results)), share)


def round_limit(max_rounds):
    """The most rounds a run can take after round 0: max_rounds rounds of new pairs, each followed
    by at most one confirmation round, then the whole-group run and its confirmation."""
    return 2 * int(max_rounds) + 2


def _ratio_errors(pass_ratio):
    if not checks.is_number(pass_ratio) or not 0 < pass_ratio <= 1:
        return [f"bench_fabric_pass_ratio must be a number in (0, 1], got {pass_ratio!r}"]
    return []


def _pending_group(members):
    """The whole-group run before it is planned or judged."""
    group = dict.fromkeys(("round", "busbw", "reference_gbs", "ratio", "first", "confirmation"))
    return {
        "members": members,
        **group,
        "reference_kind": "none",
        "cpu_share": 1.0,
        "verdict": "PENDING",
        "error": "",
        "note": "",
        "used": "",
        "confirmation_note": "",
    }


def _result_errors(nodes, results):
    """What makes the results unusable: a member outside the nodes, a pair that is not two nodes,
    a group of fewer than two, more than one group (and its rerun), a rerun that reruns nothing."""
    errors = []
    for r in results:
        members = r.get("pair") or []
        if any(p not in nodes for p in members):
            errors.append(f"pair result {members!r} names a node outside the nodes {sorted(nodes)}")
        elif r.get("kind", "pair") == "pair" and len(set(members)) != 2:
            errors.append(f"pair result {members!r} does not name two nodes")
        elif r.get("kind") == "group" and len(set(members)) < 2:
            errors.append(f"group result {members!r} names fewer than two nodes")
    groups = [r for r in results if r.get("kind") == "group" and not r.get("confirms")]
    if len(groups) > 1:
        errors.append(f"{len(groups)} whole-group results: a fabric run has one")
    return errors or _confirmation_errors(results)


def _confirmation_errors(results):
    """A rerun must rerun one failing first figure of the same job, in a later round, once."""
    errors, seen = [], set()
    firsts = {
        (r.get("round"), r.get("kind", "pair"), pair_key(r["pair"])): r
        for r in results
        if not r.get("confirms")
    }
    for r in results:
        confirms = r.get("confirms") or 0
        if isinstance(confirms, bool) or not isinstance(confirms, int) or confirms < 0:
            errors.append(f"result {r.get('pair')!r}: confirms must be a round number, got {confirms!r}")
            continue
        if not confirms:
            continue
        key = (confirms, r.get("kind", "pair"), pair_key(r["pair"]))
        what = f"round {r.get('round')}'s {' + '.join(sorted(r['pair']))}"
        first = firsts.get(key)
        if not isinstance(r.get("round"), int) or r["round"] <= confirms:
            errors.append(f"{what} confirms round {confirms}: a rerun comes after the figure it reruns")
        elif first is None:
            errors.append(f"{what} has no figure of round {confirms} to confirm")
        elif key in seen:
            errors.append(f"{what}: round {confirms}'s figure is confirmed twice")
        seen.add(key)
    return errors


def _judge_group(out, groups, judging, share):
    """The pairs are done and the whole-group run ran: judged over the members it ran with (a node
    lost since is in its error, not left out); a failing run is rerun once (the next round), and
    the rerun's verdict is the one used. judging: (expected_gbs, pass_ratio, reachable nodes, the
    last round); share: _cpu_share's."""
    expected_gbs, pass_ratio, reachable, last = judging
    g = next(r for r in groups if not r.get("confirms"))
    again = next((r for r in groups if r.get("confirms")), None)
    members = sorted(g["pair"])
    reference, kind, factor = _group_reference(out["pairs"], expected_gbs, members, share)
    first = _figure(g, reference, pass_ratio)
    if again and first["verdict"] == "PASS":
        raise ValueError(
            f"round {again.get('round')}'s whole-group run confirms round {first['round']}'s, "
            "which did not fail"
        )
    confirmation = _figure(again, reference, pass_ratio) if again else None
    used, note = ("confirmation", "") if again else _why_not_rerun(reachable, last, [])(first, members)
    entry = _entry(members, reference, (first, confirmation), used, note)
    out["group"].update(entry, members=members, reference_kind=kind, cpu_share=factor)
    if used == "pending":
        out["group"]["verdict"] = "PENDING"
        out.update(phase="confirm", round=last + 1, done=False)
        out["next_jobs"] = _jobs(last + 1, [members], "group", confirms=first["round"])
        return out
    out.update(phase="done", round=last + 1)
    return out


def _plan_group(out, members, expected_gbs, share):
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
    reference, kind, factor = _group_reference(out["pairs"], expected_gbs, members, share)
    group.update(
        reference_gbs=round(reference, 3) if reference else None, reference_kind=kind, cpu_share=factor
    )
    round_no = out["round"]
    out.update(done=False, phase="group", next_jobs=_jobs(round_no, [members], "group"))
    return out


def _partner(judged, node):
    return next(p for p in judged["pair"] if p != node)


def _said(figure):
    """'0.1 GB/s (0.10 of the reference) FAIL: error' for one judged figure."""
    busbw = f"{figure['busbw']:.3g} GB/s" if figure["busbw"] is not None else "no figure"
    ratio = f" ({figure['ratio']:.2f} of the reference)" if figure["ratio"] is not None else ""
    err = f": {figure['error']}" if figure["error"] else ""
    return f"{busbw}{ratio} {figure['verdict']}{err}"


def _say(j, node):
    """One line of a node's evidence: the pair's first figure, then its confirmation (whose
    verdict is the one used) or why there is none."""
    line = f"round {j['round']} with {_partner(j, node)}: {_said(j['first'])}"
    if j["confirmation"]:
        return f"{line}; confirmation round {j['confirmation']['round']}: {_said(j['confirmation'])}"
    return f"{line}; {j['confirmation_note']}" if j["confirmation_note"] else line


def rounds_for(n, bad=0):
    """Rounds of new pairs N reachable nodes take with ``bad`` bad nodes (see the module
    docstring; each round with a failing pair adds its confirmation round)."""
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
