"""The bench_report role's plan (wireup/bench_report.py): the run as the report play gathers it from
what each node kept, and the node data the store judges."""

from __future__ import annotations

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import bench, bench_report

RESULT = {"skipped": "", "nccl_tests": {}, "env": {}}


def test_gather_takes_the_hosts_that_reached_the_role_and_names_a_midway_stop():
    kept = bench_report.Kept(
        run_ids=["20261201T000000Z", "20261201T000000Z", ""],
        results=[RESULT, None, None],
        torch_logs=[{"single_node": "/r/a.log"}, {}, {}],
        multi=[{"lost": ["c"], "skipped": "not every node of g is left in this run"}, {}, {}],
    )
    run = bench_report.gather(["a", "b", "c"], kept, name="g")
    assert run["hosts"] == ["a", "b"] and run["run_id"] == "20261201T000000Z"
    assert run["nodes"] == {"a": RESULT, "b": bench.NO_DATA}
    assert run["lost"] == ["c"] and run["multi_skipped"].startswith("not every node")
    assert run["torch_logs"] == {"a": {"single_node": "/r/a.log"}, "b": {}}


def test_gather_refuses_a_run_no_host_reached():
    nothing = bench_report.Kept(run_ids=[""], results=[None], torch_logs=[{}], multi=[{}])
    with pytest.raises(ValueError, match="No host of group g reached the bench or gpu_trial role"):
        bench_report.gather(["a"], nothing, name="g")
    with pytest.raises(ValueError, match="No host of group g reached"):  # a trial that kept nothing
        bench_report.gather(["a"], nothing, name="g", trial={"run_id": "", "hosts": [], "nodes": {}})
    with pytest.raises(ValueError):  # every list has one entry per host
        bench_report.gather(["a", "b"], nothing, name="g")
    with pytest.raises(TypeError):  # a name the task misspells
        bench_report.Kept(run_id=[""], results=[None], torch_logs=[{}], multi=[{}])


def test_a_run_of_the_gpu_trial_alone_takes_its_run_id():
    """`bench.yml --tags gpu_health`: no host reached the bench role; every host kept gpu_trial_node."""
    nothing = bench_report.Kept(run_ids=["", ""], results=[None, None], torch_logs=[{}, {}], multi=[{}, {}])
    trial = {"run_id": "20261203T100000Z", "hosts": ["a", "b"], "nodes": {"a": {}, "b": {}}}
    run = bench_report.gather(["a", "b"], nothing, name="g", trial=trial)
    assert run == {
        "kind": "bench",
        "hosts": [],
        "lost": [],
        "run_id": "20261203T100000Z",
        "nodes": {},
        "torch_logs": {},
        "multi_skipped": "",
    }


def test_store_nodes_adds_the_run_wide_settings_the_lost_nodes_and_the_logs():
    logs = {
        "/a/single.log": "single a",
        "/a/multi.log": "no result here",
        "/b/multi.log": '{"wireup_bench": "torch_allreduce"}',
        "/a/step.log": "step a",
    }
    params = {
        "nodes": {"a": dict(RESULT), "b": dict(RESULT)},
        "thresholds": {"pass_ratio": 0.9},
        "efficiency": None,
        "secret_env": ["X"],
        "multi_node_skipped": "",
        "lost": {"c": "UNREACHABLE! ssh", "d": ""},
        "torch_logs": {
            "a": {
                "single_node": "/a/single.log",
                "multi_node": "/a/multi.log",
                "stepcost_single_node": "/a/step.log",
            },
            "b": {"multi_node": "/b/multi.log"},
        },
    }
    nodes = bench_report.store_nodes(params, logs.get)
    assert nodes["a"]["thresholds"] == {"pass_ratio": 0.9} and nodes["a"]["secret_env"] == ["X"]
    assert nodes["c"] == {"unreachable": "UNREACHABLE! ssh"}
    assert nodes["d"]["failed"] is True and nodes["d"]["thresholds"] == {"pass_ratio": 0.9}
    # Only rank 0 (on b) printed the group's results: every member keeps them.
    assert nodes["a"]["torch"] == {
        "single_node": "single a",
        "multi_node": '{"wireup_bench": "torch_allreduce"}',
    }
    assert nodes["b"]["torch"]["multi_node"] == nodes["a"]["torch"]["multi_node"]
    assert nodes["a"]["stepcost"] == {"single_node": "step a"}
    skipped = bench_report.store_nodes(dict(params, multi_node_skipped="b lost"), logs.get)
    assert [f["code"] for f in skipped["a"]["findings"]] == ["bench_torch_multi_skipped"]


def test_the_gather_tasks_give_map_a_default_jinja_keeps():
    """Jinja's map(attribute=..., default=none) is no default at all: a host without the fact
    (one that stopped midway, or a run of the GPU trial alone: no __bench_result) made the report
    play fail on 'HostVarsVars has no attribute'. The gather tasks default to {} instead."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    found = [
        f"{path.relative_to(root)}: {m.group(0)}"
        for path in sorted(root.glob("roles/*/tasks/*.yml"))
        for m in re.finditer(r"map\(attribute=[^)]*default=none[^)]*\)", path.read_text())
    ]
    assert found == []
