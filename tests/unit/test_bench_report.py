"""The bench_report role's plan (wireup/plans/bench_report.py): the run as the report play gathers it from
what each node kept, and the node data the store judges."""

from __future__ import annotations

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench, bench_report

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


# ---------------------------------------------------------------- one bad node (issue 35, item 2)
# A run of three GPU nodes from the real producers' output on real captures: each node's bench data
# from bench.node_results (the 2x H200's topology and nccl-tests outputs, the topology's findings
# from health.findings), each node's GPU trial from gpu_trial.node_data (the 2x H200's nvidia-smi -q
# -x; gpu-c's with a pending row remap: FAIL). Then ONE node's part is mangled, as a broken or
# hostile node could send it: before, storing the run failed for every host, and the launch gate
# then let gpu-c (which FAILed this run) through on its earlier PASS.
import json  # noqa: E402
import pathlib  # noqa: E402

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import health, topology  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record  # noqa: E402
from tests.unit.test_bench_plan import BUILD, GPU_NODE, settings  # noqa: E402
from tests.unit.test_gpurecord import H200, PENDING, THRESHOLDS, fact, trial_run  # noqa: E402

CAPTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
HOSTS = ("gpu-a", "gpu-b", "gpu-c")
EARLIER, RUN = "20261204T100000Z", "20261205T100000Z"
DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON, 100,000 lists deep: json.loads' RecursionError


def nested(depth):
    """A list ``depth`` lists deep (built without recursion, as a parser without a limit would)."""
    value = []
    for _ in range(depth):
        value = [value]
    return value


def bench_node(host, run_id):
    """One node's __bench_result as the bench role's filter makes it (bench.node_results)."""

    def read(name):
        return (CAPTURES / "h200x2" / name).read_text()

    topo = topology.build_topology(
        topo_m=read("topo_m.txt"),
        p2p={"r": read("topo_p2p_r.txt")},
        nvlink_s=read("nvlink_s.txt"),
        query_csv=read("query_gpu.csv"),
    )
    topo["findings"] = health.findings(topo, expected_gpus=2)
    plan = bench.plan(GPU_NODE, settings(collectives=list(COLLECTIVES)), BUILD, "", host)
    text = {c: (CAPTURES / "nccltests" / f"h200x2_v2.19.6_{c}_perf.txt").read_text() for c in COLLECTIVES}
    runs = [{"item": r, "rc": 0, "stdout": text[r["collective"]], "stderr": ""} for r in plan["nccl_runs"]]
    return bench.node_results(
        {
            "plan": plan,
            "run_id": run_id,
            "host": host,
            "node": GPU_NODE,
            "build": BUILD,
            "topology": topo,
            "nccl_runs": {"results": runs},
        }
    )


def run_params(tmp_path, run_id, *, failing=(), fast=()):
    """The run's wireup_bench_store arguments; failing: nodes with a pending row remap; fast: nodes
    whose GPUs measure 1.5 x the others' (a peer's best, were they judged with them)."""
    facts = {
        h: fact(PENDING if h in failing else H200, run_id, h, scale=1.5 if h in fast else 1.0) for h in HOSTS
    }
    return {
        "results_dir": str(tmp_path),
        "run_id": run_id,
        "kind": "bench",
        "nodes": {h: bench_node(h, run_id) for h in HOSTS},
        "thresholds": THRESHOLDS,
        "gpu_trial": trial_run(run_id, facts),
    }


def store(params):
    """What wireup_bench_store does: bench_report.store_nodes, then host_record.store_run."""
    nodes = bench_report.store_nodes(params, lambda path: "")
    return host_record.store_run(params["results_dir"], params["run_id"], nodes, params["kind"])[2]


def refused(tmp_path):
    return gate.refusals(list(HOSTS), *gate.latest_verdicts(str(tmp_path), list(HOSTS)))


def _topology(p):
    return p["nodes"]["gpu-b"]["topology"]


def _trial(p):
    return p["gpu_trial"]["nodes"]["gpu-b"]


def _fingerprint_doc(p, change):
    doc = json.loads(_trial(p)["fingerprint"]["stdout"])
    change(doc)
    _trial(p)["fingerprint"]["stdout"] = json.dumps(doc)


def _dcgm(p, stdout):
    _trial(p)["dcgm"] = {"rc": 0, "stdout": stdout, "stderr": "", "seconds": 9.0, "level": 1}


DCGM_SUMMARY_TEXT = json.dumps(
    {
        "DCGM Diagnostic": {
            "test_categories": [{"tests": [{"name": "memory", "results": [], "test_summary": "x"}]}]
        }
    }
)
MANGLED = {
    "topology gpus a string": (
        lambda p: _topology(p).update(gpus="all"),
        "topology.gpus is a string, not a list",
    ),
    "topology link end a list": (
        lambda p: _topology(p)["links"][0].update(a=["GPU0"]),
        "topology.links[0].a is a list, not a string",
    ),
    "topology finding a number": (
        lambda p: _topology(p).update(findings=[7]),
        "topology.findings[0] is a whole number, not an object",
    ),
    "topology finding severity": (
        lambda p: _topology(p)["findings"].append(dict(health.finding("info", "x", "y"), severity="fatal")),
        "].severity is not one of critical, warning, info",
    ),
    "topology nested 5,000 deep": (
        lambda p: _topology(p).update(kernel_log={"xid": nested(5000)}),
        "its bench data: topology is nested deeper than 32 levels",
    ),
    "nccl-tests run a string": (
        lambda p: p["nodes"]["gpu-b"]["nccl_tests"].update(all_reduce="text"),
        "nccl_tests.all_reduce is a string, not an object",
    ),
    "bench data a list": (lambda p: p["nodes"].update({"gpu-b": ["x"]}), "it is a list, not an object"),
    "health read a string": (lambda p: _trial(p).update(health_after="x"), "health_after is a string"),
    "health gpus a string": (
        lambda p: _trial(p)["health_after"]["health"].update(gpus="x"),
        "health.gpus is a string, not a list",
    ),
    "health GPU without its identity": (
        lambda p: _trial(p)["health_after"]["health"]["gpus"].__setitem__(0, {"index": 0}),
        "health.gpus[0] has no bus_id, name, serial, uuid",
    ),
    "health ECC counts a string": (  # of its shape to the depth HealthDoc types: the judgement fails
        lambda p: _trial(p)["health_after"]["health"]["gpus"][0]["ecc"].update(volatile="x"),
        "gpu_trial: TypeError while judging it: string indices must be integers",
    ),
    "fingerprint 100,000 lists deep": (
        lambda p: _trial(p)["fingerprint"].update(stdout=DEEP),
        "nested too deeply to read (RecursionError)",
    ),
    "fingerprint gpus a string": (
        lambda p: _fingerprint_doc(p, lambda d: d.update(gpus="x")),
        "fingerprint.gpus is a string, not a list",
    ),
    "fingerprint figure a string": (
        lambda p: _fingerprint_doc(p, lambda d: d["gpus"][0]["figures"]["gemm_bf16_flops"].update(median="")),
        "fingerprint.gpus[0].figures.gemm_bf16_flops.median is a string, not a number",
    ),
    "DCGM summary a string": (lambda p: _dcgm(p, DCGM_SUMMARY_TEXT), "AttributeError while judging it"),
    "DCGM 100,000 lists deep": (lambda p: _dcgm(p, "{" + '"a": ' + DEEP + "}"), "RecursionError"),
    "trial fact a string": (lambda p: p["gpu_trial"]["nodes"].update({"gpu-b": "x"}), "it is a string"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MANGLED))
def test_one_malformed_node_is_damaged_alone_and_the_gate_refuses_it_and_the_failed_one(tmp_path, case):
    mangle, said = MANGLED[case]
    assert {r["verdict"] for r in store(run_params(tmp_path, EARLIER)).values()} == {"PASS"}
    params = run_params(tmp_path, RUN, failing=("gpu-c",), fast=("gpu-b",))
    mangle(params)
    records = store(params)
    assert {h: r["verdict"] for h, r in records.items()} == {
        "gpu-a": "PASS",
        "gpu-b": "DAMAGED",
        "gpu-c": "FAIL",
    }
    damaged = records["gpu-b"]
    assert said in damaged["damaged"] and "\n" not in damaged["damaged"]
    assert len(damaged["damaged"]) <= host_record.DAMAGED_CHARS
    assert damaged["skipped"] == f"not judged: {damaged['damaged']}"
    assert [(f["code"], f["severity"]) for f in damaged["findings"]] == [("node_data_damaged", "critical")]
    # Written, read back as a record; never a baseline; gpu-a and gpu-c judged as always.
    assert host_record.read_host(str(tmp_path), RUN, "gpu-b")["verdict"] == "DAMAGED"
    assert host_record.last_passing(str(tmp_path), "gpu-b")[0] == EARLIER
    assert records["gpu-a"]["baseline"]["run_id"] == EARLIER
    assert records["gpu-c"]["gpu_trial"]["gpus"][0]["verdict"] == "FAIL"
    # gpu-b's GPUs (1.5 x faster) are no one's peers: gpu-a's and gpu-c's are judged among themselves.
    peer = records["gpu-a"]["gpu_trial"]["gpus"][0]["figures"]["gemm_bf16_flops"]["peer"]
    assert peer["verdict"] == "PASS" and peer["best_gpu"].startswith(("gpu-a", "gpu-c"))
    # The gate refuses the DAMAGED node and the node that FAILed; gpu-a goes.
    why = refused(tmp_path)
    assert set(why) == {"gpu-b", "gpu-c"}
    assert why["gpu-b"].startswith(f"bench run {RUN} could not judge gpu-b: {damaged['damaged']}")
    assert why["gpu-c"].startswith(
        f"bench run {RUN} FAILed on gpu-c: GPU0 GPU-47e4f408: row_remap_pending -> reset"
    )


def test_a_damaged_reason_carries_no_more_of_the_nodes_text_than_a_cut_excerpt(tmp_path):
    params = run_params(tmp_path, RUN)
    secret = "hf_" + "S3CR3T" * 50
    _topology(params)["gpus"][0]["name"] = {"HF_TOKEN": secret}
    _topology(params)["gpus"][1][secret] = 1  # a key it does not declare: passes, never read
    _trial(params)["health_after"]["health"]["gpus"][0][secret] = {}  # the same
    _dcgm(params, DCGM_SUMMARY_TEXT.replace('"x"', json.dumps(secret)))
    records = store(params)
    assert (
        records["gpu-b"]["damaged"]
        == "its bench data: topology.gpus[0].name is an object, not a string or null"
    )
    assert secret[:20] not in json.dumps(records)


def test_a_quick_run_with_one_malformed_answer_stores_the_others(tmp_path):
    """bench.yml --tags quick: one node's __node_check_result not a node_check.result answer."""
    good = node_check.result(
        "q-a", stdout=json.dumps({"verdict": "PASS", "line": "wireup-check: PASS q-a: ok"})
    )
    bad = dict(node_check.result("q-b", stdout="{}"))
    bad["problems"] = [{"kind": "nvlink", "part": 0}]  # a part that is no string
    params = {
        "results_dir": str(tmp_path),
        "run_id": RUN,
        "kind": node_check.KIND,
        "nodes": {"q-a": {"node_check": good}, "q-b": {"node_check": bad}, "q-c": {"node_check": "x"}},
        "thresholds": THRESHOLDS,
    }
    records = store(params)
    assert {h: r["verdict"] for h, r in records.items()} == {
        "q-a": "PASS",
        "q-b": "DAMAGED",
        "q-c": "DAMAGED",
    }
    assert records["q-b"]["damaged"] == "its quick check: node_check.problems[0] has no message"
    assert records["q-c"]["damaged"] == "its quick check: node_check is a string, not an object"
    assert all(r["kind"] == "quick" for r in records.values())
