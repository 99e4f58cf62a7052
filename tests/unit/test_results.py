"""Results store (one folder per run, never overwritten) and baseline comparison."""

import copy
import json
import pathlib
import re

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results


def record(run_id, verdict="PASS", *, busbw=345.0, links=None, gpus=2, torch_busbw=None):
    rows = [
        {"size": 1 << 30, "out_of_place": {"busbw": busbw - 20}, "in_place": {"busbw": busbw - 20}},
        {"size": 8 << 30, "out_of_place": {"busbw": busbw}, "in_place": {"busbw": busbw - 1}},
    ]
    rec = {
        "host": "gpu-a01",
        "run_id": run_id,
        "verdict": verdict,
        "topology": {
            "gpus": [{"index": i, "uuid": f"GPU-{i:04d}", "name": "NVIDIA H200"} for i in range(gpus)],
            "links": links if links is not None else [{"a": "GPU0", "b": "GPU1", "class": "NV18"}],
        },
        "collectives": {"all_reduce": {"rows": rows, "verdict": {"verdict": verdict, "size": 8 << 30}}},
        "torch": {},
    }
    if torch_busbw is not None:
        rec["torch"]["multi_node"] = {
            "world_size": 3,
            "rows": [
                {"size": 1 << 20, "in_place": {"busbw": torch_busbw / 2}},
                {"size": 4 << 20, "in_place": {"busbw": torch_busbw}},
            ],
        }
    return rec


def test_run_ids_sort_and_never_collide(tmp_path):
    rid = results.new_run_id(0)
    assert rid == "19700101T000000Z"
    first, path1 = results.reserve_run(str(tmp_path), rid)
    second, path2 = results.reserve_run(str(tmp_path), rid)
    third, _ = results.reserve_run(str(tmp_path), rid)
    assert (first, second, third) == (rid, rid + "-2", rid + "-3")
    assert path1 != path2
    later, _ = results.reserve_run(str(tmp_path), "19700101T000001Z")
    assert results.list_runs(str(tmp_path)) == [rid, rid + "-2", rid + "-3", later]
    with pytest.raises(ValueError, match="run id"):
        results.reserve_run(str(tmp_path), "../etc")


def test_write_never_overwrites(tmp_path):
    rid, _ = results.reserve_run(str(tmp_path), "20261129T160000Z")
    path = results.write_host(str(tmp_path), rid, "gpu-a01", record(rid))
    assert path.endswith("bench/20261129T160000Z/gpu-a01.json")
    with open(path) as handle:
        assert json.load(handle)["verdict"] == "PASS"
    with pytest.raises(FileExistsError):
        results.write_host(str(tmp_path), rid, "gpu-a01", record(rid, "FAIL"))
    assert host_record.read_host(str(tmp_path), rid, "gpu-a01")["verdict"] == "PASS"
    assert host_record.read_run(str(tmp_path), rid) == {"gpu-a01": record(rid)}
    with pytest.raises(ValueError, match="cannot be a file name"):
        results.write_host(str(tmp_path), rid, "../x", {})


def test_last_passing_skips_failed_and_later_runs(tmp_path):
    root = str(tmp_path)
    assert host_record.last_passing(root, "gpu-a01") is None
    for rid, verdict in (
        ("20261129T100000Z", "PASS"),
        ("20261129T110000Z", "PASS"),
        ("20261129T120000Z", "FAIL"),
        ("20261129T130000Z", "WARN"),
    ):
        results.reserve_run(root, rid)
        results.write_host(root, rid, "gpu-a01", record(rid, verdict))
    rid, rec = host_record.last_passing(root, "gpu-a01")
    assert rid == "20261129T110000Z" and rec["verdict"] == "PASS"
    assert (
        host_record.last_passing(root, "gpu-a01", before_run_id="20261129T110000Z")[0] == "20261129T100000Z"
    )
    assert host_record.last_passing(root, "gpu-b07") is None


def test_same_run_is_no_finding():
    base = record("20261129T100000Z")
    assert host_record.compare(record("20261129T110000Z"), base) == []


def test_link_class_changed():
    base = record("20261129T100000Z")
    cur = record("20261129T110000Z", links=[{"a": "GPU1", "b": "GPU0", "class": "SYS"}])
    found = host_record.compare(cur, base)
    assert [f["code"] for f in found] == ["baseline_link_changed"]
    assert found[0]["severity"] == "critical" and found[0]["gpus"] == [0, 1]
    assert "from NV18 to SYS" in found[0]["message"] and "20261129T100000Z" in found[0]["message"]


def test_gpu_missing():
    base = record("20261129T100000Z", gpus=2)
    cur = record("20261129T110000Z", gpus=1, links=[])
    found = host_record.compare(cur, base)
    assert [f["code"] for f in found] == ["baseline_gpu_missing"]
    assert "GPU-0001" in found[0]["message"] and found[0]["gpus"] == [1]


@pytest.mark.parametrize("drop,findings", [(0.15, 1), (0.05, 0), (0.10, 0), (0.11, 1)])
def test_busbw_drop_tolerance(drop, findings):
    base = record("20261129T100000Z", busbw=300.0)
    cur = record("20261129T110000Z", busbw=300.0 * (1 - drop))
    found = host_record.compare(cur, base, tolerance=0.10)
    assert len(found) == findings
    if findings:
        assert found[0]["code"] == "baseline_busbw_drop"
        assert f"{round(drop * 100)}% below" in found[0]["message"]


def test_tolerance_is_overridable_and_checked():
    base = record("20261129T100000Z", busbw=300.0)
    cur = record("20261129T110000Z", busbw=255.0)
    assert host_record.compare(cur, base, tolerance=0.2) == []
    with pytest.raises(ValueError, match="bench_baseline_tolerance"):
        host_record.compare(cur, base, tolerance=10)


def test_torch_drop_compared_at_largest_common_size():
    base = record("20261129T100000Z", torch_busbw=1.0)
    cur = record("20261129T110000Z", torch_busbw=0.5)
    found = host_record.compare(cur, base)
    assert [f["code"] for f in found] == ["baseline_busbw_drop"]
    assert found[0]["message"].startswith("torch multi_node")
    other = copy.deepcopy(cur)
    other["torch"]["multi_node"]["world_size"] = 2  # a different cluster shape is not comparable
    assert host_record.compare(other, base) == []


# ---------------------------------------------------------------- trust (issue 23: items 4, 5, 6, 9)
H200_TOPO = {
    "gpus": [
        {"index": i, "uuid": f"GPU-{i:04d}", "name": "NVIDIA H200", "nvlink": {"speed_gbps": 26.562}}
        for i in range(2)
    ],
    "links": [{"a": "GPU0", "b": "GPU1", "class": "NV18"}],
}
CAPTURE = (
    pathlib.Path(__file__).resolve().parents[1]
    / "fixtures"
    / "nccltests"
    / "h200x2_v2.19.6_all_reduce_perf.txt"
)
ROW_8G = (
    "  8589934592    2147483648     float     sum      -1  24945.4  344.35  344.35       0  "
    "24708.0  347.66  347.66"
)


def _node(busbw_8g=None):
    """The 2x H200 all_reduce capture, its 8 GiB row's busbw replaced when given."""
    text = CAPTURE.read_text()
    if busbw_8g is not None:
        assert ROW_8G in text
        text = text.replace(
            ROW_8G,
            f"  8589934592    2147483648     float     sum      -1  24945.4  344.35  {busbw_8g}       0  "
            f"24708.0  347.66  {busbw_8g}",
        )
    return {"topology": H200_TOPO, "nccl_tests": {"all_reduce": {"output": text, "rc": 0}}}


@pytest.mark.parametrize("absurd", ["347660.00", "inf", "nan"])
def test_an_absurd_figure_fails_as_implausible_and_never_becomes_the_baseline(tmp_path, absurd):
    root = str(tmp_path)
    host_record.store_run(root, "20261201T010000Z", {"gpu-a01": _node()})  # healthy: the baseline
    _, _, recs = host_record.store_run(root, "20261201T020000Z", {"gpu-a01": _node(absurd)})
    rec = recs["gpu-a01"]
    if absurd == "nan":
        # nccl-tests' nan is no figure: the verdict falls back to the 4 GiB row (a real one).
        assert rec["collectives"]["all_reduce"]["verdict"]["size"] == 4 << 30
        return
    v = rec["collectives"]["all_reduce"]["verdict"]
    assert v["verdict"] == "FAIL" and v["reason"].startswith("FAIL (implausible: ")
    assert "478.1 GB/s the NV18 link can carry" in v["reason"] or "not a finite number" in v["reason"]
    assert rec["verdict"] == "FAIL"
    assert any(f["code"] == "bench_implausible" for f in rec["findings"])
    # Stored as strict JSON (no Infinity), and the next healthy run still compares with the healthy one.
    text = (tmp_path / "bench" / "20261201T020000Z" / "gpu-a01.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} stored"))
    _, _, again = host_record.store_run(root, "20261201T030000Z", {"gpu-a01": _node()})
    assert again["gpu-a01"]["verdict"] == "PASS", again["gpu-a01"]["findings"]
    assert again["gpu-a01"]["baseline"]["run_id"] == "20261201T010000Z"


def test_an_implausible_pass_stored_before_is_not_a_baseline(tmp_path):
    # A record an older wireup stored: PASS at 347,660 GB/s (100,993% of expected).
    root = str(tmp_path)
    old = record("20261201T010000Z", busbw=347660.0)
    old["collectives"]["all_reduce"]["expected"] = {"link_gbps": 478.116, "link_class": "NV18"}
    old["collectives"]["all_reduce"]["verdict"]["measured_busbw"] = 347660.0
    (tmp_path / "bench" / "20261201T010000Z").mkdir(parents=True)
    (tmp_path / "bench" / "20261201T010000Z" / "gpu-a01.json").write_text(json.dumps(old))
    base, damaged = host_record.baseline_of(root, "gpu-a01")
    assert base is None
    [finding] = damaged
    assert finding["code"] == "baseline_record_damaged" and "implausible" not in finding["message"][:0]
    assert (
        "20261201T010000Z/gpu-a01.json: collectives.all_reduce: 347,660.0 GB/s is above" in finding["message"]
    )
    _, _, recs = host_record.store_run(root, "20261201T020000Z", {"gpu-a01": _node()})
    assert recs["gpu-a01"]["verdict"] == "PASS"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[]", "is a list, not a host record"),
        ('"PASS"', "is a string, not a host record"),
        ('{"verdict": "PASS", "collectives": []}', "collectives is a list, not an object"),
        ('{"verdict": "PASS", "collectives": {"all_reduce": {"rows": "x"}}}', "rows is a string, not a list"),
        ('{"verdict": "PASS", "topology": {"gpus": [1]}}', "topology.gpus is not a list of objects"),
        ('{"verdict": "PASS", "torch": {"multi_node": {"rows": [{"size": 1, "in_place": {"busbw": "9"}}]}}}',
         "busbw is a string, not a number"),
        ('{"verdict": "PASS", "stepcost": {"single_node": [{"hooks": []}]}}', "hooks is not an object"),
        ('{"verdict": "PASS", "collectives": {"all_reduce": {"rows": [{"size": 8, '
         '"in_place": {"busbw": Infinity}}]}}}',
         "not valid JSON (Infinity is not a JSON number"),
        ('{"verdict": "PA', "not valid JSON"),
        ("", "empty (a write cut off"),
    ],
)  # fmt: skip
def test_a_damaged_earlier_record_is_a_named_finding_and_the_run_goes_on(tmp_path, text, said):
    root = str(tmp_path)
    folder = tmp_path / "bench" / "20261201T010000Z"
    folder.mkdir(parents=True)
    (folder / "gpu-a01.json").write_text(text)
    run_id, _, recs = host_record.store_run(root, "20261201T020000Z", {"gpu-a01": _node()})
    rec = recs["gpu-a01"]
    # Nothing was compared: this PASS is the host's baseline now (issue 38).
    assert rec["verdict"] == "PASS" and rec["baseline"] == {"state": "recorded", "run_id": ""}
    [finding] = [f for f in rec["findings"] if f["code"] == "baseline_record_damaged"]
    assert finding["severity"] == "warning" and str(folder / "gpu-a01.json") in finding["message"]
    assert said in finding["message"]
    assert (tmp_path / "bench" / run_id / "gpu-a01.json").is_file()


def test_a_baseline_that_breaks_the_comparison_deeper_down_is_dropped_and_named(tmp_path):
    root = str(tmp_path)
    folder = tmp_path / "bench" / "20261201T010000Z"
    folder.mkdir(parents=True)
    odd = record("20261201T010000Z")
    odd["topology"]["links"] = [{"a": ["GPU0"], "b": "GPU1", "class": "NV18"}]  # unhashable a
    (folder / "gpu-a01.json").write_text(json.dumps(odd))
    _, _, recs = host_record.store_run(root, "20261201T020000Z", {"gpu-a01": _node()})
    [finding] = [f for f in recs["gpu-a01"]["findings"] if f["code"] == "baseline_record_damaged"]
    assert "TypeError in the comparison" in finding["message"] and recs["gpu-a01"]["verdict"] == "PASS"


def test_a_run_that_stores_nothing_leaves_no_empty_folder(tmp_path):
    with pytest.raises(ValueError, match="bench_pass_ratio"):
        host_record.store_run(
            str(tmp_path), "20261201T020000Z", {"a": dict(_node(), thresholds={"pass_ratio": 9})}
        )
    assert results.list_runs(str(tmp_path)) == []


def test_records_are_written_atomically_and_strict(tmp_path, monkeypatch):
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile

    rid, _ = results.reserve_run(str(tmp_path), "20261201T020000Z")

    # A full disk at the fsync: no file at the final name, no temporary file left.
    def full(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomicfile.os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        results.write_host(str(tmp_path), rid, "gpu-a01", record(rid))
    assert list((tmp_path / "bench" / rid).iterdir()) == []
    monkeypatch.undo()
    path = results.write_host(
        str(tmp_path), rid, "gpu-a01", dict(record(rid), odd=[float("inf"), float("nan")])
    )
    assert json.loads(pathlib.Path(path).read_text())["odd"] == [None, None]
    with pytest.raises(FileExistsError):
        results.write_host(str(tmp_path), rid, "gpu-a01", record(rid))


# One rule for "the figure of a collective at a size": the verdict, the baseline comparison, the
# report and the tuning read the same number (issue 23 item 9).
def _row(size, dtype, op, oop, ip):
    return {
        "size": size, "count": 1, "type": dtype, "redop": op, "root": -1,
        "out_of_place": {"time_us": 1.0, "algbw": oop, "busbw": oop, "wrong": 0, "error": None},
        "in_place": {"time_us": 1.0, "algbw": ip, "busbw": ip, "wrong": None, "error": None},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("collective", "rows", "figure"),
    [
        # alltoall: nccl-tests validates no in-place half; its 300 is not a figure.
        ("alltoall", [_row(1 << 30, "float", "none", 100.0, 300.0)], 100.0),
        # -d all: int8 comes first at the size; float/sum is the figure.
        ("all_reduce",
         [_row(1 << 30, "int8", "sum", 40.0, 40.0), _row(1 << 30, "float", "sum", 95.0, 96.0)], 96.0),
    ],
)  # fmt: skip
def test_verdict_baseline_report_and_tuning_read_one_figure(collective, rows, figure):
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import links
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import bandwidth
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench

    for r in rows:
        r["in_place"]["wrong"] = 0 if collective != "alltoall" else None
    exp = {"expected_busbw": 100.0, "collective": collective, "link_gbps": 478.0}
    verdict = bandwidth.verdict(rows, exp, collective=collective)
    size = 1 << 30
    cur = {"collectives": {collective: {"rows": rows, "verdict": verdict}}}
    base = {"run_id": "B", "collectives": {collective: {"rows": [dict(r) for r in rows], "verdict": verdict}}}
    base["collectives"][collective]["rows"] = [
        {**r, "out_of_place": {**r["out_of_place"], "busbw": r["out_of_place"]["busbw"] * 2}} for r in rows
    ]
    [drop] = host_record.compare(cur, base)
    seen = {
        "verdict": verdict["measured_busbw"],
        "baseline": float(re.search(r"busbw ([0-9.]+) GB/s", drop["message"]).group(1)),
        "report": links.largest_figure(rows, collective)[1],
    }
    if collective == "all_reduce":
        text = "\n".join(
            f"{r['size']} {r['count']} {r['type']} {r['redop']} -1 1.0 {r['out_of_place']['algbw']} "
            f"{r['out_of_place']['busbw']} 0 1.0 {r['in_place']['algbw']} {r['in_place']['busbw']} 0"
            for r in rows
        )
        header = (
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
        )
        seen["tuning"] = bench._busbw_at_top(header + text + "\n# Avg bus bandwidth    : 1\n")
    assert seen == dict.fromkeys(seen, figure), seen
    assert verdict["size"] == size
