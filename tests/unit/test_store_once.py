"""The bench store does each thing once (issue 39: the bench store at 1,024 nodes).

Encoding: each host record and each index once, by Python's C encoder (no indentation: ``indent``
makes json fall back to its pure-Python encoder, 41 % of the bench store's time at fleet size), and
a record copied by atomicfile.finite only when it holds a non-finite float. The content does not
change: the parsed JSON of each file is what the old encoding (indent=1 of the finite copy) gives
of the same record.

Reading: each earlier record a run looks at (the GPU trial's baselines, each host's baseline) is
read and checked once in the run, not once per reader.

Checking: a node's answer is walked for its depth once (store_nodes' check against its typed
definition), not again by store_run on the same data.

The runs are the real writers' on the real captures (tests/perf/fleet_build.py's nodes, made by the
bench and GPU trial roles' own functions): bench_report.store_nodes, host_record.store_run and
gate.index_run, as wireup_bench_store stores a run, twice (the second run compared with the first)."""

import gc
import json
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile, shape
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import (
    gate,
    gpu_trial_run,
    host_record,
)
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import index, query, results
from tests.perf import fleet_build as fb
from tests.unit import test_report

FLEET = fb.Fleet(("gpu0000", "gpu0001"), {})  # two good nodes of 8 H200 GPUs
HOSTS = FLEET.hosts
RUNS = (fb.run_id_of(0), fb.run_id_of(1))


def _store(root, day):
    """Day ``day``'s bench run of the fleet (bench.node_results of the nccl-tests, torch and DDP
    step captures, and the GPU trial), stored and indexed as wireup_bench_store does (fleet_build's
    store_bench: store_nodes, store_run, gate.index_run); {host: record}."""
    return fb.store_bench(fb.bench_params(FLEET, str(root), RUNS[day], day))[2]


class Encodings:
    """Counts of the pure-Python encoder's uses and of finite's copies (top-level calls)."""

    def __init__(self, monkeypatch):
        self.pure, self.copies, depth = 0, 0, [0]
        pure, copy = json.encoder._make_iterencode, atomicfile.finite

        def counted_pure(*args, **kwargs):
            self.pure += 1
            return pure(*args, **kwargs)

        def counted_copy(data):  # finite calls itself (by this name) for each item: one copy
            self.copies += depth[0] == 0
            depth[0] += 1
            try:
                return copy(data)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(json.encoder, "_make_iterencode", counted_pure)
        monkeypatch.setattr(atomicfile, "finite", counted_copy)


def test_a_run_s_records_and_indexes_are_encoded_by_the_c_encoder_without_copies(tmp_path, monkeypatch):
    _store(tmp_path, 0)
    seen = Encodings(monkeypatch)
    records = _store(tmp_path, 1)
    assert all(r["verdict"] == "PASS" for r in records.values())
    assert records[HOSTS[0]]["baseline"] == {"state": "compared", "run_id": RUNS[0]}
    assert (seen.pure, seen.copies) == (0, 0)


def _old_encoding(record):
    """The store's encoding before issue 39's change (results.record_bytes at 76ceca5)."""
    text = json.dumps(atomicfile.finite(record), indent=1, sort_keys=True, default=str, allow_nan=False)
    return json.loads(text)


def test_each_record_file_says_what_the_old_encoding_said(tmp_path):
    for day, run_id in enumerate(RUNS):
        records = _store(tmp_path, day)
        for host in HOSTS:
            text = pathlib.Path(results.host_path(str(tmp_path), run_id, host)).read_text()
            assert text.endswith("}\n") and text.count("\n") == 1  # one line, a final newline
            assert json.loads(text) == _old_encoding(records[host])
            assert host_record.read_host(str(tmp_path), run_id, host) == json.loads(text)


def test_the_index_s_signatures_still_name_the_files_written(tmp_path):
    for day in range(len(RUNS)):
        _store(tmp_path, day)
    for host in HOSTS:
        entries = index.load(str(tmp_path), host, gate.summarizer())
        assert sorted(entries) == [index.key("bench", run_id) for run_id in RUNS]
        for run_id in RUNS:
            path = results.host_path(str(tmp_path), run_id, host)
            assert entries[index.key("bench", run_id)]["sig"] == index.signature(path)


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_figure_is_still_written_as_null_by_the_copy(tmp_path, monkeypatch, odd):
    record = dict(test_report.good_node(), host="gpu-a01", run_id=RUNS[0], rows=[[1.0, odd], {"x": (odd,)}])
    seen = Encodings(monkeypatch)
    path = results.write_host(str(tmp_path), RUNS[0], "gpu-a01", record)
    assert seen.copies == 1
    text = pathlib.Path(path).read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["rows"] == [[1.0, None], {"x": [None]}]
    assert json.loads(text) == _old_encoding(record)


def test_no_part_of_a_node_s_answer_is_walked_for_its_depth_twice(tmp_path, monkeypatch):
    _store(tmp_path, 0)
    walked, depth_problem = [], shape.depth_problem

    def counted(value, *args, **kwargs):  # the containers themselves are kept: no id is reused
        parts = value.values() if isinstance(value, dict) else ()
        walked.extend(v for v in parts if isinstance(v, (dict, list)))
        return depth_problem(value, *args, **kwargs)

    monkeypatch.setattr(shape, "depth_problem", counted)
    records = _store(tmp_path, 1)
    assert all(r["verdict"] == "PASS" for r in records.values())
    assert walked and len(walked) == len({id(v) for v in walked})


def test_each_earlier_record_is_read_once_by_a_run(tmp_path, monkeypatch):
    """The GPU baselines and each host's baseline both read the newest run's records: one read
    each (two before: the GPU trial's, then the host's own)."""
    _store(tmp_path, 0)
    reads, read_strict_json = [], results.read_strict_json

    def counted(path):
        reads.append(path)
        return read_strict_json(path)

    monkeypatch.setattr(results, "read_strict_json", counted)
    records = _store(tmp_path, 1)
    assert {h: r["baseline"]["run_id"] for h, r in records.items()} == dict.fromkeys(HOSTS, RUNS[0])
    gpus = [g for r in records.values() for g in r["gpu_trial"]["gpus"]]
    assert gpus and all(f["baseline"]["run_id"] == RUNS[0] for g in gpus for f in g["figures"].values())
    earlier = sorted(p for p in reads if f"/bench/{RUNS[0]}/" in p)
    assert earlier == sorted(results.host_path(str(tmp_path), RUNS[0], host) for host in HOSTS)


def test_a_record_changed_while_read_once_is_read_again(tmp_path, monkeypatch):
    """reading_once trusts a record it read only while its file is the same (signature); outside it
    nothing is kept."""
    records = _store(tmp_path, 0)
    path = results.host_path(str(tmp_path), RUNS[0], HOSTS[0])
    reads, read_strict_json = [], results.read_strict_json
    monkeypatch.setattr(results, "read_strict_json", lambda p: reads.append(p) or read_strict_json(p))

    def walk():
        return next(query.records(str(tmp_path), host_record.record_problem, host=HOSTS[0]))[3]

    with query.reading_once():
        first = walk()
        assert walk() is first and len(reads) == 1
        pathlib.Path(path).write_text(
            json.dumps(dict(records[HOSTS[0]], verdict="FAIL")) + "  \n"
        )  # another size
        assert walk()["verdict"] == "FAIL" and len(reads) == 2
        pathlib.Path(path).write_text('{"host": "cut')
        assert isinstance(walk(), results.DamagedRecord) and len(reads) == 3
        assert isinstance(walk(), results.DamagedRecord) and len(reads) == 3
    assert isinstance(walk(), results.DamagedRecord) and len(reads) == 4


def test_a_run_is_judged_written_and_indexed_with_the_cyclic_collector_paused(tmp_path, monkeypatch):
    """Each collection the store triggered walked every record it had read and every node's data
    (issue 39): the collector is off while it judges (the GPU trial, each record's build), writes
    and indexes, on again after it; a caller's paused collector stays paused."""
    _store(tmp_path, 0)
    seen = {}
    for module, name in ((gpu_trial_run, "attach"), (host_record, "build_record"), (gate, "index_run")):
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            seen.setdefault(_name, []).append(gc.isenabled())
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    assert gc.isenabled()
    _store(tmp_path, 1)
    assert sorted(seen) == ["attach", "build_record", "index_run"]
    assert not any(on for calls in seen.values() for on in calls)
    assert gc.isenabled()
    gc.disable()
    try:
        fb.store_bench(fb.bench_params(FLEET, str(tmp_path), fb.run_id_of(2), 2))
        assert not gc.isenabled()
    finally:
        gc.enable()
