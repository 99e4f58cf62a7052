"""wireup.judge.pairwise: disjoint pairs per round, judging against the expectation or the median,
re-pairing the members of failing pairs with passing nodes to name the bad node."""

import hashlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import pairwise

N4 = ["n1", "n2", "n3", "n4"]


def run(
    nodes,
    speed,
    *,
    expected=None,
    unreachable=(),
    error=None,
    ratio=0.7,
    group_speed=None,
    dips=(),
    cpu_bound=False,
    max_rounds=6,
    jobs=None,
):
    """Drive plan() to the end; a job runs at its slowest member's speed (None = job failed), the
    whole-group run at ``group_speed`` when given; a job whose (round, members) is in ``dips``
    reads a tenth of that (a transient dip: its rerun reads the healthy figure; ``dips`` may
    also be a function of the round and the members). ``jobs``: a list
    that gets every (round, job) run. Returns (plan, rounds of new pairs)."""
    results = []
    rounds = 0
    while True:
        p = pairwise.plan(
            nodes,
            results,
            expected_gbs=expected,
            pass_ratio=ratio,
            unreachable=unreachable,
            max_rounds=max_rounds,
            **({"cpu_bound": True} if cpu_bound else {}),
        )
        assert p["errors"] == []
        if p["done"]:
            return p, rounds
        rounds += p["phase"] == "pairs"
        for job in p["next_jobs"]:
            assert job["members"] in p["next_pairs"]
            figs = [speed.get(m) for m in job["members"]]
            fig = None if None in figs else min(figs)
            if job["kind"] == "group" and group_speed is not None:
                fig = group_speed
            if fig is not None and _dips(dips, p["round"], job["members"]):
                fig = fig / 10
            if jobs is not None:
                jobs.append((p["round"], job))
            results.append(
                {
                    "round": p["round"],
                    "pair": job["members"],
                    "kind": job["kind"],
                    "confirms": job.get("confirms", 0),
                    "busbw": fig,
                    "error": error if fig is None else "",
                }
            )


def _dips(dips, round_no, members):
    """Whether the job dips: dips is a list of (round, members) or a function of them."""
    return dips(round_no, members) if callable(dips) else [round_no, members] in [list(d) for d in dips]


def _draw(key):
    """A number in [0, 1) fixed by key (random.Random(str) draws of similar keys were seen to agree)."""
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) / 2**256


def test_first_round_pairs_neighbours_and_odd_one_waits():
    assert pairwise.first_round(["c", "a", "b"]) == [["a", "b"]]
    assert pairwise.first_round(N4) == [["n1", "n2"], ["n3", "n4"]]


def test_all_good_even_takes_one_round():
    p, rounds = run(N4, {n: 1.0 for n in N4})
    assert rounds == 1 and p["bad"] == [] and p["good"] == N4 and p["reference_kind"] == "median"


def test_one_slow_node_is_named_in_two_rounds_with_evidence():
    speed = {"n1": 1.0, "n2": 1.1, "n3": 0.05, "n4": 0.9}
    p, rounds = run(N4, speed)
    assert rounds == 2 and p["bad"] == ["n3"]
    assert p["nodes"]["n4"]["state"] == "good"  # cleared by its second pair
    ev = p["nodes"]["n3"]["evidence"]
    assert ev[0].startswith("round 1 with n4: 0.05 GB/s") and "FAIL" in ev[0]
    # round 1's failing pair names nobody: both members are paired again (round 2) instead of
    # confirmed; round 2's failing pair with n1 (good) is confirmed in round 3 before n3 is named
    assert ev[0].endswith("FAIL; not confirmed: both paired again with nodes that passed (round 2)")
    assert ev[1].startswith("round 2 with n1") and ev[1].endswith(
        "; confirmation round 3: 0.05 GB/s (0.10 of the reference) FAIL"
    )


def test_against_an_expectation():
    speed = {"n1": 40.0, "n2": 41.0, "n3": 20.0, "n4": 42.0}
    p, _ = run(N4, speed, expected=40.0)
    assert p["bad"] == ["n3"] and p["reference_kind"] == "expected" and p["reference_gbs"] == 40.0


def test_every_pair_below_the_expectation_decides_nothing():
    p, rounds = run(N4, {n: 1.0 for n in N4}, expected=40.0)
    assert rounds == 1 and p["bad"] == []
    assert {s["state"] for s in p["nodes"].values()} == {"undetermined"}
    assert "no known-good partner" in p["nodes"]["n1"]["evidence"][-1]


def test_odd_n_tests_the_waiting_node_in_round_two():
    nodes = ["a", "b", "c", "d", "e"]
    p, rounds = run(nodes, {n: 1.0 for n in nodes})
    assert rounds == 2 and p["good"] == nodes
    p, _ = run(nodes, {"a": 1, "b": 1, "c": 1, "d": 1, "e": 0.1})
    assert p["bad"] == ["e"]


def test_failed_job_is_a_failed_pair_and_unreachable_nodes_are_left_out():
    speed = {"n1": 1.0, "n2": 1.0, "n3": None, "n4": 1.0}
    p, _ = run([*N4, "n5"], speed | {"n5": 1.0}, unreachable=["n5"], error="rendezvous timed out after 60 s")
    assert p["bad"] == ["n3"] and p["unreachable"] == ["n5"]
    assert p["nodes"]["n5"]["state"] == "unreachable"
    assert "rendezvous timed out" in p["nodes"]["n3"]["evidence"][0]


def test_two_nodes_failing_pair_cannot_be_split():
    p, rounds = run(["a", "b"], {"a": 1.0, "b": 0.1}, expected=5.0)
    assert rounds == 1 and p["bad"] == [] and p["nodes"]["a"]["state"] == "undetermined"


def test_one_node_alone():
    p, rounds = run(["a"], {"a": 1.0})
    assert rounds == 0 and p["nodes"]["a"]["state"] == "undetermined"


def test_many_nodes_rounds_do_not_grow_with_n():
    nodes = [f"n{i:03d}" for i in range(64)]
    speed = {n: 1.0 for n in nodes} | {"n007": 0.1, "n040": 0.1}
    p, rounds = run(nodes, speed)
    assert rounds == 2 and p["bad"] == ["n007", "n040"]
    assert pairwise.rounds_for(64, bad=2) == 2
    assert pairwise.rounds_for(64) == 1 and pairwise.rounds_for(65) == 2 and pairwise.rounds_for(1) == 0


def test_bad_inputs_are_errors_naming_the_variable():
    assert "bench_fabric_pass_ratio" in pairwise.plan(N4, pass_ratio=1.5)["errors"][0]
    bad = pairwise.plan(N4, [{"round": 1, "pair": ["n1", "zz"], "busbw": 1.0}])
    assert "outside the nodes" in bad["errors"][0]


@pytest.mark.parametrize("noise", [0.55, 0.6])
def test_a_noisy_pair_is_cleared_on_retest(noise):
    # Round 1: n3+n4 slow by chance; round 2 both pass with good partners: nobody is bad. The
    # failing pair is not run again: its members' new pairs are their second test.
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": noise * 0.5},
    ]
    p = pairwise.plan(N4, results)
    assert p["phase"] == "pairs" and p["next_pairs"] == [["n1", "n3"], ["n2", "n4"]]
    results += [{"round": 2, "pair": pr, "busbw": 1.0} for pr in p["next_pairs"]]
    p = pairwise.plan(N4, results)
    assert p["phase"] == "group" and p["bad"] == [] and p["good"] == N4
    assert p["next_pairs"] == [N4] and p["round"] == 3


def test_expectation_per_pair_and_a_node_lost_after_its_round():
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 40.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": None, "error": "timed out after 120 s"},
    ]
    expected = {"n1+n2": 42.0, "n3+n4": 42.0}
    p = pairwise.plan(N4, results, expected_gbs=expected, unreachable=["n4"])
    assert p["errors"] == [] and p["pairs"][0]["reference_gbs"] == 42.0
    assert p["nodes"]["n4"]["state"] == "unreachable"
    assert p["next_pairs"] == [["n1", "n3"]]
    results.append({"round": 2, "pair": ["n1", "n3"], "busbw": 41.0})
    p = pairwise.plan(N4, results, expected_gbs=expected | {"n1+n3": 42.0}, unreachable=["n4"])
    assert p["phase"] == "group" and p["bad"] == [] and p["good"] == ["n1", "n2", "n3"]
    # the group's own expectation where there is one, else the slowest passing pair
    assert (p["group"]["reference_gbs"], p["group"]["reference_kind"]) == (40.0, "slowest_pair")
    p = pairwise.plan(N4, results, expected_gbs=expected | {"n1+n2+n3": 39.0}, unreachable=["n4"])
    assert (p["group"]["reference_gbs"], p["group"]["reference_kind"]) == (39.0, "expected")
    assert p["next_jobs"] == [
        {"members": ["n1", "n2", "n3"], "kind": "group", "name": "wireup_fabric_r3_group", "confirms": 0}
    ]


# The whole-group run after the pairs.


def test_group_run_follows_the_pairs_and_is_judged_against_the_slowest_passing_pair():
    speed = {"n1": 1.0, "n2": 1.2, "n3": 0.9, "n4": 1.1}
    p, rounds = run(N4, speed, group_speed=0.7)
    g = p["group"]
    assert rounds == 1 and p["phase"] == "done" and p["round"] == 3
    assert g["members"] == N4 and g["round"] == 2 and g["reference_kind"] == "slowest_pair"
    assert (g["reference_gbs"], g["busbw"], g["ratio"], g["verdict"]) == (0.9, 0.7, 0.778, "PASS")
    p, _ = run(N4, speed, group_speed=0.6)  # 0.6 < 0.7 x 0.9
    assert p["group"]["verdict"] == "FAIL" and p["group"]["ratio"] == 0.667
    # the group's verdict is its own: it names no node
    assert p["bad"] == [] and {s["state"] for s in p["nodes"].values()} == {"good"}


def test_group_leaves_the_bad_node_out_and_keeps_the_undecided():
    p, rounds = run(N4, {"n1": 1.0, "n2": 1.1, "n3": 0.05, "n4": 0.9})
    assert rounds == 2 and p["bad"] == ["n3"]
    assert p["group"]["members"] == ["n1", "n2", "n4"] and p["group"]["verdict"] == "PASS"
    assert p["group"]["round"] == 4  # after round 2's failing pair is confirmed in round 3
    # every pair below its expectation: nobody is named, so every node is in the group
    p, _ = run(N4, {n: 1.0 for n in N4}, expected=40.0)
    g = p["group"]
    assert g["members"] == N4 and (g["reference_gbs"], g["reference_kind"], g["verdict"]) == (
        40.0,
        "expected",
        "FAIL",
    )


def test_group_not_run_when_it_is_a_pair_already_run_or_too_small():
    p, rounds = run(["a", "b"], {"a": 1.0, "b": 1.0})
    assert rounds == 1 and p["phase"] == "done" and p["group"]["verdict"] == "NOT RUN"
    assert p["group"]["note"] == "the group is the pair a + b, judged above"
    # three nodes, c bad: a and b were paired in round 1, so no group run either
    p, rounds = run(["a", "b", "c"], {"a": 1.0, "b": 1.0, "c": 0.1})
    assert (rounds, p["bad"], p["group"]["verdict"]) == (2, ["c"], "NOT RUN")
    p, _ = run(["a"], {"a": 1.0})
    assert p["group"]["verdict"] == "NOT RUN" and "fewer than two" in p["group"]["note"]
    assert p["next_jobs"] == [] and p["done"]


def test_failed_group_job_is_a_failed_group_with_its_error():
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": 1.0},
    ]
    group = {"round": 2, "pair": N4, "kind": "group", "busbw": None, "error": "n4: exited with code 1"}
    p = pairwise.plan(N4, [*results, group])
    assert not p["done"] and p["next_jobs"][0]["confirms"] == 2  # rerun once before it counts
    again = dict(group, round=3, confirms=2, error="n4: exited with code 1 again")
    p = pairwise.plan(N4, [*results, group, again])
    g = p["group"]
    assert p["done"] and g["verdict"] == "FAIL" and g["error"] == "n4: exited with code 1 again"
    assert g["first"]["error"] == "n4: exited with code 1" and g["used"] == "confirmation"
    assert g["ratio"] is None and p["bad"] == []


def test_group_round_comes_after_the_last_allowed_pair_round():
    # n1 fails with everyone; max_rounds=1 stops the pairs after round 1 and its rerun (round 2),
    # the group is round 3.
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 0.1},
        {"round": 1, "pair": ["n3", "n4"], "busbw": 1.0},
    ]
    p = pairwise.plan(N4, results, max_rounds=1)
    assert p["phase"] == "confirm" and p["round"] == 2
    results.append({"round": 2, "pair": ["n1", "n2"], "busbw": 0.1, "confirms": 1})
    p = pairwise.plan(N4, results, max_rounds=1)
    assert p["phase"] == "group" and p["round"] == 3
    assert p["next_pairs"] == [N4]  # n1 and n2 undetermined: not named bad, so in the group


def test_job_names_are_group_names_and_short_for_the_whole_group():
    assert pairwise.job_name(1, ["gpu-01.example", "gpu-02"]) == "wireup_fabric_r1_gpu_01_example_gpu_02"
    many = [f"node{i:04d}.rack{i % 16}.example.org" for i in range(256)]
    assert pairwise.job_name(4, many, "group") == "wireup_fabric_r4_group"
    p = pairwise.plan(["x.y", "z-1"])
    assert p["next_jobs"] == [
        {"members": ["x.y", "z-1"], "kind": "pair", "name": "wireup_fabric_r1_x_y_z_1", "confirms": 0}
    ]


@pytest.mark.parametrize(
    ("results", "says"),
    [
        ([{"round": 1, "pair": ["n1", "n2", "n3"], "busbw": 1.0}], "does not name two nodes"),
        ([{"round": 1, "pair": ["n1", "n1"], "busbw": 1.0}], "does not name two nodes"),
        ([{"round": 2, "pair": ["n1"], "kind": "group", "busbw": 1.0}], "fewer than two"),
        ([{"round": 2, "pair": N4, "kind": "group", "busbw": 1.0}] * 2, "2 whole-group results"),
        ([{"round": 2, "pair": ["n1", "zz"], "kind": "group", "busbw": 1.0}], "outside the nodes"),
    ],
)
def test_malformed_results_are_errors(results, says):
    errors = pairwise.plan(N4, results)["errors"]
    assert any(says in e for e in errors), errors


def test_scalar_expectation_applies_to_the_group_and_bool_ratio_is_refused():
    p, _ = run(N4, {n: 40.0 for n in N4}, expected=42.0, group_speed=25.0)
    assert (p["group"]["reference_kind"], p["group"]["verdict"]) == ("expected", "FAIL")
    assert "bench_fabric_pass_ratio" in pairwise.plan(N4, pass_ratio=True)["errors"][0]


def test_a_node_lost_during_the_group_run_stays_in_its_verdict():
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": 1.0},
    ]
    group = {"round": 2, "pair": N4, "kind": "group", "busbw": None, "error": "n4: no result (unreachable)"}
    p = pairwise.plan(N4, [*results, group], unreachable=["n4"], expected_gbs={"n1+n2+n3+n4": 2.0})
    g = p["group"]
    assert (g["members"], g["verdict"], g["reference_kind"]) == (N4, "FAIL", "expected")
    assert p["nodes"]["n4"]["state"] == "unreachable" and p["done"]


# Confirmation before naming (issue 35 item 8): a failing pair or whole-group run is run once more,
# in the next round, before anything is decided from it; the rerun's verdict is the one used.


def test_a_transient_dip_with_a_known_good_partner_names_no_node():
    # Five nodes: e waits in round 1, is paired with a (good) in round 2, and that job dips.
    nodes = ["a", "b", "c", "d", "e"]
    jobs = []
    p, rounds = run(nodes, {n: 1.0 for n in nodes}, dips=[(2, ["a", "e"])], jobs=jobs)
    assert p["bad"] == []
    assert {n: s["state"] for n, s in p["nodes"].items()} == dict.fromkeys(nodes, "good")
    # round 3 reruns only the failing pair, marked as the confirmation of round 2's figure
    assert [(r, j["members"], j["kind"], j["confirms"]) for r, j in jobs if r == 3] == [
        (3, ["a", "e"], "pair", 2)
    ]
    [ae] = [j for j in p["pairs"] if j["pair"] == ["a", "e"]]
    assert (ae["round"], ae["verdict"], ae["used"], ae["busbw"]) == (2, "PASS", "confirmation", 1.0)
    assert (ae["first"]["busbw"], ae["first"]["verdict"]) == (0.1, "FAIL")
    assert (ae["confirmation"]["round"], ae["confirmation"]["verdict"]) == (3, "PASS")
    assert "round 2 with a: 0.1 GB/s" in p["nodes"]["e"]["evidence"][0]
    assert "confirmation round 3: 1 GB/s (1.00 of the reference) PASS" in p["nodes"]["e"]["evidence"][0]
    assert rounds == 2 and p["group"]["round"] == 4 and p["group"]["verdict"] == "PASS"


def test_a_failure_confirmed_names_the_node_and_both_figures_are_kept():
    speed = {"n1": 1.0, "n2": 1.1, "n3": 0.05, "n4": 0.9}
    jobs = []
    p, rounds = run(N4, speed, jobs=jobs)
    assert p["bad"] == ["n3"] and rounds == 2
    assert [(r, j["members"], j["confirms"]) for r, j in jobs] == [
        (1, ["n1", "n2"], 0),
        (1, ["n3", "n4"], 0),  # fails; names nobody: both are paired again
        (2, ["n1", "n3"], 0),  # fails with a known-good node: would name n3
        (2, ["n2", "n4"], 0),
        (3, ["n1", "n3"], 2),  # so it runs once more, alone, before n3 is named
        (4, ["n1", "n2", "n4"], 0),  # the whole-group run
    ]
    [j] = [j for j in p["pairs"] if j["pair"] == ["n1", "n3"]]
    assert (j["round"], j["verdict"], j["used"], j["busbw"]) == (2, "FAIL", "confirmation", 0.05)
    assert j["first"]["verdict"] == j["confirmation"]["verdict"] == "FAIL"
    assert (j["first"]["round"], j["confirmation"]["round"]) == (2, 3)
    [j] = [j for j in p["pairs"] if j["pair"] == ["n3", "n4"]]
    assert (j["used"], j["confirmation"]) == ("first", None)
    ev = p["nodes"]["n3"]["evidence"]
    assert ev[1].startswith("round 2 with n1: 0.05 GB/s") and ev[1].endswith(
        "; confirmation round 3: 0.05 GB/s (0.10 of the reference) FAIL"
    )


def test_nobody_is_named_while_the_confirmation_is_still_to_run():
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": 1.0},
        {"round": 2, "pair": N4, "kind": "group", "busbw": 0.1},
    ]
    p = pairwise.plan(N4, results)
    assert (p["phase"], p["done"], p["round"]) == ("confirm", False, 3)
    assert p["next_jobs"] == [
        {"members": N4, "kind": "group", "name": "wireup_fabric_r3_group", "confirms": 2}
    ]
    assert (
        p["group"]["verdict"] == "PENDING" and p["group"]["confirmation_note"] == "to be confirmed in round 3"
    )
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": 1.0},
    ]
    five = [*N4, "n5"]
    p = pairwise.plan(five, [*results, {"round": 2, "pair": ["n1", "n5"], "busbw": 0.1}])
    assert p["bad"] == [] and p["nodes"]["n5"]["state"] == "undetermined"
    assert p["next_jobs"] == [
        {"members": ["n1", "n5"], "kind": "pair", "name": "wireup_fabric_r3_n1_n5", "confirms": 2}
    ]
    assert p["nodes"]["n5"]["evidence"] == [
        "round 2 with n1: 0.1 GB/s (0.10 of the reference) FAIL; to be confirmed in round 3"
    ]


def test_failing_pairs_that_cannot_be_paired_again_are_confirmed():
    # Every pair of round 1 dips (the whole machine was busy): no node passed, so none can be
    # paired with a known-good one; round 2 runs them all again and clears them.
    jobs = []
    p, rounds = run(
        N4, {n: 1.0 for n in N4}, dips=[(1, ["n1", "n2"]), (1, ["n3", "n4"])], expected=0.9, jobs=jobs
    )
    assert [(r, j["members"], j["confirms"]) for r, j in jobs if r == 2] == [
        (2, ["n1", "n2"], 1),
        (2, ["n3", "n4"], 1),
    ]
    assert p["good"] == N4 and p["bad"] == [] and rounds == 1
    # Two nodes: the one pair cannot be split, it is confirmed, then left undetermined.
    jobs = []
    p, _ = run(["a", "b"], {"a": 1.0, "b": 0.1}, expected=5.0, jobs=jobs)
    assert [(r, j["confirms"]) for r, j in jobs] == [(1, 0), (2, 1)]
    assert {s["state"] for s in p["nodes"].values()} == {"undetermined"}


def test_a_dip_in_the_whole_group_run_is_rerun_once():
    jobs = []
    p, _ = run(N4, {n: 1.0 for n in N4}, dips=[(2, N4)], jobs=jobs)
    g = p["group"]
    assert [(r, j["kind"], j["confirms"]) for r, j in jobs if j["kind"] == "group"] == [
        (2, "group", 0),
        (3, "group", 2),
    ]
    assert (g["verdict"], g["used"], g["busbw"], g["round"]) == ("PASS", "confirmation", 1.0, 2)
    assert (g["first"]["busbw"], g["first"]["verdict"]) == (0.1, "FAIL")
    assert (g["confirmation"]["round"], g["confirmation"]["verdict"]) == (3, "PASS")
    assert p["round"] == 4 and p["phase"] == "done"


def test_a_whole_group_run_failing_twice_fails_on_the_rerun():
    p, _ = run(N4, {n: 1.0 for n in N4}, group_speed=0.6)
    g = p["group"]
    assert (g["verdict"], g["used"]) == ("FAIL", "confirmation")
    assert g["first"]["verdict"] == g["confirmation"]["verdict"] == "FAIL"
    assert g["confirmation"]["ratio"] == 0.6


def test_a_member_lost_during_its_job_is_not_rerun():
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": None, "error": "n4: no result (unreachable)"},
    ]
    p = pairwise.plan(N4, results, unreachable=["n4"])
    # n4's job cannot run again: n3 is re-paired with a known-good node instead
    assert p["next_jobs"] == [
        {"members": ["n1", "n3"], "kind": "pair", "name": "wireup_fabric_r2_n1_n3", "confirms": 0}
    ]
    [j] = [j for j in p["pairs"] if j["pair"] == ["n3", "n4"]]
    assert (j["used"], j["confirmation"], j["confirmation_note"]) == (
        "first",
        None,
        "not confirmed: n4 unreachable",
    )


@pytest.mark.parametrize(
    ("results", "says"),
    [
        ([{"round": 1, "pair": ["n1", "n2"], "busbw": 0.1, "confirms": 1}], "confirms round 1"),
        ([{"round": 2, "pair": ["n1", "n2"], "busbw": 0.1, "confirms": 1}], "no figure of round 1"),
        ([{"round": 1, "pair": ["n1", "n2"], "busbw": 0.1, "confirms": "1"}], "confirms must be"),
        (
            [
                {"round": 1, "pair": ["n1", "n2"], "busbw": 0.1},
                {"round": 2, "pair": ["n1", "n2"], "busbw": 0.1, "confirms": 1},
                {"round": 3, "pair": ["n1", "n2"], "busbw": 0.1, "confirms": 1},
            ],
            "confirmed twice",
        ),
        (
            [
                {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
                {"round": 2, "pair": ["n1", "n2"], "busbw": 1.0, "confirms": 1},
            ],
            "which did not fail",
        ),
        (
            [
                {"round": 1, "pair": ["n1", "n2"], "busbw": 0.1},
                {"round": 2, "pair": ["n1", "n2", "n3"], "kind": "group", "busbw": 1.0, "confirms": 1},
            ],
            "no figure of round 1",
        ),
    ],
)
def test_malformed_confirmations_are_errors(results, says):
    errors = pairwise.plan(N4, results)["errors"]
    assert any(says in e for e in errors), errors


@pytest.mark.parametrize("seed", range(12))
def test_confirmations_are_bounded_by_the_failing_jobs_and_rounds_by_the_limit(seed):
    """Fleets of 2-200 nodes with bad nodes, jobs that dip at random and a group that dips or
    fails: every confirmation job reruns one failing job of the round before, there are never
    more confirmation jobs than failing first jobs, and the run ends within round_limit."""
    import random

    rng = random.Random(seed)
    n = rng.choice([2, 3, 5, 16, 64, 200])
    nodes = [f"n{i:03d}" for i in range(n)]
    bad = set(rng.sample(nodes, rng.randint(0, max(1, n // 8))))
    speed = {m: (0.05 if m in bad else rng.uniform(0.9, 1.2)) for m in nodes}
    max_rounds = rng.randint(1, 4)
    salt = rng.random()
    jobs = []

    def dips(r, m):
        return _draw(f"{salt} {r} {m}") < 0.15

    p, _ = run(
        nodes,
        speed,
        dips=dips,
        max_rounds=max_rounds,
        group_speed=rng.choice([None, 0.1]),
        jobs=jobs,
    )
    firsts = {(r, tuple(j["members"])) for r, j in jobs if not j["confirms"]}
    confirms = [(r, j) for r, j in jobs if j["confirms"]]
    failing_first = {(j["round"], tuple(j["pair"])) for j in p["pairs"] if j["first"]["verdict"] == "FAIL"}
    if p["group"].get("first") and p["group"]["first"]["verdict"] == "FAIL":
        failing_first.add((p["group"]["round"], tuple(p["group"]["members"])))
    assert len(confirms) <= len(failing_first)
    for r, j in confirms:
        assert j["confirms"] == r - 1 and (j["confirms"], tuple(j["members"])) in failing_first
        assert (j["confirms"], tuple(j["members"])) in firsts
    assert max(r for r, _ in jobs) <= pairwise.round_limit(max_rounds)
    # a healthy node is named only when a pair of it with a known-good node dipped twice running
    for node in set(p["bad"]) - bad:
        assert any(
            node in j["pair"]
            and j["used"] == "confirmation"
            and dips(j["round"], j["pair"])
            and dips(j["confirmation"]["round"], j["pair"])
            for j in p["pairs"]
        ), p["nodes"][node]


# The whole-group run on CPU nodes (gloo): its figure depends on the CPU each rank gets.


def test_cpu_bound_group_is_judged_at_its_share_of_the_cpus():
    """Four testbed nodes on two shared cores, node4 down: the pairs ran alone (two nodes busy),
    the group runs three at once, so each rank gets 2/3 of the CPU the pairs had: the CI run's
    0.69 of the slowest pair is what the CPUs allow, not a link fault."""
    nodes = ["node1", "node2", "node3", "node4"]
    speed = {"node1": 0.62, "node2": 0.64, "node3": 0.612}
    p, _ = run(nodes, speed, unreachable=["node4"], group_speed=0.424, cpu_bound=True)
    g = p["group"]
    assert (g["reference_kind"], g["cpu_share"], g["reference_gbs"]) == ("slowest_pair", 0.667, 0.408)
    assert (g["verdict"], g["used"], g["ratio"]) == ("PASS", "first", 1.039)
    # On GPU nodes (NCCL) the figure does not depend on CPUs: the same figures fail, twice.
    p, _ = run(nodes, speed, unreachable=["node4"], group_speed=0.424)
    assert (p["group"]["verdict"], p["group"]["cpu_share"]) == ("FAIL", 1.0)
    # A shaped link in a CPU-bound group still fails (and its rerun too): 0.0236 GB/s.
    p, _ = run(nodes, speed, unreachable=["node4"], group_speed=0.0236, cpu_bound=True)
    assert p["group"]["verdict"] == "FAIL" and p["group"]["confirmation"]["verdict"] == "FAIL"


def test_cpu_share_is_one_when_the_pairs_kept_as_many_nodes_busy():
    p, _ = run(N4, {"n1": 1.0, "n2": 1.1, "n3": 0.05, "n4": 0.9}, cpu_bound=True, group_speed=0.6)
    g = p["group"]
    # round 1 ran four nodes at once, the group runs three: no scaling, 0.6 < 0.7 x 0.9
    assert (g["members"], g["cpu_share"], g["reference_gbs"], g["verdict"]) == (
        ["n1", "n2", "n4"],
        1.0,
        0.9,
        "FAIL",
    )


def test_round_limit_bounds_pairs_confirmations_and_the_group():
    assert [pairwise.round_limit(m) for m in (1, 3, 6)] == [4, 8, 14]
