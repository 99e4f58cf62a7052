"""wireup.pairwise: disjoint pairs per round, judging against the expectation or the median,
re-pairing the members of failing pairs with passing nodes to name the bad node."""

import pytest

from wireup import pairwise

N4 = ["n1", "n2", "n3", "n4"]


def run(nodes, speed, *, expected=None, unreachable=(), error=None, ratio=0.7):
    """Drive plan() to the end; a pair runs at the slower member's speed (None = job failed)."""
    results = []
    rounds = 0
    while True:
        p = pairwise.plan(nodes, results, expected_gbs=expected, pass_ratio=ratio, unreachable=unreachable)
        assert p["errors"] == []
        if p["done"]:
            return p, rounds
        rounds += 1
        for a, b in p["next_pairs"]:
            fig = None if speed.get(a) is None or speed.get(b) is None else min(speed[a], speed[b])
            results.append(
                {"round": p["round"], "pair": [a, b], "busbw": fig, "error": error if fig is None else ""}
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
    assert p["done"] and p["bad"] == [] and p["good"] == N4


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
    assert p["done"] and p["bad"] == [] and p["good"] == ["n1", "n2", "n3"]
