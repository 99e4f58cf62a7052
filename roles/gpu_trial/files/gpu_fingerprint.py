#!/usr/bin/env python3
"""GPU performance fingerprint: every GPU of the node at once, one JSON document on stdout.

Run with the node's venv python (torch; nvidia-ml-py optional). Figure sets, each a sustained
window of --seconds (default 25), all GPUs at the same time (one thread per GPU, a barrier
between figures, so they share the node's power, cooling and PCIe switches as in training):

  gemm  dense matmul of N x N (--gemm-size, default 8192: launch overhead is well under 1%):
        bf16, fp16, tf32 (fp32 inputs, TF32 tensor cores) and fp8 (e4m3 through
        torch._scaled_mm, only where the GPU has it: compute capability 8.9 and later).
        Figure: 2 N^3 per matmul / time, in FLOP/s.
  hbm   device-to-device copy of --copy-bytes (default 1 GiB): bytes read + bytes written / time.
  pcie  host-to-device and device-to-host copies of --pcie-bytes (default 256 MiB) from pinned
        memory: each GPU alone (one after the other; half the window shared among them), then
        all GPUs at once (the other half). Bytes / time.

Each figure is timed with CUDA events around a batch of operations on the thread's own stream;
a batch lasts >= 20 ms, and batches repeat until the window is spent. Every figure keeps its
spread over the batches: {median, min, max, mean, stdev, samples}. While the windows run, a
sampler reads NVML every --sample-interval s (clock-event reasons, SM clock, temperature,
power) and records, per figure and GPU, how long each reason held the clocks down.

Output (one JSON document; keys ending in the unit, base units only):
  {"wireup_gpu_fingerprint": 1, "mode": "cuda" | "cpu-test", "note", "torch", "cuda", "nvml",
   "seconds_per_set", "sets", "elapsed_s", "set_seconds": {set: s},
   "gpus": [{"index", "name", "uuid", "bus_id", "compute_capability", "pci_path" (sysfs bridges),
             "figures": {"gemm_bf16_flops": {...}, "hbm_copy_bytes_per_second": {...},
                         "h2d_bytes_per_second": ..., "h2d_concurrent_bytes_per_second": ...},
             "skipped": {figure: why}, "errors": {figure: message},
             "throttle": {figure: {"window_s", "samples", "reasons_s": {reason: s},
                                   "sm_clock_mhz": {...}, "temperature_c": {...}, "power_w": {...}}}}],
   "errors": [...]}

``--device cpu`` is a TEST mode (mode "cpu-test"): the same loops on the CPU (torch on CPU
where torch imports, else plain Python), so the parts that need no GPU (arguments, statistics,
the sampler's bookkeeping, the JSON) run in unit tests and on the testbed. Its figures are the
CPU's, never a GPU's, and wireup never judges them.
"""

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import threading
import time

SETS = ("gemm", "hbm", "pcie")
GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp8")
MIN_SAMPLE_S = 0.02
MAX_BATCH = 10000
# NVML clock-event (throttle) reason bits (nvml.h nvmlClocksEventReason*; stable since R270).
REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


# ---------------------------------------------------------------- arguments
def _positive(kind):
    def convert(text):
        value = kind(text)
        if not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
        return value

    return convert


def _choices(allowed):
    def convert(text):
        items = [t.strip() for t in str(text).split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{text!r}: each must be one of {', '.join(allowed)}")
        return list(dict.fromkeys(items))

    return convert


def _gpu_list(text):
    if str(text).strip() == "all":
        return "all"
    try:
        items = [int(t) for t in str(text).split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus {text!r}: 'all' or indexes like 0,1,2") from None
    if not items or min(items) < 0:
        raise argparse.ArgumentTypeError(f"--gpus {text!r}: 'all' or indexes like 0,1,2")
    return sorted(set(items))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=_positive(float), default=25.0, help="window per figure set")
    parser.add_argument("--sets", type=_choices(SETS), default=list(SETS), help="gemm,hbm,pcie")
    parser.add_argument("--gemm-dtypes", type=_choices(GEMM_DTYPES), default=list(GEMM_DTYPES))
    parser.add_argument("--gemm-size", type=_positive(int), default=8192, help="N of the N x N matmul")
    parser.add_argument("--copy-bytes", type=_positive(int), default=1 << 30, help="HBM copy size")
    parser.add_argument("--pcie-bytes", type=_positive(int), default=256 << 20, help="H2D/D2H copy size")
    parser.add_argument("--gpus", type=_gpu_list, default="all", help="'all' or indexes (cpu: fake devices)")
    parser.add_argument("--sample-interval", type=_positive(float), default=0.1, help="NVML sampling period")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: TEST mode only")
    parser.add_argument("--out", default="", help="write the JSON there too (stdout always)")
    return parser.parse_args(argv)


# ---------------------------------------------------------------- statistics
def summarize(values):
    """{median, min, max, mean, stdev, samples} of the finite values; None when there are none."""
    finite = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if not finite:
        return None
    return {
        "median": statistics.median(finite),
        "min": min(finite),
        "max": max(finite),
        "mean": statistics.fmean(finite),
        "stdev": statistics.stdev(finite) if len(finite) > 1 else 0.0,
        "samples": len(finite),
    }


def batch_size(seconds_per_op, min_sample_s=MIN_SAMPLE_S):
    """Operations per timed batch so one batch lasts >= min_sample_s (1 .. MAX_BATCH)."""
    if not seconds_per_op or seconds_per_op <= 0 or not math.isfinite(seconds_per_op):
        return MAX_BATCH
    return max(1, min(MAX_BATCH, math.ceil(min_sample_s / seconds_per_op)))


def sustain(run_batch, work_per_op, seconds, clock=time.monotonic):
    """Rates (work / s) of timed batches, repeated until `seconds` of wall time are spent.

    run_batch(n) runs n operations and returns their time in seconds (CUDA events on a GPU);
    the first (untimed) call warms up and calibrates the batch size."""
    run_batch(1)
    batch = batch_size(run_batch(1))
    rates, start = [], clock()
    while True:
        took = run_batch(batch)
        if took > 0:
            rates.append(work_per_op * batch / took)
        if clock() - start >= seconds:
            return rates


def split_window(seconds, sets, dtypes, gpu_count):
    """Seconds of each figure: the gemm set's window is shared by its dtypes; the pcie set gives
    half its window to the GPUs alone (2 directions each, one GPU after the other) and half to
    the concurrent run (2 directions)."""
    out = {}
    if "gemm" in sets:
        out.update({f"gemm_{d}": seconds / len(dtypes) for d in dtypes})
    if "hbm" in sets:
        out["hbm_copy"] = seconds
    if "pcie" in sets:
        out["pcie_alone"] = seconds / 2 / (2 * max(gpu_count, 1))
        out["pcie_concurrent"] = seconds / 2 / 2
    return out


# ---------------------------------------------------------------- the sampler's bookkeeping
def reasons_of(mask):
    """NVML reason bitmask -> sorted reason names."""
    if mask is None:
        return []
    return sorted(name for bit, name in REASON_BITS.items() if int(mask) & bit)


class Sampler:
    """Per phase (a figure) and GPU: how long each clock-event reason was active, and the SM
    clock, temperature and power seen. read(gpu) -> {"reasons": mask, "sm_clock_mhz",
    "temperature_c", "power_w"} (any may be None); the thread calls it every `interval` s."""

    def __init__(self, read, gpus, interval, clock=time.monotonic):
        self.read, self.gpus, self.interval, self.clock = read, list(gpus), interval, clock
        self.phase = {}
        self.data = {}
        self.lock = threading.Lock()
        self.last = None
        self.stopping = threading.Event()
        self.thread = None
        self.errors = []

    def begin(self, gpu, phase):
        with self.lock:
            self.phase[gpu] = phase

    def end(self, gpu):
        with self.lock:
            self.phase.pop(gpu, None)

    def record(self, gpu, reading, dt):
        """Account one reading of one GPU for `dt` seconds to its current phase."""
        with self.lock:
            phase = self.phase.get(gpu)
            if phase is None:
                return
            entry = self.data.setdefault((phase, gpu), _empty_entry())
        entry["window_s"] += dt
        entry["samples"] += 1
        for reason in reasons_of(reading.get("reasons")):
            entry["reasons_s"][reason] = entry["reasons_s"].get(reason, 0.0) + dt
        for key in ("sm_clock_mhz", "temperature_c", "power_w"):
            if reading.get(key) is not None:
                entry[key].append(reading[key])

    def tick(self):
        """One round of readings (the thread's body; tests call it directly)."""
        now = self.clock()
        dt = self.interval if self.last is None else max(0.0, now - self.last)
        self.last = now
        for gpu in self.gpus:
            try:
                reading = self.read(gpu)
            except Exception as err:  # a GPU that stops answering NVML is named, not fatal
                self.errors.append(f"GPU{gpu}: NVML read failed: {err}")
                continue
            self.record(gpu, reading, dt)

    def start(self):
        def loop():
            while not self.stopping.wait(self.interval):
                self.tick()

        self.thread = threading.Thread(target=loop, name="wireup-sampler", daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        if self.thread:
            self.thread.join(timeout=5)

    def summary(self, gpu):
        """{phase: {window_s, samples, reasons_s, sm_clock_mhz, temperature_c, power_w}} of one GPU."""
        out = {}
        for (phase, who), entry in sorted(self.data.items()):
            if who != gpu:
                continue
            out[phase] = {
                "window_s": round(entry["window_s"], 3),
                "samples": entry["samples"],
                "reasons_s": {k: round(v, 3) for k, v in sorted(entry["reasons_s"].items())},
                **{k: summarize(entry[k]) for k in ("sm_clock_mhz", "temperature_c", "power_w")},
            }
        return out


def _empty_entry():
    return {
        "window_s": 0.0,
        "samples": 0,
        "reasons_s": {},
        "sm_clock_mhz": [],
        "temperature_c": [],
        "power_w": [],
    }


# ---------------------------------------------------------------- NVML (optional)
def nvml_reader(uuids):
    """(read(gpu), version, note) through nvidia-ml-py, matching GPUs by UUID (else by index);
    (None, None, why) without it."""
    try:
        import pynvml
    except ImportError:
        return None, None, "nvidia-ml-py not installed: clocks and throttle reasons not sampled"
    try:
        pynvml.nvmlInit()
        handles = _nvml_handles(pynvml, uuids)
    except Exception as err:
        return None, None, f"NVML unavailable ({err}): clocks and throttle reasons not sampled"
    # Renamed in nvidia-ml-py 12.535 (throttle -> clocks event); both ask NVML the same.
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    reasons = reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def read(gpu):
        h = handles[gpu]
        power = _answer(pynvml.nvmlDeviceGetPowerUsage, h)
        return {
            "reasons": _answer(reasons, h),
            "sm_clock_mhz": _answer(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
            "temperature_c": _answer(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": power / 1000.0 if power is not None else None,
        }

    version = getattr(pynvml, "__version__", None) or _dist_version("nvidia-ml-py")
    return read, version, ""


def _answer(call, *args):
    """An NVML getter's answer, None where this GPU does not support it."""
    try:
        return call(*args)
    except Exception:
        return None


def _nvml_handles(pynvml, uuids):
    by_uuid = {}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid = pynvml.nvmlDeviceGetUUID(h)
        by_uuid[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = (i, h)
    out = {}
    for gpu, uuid in uuids.items():
        found = by_uuid.get(uuid) if uuid else None
        out[gpu] = found[1] if found else pynvml.nvmlDeviceGetHandleByIndex(gpu)
    return out


def _dist_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


# ---------------------------------------------------------------- backends
class PythonDevice:
    """CPU TEST mode without torch: the same interface, plain-Python work, wall-clock timing."""

    kind = "python"

    def __init__(self, index, args):
        self.index, self.args = index, args
        self.name, self.uuid, self.bus_id, self.capability = f"CPU test device {index}", None, None, None
        self.keep = []

    def gemm(self, dtype):
        if dtype == "fp8":
            return None, "fp8 needs a CUDA GPU of compute capability 8.9 or later (CPU test mode)"
        n = 24
        a = [[float(i * n + j) % 7 for j in range(n)] for i in range(n)]

        def op():
            [[sum(x * y for x, y in zip(row, col)) for col in zip(*a)] for row in a]

        return (op, 2 * n**3), ""

    def copy(self, kind):
        size = min(self.args.copy_bytes if kind == "hbm" else self.args.pcie_bytes, 4 << 20)
        src, dst = bytearray(b"\x01" * size), bytearray(size)
        self.keep = [src, dst]
        view, out = memoryview(src), memoryview(dst)

        def op():
            out[:] = view

        return (op, (2 if kind == "hbm" else 1) * size), ""

    def timed(self, op, n):
        start = time.perf_counter()
        for _repeat in range(n):
            op()
        return time.perf_counter() - start

    def release(self):
        self.keep = []


class TorchDevice:
    """One GPU (CUDA events on its own stream, pinned host memory) or, in TEST mode, the CPU."""

    kind = "torch"

    def __init__(self, index, args, torch):
        self.torch, self.args, self.index = torch, args, index
        self.cuda = args.device == "cuda"
        self.dev = torch.device(f"cuda:{index}" if self.cuda else "cpu")
        self.stream = torch.cuda.Stream(device=self.dev) if self.cuda else None
        props = torch.cuda.get_device_properties(index) if self.cuda else None
        self.name = props.name if props else f"CPU test device {index}"
        self.capability = (props.major, props.minor) if props else None
        uuid = getattr(props, "uuid", None) if props else None
        self.uuid = f"GPU-{uuid}" if uuid else None
        self.bus_id = _bus_id(props)
        self.memory = props.total_memory if props else 8 << 30
        self.keep = []

    def _rand(self, shape, dtype):
        return self.torch.randn(*shape, device=self.dev, dtype=self.torch.float32).to(dtype)

    def gemm(self, dtype):
        torch = self.torch
        n = self.args.gemm_size if self.cuda else min(self.args.gemm_size, 512)
        if dtype == "fp8":
            return self._fp8(n)
        kind = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
        if not self.cuda and dtype == "fp16":
            kind = torch.float32  # CPU fp16 matmul is an emulation: time fp32 instead (test mode)
        a, b = self._rand((n, n), kind), self._rand((n, n), kind)
        c = torch.empty((n, n), device=self.dev, dtype=kind)
        self.keep = [a, b, c]
        return self.ready((lambda: torch.matmul(a, b, out=c), 2 * n**3)), ""

    def _fp8(self, n):
        torch = self.torch
        if not self.cuda or self.capability < (8, 9) or not hasattr(torch, "_scaled_mm"):
            cc = ".".join(map(str, self.capability)) if self.capability else "CPU"
            return None, f"no fp8 matmul on this device (compute capability {cc}; fp8 needs 8.9 or later)"
        a = (torch.randn(n, n, device=self.dev) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, n, device=self.dev) * 0.5).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device=self.dev, dtype=torch.float32)
        self.keep = [a, b, one]

        def op():
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return self.ready((op, 2 * n**3)), ""

    def copy(self, kind):
        """hbm: device-to-device copy (read + write counted); h2d/d2h: pinned host memory."""
        torch = self.torch
        cap = self.memory // 8 if self.cuda else 16 << 20  # TEST mode: small CPU buffers
        if kind == "hbm":
            size = min(self.args.copy_bytes, cap) // 4 * 4
            src = torch.empty(size // 4, device=self.dev, dtype=torch.float32).fill_(1.0)
            dst = torch.empty_like(src)
            self.keep = [src, dst]
            return self.ready((lambda: dst.copy_(src, non_blocking=True), 2 * size)), ""
        size = min(self.args.pcie_bytes, cap) // 4 * 4
        host = torch.empty(size // 4, dtype=torch.float32, pin_memory=self.cuda).fill_(1.0)
        dev = torch.empty(size // 4, device=self.dev, dtype=torch.float32)
        self.keep = [host, dev]
        if kind == "h2d":
            return self.ready((lambda: dev.copy_(host, non_blocking=True), size)), ""
        return self.ready((lambda: host.copy_(dev, non_blocking=True), size)), ""

    def timed(self, op, n):
        if not self.cuda:
            start = time.perf_counter()
            for _repeat in range(n):
                op()
            return time.perf_counter() - start
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(self.dev), torch.cuda.stream(self.stream):
            start.record(self.stream)
            for _repeat in range(n):
                op()
            end.record(self.stream)
        end.synchronize()
        return start.elapsed_time(end) / 1000.0

    def ready(self, made):
        """Wait for the inputs (made on the default stream) before the timed stream reads them."""
        if self.cuda:
            self.torch.cuda.synchronize(self.dev)
        return made

    def release(self):
        # Drop the buffers: the caching allocator reuses them for the next figure (no
        # empty_cache from the GPU threads while the others still run).
        self.keep = []


def pci_path(bus_id, root="/sys/bus/pci/devices"):
    """The PCI bridges from the root complex down to a GPU (sysfs' device path), e.g.
    ['pci0000:00', '0000:00:01.0', '0000:01:00.0', '0000:02:08.0', '0000:03:00.0']: GPUs whose
    paths share a root port share its link (the controller groups them). None when unknown."""
    if not bus_id:
        return None
    domain, _colon, rest = str(bus_id).partition(":")
    name = f"{int(domain, 16):04x}:{rest.lower()}" if rest else str(bus_id).lower()
    link = os.path.join(root, name)
    if not os.path.exists(link):
        return None
    parts = [p for p in os.path.realpath(link).split("/") if p.startswith("pci") or p.count(":") == 2]
    return parts if len(parts) >= 2 and parts[0].startswith("pci") and parts[-1] == name else None


def _bus_id(props):
    if props is None or getattr(props, "pci_bus_id", None) is None:
        return None
    domain = getattr(props, "pci_domain_id", 0) or 0
    return f"{domain:08X}:{props.pci_bus_id:02X}:{getattr(props, 'pci_device_id', 0) or 0:02X}.0"


def open_devices(args):
    """(devices, torch version, cuda version, mode note)."""
    if args.device == "cuda":
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # torch's index = nvidia-smi's
    try:
        import torch
    except ImportError:
        if args.device == "cuda":
            raise SystemExit("gpu_fingerprint: torch is not importable by this python") from None
        gpus = args.gpus if args.gpus != "all" else [0]
        return [PythonDevice(i, args) for i in gpus], None, None, "cpu-test (plain Python, no torch)"
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("gpu_fingerprint: torch sees no CUDA GPU (torch.cuda.is_available() is False)")
        count = torch.cuda.device_count()
        gpus = list(range(count)) if args.gpus == "all" else [g for g in args.gpus if g < count]
        torch.set_float32_matmul_precision("high")  # fp32 matmul on TF32 tensor cores
        note = "cuda"
    else:
        gpus = args.gpus if args.gpus != "all" else [0]
        torch.set_num_threads(1)
        note = f"cpu-test (torch {torch.__version__} on CPU)"
    return [TorchDevice(i, args, torch) for i in gpus], torch.__version__, torch.version.cuda, note


# ---------------------------------------------------------------- running the figures
class Run:
    """All devices, the sampler, the barrier and what each figure measured."""

    def __init__(self, args, devices, sampler):
        self.args, self.devices, self.sampler = args, devices, sampler
        self.barrier = threading.Barrier(len(devices), timeout=max(120.0, 10 * args.seconds))
        self.out = {d.index: {"figures": {}, "skipped": {}, "errors": {}} for d in devices}
        self.windows = split_window(args.seconds, args.sets, args.gemm_dtypes, len(devices))
        self.set_seconds = {}

    def measure(self, device, figure, make, seconds):
        """One figure on one device: build its operation, sustain it, keep the spread."""
        result = self.out[device.index]
        try:
            made, why = make()
            if made is None:
                result["skipped"][figure] = why
                return
            op, work = made
            if self.sampler:
                self.sampler.begin(device.index, figure)
            rates = sustain(lambda n: device.timed(op, n), work, seconds)
            result["figures"][figure] = summarize(rates)
        except Exception as err:  # one failed figure is a result; the others still run
            result["errors"][figure] = f"{type(err).__name__}: {err}"[:300]
        finally:
            if self.sampler:
                self.sampler.end(device.index)
            device.release()

    def together(self, figure, make_for, seconds):
        """The same figure on every device at once (one thread each, started by a barrier)."""

        def body(device):
            with contextlib.suppress(threading.BrokenBarrierError):  # one hung: the others still measure
                self.barrier.wait()
            self.measure(device, figure, lambda: make_for(device), seconds)

        threads = [threading.Thread(target=body, args=(d,), name=f"gpu{d.index}") for d in self.devices]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def gemm(self):
        for dtype in self.args.gemm_dtypes:
            self.together(f"gemm_{dtype}_flops", lambda d, k=dtype: d.gemm(k), self.windows[f"gemm_{dtype}"])

    def hbm(self):
        self.together("hbm_copy_bytes_per_second", lambda d: d.copy("hbm"), self.windows["hbm_copy"])

    def pcie(self):
        for device in self.devices:  # each GPU alone: the others idle
            for kind in ("h2d", "d2h"):
                self.measure(
                    device,
                    f"{kind}_bytes_per_second",
                    lambda k=kind, d=device: d.copy(k),
                    self.windows["pcie_alone"],
                )
        for kind in ("h2d", "d2h"):
            self.together(
                f"{kind}_concurrent_bytes_per_second",
                lambda d, k=kind: d.copy(k),
                self.windows["pcie_concurrent"],
            )

    def run(self):
        for name in SETS:
            if name in self.args.sets:
                start = time.monotonic()
                getattr(self, name)()
                self.set_seconds[name] = round(time.monotonic() - start, 3)


def document(args, devices, run, meta):
    """The JSON document of the run (this file's docstring)."""
    gpus = []
    for d in devices:
        entry = {
            "index": d.index,
            "name": d.name,
            "uuid": d.uuid,
            "bus_id": d.bus_id,
            "compute_capability": ".".join(map(str, d.capability)) if d.capability else None,
            "pci_path": pci_path(d.bus_id),
            **run.out[d.index],
            "throttle": run.sampler.summary(d.index) if run.sampler else {},
        }
        gpus.append(entry)
    test = meta["mode"] != "cuda"
    return {
        "wireup_gpu_fingerprint": 1,
        "mode": "cpu-test" if test else "cuda",
        "note": meta["mode"] + (": TEST mode, CPU figures, never judged" if test else ""),
        "torch": meta["torch"],
        "cuda": meta["cuda"],
        "nvml": meta["nvml"],
        "nvml_note": meta["nvml_note"],
        "seconds_per_set": args.seconds,
        "sets": args.sets,
        "gemm_size": args.gemm_size,
        "copy_bytes": args.copy_bytes,
        "pcie_bytes": args.pcie_bytes,
        "elapsed_s": meta["elapsed_s"],
        "set_seconds": run.set_seconds,
        "gpus": gpus,
        "errors": (run.sampler.errors[:20] if run.sampler else []) + meta["errors"],
    }


def main(argv=None):
    started = time.monotonic()
    args = parse_args(argv)
    devices, torch_version, cuda_version, mode = open_devices(args)
    if not devices:
        raise SystemExit("gpu_fingerprint: no device to measure (--gpus names none that exists)")
    read, nvml_version, nvml_note = (None, None, "CPU test mode: no NVML")
    if args.device == "cuda":
        read, nvml_version, nvml_note = nvml_reader({d.index: d.uuid for d in devices})
    sampler = Sampler(read, [d.index for d in devices], args.sample_interval) if read else None
    run = Run(args, devices, sampler)
    if sampler:
        sampler.start()
    try:
        run.run()
    finally:
        if sampler:
            sampler.stop()
    meta = {
        "mode": mode,
        "torch": torch_version,
        "cuda": cuda_version,
        "nvml": nvml_version,
        "nvml_note": nvml_note,
        "elapsed_s": round(time.monotonic() - started, 3),
        "errors": [],
    }
    text = json.dumps(document(args, devices, run, meta), sort_keys=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
