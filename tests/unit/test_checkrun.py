"""wireup-check as the nodes run it (issue 26): the executable zip check/bundle.py builds, run by
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

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import bundle
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.check import run as check_run
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history
from tests import busy
from tests.testbed import stand_in_smi

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
    exe.write_bytes(bundle.build(PYTHON))
    exe.chmod(0o755)
    (tmp_path / "prom").mkdir()
    config = {
        "host": "gpu-a01",
        "baseline": str(tmp_path / "state/baseline.json"),
        "nvidia_smi": str(tmp_path / "nvidia-smi"),
        "sysfs_root": str(SYSFS / "ndr8_healthy"),
        "textfile_dir": str(tmp_path / "prom"),
        # wireup-check's wait for its nvidia-smi reads: the stand-in answers at once, but 2 s
        # killed its `cat` under 16 busy loops; a hang is its own test (2 s there).
        "timeout": busy.PATIENCE_S,
        "slurm_node": "gpu-a01",
        "history_dir": str(tmp_path / "history"),
    }
    (tmp_path / "check.json").write_text(json.dumps(config))
    return tmp_path


def run(node, *args, stdin="", env=None, timeout=busy.HANG_S):
    argv = [PYTHON, "-S", "-I", str(node / "wireup-check"), "--config", str(node / "check.json"), *args]
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, check=False, timeout=timeout, env=env
    )


def test_the_bundle_is_deterministic_and_refuses_an_odd_interpreter(tmp_path):
    one, two = bundle.build("/usr/bin/python3"), bundle.build("/usr/bin/python3")
    assert one == two and one.startswith(b"#!/usr/bin/python3\n")
    for bad in ("python3", "/usr/bin/python3 -S", "/x\n/y"):
        with pytest.raises(ValueError, match="node_check_python"):
            bundle.build(bad)
    out = tmp_path / "w"
    assert bundle.main([str(out)]) == 0 and out.read_bytes() == one
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


def test_every_module_of_the_bundle_imports_with_the_standard_library_alone(tmp_path):
    """The zip holds the modules wireup-check imports as the top-level ``wireup``: each imports there under
    ``python3 -S -I`` (no site-packages: no ansible, no packaging), so none imports the collection's
    name or a third-party module at module level (the collection's own rule, and what a node has)."""
    exe = tmp_path / "wireup-check"
    exe.write_bytes(bundle.build(PYTHON))
    names = sorted(
        n[len("wireup/") : -3].replace("/", ".").removesuffix(".__init__")
        for n in bundle.sources()
        if n.startswith("wireup/")
    )
    assert {"check.run", "judge.quick", "report.metrics", "launch.slurm"} <= set(names)
    # ... and only what wireup-check imports: the report, the gate, the plans stay on the controller.
    assert not {"report.assemble", "record.gate", "plans.preflight", "plans.torchrun_launch"} & set(names)
    # -I ignores PYTHONPATH: the zip goes on sys.path as the node's __main__ finds it.
    code = "import importlib, sys; [importlib.import_module('wireup.' + n) for n in sys.argv[2:]]"
    code = f"import sys; sys.path.insert(0, sys.argv[1]); {code}"
    done = subprocess.run(
        [PYTHON, "-S", "-I", "-c", code, str(exe), *names],
        capture_output=True,
        text=True,
        check=False,
        timeout=busy.HANG_S,
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
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, timeout=2)))  # every read hangs: 2 s is enough
    hung = run(node)
    assert (
        hung.returncode == 1 and "nvidia-smi topo -m did not answer: still running after 2 s" in hung.stdout
    )
    (node / "smi/hang").unlink()
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
    shown.write_text("NodeName=gpu-a01 Arch=x86_64 State=IDLE ThreadsPerCore=1 Partitions=gpu\n")
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
    assert calls[0] == "show node -o"
    assert calls[1].startswith(
        "update NodeName=gpu-a01 State=DRAIN Reason=wireup: [node_problem] hw/quick: "
        "GPU0 00000000:00:06.0 NVLink 18 of 18"
    )
    assert len(calls[1].split("Reason=", 1)[1]) <= 120
    assert "Slurm: drain gpu-a01 (State=IDLE)" in done.stderr
    reason = calls[1].split("Reason=", 1)[1]
    shown.write_text(f"NodeName=gpu-a01 State=IDLE+DRAIN Reason={reason} [root@2026-12-02T10:00:00]\n")
    log.write_text("")
    again = run(node, "--drain", env=env)
    assert again.returncode == 1 and log.read_text().splitlines() == ["show node -o"]
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
    config = check_run.merge_config({"host": "h1"})
    argv, _env, note = check_run.bench_plan(config, {"bench": {"nccl_tests": {"bin_dir": "/x"}}}, 1)
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


# ------------------------------------------------------------------------------ issue 35: fails closed
GPUHEALTH = REPO / "tests/fixtures/gpuhealth"
PROMTOOL = shutil.which("promtool")
# The real captures with a row remap waiting for a reset: our own H200 XML with GPU0's remapped
# rows edited to pending (no public `-q -x` capture with a pending remap was found), and gpud's
# public A10 capture (the text of `nvidia-smi -q`, which gpuhealth.parse reads as well).
REMAP_PENDING = {
    "h200x2-xml-edited": (
        GPUHEALTH / "synthetic/h200x2_580.159.04_q_x_gpu0_row_remap_pending_edited.xml",
        {"gpu": "0", "bus_id": "00000000:00:06.0", "uuid": "GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75"},
        "GPU0 reset: GPU0 (00000000:00:06.0, GPU-47e4f408, S/N 1653724057182): "
        "row remap pending (1 uncorrectable",
    ),
    "a10-public-text": (
        GPUHEALTH / "a10_gpud_535.129.03_q.txt",
        {"gpu": "0", "bus_id": "00000000:07:00.0", "uuid": "GPU-73d12ef7-f589-f867-4259-c7090ab44736"},
        "GPU0 reset: GPU0 (00000000:07:00.0, GPU-73d12ef7, S/N 1324521052681): "
        "row remap pending (4 uncorrectable",
    ),
}


@pytest.fixture
def slurm(node):
    """A stand-in scontrol on PATH: it records its argv, and what the textfile folder held when it
    was called (the drain comes before any metrics write)."""
    (node / "bin").mkdir()
    (node / "shown.txt").write_text(
        "NodeName=gpu-a01 Arch=x86_64 State=IDLE ThreadsPerCore=1 Partitions=gpu\n"
    )
    script(
        node / "bin/scontrol",
        f'echo "$@" >> {node}/scontrol.log\necho "$1: $(ls -A {node}/prom)" >> {node}/prom_seen.log\n'
        f'[ "$1" = show ] && cat {node}/shown.txt\nexit 0\n',
    )
    return dict(os.environ, PATH=f"{node / 'bin'}:/usr/bin:/bin")


def scontrol_calls(node):
    log = node / "scontrol.log"
    return log.read_text().splitlines() if log.exists() else []


def promtool_accepts(path):
    if not PROMTOOL:
        pytest.skip("promtool missing: make deps installs Debian's prometheus")
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=path.read_text(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


@pytest.mark.parametrize("capture", sorted(REMAP_PENDING))
def test_a_pending_row_remap_drains_the_node_before_the_textfile_which_promtool_accepts(node, slurm, capture):
    """Issue 35 item 1, end to end: the real bundle, nvidia-smi printing a real capture whose GPU0
    waits for a reset, scontrol recording its argv. Before: TypeError (the finding's gpu, a dict,
    went into a label set), exit 1, no scontrol, no textfile."""
    path, labels, finding = REMAP_PENDING[capture]
    shutil.copy(path, node / "smi/nvidia_smi_q.xml")
    done = run(node, "--drain", env=slurm)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        done.stdout.startswith(f"wireup-check: FAIL gpu-a01: {finding}")
        and len(done.stdout.splitlines()) == 1
    )
    calls = scontrol_calls(node)
    assert calls[0] == "show node -o"
    assert calls[1].startswith(
        f"update NodeName=gpu-a01 State=DRAIN Reason=wireup: [node_problem] hw/quick: {finding}"[:110]
    )
    assert len(calls[1].split("Reason=", 1)[1]) <= 120
    # The drain came first: the folder was empty when scontrol ran, the textfile is there now.
    assert (node / "prom_seen.log").read_text().splitlines() == ["show: ", "update: "]
    prom = node / "prom/wireup_check.prom"
    promtool_accepts(prom)
    text = prom.read_text()
    assert 'wireup_check_verdict{host="gpu-a01",verdict="FAIL"} 1' in text
    inside = ",".join(f'{k}="{v}"' for k, v in labels.items())
    code = 'code="gpu_row_remap_pending",remediation="reset"'
    assert f'wireup_check_gpu_finding{{host="gpu-a01",{inside},{code}}} 1' in text


def _deep_xml(depth=5000):
    return "<nvidia_smi_log>" + "<a>" * depth + "</a>" * depth + "</nvidia_smi_log>\n"


def _edit_baseline(node, edit):
    base = json.loads((node / "state/baseline.json").read_text())
    edit(base)
    (node / "state/baseline.json").write_text(json.dumps(base))


DAMAGE = {
    # Valid JSON that is not a usable baseline: before, KeyError / TypeError, exit 1, no drain.
    "a link without its class": (
        lambda node: _edit_baseline(node, lambda b: b["node"]["links"].append({"a": "GPU0", "b": "GPU1"})),
        "could not check: the baseline ",
    ),
    "a port without its name": (
        lambda node: _edit_baseline(node, lambda b: b["node"]["ports"].append({"up": True, "watched": True})),
        "could not check: the baseline ",
    ),
    "an NVLink count that is text": (
        lambda node: _edit_baseline(node, lambda b: b["node"]["gpus"][0]["nvlink"].update(active="18")),
        "could not check: the check stopped on TypeError",
    ),
    # Unreadable: a folder where the file should be.
    "a folder in its place": (
        lambda node: ((node / "state/baseline.json").unlink(), (node / "state/baseline.json").mkdir()),
        "could not check: cannot read the baseline ",
    ),
    # Hostile: 5000 nested elements (before: RecursionError out of gpuhealth.parse, no drain; now
    # gpuhealth refuses a document nested deeper than nvidia-smi's own, and the check says so).
    "deeply nested XML": (
        lambda node: (node / "smi/nvidia_smi_q.xml").write_text(_deep_xml()),
        "could not check: nvidia-smi -q -x could not be read (the output of `nvidia-smi -q",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_check_that_cannot_judge_drains_the_node_with_an_error_reason(node, slurm, damage):
    assert run(node, "--write-baseline", "--manual").returncode == 0
    make, said = DAMAGE[damage]
    make(node)
    done = run(node, "--drain", env=slurm)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("wireup-check: ERROR gpu-a01: ") and len(done.stdout.splitlines()) == 1
    assert "Traceback" not in done.stderr
    update = scontrol_calls(node)[1]
    reason = update.split("Reason=", 1)[1]
    assert update.startswith("update NodeName=gpu-a01 State=DRAIN Reason=")
    # a check that could not read the node: the node's software, not its hardware (issue 37)
    want = f"wireup: [node_problem] sw/quick: wireup-check ERROR gpu-a01: {said}"
    assert reason.startswith(want) or (reason.endswith("...") and want.startswith(reason[:-3])), reason
    assert len(reason) <= 120 and reason.isprintable()
    assert (node / "prom_seen.log").read_text().splitlines() == ["show: ", "update: "]
    prom = node / "prom/wireup_check.prom"
    assert 'wireup_check_verdict{host="gpu-a01",verdict="ERROR"} 1' in prom.read_text()
    promtool_accepts(prom)


def test_a_fifo_or_a_link_at_the_textfile_neither_blocks_nor_is_followed(node):
    """Issue 35 item 5: the folder's owner (Debian: prometheus) puts a FIFO, then a link to a
    root-only file, where wireup_check.prom goes. Before: the FIFO hung wireup-check at its
    read of the old text (before the drain); the link was replaced already."""
    prom = node / "prom/wireup_check.prom"
    os.mkfifo(prom)
    done = run(node)  # the FIFO hung it for ever: run's guard (busy.HANG_S) ends that test
    assert done.returncode == 0 and stat.S_ISREG(os.lstat(prom).st_mode)
    victim = node / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    prom.unlink()
    prom.symlink_to(victim)
    assert run(node).returncode == 0
    assert victim.read_text() == "secret\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert stat.S_ISREG(os.lstat(prom).st_mode) and "wireup_check_verdict" in prom.read_text()
    assert sorted(p.name for p in (node / "prom").iterdir()) == ["wireup_check.prom"]


def test_a_textfile_folder_reached_through_a_link_others_placed_is_refused(node):
    """The folder's parent belongs to someone else, who replaced the folder with a link to /etc
    (here: a folder of the test). Nothing is written there; the check's verdict stands."""
    shared, target = node / "var-lib-prometheus", node / "etc"
    shared.mkdir()
    target.mkdir()
    shared.chmod(0o777)
    (shared / "node-exporter").symlink_to(target)
    done = run(node, "--textfile-dir", str(shared / "node-exporter"), "--json")
    said = json.loads(done.stdout)
    assert done.returncode == 0 and said["verdict"] == "PASS"
    assert any("metrics not written" in n and "symbolic link" in n for n in said["notes"]), said["notes"]
    assert list(target.iterdir()) == []


def _sysfs_copy(node, source):
    tree = node / "sysfs"
    shutil.copytree(SYSFS / source, tree, symlinks=True)
    return tree


def test_a_fail_that_names_a_non_utf8_nic_replaces_the_pass_file(node):
    """Issue 35 item 7: eno1 comes back under a name that is not UTF-8 (a byte 0xff), so the
    baseline's eno1 is missing: FAIL. Before: the text could not be encoded, 'metrics not
    written', and the earlier PASS file stayed for Prometheus to read."""
    tree = _sysfs_copy(node, "ndr8_healthy")
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, sysfs_root=str(tree))))
    assert run(node, "--write-baseline", "--manual").returncode == 0
    assert run(node).returncode == 0
    prom = node / "prom/wireup_check.prom"
    assert 'verdict="PASS"} 1' in prom.read_text()
    net = os.fsencode(tree / "sys/class/net")
    os.rename(os.path.join(net, b"eno1"), os.path.join(net, b"eno\xff1"))
    done = run(node)
    assert done.returncode == 1 and "FAIL gpu-a01: NIC eno1 missing" in done.stdout
    text = prom.read_text()
    assert 'wireup_check_verdict{host="gpu-a01",verdict="FAIL"} 1' in text
    assert 'wireup_check_nic_up{host="gpu-a01",port="eno\\\\udcff1"} 1' in text
    promtool_accepts(prom)


def test_metrics_that_cannot_be_rendered_leave_the_verdict_never_a_stale_pass(node, monkeypatch):
    """Whatever stops the full text (a shape the renderer refuses), the file is replaced by the
    verdict alone and says it is incomplete; a write that fails removes the old file."""
    config = check_run.merge_config(
        {"host": "gpu-a01", "textfile_dir": str(node / "prom"), "textfile": "always"}
    )
    prom = node / "prom/wireup_check.prom"
    prom.write_text('wireup_check_verdict{host="gpu-a01",verdict="PASS"} 1\n')
    result = check_run.quick.result(
        "gpu-a01", None, None, found={"problems": [{"kind": "nic", "part": "NIC x", "message": "NIC x down"}]}
    )

    def refuse(_result):
        raise ValueError("wireup_check_nic_up: the label set {...} is given twice")

    monkeypatch.setattr(check_run.metrics, "check_families", refuse)
    note = check_run.write_check_textfile(config, result)
    text = prom.read_text()
    assert 'wireup_check_verdict{host="gpu-a01",verdict="FAIL"} 1' in text
    assert 'wireup_check_metrics_incomplete{host="gpu-a01"} 1' in text
    assert note.startswith("metrics cut to the verdict: wireup_check_nic_up")
    promtool_accepts(prom)

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(check_run.atomicfile, "write_bytes", full)
    note = check_run.write_check_textfile(config, dict(result, time=1796212800.0))  # a later run
    assert not prom.exists() and "No space left on device" in note and "old file removed" in note


def _bench_node(node, owner=None, mode=0o755, lib_mode=None):
    """A nccl-tests build whose all_reduce_perf leaves a mark when it runs."""
    build = node / "venv/nccl-tests"
    (build / "lib").mkdir(parents=True)
    script(build / "all_reduce_perf", f"touch {node}/ran\ncat {H200 / 'all_reduce_perf.txt'}\n")
    build.chmod(mode)
    if lib_mode is not None:
        (build / "lib").chmod(lib_mode)
    if owner is not None:
        os.chown(build, owner, owner)
    part = {
        "run_id": "20261202T010203Z",
        "gpu_count": 2,
        "links": [["GPU0", "GPU1", "NV18"]],
        "figure": {"collective": "all_reduce", "size": 1 << 33, "busbw": 348.0},
        "nccl_tests": {"bin_dir": str(build), "ld_library_path": str(build / "lib")},
    }
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, bench={"size": 1 << 33})))
    assert run(node, "--write-baseline", stdin=json.dumps(part)).returncode == 0


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ({"owner": 4242}, "is owned by uid 4242"),
        ({"mode": 0o775}, "is writable by its group or others"),
        ({"lib_mode": 0o777}, "lib is writable by its group or others"),
    ],
)
def test_the_benchmark_runs_nothing_from_a_folder_another_user_can_change(node, how, said):
    """Issue 35 item 7: `wireup-check --bench` runs as root with LD_LIBRARY_PATH into the venv,
    which pytorch_venv_owner may give to another user. Before: it ran (the mark was left)."""
    _bench_node(node, **how)
    done = run(node, "--bench")
    assert not (node / "ran").exists()
    assert done.returncode == 2 and done.stdout.startswith("wireup-check: ERROR gpu-a01: benchmark refused: ")
    assert said in done.stdout and "pytorch_venv_owner" in done.stdout


def test_the_benchmark_runs_from_a_build_only_root_can_change(node):
    _bench_node(node)
    ok = json.loads(run(node, "--bench", "--json").stdout)
    assert (node / "ran").exists() and ok["verdict"] == "PASS" and 340 < ok["bench"]["busbw"] < 350


def test_the_testbeds_stand_in_nvidia_smi_makes_wireup_check_drain_for_a_gpu(node, slurm):
    """The stand-in tests/integration/test_slurm.py installs on a testbed node (its node_reads:
    the H200 captures) gives wireup-check a node whose GPU0 waits for a reset: the same drain."""
    smi = node / "stand-in-smi"
    smi.write_text(stand_in_smi.script(str(REMAP_PENDING["h200x2-xml-edited"][0]), str(H200)))
    smi.chmod(0o755)
    done = run(node, "--drain", "--nvidia-smi", str(smi), env=slurm)
    assert done.returncode == 1 and "FAIL gpu-a01: GPU0 reset: GPU0 (00000000:00:06.0" in done.stdout
    assert scontrol_calls(node)[1].startswith(
        "update NodeName=gpu-a01 State=DRAIN Reason=wireup: [node_problem] hw/quick: GPU0 reset"
    )


def _partition(node, drained_by_wireup, size=20):
    """shown.txt: every node of partition gpu as scontrol show node -o prints them (the testbed's
    22.05.8 record layout), the first ``drained_by_wireup`` of the others drained by wireup."""
    lines = ["NodeName=gpu-a01 Arch=x86_64 State=IDLE ThreadsPerCore=1 Partitions=gpu"]
    for i in range(2, size + 1):
        st = "IDLE+DRAIN" if i - 2 < drained_by_wireup else "IDLE"
        why = (
            " Reason=wireup: [node_problem] hw/quick: GPU0 reset [root@2026-12-02T10:00:00]"
            if i - 2 < drained_by_wireup
            else ""
        )
        lines.append(f"NodeName=gpu-a{i:02d} Arch=x86_64 State={st} ThreadsPerCore=1 Partitions=gpu{why}")
    (node / "shown.txt").write_text("\n".join(lines) + "\n")


def test_the_node_side_drain_stays_within_its_partitions_blast_radius(node, slurm):
    """Issue 37 item 3: before, wireup-check --drain drained every failing node, however many of
    its partition wireup had drained already. 10% of 20 is 2: with one drained it drains, with
    two it stops and names the likely shared cause."""
    assert run(node, "--write-baseline", "--manual").returncode == 0
    (node / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 0, 18))
    _partition(node, 1)
    done = run(node, "--drain", env=slurm)
    assert [c.split()[0] for c in scontrol_calls(node)] == ["show", "update"], done.stderr
    (node / "scontrol.log").write_text("")
    _partition(node, 2)
    done = run(node, "--drain", env=slurm)
    assert done.returncode == 1 and scontrol_calls(node) == ["show node -o"]
    assert (
        "Slurm: wireup: blast radius: 3 of 20 nodes of Slurm partition gpu would be out of service "
        "(2 drained by wireup already, 1 now; the limit is 2: 10%, at most 8): nothing more is drained. "
        "The cause is likely shared (a driver rollout, a switch, the fabric manager): 1 of 1 have 'GPU0"
    ) in done.stderr
    # the limit is the node's configuration (node_check_drain_max_share)
    conf = json.loads((node / "check.json").read_text())
    (node / "check.json").write_text(json.dumps(dict(conf, drain_max_share=15)))
    (node / "scontrol.log").write_text("")
    run(node, "--drain", env=slurm)
    assert [c.split()[0] for c in scontrol_calls(node)] == ["show", "update"]


def test_the_node_side_drain_fails_closed_when_slurm_does_not_name_the_node(node, slurm):
    assert run(node, "--write-baseline", "--manual").returncode == 0
    (node / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 0, 18))
    (node / "shown.txt").write_text("slurm_load_node error: Unable to contact slurm controller\n")
    done = run(node, "--drain", env=slurm)
    assert scontrol_calls(node) == ["show node -o"]
    assert (
        "Slurm: wireup: blast radius: no node group or partition could be read: nothing is drained"
        in done.stderr
    )


# ------------------------------------------------------------ issue 37 item 4: the node's own drains
def _drained_by_the_check(node, slurm):
    """wireup-check --drain on a node whose GPU0 lost its NVLinks: (its scontrol update's reason,
    the event files its history folder holds)."""
    assert run(node, "--write-baseline", "--manual").returncode == 0
    (node / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 0, 18))
    done = run(node, "--drain", env=slurm)
    assert done.returncode == 1, done.stdout + done.stderr
    reason = scontrol_calls(node)[1].split("Reason=", 1)[1]
    assert "history: the drain recorded in " in done.stderr, done.stderr
    return reason, sorted((node / "history").iterdir())


def test_a_node_side_drain_is_an_event_the_controller_collects_once_then_the_node_forgets_it(node, slurm):
    """Before: wireup-check drained the node and wrote nothing (no controller to write to). Now the
    drain is an event in the node's folder (the same Event, who node:wireup-check, 0640); the
    collector takes the node reader's files into results/history/HOST/, a second collection (the
    removal failed) writes nothing again, and only collected files leave the node."""
    reason, [path] = _drained_by_the_check(node, slurm)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    ev = json.loads(path.read_text())
    assert (ev["host"], ev["kind"], ev["who"], ev["why"]) == ("gpu-a01", "drain", "node:wireup-check", reason)
    # drained already (for a wireup reason): no second drain, no second event
    (node / "shown.txt").write_text(
        f"NodeName=gpu-a01 State=IDLE+DRAIN Reason={reason} [root@2026-12-02T10:00:00]\n"
    )
    run(node, "--drain", env=slurm)
    assert sorted((node / "history").iterdir()) == [path]

    results = str(node / "results")
    files, skipped = history.node_files(str(node / "history"))
    assert skipped == [] and [f["name"] for f in files] == [path.name]
    got = history.collect(results, "gpu-a01", files, skipped)
    assert got["collected"] == [path.name] and got["refused"] == [] and len(got["written"]) == 1
    assert history.read(results, "gpu-a01") == [ev]
    again = history.collect(results, "gpu-a01", files, skipped)
    assert again["written"] == [] and again["collected"] == [path.name]
    assert history.read(results, "gpu-a01") == [ev]  # append-only, no duplicate
    assert history.remove_node(str(node / "history"), got["collected"]) == [path.name]
    assert list((node / "history").iterdir()) == []


def test_a_controller_event_of_the_same_name_is_never_overwritten(node, slurm):
    _reason, [path] = _drained_by_the_check(node, slurm)
    results = node / "results"
    mine = results / "history/gpu-a01" / path.name
    mine.parent.mkdir(parents=True)
    mine.write_text("{}")
    got = history.collect(str(results), "gpu-a01", *history.node_files(str(node / "history")))
    assert mine.read_text() == "{}" and got["collected"] == [path.name]
    assert [os.path.basename(p) for p in got["written"]] == [path.name.replace("-000-", "-001-")]


def test_a_flapping_check_keeps_at_most_so_many_events_uncollected(node, slurm):
    """The node's folder is bounded: past history.MAX_NODE_EVENTS uncollected events the next
    drain is still made, its event refused and said."""
    folder = node / "history"
    folder.mkdir()
    ev = history.event("gpu-a01", "drain", history.NODE_WHO, "x", when=1796630400.0)
    for _i in range(history.MAX_NODE_EVENTS):
        history.write_node(str(folder), ev)
    assert run(node, "--write-baseline", "--manual").returncode == 0
    (node / "smi/nvlink_s.txt").write_text(links_down((H200 / "nvlink_s.txt").read_text(), 0, 18))
    done = run(node, "--drain", env=slurm)
    assert [c.split()[0] for c in scontrol_calls(node)] == ["show", "update"]
    assert "history: the drain not recorded: " in done.stderr and "not yet collected" in done.stderr
    assert len(list(folder.iterdir())) == history.MAX_NODE_EVENTS


def _tamper(node, path, **changes):
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(dict(doc, **changes)))


HOSTILE = {
    "another host's name": (lambda node, p: _tamper(node, p, host="gpu-a02"), "names host 'gpu-a02'"),
    "the controller's who": (lambda node, p: _tamper(node, p, who="controller:root"), "node:wireup-check"),
    "a return": (
        lambda node, p: _tamper(
            node, p.rename(p.with_name(p.name.replace("drain", "return"))), kind="return"
        ),
        "node:wireup-check",
    ),
    "a time its name does not say": (lambda node, p: _tamper(node, p, time=1796630400.0), "its name says"),
    "off-grammar name": (lambda node, p: p.rename(p.with_name("x" + p.name)), "not an event's file name"),
    "not JSON": (lambda node, p: p.write_text("{broken"), "not an event"),
    "huge": (lambda node, p: p.write_text(" " * (1 << 20) + p.read_text()), "over"),
    "a link": (
        lambda node, p: ((node / "secret").write_text("s3cret"), p.unlink(), p.symlink_to(node / "secret")),
        "not a regular file",
    ),
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_hostile_event_file_on_the_node_is_refused_and_said(node, slurm, hostile):
    """What the node holds is not trusted: the reader never follows a link nor reads past the size
    limit, the collector checks every file again (its name's grammar and time, the Event's, the
    node's own host name, wireup-check's drains only) and a hand-made list too; nothing refused is
    written or removed from the node."""
    _reason, [path] = _drained_by_the_check(node, slurm)
    tamper, said = HOSTILE[hostile]
    tamper(node, path)
    results = str(node / "results")
    files, skipped = history.node_files(str(node / "history"))
    got = history.collect(results, "gpu-a01", files, skipped)
    assert got["written"] == [] and got["collected"] == [] and history.read(results, "gpu-a01") == []
    assert len(got["refused"]) == 1 and said in got["refused"][0], got["refused"]
    assert "s3cret" not in json.dumps(files)
    # the collector alone, handed what a hostile node may send instead of the reader's files
    raw = {"name": path.name, "text": " " * (1 << 20)}
    for sent in ([raw], [{"name": ["x"], "text": 1}], ["x"]):
        assert history.collect(results, "gpu-a01", sent, [])["collected"] == []


def _ansible(module, args, check=False):
    """One of wireup's modules run by Ansible on this machine, as repair.yml runs it."""
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    argv = [str(pathlib.Path(sys.executable).with_name("ansible")), "-i", "localhost,", "-c", "local"]
    argv += ["--check"] if check else []
    argv += ["-e", f"ansible_python_interpreter={sys.executable}", "localhost"]
    argv += ["-m", f"wireup.cluster.{module}", "-a", json.dumps(args)]
    out = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=busy.HANG_S, check=False
    )
    return out.returncode, json.loads(out.stdout.split("=>", 1)[1])


def test_repair_collects_through_its_two_modules_and_check_mode_changes_nothing(node, slurm):
    """roles/repair/tasks/collect.yml's steps: wireup_node_history reads the node's folder,
    wireup_history_collect writes into results/history/HOST/, wireup_node_history removes what
    was collected; in check mode nothing is written or removed."""
    _reason, [path] = _drained_by_the_check(node, slurm)
    folder, results = str(node / "history"), str(node / "results")
    rc, read = _ansible("wireup_node_history", {"path": folder})
    assert rc == 0 and read["changed"] is False and [f["name"] for f in read["files"]] == [path.name]
    args = {"results_dir": results, "host": "gpu-a01", "files": read["files"], "unread": read["unread"]}
    rc, dry = _ansible("wireup_history_collect", args, check=True)
    assert rc == 0 and dry["collected"] == [] and not (node / "results").exists(), dry
    rc, got = _ansible("wireup_history_collect", args)
    assert rc == 0 and got["changed"] is True and got["collected"] == [path.name], got
    assert got["show"] == ["History: gpu-a01: 1 drain event(s) of wireup-check collected (1 new), 0 refused"]
    rc, dry = _ansible("wireup_node_history", {"path": folder, "remove": got["collected"]}, check=True)
    assert rc == 0 and dry["removed"] == [] and path.exists()
    rc, gone = _ansible("wireup_node_history", {"path": folder, "remove": got["collected"]})
    assert rc == 0 and gone["removed"] == [path.name] and not path.exists()
    assert [e["kind"] for e in history.read(results, "gpu-a01")] == ["drain"]
