"""Issue 11 items 6-9: the environment of every figure, the tuned env file (origin, staleness),
torch vs nccl-tests like for like, ratios to the raw link, and the report's text and plots."""

import calendar
import copy
import importlib.util
import json
import pathlib
import time

import pytest
from test_report import NCCL, good_node, h200_topology

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import torch_report
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import benchenv
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble

REPO = pathlib.Path(__file__).resolve().parents[2]
HEALTHY = REPO / "tests" / "fixtures" / "h200x2" / "bench_record_2026-11-29_healthy.json"
ONE_GPU = "h200x1_v2.19.6_all_reduce_perf_1gpu"
DRIVER, NCCL_VERSION = "580.159.04", "2.28.9"
WRITTEN = "2026-11-30T12:00:00Z"
WRITTEN_S = calendar.timegm(time.strptime(WRITTEN, "%Y-%m-%dT%H:%M:%SZ"))
DEVICE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def tuned_text(nccl=NCCL_VERSION, written=WRITTEN):
    return benchenv.tuned_env_file(
        {"NCCL_MIN_NCHANNELS": "32"},
        {
            "run_id": "20261130T120000Z",
            "host": "gpu-a01",
            "written": written,
            "driver": DRIVER,
            "nccl": nccl,
            "nccl_tests": "v2.19.6",
            "size": "8G",
            "busbw": 360.4,
            "default_busbw": 350.0,
        },
    )


def torch_log(env=None, tuned=""):
    """The single-node torch benchmark's output on 2x H200 (rows of the healthy 2026-11-29 bench record,
    torch 2.11.0+cu130), preceded by the environment line the script now prints."""
    rows = json.loads(HEALTHY.read_text())["torch"]["single_node"]["rows"]
    lines = [
        json.dumps(
            {"wireup_bench_env": env or dict(DEVICE_ENV, NCCL_SOCKET_IFNAME="eth0"), "tuned_env": tuned}
        )
    ]
    for row in rows:
        sec = row["in_place"]
        lines.append(
            json.dumps(
                {
                    "wireup_bench": "torch_allreduce",
                    "size": row["size"],
                    "count": row["count"],
                    "dtype": "float32",
                    "time_us": sec["time_us"],
                    "algbw": sec["algbw"],
                    "busbw": sec["busbw"],
                    "wrong": sec["wrong"],
                    "world_size": 2,
                    "nnodes": 1,
                    "backend": "nccl",
                    "warmup": 5,
                    "iters": 20,
                    "torch_version": "2.11.0+cu130",
                    "nccl_version": "2.28.9",
                }
            )
        )
    return "\n".join(lines) + "\n"


def gpu_node(*, tuned_used=False, tuned_file=None, changes=(), torch=None, nccl=NCCL_VERSION):
    n = good_node()
    n["versions"] = {"driver": DRIVER, "nccl": nccl, "nccl_tests": "v2.19.6"}
    given = dict(DEVICE_ENV, LD_LIBRARY_PATH="/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib")
    if tuned_used:
        given = dict({"NCCL_MIN_NCHANNELS": "32"}, **given)
    n["figure_env"] = {
        "nccl_tests": given,
        "torch": dict(({"NCCL_MIN_NCHANNELS": "32"} if tuned_used else {}), **DEVICE_ENV),
        "tuned_used": tuned_used,
        "tuned_text": tuned_file if tuned_used else "",
    }
    n["tuned_env"] = {
        "path": "/opt/wireup/nccl-tuned.env",
        "text": tuned_file,
        "mtime": WRITTEN_S,
        "package_lists": [],
        "files": [
            {"item": {"what": what, "path": path}, "stat": {"exists": True, "mtime": mtime}}
            for what, path, mtime in changes
        ],
    }
    n["torch"] = {"single_node": torch if torch is not None else torch_log()}
    return n


# ---------------------------------------------------------------- the tuned env file
def test_tuned_env_file_round_trip_and_origin():
    text = tuned_text()
    assert "{" not in text and "NCCL_MIN_NCHANNELS=32\n" in text
    parsed = benchenv.parse_tuned_env(text)
    assert parsed["values"] == {"NCCL_MIN_NCHANNELS": "32"}
    assert parsed["origin"]["written"] == WRITTEN and parsed["origin"]["run_id"] == "20261130T120000Z"
    assert parsed["origin"]["driver"] == DRIVER and parsed["origin"]["nccl"] == NCCL_VERSION
    odd = benchenv.tuned_env_file({"NCCL_ALGO": "Ring Tree"}, {"host": "it's"})
    assert benchenv.parse_tuned_env(odd) == {"values": {"NCCL_ALGO": "Ring Tree"}, "origin": {"host": "it's"}}
    with pytest.raises(ValueError, match="shell names"):
        benchenv.tuned_env_file({"NCCL-X": "1"}, {})


def test_hand_written_tuned_env_is_read_like_the_shell_does():
    parsed = benchenv.parse_tuned_env("# mine\nexport NCCL_ALGO='Tree'\nNCCL_PROTO=Simple\nnot a line\n=x\n")
    assert parsed == {"values": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}, "origin": {}}
    state = benchenv.tuned_env_state("/x", "NCCL_ALGO=Tree\n", mtime=WRITTEN_S)
    assert state["written"] == WRITTEN and not state["stale"] and "no origin line" in state["origin_note"]


@pytest.mark.parametrize(
    ("nccl_now", "changes", "stale", "reason"),
    [
        (NCCL_VERSION, [], False, None),
        ("2.29.1", [], True, "measured with NCCL 2.28.9, NCCL 2.29.1 now"),
        # pip reinstalled the same NCCL after the file was written: its libnccl.so.2 is newer.
        (
            NCCL_VERSION,
            [("nccl", "/venv/nvidia/nccl/lib/libnccl.so.2", WRITTEN_S + 3600)],
            True,
            "NCCL change",
        ),
        (NCCL_VERSION, [("nccl", "/venv/nvidia/nccl/lib/libnccl.so.2", WRITTEN_S - 3600)], False, None),
        (NCCL_VERSION, [("driver", "/usr/bin/nvidia-smi", WRITTEN_S + 60)], True, "driver change"),
    ],
)
def test_stale_by_version_or_date(nccl_now, changes, stale, reason):
    probes = benchenv.change_probes(
        [],
        [{"item": {"what": w, "path": p}, "stat": {"exists": True, "mtime": m}} for w, p, m in changes],
    )
    state = benchenv.tuned_env_state(
        "/opt/wireup/nccl-tuned.env",
        tuned_text(),
        versions={"driver": DRIVER, "nccl": nccl_now},
        changes=benchenv.last_changes(probes),
    )
    assert state["stale"] is stale
    if reason:
        assert any(reason in r for r in state["stale_reasons"]), state["stale_reasons"]
        assert "STALE" in benchenv.describe_tuned(state)


def test_last_change_from_dpkg_lists_and_binaries():
    lists = [
        {"path": "/var/lib/dpkg/info/libnccl2.list", "mtime": 100.0, "size": 10},
        {"path": "/var/lib/dpkg/info/nvidia-driver-580-open.list", "mtime": 300.0},
        {"path": "/var/lib/dpkg/info/libnvidia-compute-580:amd64.list", "mtime": 200.0},
    ]
    files = [
        {"item": {"what": "nccl", "path": "/v/libnccl.so.2"}, "stat": {"exists": True, "mtime": 150.0}},
        {"item": {"what": "driver", "path": "/usr/bin/nvidia-smi"}, "stat": {"exists": False}},
        {"skipped": True, "item": {"what": "nccl", "path": "/x"}},
    ]
    changes = benchenv.last_changes(benchenv.change_probes(lists, files))
    assert changes["nccl"]["path"] == "/v/libnccl.so.2" and changes["nccl"]["mtime"] == 150.0
    assert changes["driver"]["path"].endswith("nvidia-driver-580-open.list")
    assert changes["driver"]["time"] == "1970-01-01T00:05:00Z"
    assert benchenv.last_changes([]) == {"driver": None, "nccl": None}


# ---------------------------------------------------------------- what a process saw
def test_nccl_json_env_keeps_what_changes_nccl_only():
    seen = benchenv.nccl_json_env((NCCL / f"{ONE_GPU}.json").read_text())
    assert seen["NCCL_NVLS_ENABLE"] == "0" and seen["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert "HOME" not in seen and "PWD" not in seen and "LANG" not in seen
    assert benchenv.nccl_json_env((NCCL / f"{ONE_GPU}.txt").read_text()) is None
    assert benchenv.nccl_json_env("") is None


def test_torch_log_env_line_even_with_noise_glued():
    text = "W1201 noise\n" + torch_log(tuned="/opt/wireup/nccl-tuned.env").replace(
        "\n", " [stderr glued]\n", 1
    )
    seen = benchenv.torch_log_env(text)
    assert seen["tuned_env"] == "/opt/wireup/nccl-tuned.env" and seen["vars"]["NCCL_NVLS_ENABLE"] == "0"
    assert benchenv.torch_log_env((NCCL / "torch_allreduce_gloo_3ranks.txt").read_text()) is None
    # Key order does not matter (an earlier script wrote the line with sort_keys: tuned_env first).
    line = json.dumps({"wireup_bench_env": {"GLOO_SOCKET_IFNAME": "host0"}, "tuned_env": ""}, sort_keys=True)
    assert benchenv.torch_log_env(line) == {"vars": {"GLOO_SOCKET_IFNAME": "host0"}, "tuned_env": ""}


def test_torch_script_ends_at_nccl_tests_largest_size():
    spec = importlib.util.spec_from_file_location("torch_allreduce", REPO / "files/bench/torch_allreduce.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # 1M x 4^k steps over 8G: the old script stopped at 4G; nccl-tests' verdict is at 8G.
    assert script.sizes(1 << 20, 8 << 30, 4)[-2:] == [4 << 30, 8 << 30]
    assert script.sizes(1 << 20, 16 << 20, 4) == [1 << 20, 4 << 20, 16 << 20]
    assert script.RECORDED_PREFIXES == benchenv.RECORDED_PREFIXES


# ---------------------------------------------------------------- the host record
def test_default_run_records_default_env_per_figure_and_unused_tuned_file():
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", gpu_node(tuned_file=tuned_text()))
    for name, coll in rec["collectives"].items():
        assert coll["env"]["mode"] == "default", name
        assert (
            coll["env"]["vars"]["NCCL_NVLS_ENABLE"] == "0" and "NCCL_MIN_NCHANNELS" not in coll["env"]["vars"]
        )
        assert coll["env"]["tuned_file"] is None
    torch = rec["torch"]["single_node"]
    assert torch["env"]["mode"] == "default" and torch["env"]["seen"]["NCCL_SOCKET_IFNAME"] == "eth0"
    assert rec["tuned_env"]["present"] and not rec["tuned_env"]["used"] and not rec["tuned_env"]["stale"]
    assert rec["tuned_env"]["values"] == {"NCCL_MIN_NCHANNELS": "32"}
    # Stored as JSON, the figure's environment goes with it.
    again = json.loads(json.dumps(rec))
    assert again["collectives"]["all_reduce"]["env"]["mode"] == "default"


def test_tuned_run_records_the_file_origin_and_date_per_figure():
    n = gpu_node(
        tuned_used=True, tuned_file=tuned_text(), torch=torch_log(tuned="/opt/wireup/nccl-tuned.env")
    )
    n["nccl_tests"]["all_reduce"]["json"] = (NCCL / "h200x2_v2.19.6_all_reduce_perf.json").read_text()
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    coll = rec["collectives"]["all_reduce"]
    assert coll["env"]["mode"] == "tuned" and coll["env"]["vars"]["NCCL_MIN_NCHANNELS"] == "32"
    assert coll["env"]["tuned_file"]["written"] == WRITTEN
    assert coll["env"]["tuned_file"]["run_id"] == "20261130T120000Z"
    assert coll["env"]["seen"] == {"NCCL_NVLS_ENABLE": "0", "NCCL_VERSION": "2.28.3-1"}  # from -J JSON
    assert rec["torch"]["single_node"]["env"]["mode"] == "tuned"
    assert rec["tuned_env"]["used"]
    assert not [f for f in rec["findings"] if f["code"] == "bench_env_mismatch"]


def test_tuned_env_leaking_into_a_default_figure_is_a_finding():
    n = gpu_node(tuned_file=tuned_text(), torch=torch_log(tuned="/opt/wireup/nccl-tuned.env"))
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    found = [f for f in rec["findings"] if f["code"] == "bench_env_mismatch"]
    assert len(found) == 1 and "bench_use_tuned_env=false" in found[0]["message"]


def test_tuned_figure_whose_process_saw_no_tuned_env_is_a_finding():
    n = gpu_node(tuned_used=True, tuned_file=tuned_text(), torch=torch_log(tuned=""))
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    found = [f for f in rec["findings"] if f["code"] == "bench_env_mismatch"]
    assert len(found) == 1 and "sourced no tuned NCCL env" in found[0]["message"]


def test_stale_tuned_env_is_a_warning_finding():
    n = gpu_node(tuned_file=tuned_text(), changes=[("nccl", "/v/libnccl.so.2", WRITTEN_S + 86400)])
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    found = [f for f in rec["findings"] if f["code"] == "tuned_env_stale"]
    assert len(found) == 1 and found[0]["severity"] == "warning"
    assert "2026-12-01T12:00:00Z" in found[0]["message"] and "bench_nccl_tune=true" in found[0]["message"]
    assert rec["verdict"] == "PASS"  # a warning, not a verdict


def test_raw_link_ratio_beside_the_ratio_to_expected():
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", gpu_node())
    coll = rec["collectives"]["all_reduce"]
    assert coll["of_link"]["link_gbps"] == pytest.approx(478.116)
    assert coll["of_link"]["link_class"] == "NV18"
    assert coll["of_link"]["ratio"] == pytest.approx(coll["verdict"]["measured_busbw"] / 478.116, abs=1e-3)
    assert 0.70 < coll["of_link"]["ratio"] < 0.75
    line = assemble.summary_line(rec)
    assert "of the 478 GB/s NV18 link)" in line


def test_torch_against_nccl_tests_at_the_same_size():
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", gpu_node())
    like = rec["torch"]["single_node"]["vs_nccl_tests"]
    # The healthy run's torch rows end at 1 GiB: compared with nccl-tests' 1 GiB row, not its 8 GiB verdict.
    assert like["size"] == 1 << 30
    assert like["torch_busbw"] == pytest.approx(342.9137)
    assert like["ratio"] == pytest.approx(like["torch_busbw"] / like["nccl_tests_busbw"], abs=1e-3)
    assert like["goal"] == 0.97
    below = [f for f in rec["findings"] if f["code"] == "bench_torch_below_nccl_tests"]
    assert bool(below) == (like["ratio"] < 0.97)
    n = gpu_node()
    n["thresholds"]["torch_goal"] = 1.5
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    below = [f for f in rec["findings"] if f["code"] == "bench_torch_below_nccl_tests"]
    assert len(below) == 1 and "goal >= 150%" in below[0]["message"]


def test_one_gpu_is_na_with_its_reason_not_a_crash(tmp_path):
    topo = h200_topology()
    topo["gpus"] = topo["gpus"][:1]
    topo["links"] = []
    n = {
        "topology": topo,
        "nccl_tests": {
            "all_reduce": {
                "output": (NCCL / f"{ONE_GPU}.txt").read_text(),
                "json": (NCCL / f"{ONE_GPU}.json").read_text(),
                "rc": 0,
            }
        },
        "versions": {"driver": DRIVER, "nccl": NCCL_VERSION},
        "figure_env": {"nccl_tests": DEVICE_ENV, "torch": DEVICE_ENV, "tuned_used": False, "tuned_text": ""},
    }
    rec = host_record.build_record("gpu-1", "20261201T000000Z", n)
    coll = rec["collectives"]["all_reduce"]
    assert rec["verdict"] == "N/A" and coll["verdict"]["verdict"] == "N/A"
    assert "fewer than 2 GPUs" in coll["verdict"]["reason"]
    assert coll["of_link"]["ratio"] is None
    assert "all_reduce N/A (no expectation: fewer than 2 GPUs" in assemble.summary_line(rec)
    out = assemble.write_report(str(tmp_path), "20261201T000000Z", {"gpu-1": rec})
    assert "fewer than 2 GPUs" in pathlib.Path(out["md"]).read_text()


# ---------------------------------------------------------------- the report
def _report(tmp_path, records, monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setattr(markdown, "pyplot", lambda: None)
    out = assemble.write_report(str(tmp_path), "20261201T000000Z", records)
    return pathlib.Path(out["md"]).read_text()


def test_report_names_every_figures_env_and_tuned_side_by_side(tmp_path, monkeypatch):
    n = gpu_node(tuned_file=tuned_text())
    n["tuning"] = {
        "default_busbw": 350.0,
        "best": {"NCCL_MIN_NCHANNELS": "32"},
        "best_busbw": 360.4,
        "gain": 0.0297,
        "candidates": [
            {"env": {}, "busbw": 350.0},
            {"env": {"NCCL_MIN_NCHANNELS": "32"}, "busbw": 360.4},
            {"env": {"NCCL_ALGO": "Tree"}, "busbw": 353.0},
        ],
        "size": "8G",
        "path": "/opt/wireup/nccl-tuned.env",
        "mode": "sweep",
        "env": DEVICE_ENV,
    }
    md = _report(
        tmp_path, {"gpu-a01": host_record.build_record("gpu-a01", "20261201T000000Z", n)}, monkeypatch
    )
    assert "{'" not in md  # no Python dict anywhere
    assert "avg busbw" not in md
    assert (
        "| nccl-tests all_gather, nccl-tests all_reduce, nccl-tests reduce_scatter | default NCCL; "
        "LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib NCCL_NVLS_ENABLE=0"
        in md
    )
    assert "| torch single_node | default NCCL; NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=eth0" in md
    assert (
        "Tuned NCCL env /opt/wireup/nccl-tuned.env: NCCL_MIN_NCHANNELS=32, written 2026-11-30T12:00:00Z "
        "by run 20261130T120000Z on gpu-a01 (driver 580.159.04, NCCL 2.28.9); "
        "NOT used by this run's figures (default NCCL)."
    ) in md
    assert "| default NCCL | 350.0 | - |" in md
    assert "| NCCL_MIN_NCHANNELS=32 (tuned env file) | 360.4 | +3.0% |" in md
    assert "| NCCL_ALGO=Tree | 353.0 | +0.9% |" in md
    assert "NCCL tuning: best NCCL_MIN_NCHANNELS=32 (360.4 GB/s vs 350.0 GB/s default)" in md
    # Ratio to expected and to the raw link, side by side.
    assert "| of expected | raw link GB/s | of raw link | NCCL env |" in md
    assert "| 478.1 | 73% | default |" in md
    # torch vs nccl-tests at the same size.
    assert "of nccl-tests (goal)" in md and "at 1G (>= 97%)" in md


def test_report_flags_a_stale_tuned_env_used_by_the_figures(tmp_path, monkeypatch):
    n = gpu_node(tuned_used=True, tuned_file=tuned_text(), nccl="2.29.1")
    # bench_use_tuned_env: all_reduce with default NCCL and the tuned file's settings, nothing written.
    n["tuning"] = {
        "default_busbw": 349.0,
        "best": {"NCCL_MIN_NCHANNELS": "32"},
        "best_busbw": 355.1,
        "candidates": [{"env": {}, "busbw": 349.0}, {"env": {"NCCL_MIN_NCHANNELS": "32"}, "busbw": 355.1}],
        "size": "8G",
        "path": "/opt/wireup/nccl-tuned.env",
        "mode": "tuned_vs_default",
        "env": DEVICE_ENV,
    }
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    md = _report(tmp_path, {"gpu-a01": rec}, monkeypatch)
    assert "used by this run's figures; STALE: measured with NCCL 2.28.9, NCCL 2.29.1 now" in md
    assert (
        "tuned NCCL (/opt/wireup/nccl-tuned.env, written 2026-11-30T12:00:00Z, STALE); LD_LIBRARY_PATH=" in md
    )
    assert "NCCL_MIN_NCHANNELS=32 NCCL_NVLS_ENABLE=0" in md
    assert "tuned_env_stale" in md
    assert "NCCL tuned" in assemble.summary_line(rec)
    assert "| NCCL_MIN_NCHANNELS=32 (tuned env file) | 355.1 | +1.7% |" in md
    assert "written to" not in md and "sweep:" not in md


def _capture_figures(monkeypatch):
    plt = markdown.pyplot()
    if plt is None:
        pytest.skip("matplotlib is not installed")
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


def test_busbw_plot_has_a_latency_panel_and_the_raw_link(tmp_path, monkeypatch):
    figures = _capture_figures(monkeypatch)
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", gpu_node())
    assert assemble._plot_busbw(markdown.pyplot(), rec, str(tmp_path / "b.png"))
    bw, lat = figures[0].axes
    assert lat.get_yscale() == "log" and lat.get_xscale() == "log"
    smallest = min(x for line in lat.get_lines() for x in line.get_xdata())
    assert smallest == 8  # the 8 B latency is on the plot
    assert any("raw link 478" in line.get_label() for line in bw.get_lines())
    assert bw.get_ylim()[0] == 0


def test_torch_plot_draws_the_expectation_from_zero(tmp_path, monkeypatch):
    figures = _capture_figures(monkeypatch)
    n = gpu_node()
    # A 10x drop: it must not look like a healthy curve on a rescaled axis.
    rec = host_record.build_record("gpu-a01", "20261201T000000Z", n)
    rec = copy.deepcopy(rec)
    for row in rec["torch"]["single_node"]["rows"]:
        row["in_place"]["busbw"] /= 10
    assert torch_report.plot(markdown.pyplot(), {"gpu-a01": rec}, str(tmp_path / "t.png"))
    ax = figures[0].axes[0]
    assert ax.get_ylim()[0] == 0
    expected = rec["torch"]["single_node"]["expected"]["expected_busbw"]
    assert any(list(line.get_ydata()) == [expected, expected] for line in ax.get_lines())
    assert ax.get_ylim()[1] >= expected
