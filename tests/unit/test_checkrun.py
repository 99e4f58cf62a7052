"""wireup-check as the nodes run it (issue 26): the executable zip checkbundle.py builds, run by
this machine's python3 with the standard library only (`-S -I`: no site-packages, as on a bare
node), against nvidia-smi replaying the real 2x H200 captures (tests/fixtures/h200x2) and the
sysfs NIC trees in tests/fixtures/sysfs: baseline, PASS, a fault derived from the capture (NVLinks
down), a damaged baseline, a hung nvidia-smi, the textfile, the Slurm drain (scontrol recording its
arguments) and the one-size benchmark (all_reduce_perf replaying a capture)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup import checkbundle, checkrun

REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "tests/fixtures/h200x2"
SYSFS = REPO / "tests/fixtures/sysfs"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def links_down(text, gpu, count):
    out, mine, seen = [], False, 0
    for raw in text.splitlines():
        line = raw
        if line.startswith("GPU "):
            mine, seen = line.startswith(f"GPU {gpu}:"), 0
        elif mine and seen < count and "Link" in line:
            line, seen = line.split(":")[0] + ": <inactive>", seen + 1
        out.append(line)
    return "\n".join(out) + "\n"


def script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def node(tmp_path):
    """A node's files: wireup-check built into it, nvidia-smi replaying captures from tmp/smi/."""
    smi = tmp_path / "smi"
    smi.mkdir()
    for name in ("topo_m.txt", "nvlink_s.txt", "query_gpu.csv", "nvidia_smi_q.xml"):
        shutil.copy(H200 / name, smi / name)
    script(
        tmp_path / "nvidia-smi",
        f"""D={smi}
[ -f $D/hang ] && exec sleep 30
case "$1" in
  topo) cat $D/topo_m.txt ;;
  nvlink) cat $D/nvlink_s.txt ;;
  --query-gpu=*) cat $D/query_gpu.csv ;;
  -q) cat $D/nvidia_smi_q.xml ;;
  *) echo "unknown $*" >&2; exit 9 ;;
esac
""",
    )
    exe = tmp_path / "wireup-check"
    exe.write_bytes(checkbundle.build(PYTHON))
    exe.chmod(0o755)
    (tmp_path / "prom").mkdir()
    config = {
        "host": "gpu-a01",
        "baseline": str(tmp_path / "state/baseline.json"),
        "nvidia_smi": str(tmp_path / "nvidia-smi"),
        "sysfs_root": str(SYSFS / "ndr8_healthy"),
        "textfile_dir": str(tmp_path / "prom"),
        "timeout": 2,
        "slurm_node": "gpu-a01",
    }
    (tmp_path / "check.json").write_text(json.dumps(config))
    return tmp_path


def run(node, *args, stdin="", env=None):
    argv = [PYTHON, "-S", "-I", str(node / "wireup-check"), "--config", str(node / "check.json"), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False, timeout=60, env=env)


def test_the_bundle_is_deterministic_and_refuses_an_odd_interpreter(tmp_path):
    one, two = checkbundle.build("/usr/bin/python3"), checkbundle.build("/usr/bin/python3")
    assert one == two and one.startswith(b"#!/usr/bin/python3\n")
    for bad in ("python3", "/usr/bin/python3 -S", "/x\n/y"):
        with pytest.raises(ValueError, match="node_check_python"):
            checkbundle.build(bad)
    out = tmp_path / "w"
    assert checkbundle.main([str(out)]) == 0 and out.read_bytes() == one
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


def test_every_module_of_the_bundle_imports_with_the_standard_library_alone(tmp_path):
    """The zip holds the whole package as the top-level ``wireup``: each module imports there under
    ``python3 -S -I`` (no site-packages: no ansible, no packaging), so none imports the collection's
    name or a third-party module at module level (the collection's own rule, and what a node has)."""
    exe = tmp_path / "wireup-check"
    exe.write_bytes(checkbundle.build(PYTHON))
    names = sorted(n[len("wireup/") : -3] for n in checkbundle.sources() if n.startswith("wireup/"))
    assert {"checkrun", "nodecheck", "node_check", "promtext", "results", "report", "validate"} <= set(names)
    # -I ignores PYTHONPATH: the zip goes on sys.path as the node's __main__ finds it.
    code = "import importlib, sys; [importlib.import_module('wireup.' + n) for n in sys.argv[2:]]"
    code = f"import sys; sys.path.insert(0, sys.argv[1]); {code}"
    done = subprocess.run(
        [PYTHON, "-S", "-I", "-c", code, str(exe), *names],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_baseline_then_pass_then_nvlinks_down_fail_with_the_line_and_the_textfile(node):
    done = run(node, "--write-baseline", "--manual", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["changed"] is True
    base = node / "state/baseline.json"
    assert stat.S_IMODE(base.stat().st_mode) == 0o640 and stat.S_IMODE(base.parent.stat().st_mode) == 0o750
    ok = run(node)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith(
        "wireup-check: PASS gpu-a01: 2 GPU(s), 36 NVLinks, 9 NIC port(s) as at the baseline"
    )
    assert len(ok.stdout.splitlines()) == 1
    (node / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 1, 3))
    bad = run(node)
    assert bad.returncode == 1
    assert bad.stdout.startswith(
        "wireup-check: FAIL gpu-a01: GPU1 00000000:00:07.0 NVLink 3 of 18 links down (was 18"
    )
    prom = (node / "prom/wireup_check.prom").read_text()
    assert 'wireup_check_verdict{host="gpu-a01",verdict="FAIL"} 1' in prom
    assert 'wireup_check_nvlink_active_links{host="gpu-a01",gpu="1",bus_id="00000000:00:07.0"} 15' in prom
    assert [p.name for p in (node / "prom").iterdir()] == ["wireup_check.prom"]  # no temporary file left
    as_json = json.loads(run(node, "--json").stdout)
    assert as_json["verdict"] == "FAIL" and as_json["baseline"]["taken"] == "manual"
    assert "node" not in json.dumps(as_json["baseline"])


def test_rails_and_a_new_baseline_from_a_bench_part(node):
    part = {"run_id": "20261202T010203Z", "gpu_count": 2, "links": [["GPU0", "GPU1", "NV18"]], "figure": {}}
    first = run(node, "--write-baseline", "--json", stdin=json.dumps(part))
    assert json.loads(first.stdout) == {
        "rc": 0,
        "line": "wireup-check: baseline of gpu-a01 written from bench run 20261202T010203Z "
        f"({node}/state/baseline.json)",
        "changed": True,
    }
    again = json.loads(run(node, "--write-baseline", "--json", stdin=json.dumps(part)).stdout)
    assert again["changed"] is False and again["rc"] == 0
    other = dict(part, run_id="20261203T000000Z", links=[["GPU0", "GPU1", "SYS"]])
    refused = run(node, "--write-baseline", stdin=json.dumps(other))
    assert refused.returncode == 1 and "baseline not written: the GPU-GPU link classes" in refused.stdout
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(
        json.dumps(dict(conf, sysfs_root=str(SYSFS / "ndr8_one_rail_hdr_one_down")))
    )
    bad = run(node)
    assert bad.returncode == 1
    assert "FAIL gpu-a01: NIC mlx5_5:1 at 200 Gb/s (was 400 Gb/s at the last passing bench" in bad.stdout
    assert bad.stdout.rstrip().endswith("(+1 more: NIC mlx5_7:1)")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("{cut", "is not JSON"),
        ('{"kind": "wireup-check-baseline", "schema": 1}', "unusable: no node or bench part"),
        ("[]", "unusable: not a wireup-check-baseline document"),
    ],
)
def test_a_damaged_baseline_fails_closed(node, damage, said):
    (node / "state").mkdir()
    (node / "state/baseline.json").write_text(damage)
    done = run(node)
    assert done.returncode == 2 and done.stdout.startswith("wireup-check: ERROR gpu-a01: the baseline ")
    assert said in done.stdout and done.stdout.rstrip().endswith("(cannot check: failing closed)")


def test_bad_settings_fail_closed(node):
    (node / "check.json").write_text(json.dumps({"host": "x", "surprise": 1}))
    done = run(node)
    assert done.returncode == 2 and "unknown key 'surprise'" in done.stdout


def test_a_hung_or_missing_nvidia_smi_fails_and_names_it(node):
    assert run(node, "--write-baseline", "--manual").returncode == 0
    (node / "smi/hang").write_text("")
    hung = run(node)
    assert (
        hung.returncode == 1 and "nvidia-smi topo -m did not answer: still running after 2 s" in hung.stdout
    )
    (node / "smi/hang").unlink()
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, nvidia_smi=str(node / "absent"))))
    gone = run(node)
    assert (
        gone.returncode == 1
        and "nvidia-smi not found" in gone.stdout
        and "the baseline has 2 GPU(s)" in gone.stdout
    )


def test_no_baseline_passes_and_says_so_or_fails_when_required(node):
    done = run(node)
    assert done.returncode == 0 and "no baseline (gpu-a01 has not passed bench.yml" in done.stdout
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, require_baseline=True)))
    assert run(node).returncode == 3


def test_drain_uses_slurms_reason_rules_and_leaves_a_wireup_drain_alone(node):
    log = node / "scontrol.log"
    shown = node / "shown.txt"
    shown.write_text("NodeName=gpu-a01 Arch=x86_64 State=IDLE ThreadsPerCore=1\n")
    script(
        node / "bin/scontrol" if (node / "bin").mkdir() is None else None,
        f'echo "$@" >> {log}\n[ "$1" = show ] && cat {shown}\nexit 0\n',
    )
    env = dict(os.environ, PATH=f"{node / 'bin'}:/usr/bin:/bin")
    assert run(node, "--write-baseline", "--manual").returncode == 0
    (node / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 0, 18))
    done = run(node, "--drain", env=env)
    assert done.returncode == 1
    calls = log.read_text().splitlines()
    assert calls[0] == "show node -o gpu-a01"
    assert calls[1].startswith(
        "update NodeName=gpu-a01 State=DRAIN Reason=wireup: GPU0 00000000:00:06.0 NVLink 18 of 18"
    )
    assert len(calls[1].split("Reason=", 1)[1]) <= 120
    assert "Slurm: drain gpu-a01 (State=IDLE)" in done.stderr
    reason = calls[1].split("Reason=", 1)[1]
    shown.write_text(f"NodeName=gpu-a01 State=IDLE+DRAIN Reason={reason} [root@2026-12-02T10:00:00]\n")
    log.write_text("")
    again = run(node, "--drain", env=env)
    assert again.returncode == 1 and log.read_text().splitlines() == ["show node -o gpu-a01"]
    assert "drained already for a wireup reason" in again.stderr


def test_the_one_size_benchmark_against_the_bench_figure(node):
    bin_dir = node / "nccl-tests"
    bin_dir.mkdir()
    capture = H200 / "all_reduce_perf.txt"
    script(bin_dir / "all_reduce_perf", f"cat {capture}\n")
    record_figure = 348.0
    part = {
        "run_id": "20261202T010203Z",
        "gpu_count": 2,
        "links": [["GPU0", "GPU1", "NV18"]],
        "figure": {"collective": "all_reduce", "size": 1 << 33, "busbw": record_figure},
        "nccl_tests": {"bin_dir": str(bin_dir), "ld_library_path": ""},
    }
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, bench={"size": 1 << 33})))
    assert run(node, "--write-baseline", stdin=json.dumps(part)).returncode == 0
    ok = json.loads(run(node, "--bench", "--json").stdout)
    assert ok["verdict"] == "PASS" and ok["bench"]["size"] == 1 << 33 and 340 < ok["bench"]["busbw"] < 350
    base = json.loads((node / "state/baseline.json").read_text())
    base["bench"]["figure"]["busbw"] = 600.0
    (node / "state/baseline.json").write_text(json.dumps(base))
    slow = run(node, "--bench")
    assert (
        slow.returncode == 1
        and "all_reduce at 8589934592 bytes 34" in slow.stdout
        and "of 600.0 GB/s" in slow.stdout
    )


def test_one_gpu_runs_no_benchmark_and_says_why(node):
    config = checkrun.merge_config({"host": "h1"})
    argv, _env, note = checkrun.bench_plan(config, {"bench": {"nccl_tests": {"bin_dir": "/x"}}}, 1)
    assert argv is None and note.startswith("benchmark skipped: nccl-tests skipped on h1: 1 GPU")


def test_write_textfile_writes_only_wireup_names_atomically_and_only_on_change(node):
    text = "# HELP wireup_x x\n# TYPE wireup_x gauge\nwireup_x 1\n"
    first = json.loads(run(node, "--write-textfile", "wireup_bench.prom", "--json", stdin=text).stdout)
    assert first == {"changed": True, "note": ""}
    assert (node / "prom/wireup_bench.prom").read_text() == text
    assert stat.S_IMODE((node / "prom/wireup_bench.prom").stat().st_mode) == 0o644
    assert (
        json.loads(run(node, "--write-textfile", "wireup_bench.prom", "--json", stdin=text).stdout)["changed"]
        is False
    )
    odd = json.loads(run(node, "--write-textfile", "../x.prom", "--json", stdin=text).stdout)
    assert odd["changed"] is False and "not a textfile name" in odd["note"]
    never = json.loads(
        run(node, "--write-textfile", "wireup_y.prom", "--json", "--textfile", "never", stdin=text).stdout
    )
    assert never == {"changed": False, "note": ""} and not (node / "prom/wireup_y.prom").exists()


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        ("not json", "is not JSON"),
        ('{"gpu_count": 2}', "(no run_id)"),
        ('{"run_id": "r", "gpu_count": "2", "links": []}', "(gpu_count is not a number)"),
        (
            '{"run_id": "r", "gpu_count": 2, "links": [["GPU0", "GPU1"]]}',
            "(links is not a list of [GPU, GPU, class])",
        ),
        ('{"run_id": "r", "gpu_count": 2, "links": [], "figure": []}', "(figure is not an object)"),
    ],
)
def test_a_bench_part_that_is_not_one_writes_no_baseline(node, stdin, said):
    done = run(node, "--write-baseline", stdin=stdin)
    assert done.returncode == 2 and said in done.stdout and not (node / "state/baseline.json").exists()
