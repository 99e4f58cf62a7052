"""roles/gpu_trial/files/gpu_fingerprint.py without a GPU: arguments, statistics, the window budget,
the sampler's bookkeeping, the PCI path, and the whole program in its CPU TEST mode (plain Python on
this machine, which has no torch; the testbed runs the same mode with torch on CPU)."""

import importlib.util
import json
import pathlib
import subprocess
import sys
import time

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import shape
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import gpu_trial

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "roles" / "gpu_trial" / "files" / "gpu_fingerprint.py"
spec = importlib.util.spec_from_file_location("gpu_fingerprint", SCRIPT)
fp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fp)


def test_arguments_and_their_errors(capsys):
    args = fp.parse_args([])
    assert args.seconds == 25.0 and args.sets == ["gemm", "hbm", "pcie"] and args.gpus == "all"
    assert args.gemm_dtypes == ["bf16", "fp16", "tf32", "fp8"] and args.device == "cuda"
    args = fp.parse_args(
        ["--seconds", "0.5", "--sets", "gemm,pcie,gemm", "--gpus", "3,1,1", "--device", "cpu"]
    )
    assert args.sets == ["gemm", "pcie"] and args.gpus == [1, 3] and args.seconds == 0.5
    for bad in (
        ["--seconds", "0"],
        ["--seconds", "nan"],
        ["--sets", "gemm,disk"],
        ["--gpus", "-1"],
        ["--gpus", "a"],
        ["--gemm-size", "0"],
        ["--gemm-dtypes", "int4"],
    ):
        with pytest.raises(SystemExit):
            fp.parse_args(bad)
    assert "must be" in capsys.readouterr().err


def test_summary_and_batches():
    assert fp.summarize([3.0, 1.0, 2.0, float("nan"), None]) == {
        "median": 2.0,
        "min": 1.0,
        "max": 3.0,
        "mean": 2.0,
        "stdev": 1.0,
        "samples": 3,
    }
    assert fp.summarize([]) is None and fp.summarize([5])["stdev"] == 0.0
    assert fp.batch_size(0.001) == 20 and fp.batch_size(0.5) == 1 and fp.batch_size(0) == fp.MAX_BATCH
    assert fp.batch_size(1e-9) == fp.MAX_BATCH


def test_sustain_repeats_batches_until_the_window_is_spent():
    now = [0.0]
    calls = []

    def run_batch(n):
        calls.append(n)
        now[0] += 0.004 * n
        return 0.004 * n

    rates = fp.sustain(run_batch, work_per_op=8.0, seconds=1.0, clock=lambda: now[0])
    assert calls[:2] == [1, 1] and set(calls[2:]) == {5}  # warm-up, calibration, then 20 ms batches
    assert all(r == pytest.approx(2000.0) for r in rates) and 45 <= len(rates) <= 52


@pytest.mark.parametrize("gpus", [1, 2, 8, 16])
def test_the_windows_cost_three_sets_whatever_the_gpu_count(gpus):
    windows = fp.split_window(25.0, ["gemm", "hbm", "pcie"], ["bf16", "fp16", "tf32", "fp8"], gpus)
    total = sum(windows[f"gemm_{d}"] for d in ("bf16", "fp16", "tf32", "fp8")) + windows["hbm_copy"]
    total += windows["pcie_alone"] * 2 * gpus + windows["pcie_concurrent"] * 2
    assert total == pytest.approx(75.0)


def test_sampler_accounts_time_per_reason_and_phase():
    now = [100.0]
    masks = iter([0x4, 0x4 | 0x40, 0x0, 0x80])

    def read(gpu):
        return {
            "reasons": next(masks) if gpu == 0 else 0x1,
            "sm_clock_mhz": 1980,
            "temperature_c": 60,
            "power_w": 650.5,
        }

    sampler = fp.Sampler(read, [0, 1], interval=0.1, clock=lambda: now[0])
    sampler.begin(0, "gemm_bf16_flops")
    sampler.begin(1, "gemm_bf16_flops")
    for _ in range(3):
        sampler.tick()
        now[0] += 0.5
    sampler.end(1)
    sampler.tick()  # GPU1 is between figures: not counted
    summary = sampler.summary(0)["gemm_bf16_flops"]
    assert summary["samples"] == 4 and summary["window_s"] == pytest.approx(0.1 + 0.5 * 3)
    assert summary["reasons_s"] == {
        "hw_power_brake_slowdown": 0.5,
        "hw_thermal_slowdown": 0.5,
        "sw_power_cap": 0.6,  # 0.1 (the first look) + 0.5
    }
    assert summary["sm_clock_mhz"]["median"] == 1980 and summary["power_w"]["max"] == 650.5
    assert sampler.summary(1)["gemm_bf16_flops"]["samples"] == 3
    assert fp.reasons_of(0x48) == ["hw_slowdown", "hw_thermal_slowdown"] and fp.reasons_of(None) == []


def test_sampler_names_a_gpu_that_stops_answering():
    def read(gpu):
        raise RuntimeError("GPU is lost")

    sampler = fp.Sampler(read, [3], interval=0.1)
    sampler.begin(3, "hbm")
    sampler.tick()
    assert sampler.errors == ["GPU3: NVML read failed: GPU is lost"] and sampler.summary(3) == {}


def test_pci_path_from_sysfs(tmp_path):
    devices = (
        tmp_path
        / "devices"
        / "pci0000:00"
        / "0000:00:01.0"
        / "0000:01:00.0"
        / "0000:02:08.0"
        / "0000:03:00.0"
    )
    devices.mkdir(parents=True)
    bus = tmp_path / "bus"
    bus.mkdir()
    (bus / "0000:03:00.0").symlink_to(devices)
    assert fp.pci_path("00000000:03:00.0", root=str(bus)) == [
        "pci0000:00",
        "0000:00:01.0",
        "0000:01:00.0",
        "0000:02:08.0",
        "0000:03:00.0",
    ]
    assert fp.pci_path("00000000:04:00.0", root=str(bus)) is None and fp.pci_path(None) is None


def test_the_program_in_cpu_test_mode():
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--seconds", "0.2", "--gpus", "0,1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    took = time.monotonic() - start
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["wireup_gpu_fingerprint"] == 1 and doc["mode"] == "cpu-test" and "never judged" in doc["note"]
    # The one typed definition the store checks a node's document against (gpurecord, issue 35).
    assert shape.problem(doc, gpu_trial.FingerprintDoc, "fingerprint") == ""
    assert doc["sets"] == ["gemm", "hbm", "pcie"] and set(doc["set_seconds"]) == {"gemm", "hbm", "pcie"}
    assert doc["elapsed_s"] <= took < 3 * 0.2 + 60  # the windows, plus a loaded machine
    assert [g["index"] for g in doc["gpus"]] == [0, 1] and doc["errors"] == []
    for gpu in doc["gpus"]:
        assert set(gpu["figures"]) == {
            "gemm_bf16_flops",
            "gemm_fp16_flops",
            "gemm_tf32_flops",
            "hbm_copy_bytes_per_second",
            "h2d_bytes_per_second",
            "d2h_bytes_per_second",
            "h2d_concurrent_bytes_per_second",
            "d2h_concurrent_bytes_per_second",
        }
        assert "8.9" in gpu["skipped"]["gemm_fp8_flops"] and gpu["errors"] == {}
        for figure in gpu["figures"].values():
            assert figure["samples"] >= 1 and figure["min"] <= figure["median"] <= figure["max"]
            assert figure["median"] > 0


def test_a_figure_that_fails_is_named_and_the_others_run():
    args = fp.parse_args(
        ["--device", "cpu", "--seconds", "0.05", "--sets", "gemm,hbm", "--gemm-dtypes", "bf16"]
    )

    class Broken(fp.PythonDevice):
        def copy(self, kind):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    devices = [Broken(0, args), fp.PythonDevice(1, args)]
    run = fp.Run(args, devices, None)
    run.run()
    assert "illegal memory access" in run.out[0]["errors"]["hbm_copy_bytes_per_second"]
    assert run.out[0]["figures"]["gemm_bf16_flops"]["samples"] >= 1
    assert run.out[1]["figures"]["hbm_copy_bytes_per_second"]["samples"] >= 1
