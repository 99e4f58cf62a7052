"""A node's answer against its one typed definition (wireup/core/shape.py, issue 35): the check itself,
and every typed definition against what its real producer makes from every real capture we hold
(a check stricter than the producer would make a healthy node DAMAGED)."""

from __future__ import annotations

import json
import pathlib
import tracemalloc
import typing
from typing import Literal, TypedDict

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import gpu_trial, node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import shape
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth, health, topology
from tests.perf import fleet_build as fb
from tests.unit import test_report

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"


class _Id(TypedDict):
    index: int


class Gpu(_Id, total=False):
    name: str | None
    kind: Literal["a", "b"]
    figures: dict[str, float]
    links: list[str]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"index": 0, "name": None, "kind": "a", "figures": {"x": 1, "y": 2.5}, "links": []}, ""),
        ({"index": 0, "extra": object()}, ""),  # a key it does not declare is never read
        ([], "gpu is a list, not an object"),
        ({}, "gpu has no index"),
        ({"index": True}, "gpu.index is true or false, not a whole number"),
        ({"index": 1.0}, "gpu.index is a number, not a whole number"),
        ({"index": 0, "name": 7}, "gpu.name is a whole number, not a string or null"),
        ({"index": 0, "kind": "c"}, "gpu.kind is not one of a, b"),
        ({"index": 0, "figures": {"x": "fast"}}, "gpu.figures.x is a string, not a number"),
        ({"index": 0, "figures": {"\x1b[31m" + "k" * 60: None}}, "gpu.figures.?[31mkkkkkk"),
        ({"index": 0, "links": "GPU1"}, "gpu.links is a string, not a list"),
        ({"index": 0, "links": ["GPU1", 2]}, "gpu.links[1] is a whole number, not a string"),
    ],
)
def test_problem_names_the_first_place_that_is_wrong_never_the_value(value, said):
    found = shape.problem(value, Gpu, "gpu")
    assert found.startswith(said) if said else found == ""
    assert "fast" not in found and "GPU1" not in found and "k" * 41 not in found


def test_depth_is_checked_without_recursion_and_names_the_key_that_holds_it():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    assert shape.depth_problem({"ok": [[1]], "raw": {"x": deep}}, "topology") == (
        "topology.raw is nested deeper than 32 levels"
    )
    assert shape.depth_problem({"a": [[[]]]}) == ""
    with pytest.raises(shape.Malformed, match="it is nested deeper than 32 levels"):
        shape.check(deep, list)


def test_each_type_is_looked_into_once_not_once_per_value(monkeypatch):
    """The typing introspection (get_origin, get_args, is_typeddict) of a shape is done once per
    type: checking a fleet's nodes costs their values, not their values times the type's analysis
    (issue 39). The real bench data of the fleet benchmark's node, checked twice."""
    node = fb.bench_node(fb.Fleet(("gpu0000",), {}), "gpu0000", fb.run_id_of(0))
    assert shape.node_problem(node, bench.NodeData) == ""
    asked = []
    for name in ("get_origin", "get_args", "is_typeddict"):
        real = getattr(typing, name)
        monkeypatch.setattr(typing, name, lambda hint, real=real, name=name: asked.append(name) or real(hint))
    assert shape.node_problem(node, bench.NodeData) == ""
    assert shape.node_problem({**node, "topology": []}, bench.NodeData) == "topology is a list, not an object"
    assert asked == []


def _depth_before(value, where="", limit=shape.DEPTH):
    """depth_problem as it was before issue 39's change (every item on the stack): the reference
    for the same answers."""
    stack = [(value, 1, ())]
    while stack:
        item, depth, top = stack.pop()
        if depth > limit:
            return f"{shape._name(((where,) if where else ()) + top)} is nested deeper than {limit} levels"
        if isinstance(item, dict):
            stack.extend((v, depth + 1, top or (k,)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, depth + 1, top) for v in item)
    return ""


def _nested(levels, leaf):
    value = leaf
    for level in range(levels):
        value = {f"k{level}": value, "n": 1} if level % 2 else [0, value, "x"]
    return value


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
@pytest.mark.parametrize("levels", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("leaf", [7, "s", [], {}, [1], {"a": None}])
def test_depth_answers_as_before_at_every_level_around_the_limit(limit, levels, leaf):
    """Scalars one level too deep count, as containers do; the key named is the same."""
    for value in (_nested(levels, leaf), {"a": _nested(levels, leaf), "b": [_nested(levels, 1)]}):
        assert shape.depth_problem(value, "top", limit) == _depth_before(value, "top", limit)


def test_depth_of_the_real_bench_data_answers_as_before():
    data = json.loads(json.dumps(test_report.good_node()))
    assert shape.depth_problem(data) == _depth_before(data) == ""
    assert shape.depth_problem(data, "d", 3) == _depth_before(data, "d", 3) != ""


def test_depth_walks_containers_only_not_every_number():
    """A flat list of 200,000 numbers (a node's rows) is one container: the walk holds no item of
    it on its stack (before: 200,000 stack entries, about 20 MB at its peak)."""
    flat = [float(i) for i in range(200_000)]
    tracemalloc.start()
    try:
        assert shape.depth_problem({"rows": flat}) == ""
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_a_failure_is_one_line_with_a_cut_excerpt():
    assert shape.failure(shape.Malformed("x.y is a string, not a list")) == "x.y is a string, not a list"
    assert shape.failure(RecursionError("maximum recursion depth")) == (
        "its answer is nested too deeply to read (RecursionError)"
    )
    said = shape.failure(ValueError("line one\nline two" + "z" * 500))
    assert said.startswith("ValueError while judging it: line one line twozz") and "\n" not in said
    assert len(said) < 200


def test_the_one_finding_shape_names_the_severities_health_knows():
    severity = typing.get_type_hints(health.Finding)["severity"]
    assert typing.get_args(severity) == health.SEVERITIES
    assert shape.problem(health.finding("info", "x", "a message", [1, 0]), health.Finding) == ""


# ---------------------------------------------------------------- the real producers' output
# The nvidia-smi reads (not DCGM's documents, lspci listings or kernel logs, which sit beside them).
HEALTH_CAPTURES = sorted(
    p
    for p in (FIXTURES / "gpuhealth").rglob("*")
    if p.suffix in (".xml", ".txt")
    and not {"dcgm", "lspci", "kernel_log"} & set(p.parts)
    and "_kernel_log_" not in p.name
)


@pytest.mark.parametrize("path", HEALTH_CAPTURES, ids=lambda p: p.name)
def test_every_health_capture_parses_to_a_health_doc(path):
    parsed = gpuhealth.parse(path.read_text(errors="replace"))
    assert shape.problem(parsed, gpuhealth.HealthDoc, "health") == ""
    answer = gpuhealth.answer(parsed, "")
    assert shape.problem({"health": answer["health"], "error": "", "dcgmi": ""}, gpu_trial.HealthPart) == ""


def _topologies():
    """build_topology on every topo -m, query-gpu and nvlink -s capture that parses (the public
    captures of tests/fixtures/public and our machines')."""
    for path in sorted((FIXTURES / "public").glob("*")) + sorted((FIXTURES / "h200x1").glob("*.txt")):
        kind = next((k for k in ("topo_m", "query_gpu", "nvlink_s") if k in path.name), None)
        if not kind:
            continue
        given = {"topo_m": "topo_m", "query_gpu": "query_csv", "nvlink_s": "nvlink_s"}[kind]
        try:
            yield path.name, topology.build_topology(**{given: path.read_text(errors="replace")})
        except ValueError:
            continue  # a capture kept to show what is refused


@pytest.mark.parametrize(("name", "topo"), list(_topologies()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_topology_capture_builds_a_topology(name, topo):
    assert shape.problem(topo, topology.Topology, "topology") == ""


def test_the_h200x2_topology_with_its_findings_is_a_topology():
    def read(name):
        return (FIXTURES / "h200x2" / name).read_text()

    topo = topology.build_topology(
        topo_m=read("topo_m.txt"),
        p2p={mode: read(f"topo_p2p_{mode}.txt") for mode in "rnw"},
        nvlink_s=read("nvlink_s.txt"),
        query_csv=read("query_gpu.csv"),
        smi_xml=read("nvidia_smi_q.xml"),
    )
    topo["findings"] = health.findings(topo, expected_gpus=2)
    assert topo["gpus"] and topo["links"]
    assert shape.problem(topo, topology.Topology, "topology") == ""
    assert shape.problem({"topology": topo}, bench.NodeData) == ""
    assert shape.problem(dict(bench.NO_DATA), bench.NodeData) == ""


@pytest.mark.parametrize(
    "stdout",
    [
        json.dumps({"verdict": "PASS", "line": "wireup-check: PASS n1: ok", "seconds": 0.4, "exit": 0}),
        json.dumps({"verdict": "FAIL", "problems": [{"kind": "nvlink", "part": "GPU0", "message": "m"}],
                    "bench": {"collective": "all_reduce", "size": 1 << 30, "busbw": None}}),
        json.dumps({"verdict": "MAYBE", "problems": "x", "baseline": {"run_id": 7}, "exit": "1"}),
        "Traceback (most recent call last):",
        "",
    ],
)  # fmt: skip
def test_node_check_result_is_always_a_check_result(stdout):
    answer = node_check.result("n1", stdout=stdout, rc=1)
    assert shape.problem(answer, node_check.CheckResult, "node_check") == ""
    assert shape.problem({"node_check": answer}, node_check.QuickNode) == ""


def test_a_bench_node_that_swept_the_nccl_settings_is_node_data():
    """bench.node_results with its tuning (bench_nccl_tune: the sweep's candidates, the best env,
    the figures), on the 2x H200's all_reduce outputs: bench.NodeData and bench.Tuning hold it."""
    from tests.unit.test_bench_plan import BUILD, GPU_NODE, settings

    plan = bench.plan(GPU_NODE, settings(bench_nccl_tune=True), BUILD, "", "gpu-a01")
    fast = (FIXTURES / "h200x2" / "all_reduce_perf.txt").read_text()
    slow = (FIXTURES / "h200x2" / "all_reduce_perf_p2p_disabled.txt").read_text()
    tuned = [{"rc": 0, "stdout": text, "stderr": ""} for text in (slow, fast, slow, slow)]
    runs = [{"item": r, "rc": 0, "stdout": fast, "stderr": ""} for r in plan["nccl_runs"]]
    node = bench.node_results(
        {
            "plan": plan,
            "run_id": "20261201T010203Z",
            "host": "gpu-a01",
            "node": GPU_NODE,
            "build": BUILD,
            "nccl_runs": {"results": runs},
            "tune_runs": {"results": tuned},
        }
    )
    assert node["tuning"]["best"] == {"NCCL_MIN_NCHANNELS": "32"} and node["tuning"]["candidates"]
    assert shape.node_problem(node, bench.NodeData) == ""
