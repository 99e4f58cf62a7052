"""wireup.report.metrics (issue 26): the exposition text wireup writes for node_exporter's textfile
collector, validated by Prometheus' own promtool (Debian's prometheus package; `make deps`
installs it, and under WIREUP_NO_SKIP a missing promtool fails these tests), and the README's
alert rule checked by `promtool check rules`."""

from __future__ import annotations

import json
import math
import pathlib
import re
import shutil
import subprocess

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import quick
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import gpuhealth, health
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import prom
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import metrics
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "tests/fixtures/h200x2"
RECORDS = [H200 / "bench_record_2026-11-29_healthy.json", REPO / "docs/example-h200x2/healthy/localhost.json"]
GPUHEALTH = REPO / "tests/fixtures/gpuhealth"
# Our 2x H200 capture with GPU0's remapped rows edited to pending (tests/fixtures/gpuhealth/README.md).
REMAP_PENDING = GPUHEALTH / "synthetic/h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml"
CAPTURES = sorted(
    [*GPUHEALTH.glob("*.xml"), *GPUHEALTH.glob("*.txt"), REMAP_PENDING, H200 / "nvidia_smi_q.xml"]
)
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    not PROMTOOL, reason="promtool missing: make deps installs Debian's prometheus"
)


def promtool(*args, text=""):
    return subprocess.run([PROMTOOL, *args], input=text, capture_output=True, text=True, check=False)


def samples(text, name):
    """{label string: value} of one metric in an exposition text."""
    return {
        m.group(1) or "": float(m.group(2)) for m in re.finditer(rf"^{name}(\{{.*\}})? (\S+)$", text, re.M)
    }


FABRIC = {
    "run_id": "20261202T120000Z",
    "kind": "fabric",
    "verdicts": {"n1": "PASS", "n2": "PASS", "n3": "FAIL", "n4": "PASS"},
    "pairs": [
        {"round": 1, "pair": ["n1", "n2"], "kind": "pair", "busbw": 0.93},
        {"round": 1, "pair": ["n3", "n4"], "kind": "pair", "busbw": 0.235},
        {"round": 2, "pair": ["n1", "n3"], "kind": "pair", "busbw": 0.236},
        {"round": 3, "pair": ["n1", "n2", "n4"], "kind": "group", "busbw": None},
    ],
}


def test_label_values_and_help_are_escaped_per_the_exposition_format():
    assert prom.escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert prom.escape_help('say "x"\\\n') == 'say "x"\\\\\\n'
    fam = metrics.family("wireup_x", "help", [({"host": 'n"1\n'}, 1)])
    assert (
        metrics.render([fam]) == '# HELP wireup_x help\n# TYPE wireup_x gauge\nwireup_x{host="n\\"1\\n"} 1\n'
    )


def test_values_names_and_duplicates():
    assert [prom.format_value(v) for v in (1, 2.5, True, math.nan, math.inf, -math.inf)] == [
        "1",
        "2.5",
        "1",
        "NaN",
        "+Inf",
        "-Inf",
    ]
    for bad in ("1x", "wireup-x", ""):
        with pytest.raises(ValueError, match="not a Prometheus metric name"):
            metrics.family(bad, "h", [])
    with pytest.raises(ValueError, match="label name"):
        metrics.family("wireup_x", "h", [({"__name__": "x"}, 1)])
    with pytest.raises(ValueError, match="given twice"):
        metrics.family("wireup_x", "h", [({"a": "1"}, 1), ({"a": "1"}, 2)])
    with pytest.raises(ValueError, match="not a number"):
        metrics.family("wireup_x", "h", [({}, "1")])
    fam = metrics.family("wireup_x", "h", [({}, None)])  # not reported: no sample
    assert fam["samples"] == [] and metrics.render([fam]) == ""
    with pytest.raises(ValueError, match="given twice"):
        metrics.render([metrics.family("wireup_x", "h", [({}, 1)])] * 2)


def test_verdict_is_one_series_per_state_and_the_run_time_comes_from_the_run_id():
    got = metrics.verdict_samples({"host": "n"}, "FAIL", metrics.BENCH_VERDICTS)
    assert [(s[0]["verdict"], s[1]) for s in got if s[1]] == [("FAIL", 1)]
    assert len(got) == len(metrics.BENCH_VERDICTS)
    odd = metrics.verdict_samples({}, "LATER", ("PASS",))
    assert odd == [({"verdict": "PASS"}, 0), ({"verdict": "LATER"}, 1)]
    assert metrics.run_time("20261202T120000Z-2") == 1796212800.0
    assert metrics.run_time("not-a-run") is None


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.parent.name)
def test_bench_records_figures_in_base_units(path):
    record = json.loads(path.read_text())
    text = metrics.render(metrics.bench_families("gpu-a01", record))
    verdict = samples(text, "wireup_bench_verdict")
    assert verdict['{host="gpu-a01",verdict="PASS"}'] == 1 and sum(verdict.values()) == 1
    measured = record["collectives"]["all_reduce"]["verdict"]
    busbw = samples(text, "wireup_bench_busbw_bytes_per_second")
    key = f'{{host="gpu-a01",collective="all_reduce",size_bytes="{measured["size"]}"}}'
    assert busbw[key] == pytest.approx(measured["measured_busbw"] * 1e9)
    expected = samples(text, "wireup_bench_expected_busbw_bytes_per_second")
    assert expected['{host="gpu-a01",collective="all_reduce"}'] == pytest.approx(
        measured["expected_busbw"] * 1e9
    )
    assert samples(text, "wireup_bench_timestamp_seconds")['{host="gpu-a01"}'] == metrics.run_time(
        record["run_id"]
    )
    info = samples(text, "wireup_bench_info")
    assert list(info.values()) == [1.0] and f'run_id="{record["run_id"]}"' in next(iter(info))


def test_a_damaged_latest_record_is_its_own_verdict():
    text = metrics.node_text("n1", {"verdict": "DAMAGED", "run_id": "r", "record": {"run_id": "r"}})
    assert samples(text, "wireup_bench_verdict")['{host="n1",verdict="DAMAGED"}'] == 1


def test_fabric_pairs_and_verdict_of_one_node():
    text = metrics.render(metrics.fabric_families("n3", FABRIC))
    assert samples(text, "wireup_fabric_verdict")['{host="n3",verdict="FAIL"}'] == 1
    busbw = samples(text, "wireup_fabric_busbw_bytes_per_second")
    assert busbw == {
        '{host="n3",peers="n4",round="1",kind="pair"}': pytest.approx(0.235e9),
        '{host="n3",peers="n1",round="2",kind="pair"}': pytest.approx(0.236e9),
    }
    assert metrics.fabric_families("n9", FABRIC) == []  # not in that run
    damaged = metrics.render(metrics.fabric_families("n1", {"damaged": "cut off", "run_id": "x"}))
    assert samples(damaged, "wireup_fabric_verdict")['{host="n1",verdict="DAMAGED"}'] == 1


def _check_result():
    gpus = [
        {
            "index": 0,
            "bus_id": "00000000:00:06.0",
            "nvlink": {"active": 18},
            "pcie": {"width_current": 16, "gen_max": 5},
        },
        {
            "index": 1,
            "bus_id": "00000000:00:07.0",
            "nvlink": {"active": 15},
            "pcie": {"width_current": 16, "gen_max": 5},
        },
    ]
    ports = [{"name": "mlx5_0:1", "up": True, "gbps": 400.0}, {"name": 'eth"0', "up": False, "gbps": None}]
    problem = {"kind": "nvlink", "part": "GPU1 00000000:00:07.0", "message": "GPU1 NVLink 3 of 18 links down"}
    return quick.result(
        "gpu-a01",
        None,
        {"gpus": gpus, "ports": ports, "links": []},
        found={"problems": [problem]},
        time=1796212800.5,
        seconds=0.42,
        bench={"collective": "all_reduce", "size": 1 << 30, "busbw": 180.5},
        gpu_findings=gpuhealth.findings(gpuhealth.parse(REMAP_PENDING.read_text())),
    )


def test_the_quick_checks_families():
    text = metrics.check_text(_check_result())
    assert samples(text, "wireup_check_verdict")['{host="gpu-a01",verdict="FAIL"}'] == 1
    assert samples(text, "wireup_check_problem") == {'{host="gpu-a01",part="GPU1 00000000:00:07.0"}': 1}
    assert (
        samples(text, "wireup_check_nvlink_active_links")[
            '{host="gpu-a01",gpu="1",bus_id="00000000:00:07.0"}'
        ]
        == 15
    )
    assert samples(text, "wireup_check_nic_rate_bytes_per_second") == {
        '{host="gpu-a01",port="mlx5_0:1"}': 400e9 / 8
    }
    assert samples(text, "wireup_check_busbw_bytes_per_second") == {
        '{host="gpu-a01",collective="all_reduce",size_bytes="1073741824"}': pytest.approx(180.5e9)
    }
    gpu0 = 'gpu="0",bus_id="00000000:00:06.0",uuid="GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75"'
    assert samples(text, "wireup_check_gpu_finding") == {
        f'{{host="gpu-a01",{gpu0},code="gpu_row_remap_pending",remediation="reset"}}': 1,
        f'{{host="gpu-a01",{gpu0},code="gpu_row_remaps",remediation="monitor"}}': 1,
    }
    assert samples(text, "wireup_check_duration_seconds") == {'{host="gpu-a01"}': 0.42}


@needs_promtool
@pytest.mark.parametrize("which", ["bench", "bench2", "fabric", "check", "hostile"])
def test_promtool_check_metrics_accepts_every_text(which):
    texts = {
        "bench": lambda: metrics.render(
            metrics.bench_families("gpu-a01", json.loads(RECORDS[0].read_text()))
        ),
        "bench2": lambda: metrics.render(
            metrics.bench_families("localhost", json.loads(RECORDS[1].read_text()))
        ),
        "fabric": lambda: metrics.render(metrics.fabric_families("n1", FABRIC)),
        "check": lambda: metrics.check_text(_check_result()),
        "hostile": lambda: metrics.node_text(
            'a"b\\c\nd', {"verdict": "FAIL", "run_id": "x", "record": {"run_id": "x", "verdict": "FAIL"}}
        ),
    }
    text = texts[which]()
    assert text
    done = promtool("check", "metrics", text=text)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), (
        done.stdout + done.stderr
    )


@needs_promtool
def test_promtool_finds_a_broken_text():
    done = promtool("check", "metrics", text='# TYPE wireup_x gauge\nwireup_x{a="1} 1\n')
    assert done.returncode != 0


def test_controller_text_reads_the_newest_records_from_the_store(tmp_path):
    record = json.loads(RECORDS[0].read_text())
    record["host"] = "gpu-a01"
    results.write_host(tmp_path, "20261201T000000Z", "gpu-a01", dict(record, run_id="20261201T000000Z"))
    newer = dict(record, run_id="20261202T000000Z", verdict="FAIL")
    results.write_host(tmp_path, "20261202T000000Z", "gpu-a01", newer)
    fabric = tmp_path / "fabric/20261202T120000Z"
    fabric.mkdir(parents=True)
    (fabric / "fabric.json").write_text(json.dumps(dict(FABRIC, nodes={}, verdicts={"gpu-a01": "PASS"})))
    text = metrics.controller_text(tmp_path, "gpu-a01")
    assert samples(text, "wireup_bench_verdict")['{host="gpu-a01",verdict="FAIL"}'] == 1
    assert samples(text, "wireup_fabric_verdict")['{host="gpu-a01",verdict="PASS"}'] == 1
    assert metrics.controller_text(tmp_path, "other") == ""
    (tmp_path / "bench/20261203T000000Z").mkdir()
    (tmp_path / "bench/20261203T000000Z/gpu-a01.json").write_text("{cut")
    text = metrics.controller_text(tmp_path, "gpu-a01")
    assert samples(text, "wireup_bench_verdict")['{host="gpu-a01",verdict="DAMAGED"}'] == 1


def _readme_block(title):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index(title) :]
    return re.search(r"```(?:yaml|promql)\n(.*?)```", section, re.S).group(1)


@needs_promtool
def test_the_readmes_alert_rule_passes_promtool_check_rules(tmp_path):
    rules = tmp_path / "wireup-alerts.yml"
    rules.write_text(_readme_block("An alert rule"))
    done = promtool("check", "rules", str(rules))
    assert done.returncode == 0 and "SUCCESS: 1 rules found" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_every_real_captures_gpu_findings_have_the_shape_the_check_reads(capture):
    """The seam of issue 35 item 1: what gpuhealth really makes (its findings of every capture in
    tests/fixtures/gpuhealth) is health.GpuFinding, the shape nodecheck and promtext read; each
    renders (before: a finding's gpu, a dict, went into a label set: TypeError) and promtool
    accepts the text."""
    found = gpuhealth.findings(gpuhealth.parse(capture.read_text(errors="replace")))
    for f in found:
        assert set(f) == health.GpuFinding.__required_keys__, f
        assert set(f["gpu"]) in (set(), set(health.GpuIdentity.__optional_keys__)), f
    result = quick.result(
        "gpu-a01",
        None,
        None,
        found={"problems": quick.gpu_health_problems(found)},
        time=1796212800.5,
        gpu_findings=found,
    )
    text = metrics.check_text(result)
    listed = samples(text, "wireup_check_gpu_finding")
    assert len(listed) == len({(f["gpu"].get("uuid"), f["code"]) for f in found})
    for f in found:
        uuid = f["gpu"].get("uuid") or ""
        assert any(f'uuid="{uuid}",code="{f["code"]}"' in key for key in listed), (f, listed)
    if PROMTOOL:
        done = promtool("check", "metrics", text=text)
        assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_a_check_text_that_cannot_be_made_falls_back_to_the_verdict():
    result = quick.result('a"b\udcff', None, None, found={"errors": ["x"]}, time=1796212800.5, seconds=0.1)
    text = metrics.check_verdict_text(result)
    assert samples(text, "wireup_check_verdict")['{host="a\\"b\\\\udcff",verdict="ERROR"}'] == 1
    assert samples(text, "wireup_check_metrics_incomplete") == {'{host="a\\"b\\\\udcff"}': 1}
    text.encode("utf-8")
    if PROMTOOL:
        assert promtool("check", "metrics", text=text).returncode == 0


def _stored_fabric_run(tmp_path):
    """A fabric run of 8 nodes (one slow link) judged and stored by wireup's own code: the bench
    role's jobs and results on the real two-host NCCL logs, fabric_run.judge_round, the module's _store."""
    from tests.perf import fleet_build

    hosts = tuple(f"gpu{i:04d}" for i in range(8))
    shape = fleet_build.Fleet(hosts, {"gpu0004": "fabric_slow"})
    record, _rounds, _jobs = fleet_build.fabric_run(shape, str(tmp_path), str(tmp_path / "jobs"))
    return record, next((tmp_path / "fabric").iterdir())


def test_a_nodes_textfile_reads_its_own_part_of_the_fabric_record(tmp_path, monkeypatch):
    # Each node's textfile re-read the whole fabric record: O(N) each, O(N^2) for the fleet.
    record, run_dir = _stored_fabric_run(tmp_path)
    whole = {h: metrics.node_text(h, None, record) for h in record["verdicts"]}
    read, real = [], results.read_strict_json
    monkeypatch.setattr(results, "read_strict_json", lambda path: read.append(path) or real(path))
    for host, text in whole.items():
        assert metrics.controller_text(str(tmp_path), host) == text and text
    assert samples(whole["gpu0004"], "wireup_fabric_verdict")['{host="gpu0004",verdict="FAIL"}'] == 1
    assert not [p for p in read if p.endswith("fabric.json")]
    assert sorted(read) == sorted(str(run_dir / "hosts" / f"{h}.json") for h in whole)


def test_a_stale_or_damaged_slice_is_never_trusted_over_its_record(tmp_path):
    record, run_dir = _stored_fabric_run(tmp_path)
    # The record rewritten after its slices (a later round cut off before its slices): the record.
    changed = dict(record, verdicts={**record["verdicts"], "gpu0001": "FAIL"})
    atomicfile.write_json(str(run_dir / "fabric.json"), changed, indent=2)
    text = metrics.controller_text(str(tmp_path), "gpu0001")
    assert samples(text, "wireup_fabric_verdict")['{host="gpu0001",verdict="FAIL"}'] == 1
    # A damaged slice: the record, whole.
    (run_dir / "hosts" / "gpu0002.json").write_text("{cut")
    assert metrics.controller_text(str(tmp_path), "gpu0002") == metrics.node_text("gpu0002", None, changed)
    # A damaged record: DAMAGED, whatever its slices say.
    (run_dir / "fabric.json").write_text("{cut")
    text = metrics.controller_text(str(tmp_path), "gpu0003")
    assert samples(text, "wireup_fabric_verdict")['{host="gpu0003",verdict="DAMAGED"}'] == 1


def test_a_busbw_of_true_is_no_sample():
    """A record whose measured busbw is ``true`` (JSON's, from a damaged or hand-edited record) has
    no bytes-per-second figure: it was written as 1e9."""
    record = json.loads(RECORDS[0].read_text())
    record["collectives"]["all_reduce"]["verdict"]["measured_busbw"] = True
    text = metrics.render(metrics.bench_families("gpu-a01", record))
    busbw = samples(text, "wireup_bench_busbw_bytes_per_second")
    assert not any('collective="all_reduce"' in key and value == 1e9 for key, value in busbw.items())
