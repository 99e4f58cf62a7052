"""Results store (one folder per run, never overwritten) and baseline comparison."""

import copy
import json

import pytest

from wireup import results


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
    assert results.read_host(str(tmp_path), rid, "gpu-a01")["verdict"] == "PASS"
    assert results.read_run(str(tmp_path), rid) == {"gpu-a01": record(rid)}
    with pytest.raises(ValueError, match="cannot be a file name"):
        results.write_host(str(tmp_path), rid, "../x", {})


def test_last_passing_skips_failed_and_later_runs(tmp_path):
    root = str(tmp_path)
    assert results.last_passing(root, "gpu-a01") is None
    for rid, verdict in (
        ("20261129T100000Z", "PASS"),
        ("20261129T110000Z", "PASS"),
        ("20261129T120000Z", "FAIL"),
        ("20261129T130000Z", "WARN"),
    ):
        results.reserve_run(root, rid)
        results.write_host(root, rid, "gpu-a01", record(rid, verdict))
    rid, rec = results.last_passing(root, "gpu-a01")
    assert rid == "20261129T110000Z" and rec["verdict"] == "PASS"
    assert results.last_passing(root, "gpu-a01", before_run_id="20261129T110000Z")[0] == "20261129T100000Z"
    assert results.last_passing(root, "gpu-b07") is None


def test_same_run_is_no_finding():
    base = record("20261129T100000Z")
    assert results.compare(record("20261129T110000Z"), base) == []


def test_link_class_changed():
    base = record("20261129T100000Z")
    cur = record("20261129T110000Z", links=[{"a": "GPU1", "b": "GPU0", "class": "SYS"}])
    found = results.compare(cur, base)
    assert [f["code"] for f in found] == ["baseline_link_changed"]
    assert found[0]["severity"] == "critical" and found[0]["gpus"] == [0, 1]
    assert "from NV18 to SYS" in found[0]["message"] and "20261129T100000Z" in found[0]["message"]


def test_gpu_missing():
    base = record("20261129T100000Z", gpus=2)
    cur = record("20261129T110000Z", gpus=1, links=[])
    found = results.compare(cur, base)
    assert [f["code"] for f in found] == ["baseline_gpu_missing"]
    assert "GPU-0001" in found[0]["message"] and found[0]["gpus"] == [1]


@pytest.mark.parametrize("drop,findings", [(0.15, 1), (0.05, 0), (0.10, 0), (0.11, 1)])
def test_busbw_drop_tolerance(drop, findings):
    base = record("20261129T100000Z", busbw=300.0)
    cur = record("20261129T110000Z", busbw=300.0 * (1 - drop))
    found = results.compare(cur, base, tolerance=0.10)
    assert len(found) == findings
    if findings:
        assert found[0]["code"] == "baseline_busbw_drop"
        assert f"{round(drop * 100)}% below" in found[0]["message"]


def test_tolerance_is_overridable_and_checked():
    base = record("20261129T100000Z", busbw=300.0)
    cur = record("20261129T110000Z", busbw=255.0)
    assert results.compare(cur, base, tolerance=0.2) == []
    with pytest.raises(ValueError, match="bench_baseline_tolerance"):
        results.compare(cur, base, tolerance=10)


def test_torch_drop_compared_at_largest_common_size():
    base = record("20261129T100000Z", torch_busbw=1.0)
    cur = record("20261129T110000Z", torch_busbw=0.5)
    found = results.compare(cur, base)
    assert [f["code"] for f in found] == ["baseline_busbw_drop"]
    assert found[0]["message"].startswith("torch multi_node")
    other = copy.deepcopy(cur)
    other["torch"]["multi_node"]["world_size"] = 2  # a different cluster shape is not comparable
    assert results.compare(other, base) == []
