"""wireup.judge.pairwise: disjoint pairs per round, judging against the expectation or the median,
re-pairing the members of failing pairs with passing nodes to name the bad node."""

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import pairwise

N4 = ["n1", "n2", "n3", "n4"]


def run(nodes, speed, *, expected=None, unreachable=(), error=None, ratio=0.7, group_speed=None):
    """Drive plan() to the end; a job runs at its slowest member's speed (None = job failed), the
    whole-group run at ``group_speed`` when given. Returns (plan, rounds of pairs)."""
    results = []
    rounds = 0
    while True:
        p = pairwise.plan(nodes, results, expected_gbs=expected, pass_ratio=ratio, unreachable=unreachable)
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
            results.append(
                {
                    "round": p["round"],
                    "pair": job["members"],
                    "kind": job["kind"],
                    "busbw": fig,
                    "error": error if fig is None else "",
                }
            )


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
    assert ev[1].startswith("round 2 with n1") and ev[1].endswith("FAIL")


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
    # Round 1: n3+n4 slow by chance; round 2 both pass with good partners: nobody is bad.
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 1.0},
        {"round": 1, "pair": ["n3", "n4"], "busbw": noise * 0.5},
    ]
    p = pairwise.plan(N4, results)
    assert p["next_pairs"] == [["n1", "n3"], ["n2", "n4"]]
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
        {"members": ["n1", "n2", "n3"], "kind": "group", "name": "wireup_fabric_r3_group"}
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
    assert p["group"]["round"] == 3
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
    assert p["done"] and p["group"]["verdict"] == "FAIL" and p["group"]["error"] == "n4: exited with code 1"
    assert p["group"]["ratio"] is None and p["bad"] == []


def test_group_round_comes_after_the_last_allowed_pair_round():
    # n1 fails with everyone; max_rounds=1 stops the pairs after round 1, the group is round 2.
    results = [
        {"round": 1, "pair": ["n1", "n2"], "busbw": 0.1},
        {"round": 1, "pair": ["n3", "n4"], "busbw": 1.0},
    ]
    p = pairwise.plan(N4, results, max_rounds=1)
    assert p["phase"] == "group" and p["round"] == 2
    assert p["next_pairs"] == [N4]  # n1 and n2 undetermined: not named bad, so in the group


def test_job_names_are_group_names_and_short_for_the_whole_group():
    assert pairwise.job_name(1, ["gpu-01.example", "gpu-02"]) == "wireup_fabric_r1_gpu_01_example_gpu_02"
    many = [f"node{i:04d}.rack{i % 16}.example.org" for i in range(256)]
    assert pairwise.job_name(4, many, "group") == "wireup_fabric_r4_group"
    p = pairwise.plan(["x.y", "z-1"])
    assert p["next_jobs"] == [{"members": ["x.y", "z-1"], "kind": "pair", "name": "wireup_fabric_r1_x_y_z_1"}]


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
