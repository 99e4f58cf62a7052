"""store/query.py: the store's one newest-first query (issue 36), on records the real producers
wrote (the healthy H200 bench record through results.write_host, a quick check's record through
node_check.result and host_record.store_run), read whole by the record layer's check."""

from __future__ import annotations

import copy
import json
import pathlib
import time

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import query, results

REPO = pathlib.Path(__file__).resolve().parents[2]
FULL = json.loads((REPO / "tests/fixtures/h200x2/bench_record_2026-11-29_healthy.json").read_text())
CHECK = host_record.record_problem


def put(root, run_id, host, kind="bench", **changes):
    record = dict(copy.deepcopy(FULL), host=host, run_id=run_id, **changes)
    results.write_host(str(root), run_id, host, record, kind)


def test_runs_are_newest_first_over_kinds_and_a_quick_run_of_the_same_id_is_the_newer(tmp_path):
    put(tmp_path, "20261201T000000Z", "n1")
    put(tmp_path, "20261202T000000Z", "n1")
    put(tmp_path, "20261202T000000Z", "n1", kind="quick", verdict="PASS")
    put(tmp_path, "20261202T000000Z-2", "n1")
    assert query.runs(str(tmp_path), ("bench", node_check.KIND)) == [
        ("bench", "20261202T000000Z-2"),
        ("quick", "20261202T000000Z"),
        ("bench", "20261202T000000Z"),
        ("bench", "20261201T000000Z"),
    ]
    assert query.runs(str(tmp_path), before="20261202T000000Z") == [("bench", "20261201T000000Z")]


def test_a_run_dated_in_the_future_comes_last(tmp_path):
    future = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() + 3 * results.CLOCK_SKEW_S))
    put(tmp_path, future, "n1")
    put(tmp_path, "20261201T000000Z", "n1")
    assert [run_id for _kind, run_id in query.runs(str(tmp_path))] == ["20261201T000000Z", future]


def test_records_of_one_host_skip_missing_ones_and_yield_damaged_ones_as_errors(tmp_path):
    put(tmp_path, "20261201T000000Z", "n1")
    put(tmp_path, "20261202T000000Z", "n2")  # n1 has no record of this run: skipped
    damaged = tmp_path / "bench" / "20261203T000000Z" / "n1.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"verdict": "MAYBE"}')
    found = list(query.records(str(tmp_path), CHECK, host="n1"))
    assert [(kind, run_id, host) for kind, run_id, host, _r in found] == [
        ("bench", "20261203T000000Z", "n1"),
        ("bench", "20261201T000000Z", "n1"),
    ]
    assert isinstance(found[0][3], results.DamagedRecord) and "MAYBE" in str(found[0][3])
    assert found[1][3]["verdict"] == FULL["verdict"]


def test_every_host_of_each_run_in_name_order_and_nothing_read_past_the_caller(tmp_path):
    for host in ("n2", "n1"):
        put(tmp_path, "20261201T000000Z", host)
        put(tmp_path, "20261202T000000Z", host)
    walk = query.records(str(tmp_path), CHECK)
    assert [next(walk)[1:3], next(walk)[1:3]] == [("20261202T000000Z", "n1"), ("20261202T000000Z", "n2")]
    # Lazy: removing the older run now is seen (it was never read).
    for path in (tmp_path / "bench" / "20261201T000000Z").iterdir():
        path.unlink()
    assert list(walk) == []


def test_a_host_name_that_is_no_file_name_is_an_error_never_a_path(tmp_path):
    put(tmp_path, "20261201T000000Z", "n1")
    ((kind, run_id, host, err),) = query.records(str(tmp_path), CHECK, host="../n1")
    assert (kind, run_id, host) == ("bench", "20261201T000000Z", "../n1")
    assert isinstance(err, ValueError) and not isinstance(err, results.DamagedRecord)


def test_the_record_layer_s_check_is_the_one_applied(tmp_path):
    put(tmp_path, "20261201T000000Z", "n1")
    ((_k, _r, _h, err),) = query.records(str(tmp_path), lambda record: "not wanted here", host="n1")
    assert isinstance(err, results.DamagedRecord) and "not wanted here" in str(err)
