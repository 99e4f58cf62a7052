"""Records built from the 2x H200 captures, and the report written from them."""

import base64
import copy
import pathlib
import re

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import topology
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
H200 = ROOT / "h200x2"
NCCL = ROOT / "nccltests"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def h200_topology():
    def read(name):
        return (H200 / name).read_text()

    topo = topology.build_topology(
        topo_m=read("topo_m.txt"),
        p2p={"r": read("topo_p2p_r.txt")},
        nvlink_s=read("nvlink_s.txt"),
        query_csv=read("query_gpu.csv"),
    )
    topo["findings"] = [{"severity": "info", "code": "example", "gpus": [], "message": "an info finding"}]
    topo["raw"] = {"topo_m": "big text"}
    return topo


def node(all_reduce="h200x2_v2.19.6_all_reduce_perf.txt", env=None):
    return {
        "topology": h200_topology(),
        "nccl_tests": {
            "all_reduce": {"output": (NCCL / all_reduce).read_text(), "rc": 0},
            "all_gather": {"output": (NCCL / "h200x2_v2.19.6_all_gather_perf.txt").read_text(), "rc": 0},
            "reduce_scatter": {
                "output": (NCCL / "h200x2_v2.19.6_reduce_scatter_perf.txt").read_text(),
                "rc": 0,
            },
            "alltoall": {"output": "Failed: NCCL error alltoall.cu:81 'unhandled cuda error'\n", "rc": 1},
        },
        "torch": {"multi_node": (NCCL / "torch_allreduce_gloo_3ranks.txt").read_text()},
        "env": env or {"NCCL_NVLS_ENABLE": "0"},
        "versions": {"nccl_tests": "v2.19.6", "nccl": "2.28.9"},
        "thresholds": {"pass_ratio": 0.9, "warn_ratio": 0.75, "min_bytes": 1 << 30, "tolerance": 0.1},
    }


def good_node():
    n = node()
    del n["nccl_tests"]["alltoall"]
    return n


def test_record_from_h200_captures():
    rec = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    assert rec["verdict"] == "PASS"
    assert rec["collectives"]["all_reduce"]["verdict"]["verdict"] == "PASS"
    assert rec["collectives"]["all_reduce"]["expected"]["expected_busbw"] == pytest.approx(344.24, abs=0.01)
    assert rec["collectives"]["all_reduce"]["nccl_version"] == "2.28.9"
    assert rec["torch"]["multi_node"]["world_size"] == 3
    assert "raw" not in rec["topology"] and "findings" not in rec["topology"]
    assert [f["source"] for f in rec["findings"]] == ["topology"]


def test_failed_binary_and_degraded_rerun_fail_against_expectation_and_baseline():
    base = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    rerun = node("h200x2_v2.19.6_all_reduce_perf_p2p_disabled.txt", env={"NCCL_P2P_DISABLE": "1"})
    rec = host_record.build_record("gpu-a01", "20261129T110000Z", rerun, ("20261129T100000Z", base))
    assert rec["verdict"] == "FAIL"
    assert rec["collectives"]["alltoall"]["verdict"]["verdict"] == "FAIL"
    assert rec["collectives"]["alltoall"]["verdict"]["reason"] == (
        "alltoall_perf failed: exit code 1: testInternalError; "
        "\"Failed: NCCL error alltoall.cu:81 'unhandled cuda error'\"; no result rows"
    )
    codes = {(f["source"], f["code"]) for f in rec["findings"]}
    assert ("expectation", "bench_below_expected") in codes
    assert ("baseline", "baseline_busbw_drop") in codes
    assert rec["baseline"] == {"state": "compared", "run_id": "20261129T100000Z"}
    assert "NCCL_P2P_DISABLE=1" not in assemble.summary_line(rec)
    line = assemble.summary_line(rec)
    assert line.startswith("gpu-a01: FAIL, compared with run 20261129T100000Z - all_gather PASS"), line


def test_skipped_gpu_less_node_is_na():
    rec = host_record.build_record("cpu-1", "20261129T100000Z", {"skipped": "no NVIDIA GPU"})
    assert rec["verdict"] == "N/A"
    assert assemble.summary_line(rec) == (
        "cpu-1: N/A, nothing compared (no passing run to compare with) - no NVIDIA GPU"
    )


def _run(tmp_path, records):
    out = assemble.write_report(str(tmp_path), "20261129T110000Z", records)
    return out, pathlib.Path(out["md"]).read_text(), pathlib.Path(out["html"]).read_text()


def test_report_files_html_self_contained_png_valid(tmp_path):
    pytest.importorskip("matplotlib")
    base = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    bad = host_record.build_record(
        "gpu-a01",
        "20261129T110000Z",
        node("h200x2_v2.19.6_all_reduce_perf_p2p_disabled.txt"),
        ("20261129T100000Z", base),
    )
    cpu = host_record.build_record("cpu-1", "20261129T110000Z", {"skipped": "no NVIDIA GPU"})
    _, md, page = _run(tmp_path, {"gpu-a01": bad, "cpu-1": cpu})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["busbw_gpu-a01.png", "report.html", "report.md", "topology_gpu-a01.png", "torch.png"]
    for png in tmp_path.glob("*.png"):
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
    # Markdown: summary, verdict table, findings against expectation and baseline, plots linked.
    assert "| gpu-a01 | FAIL | 2 | NV18 |" in md
    assert "| cpu-1 | N/A |" in md
    assert "baseline_busbw_drop" in md and "bench_below_expected" in md
    assert "![busbw and latency vs size on gpu-a01](busbw_gpu-a01.png)" in md
    assert "torch.distributed all_reduce" in md
    # HTML: every image inline, nothing fetched from elsewhere.
    images = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(images) == 3
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
    assert not re.search(r'(?:src|href)="(?!data:)', page)
    assert '<td class="FAIL">FAIL</td>' in page


def test_report_without_matplotlib_still_written(tmp_path, monkeypatch):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    rec = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    out, md, page = _run(tmp_path, {"gpu-a01": rec})
    assert out["pngs"] == [] and not out["plots"]
    assert "Plots skipped: matplotlib is not installed" in md
    assert "<img" not in page


def test_report_escapes_html(tmp_path, monkeypatch):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    rec = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    rec = copy.deepcopy(rec)
    rec["findings"].append({"severity": "warning", "code": "x", "message": "<script>alert(1)</script>"})
    _, _, page = _run(tmp_path, {"gpu-a01": rec})
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_json_output_preferred_and_failed_host():
    n = good_node()
    n["nccl_tests"]["all_reduce"]["json"] = (NCCL / "h200x2_v2.19.6_all_reduce_perf.json").read_text()
    rec = host_record.build_record("gpu-a01", "20261129T100000Z", n)
    coll = rec["collectives"]["all_reduce"]
    assert coll["format"] == "json" and coll["nccl_tests_version"] == "2.19.6"
    assert coll["verdict"]["measured_busbw"] == pytest.approx(347.65823)
    failed = host_record.build_record(
        "gpu-a02", "20261129T100000Z", {"failed": True, "skipped": "no bench data"}
    )
    assert failed["verdict"] == "FAIL"


def test_store_run_compares_with_last_pass(tmp_path):
    root = str(tmp_path)
    rid, _, recs = host_record.store_run(root, "20261129T100000Z", {"gpu-a01": good_node()})
    assert recs["gpu-a01"]["verdict"] == "PASS"
    assert recs["gpu-a01"]["baseline"] == {"state": "recorded", "run_id": ""}
    bad = node("h200x2_v2.19.6_all_reduce_perf_p2p_disabled.txt")
    rid2, run_dir, recs = host_record.store_run(root, "20261129T100000Z", {"gpu-a01": bad})
    assert rid2 == "20261129T100000Z-2"  # same second: a new folder, the first run untouched
    assert recs["gpu-a01"]["baseline"] == {"state": "compared", "run_id": rid}
    assert any(f["code"] == "baseline_busbw_drop" for f in recs["gpu-a01"]["findings"])
    assert (pathlib.Path(run_dir) / "gpu-a01.json").exists()
    assert host_record.read_host(root, rid, "gpu-a01")["verdict"] == "PASS"


def test_summary_line_of_a_cpu_node_with_the_cluster_run():
    n = {
        "skipped": "no NVIDIA GPU: GPU benchmarks skipped",
        "torch": {"multi_node": (NCCL / "torch_allreduce_gloo_3ranks.txt").read_text()},
    }
    line = assemble.summary_line(host_record.build_record("node1", "20261129T100000Z", n))
    # Issue 12: a GPU-less node is judged on its gloo run (it used to be N/A forever).
    assert line.startswith(
        "node1: PASS, baseline recorded (first passing run: nothing compared) - no NVIDIA GPU: GPU "
        "benchmarks skipped; torch multi_node (3 ranks, gloo)"
    )
    assert "GB/s at 4M" in line
    assert line.endswith("findings 0 critical/0 warning")


# --- issue 12, item 6: a GPU-less node's verdict, against its own history ---------------------------
GLOO = (NCCL / "torch_allreduce_gloo_3ranks.txt").read_text()


def _cpu_node(text=GLOO):
    return {"skipped": "no NVIDIA GPU: GPU benchmarks skipped", "torch": {"multi_node": text}}


def _scaled(text, factor):
    """The same capture with every result line's busbw and algbw scaled (a slower rerun)."""
    import json as _json

    out = []
    for line in text.splitlines():
        if line.startswith("{") and '"wireup_bench"' in line:
            data = _json.loads(line)
            data["busbw"] *= factor
            data["algbw"] *= factor
            out.append(_json.dumps(data))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def test_gpu_less_node_passes_then_is_compared_with_its_last_pass(tmp_path):
    root = str(tmp_path)
    first_id, _, first = host_record.store_run(root, "20261129T100000Z", {"node1": _cpu_node()})
    assert first["node1"]["verdict"] == "PASS"
    _, _, again = host_record.store_run(root, "20261129T110000Z", {"node1": _cpu_node()})
    rec = again["node1"]
    assert rec["verdict"] == "PASS" and rec["baseline"]["run_id"] == first_id
    assert rec["baseline"]["torch"]["multi_node"]["change"] == pytest.approx(0.0)
    line = assemble.summary_line(rec)
    assert line.startswith(f"node1: PASS, compared with run {first_id} - "), line
    assert line.endswith("GB/s at 4M, +0%") and f"; against run {first_id}: torch multi_node " in line, line


def test_gpu_less_node_slower_than_its_last_pass_warns(tmp_path):
    root = str(tmp_path)
    host_record.store_run(root, "20261129T100000Z", {"node1": _cpu_node()})
    _, _, slow = host_record.store_run(root, "20261129T110000Z", {"node1": _cpu_node(_scaled(GLOO, 0.5))})
    rec = slow["node1"]
    assert rec["verdict"] == "WARN", rec["findings"]
    [drop] = [f for f in rec["findings"] if f["code"] == "baseline_busbw_drop"]
    assert drop["severity"] == "warning" and "50% below" in drop["message"]
    assert assemble.summary_line(rec).endswith("-50%")
    # A WARN is no baseline: the next run is still compared with the first.
    _, _, third = host_record.store_run(root, "20261129T120000Z", {"node1": _cpu_node()})
    assert third["node1"]["baseline"]["run_id"] == "20261129T100000Z"


def test_gpu_less_node_without_a_measurement_stays_na():
    rec = host_record.build_record(
        "node2", "20261129T100000Z", {"skipped": "no NVIDIA GPU: GPU benchmarks skipped"}
    )
    assert rec["verdict"] == "N/A"


def test_a_gpu_node_is_not_judged_as_gpu_less():
    rec = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    assert not results.is_gpu_less(rec)
    assert "torch" not in rec["baseline"]


# --- issue 23 item 10, issue 28 item 3 ------------------------------------------------------------
def test_report_md_escapes_what_nodes_said(tmp_path, monkeypatch):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    rec = copy.deepcopy(host_record.build_record("gpu-a01", "20261129T100000Z", good_node()))
    rec["findings"].append(
        {"severity": "warning", "code": "x", "message": "<script>alert(1)</script> [a](javascript:b)\n# h"}
    )
    rec["versions"]["nccl"] = "<img src=x onerror=alert(1)>"
    _, md, page = _run(tmp_path, {"gpu-a01": rec})
    assert "<script>" not in md and "<img" not in md and "](javascript" not in md.replace("\\](", "")
    assert "&lt;script>alert(1)&lt;/script> \\[a\\](javascript:b) # h |" in md
    assert "<script>" not in page and "<img src=x" not in page and "&lt;img src=x" in page


def test_report_says_what_each_kind_of_node_was_judged_on(tmp_path, monkeypatch):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    cpus = {
        h: host_record.build_record(h, "20261129T100000Z", _cpu_node()) for h in ("node1", "node2", "node3")
    }
    _, md, _ = _run(tmp_path, cpus)
    opening = md.split("\n\n")[1]
    assert "GPU" not in opening.replace("no GPU", "").replace("not against a GPU link", ""), opening
    assert "(node1, node2, node3: no GPU) are taken on the torch.distributed gloo all-reduce" in opening
    gpu = host_record.build_record("gpu-a01", "20261129T100000Z", good_node())
    _, md, _ = _run(tmp_path, {"gpu-a01": gpu})
    assert "Verdicts are taken at the largest message size >= 1 GiB against the expected bus bandwidth" in md
    _, md, _ = _run(tmp_path, {"gpu-a01": gpu, **cpus})
    opening = md.split("\n\n")[1]
    assert "GPU nodes' verdicts (1) are taken at the largest" in opening
    assert "GPU-less nodes' verdicts (node1, node2, node3: no GPU)" in opening
