#!/usr/bin/env python3
"""torch.distributed all-reduce benchmark, measured the way nccl-tests measures it.

Run under torchrun (one process per GPU, or one per CPU node). For each message size it runs
--warmup untimed all-reduces, then --iters timed ones, and rank 0 prints ONE JSON line:

  {"wireup_bench": "torch_allreduce", "size": B, "count": N, "dtype": "float32", "time_us": T,
   "algbw": GB/s, "busbw": GB/s, "wrong": 0, "world_size": W, "nnodes": K, "backend": "nccl", ...}

time_us is the mean time of one all-reduce, taken as the slowest rank's (MAX over ranks);
algbw = size / time; busbw = algbw * 2 (W - 1) / W, the definition nccl-tests uses for all_reduce
(its doc/PERFORMANCE.md), so both numbers are directly comparable. On GPUs the time comes from CUDA
events around the timed loop on the current stream; on CPU nodes (gloo) from a monotonic clock
between barriers. After the timed loop, one all-reduce of known values is checked: "wrong" counts
the elements that differ from the expected sum (0 on a healthy run).

Before the first size, rank 0 prints the environment it runs with (NCCL_*, GLOO_*, TORCH_*,
CUDA_* ... and the tuned NCCL env file launch.sh sourced, if any):

  {"wireup_bench_env": {"NCCL_NVLS_ENABLE": "0", ...}, "tuned_env": ""}

The largest size is always --max-bytes itself (bench.yml passes nccl-tests' largest size), so
torch and nccl-tests can be compared at the same size.

wireup's parsers (plugins/module_utils/wireup/probe/bench_output.py parse_torch, benchenv.torch_log_env)
read these lines back.
"""

import argparse
import json
import os
import sys
import time
import types


def parse_size(text):
    """'8', '64K', '1M', '8G' -> bytes (binary units, as nccl-tests' -b/-e)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = str(text).strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def sizes(min_bytes, max_bytes, factor):
    """min, min*factor, ... up to max; max itself always comes last, so the largest size is the
    one nccl-tests ran to (-e) even when the factors step over it."""
    out = []
    size = min_bytes
    while size <= max_bytes:
        out.append(size)
        if factor <= 1:
            break
        size *= factor
    if max_bytes >= min_bytes and (not out or out[-1] != max_bytes):
        out.append(max_bytes)
    return out


# Variables that change what NCCL, gloo or torch do; the benchmark prints them (and only them)
# so each figure records the environment it ran with (plugins/module_utils/wireup/judge/benchenv.py).
RECORDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "NVSHMEM_", "UCX_", "FI_", "LD_LIBRARY_PATH")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", default="1M", help="smallest message (default 1M)")
    parser.add_argument("--max-bytes", default="64M", help="largest message (default 64M)")
    parser.add_argument("--factor", type=int, default=4, help="size multiplier between steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed iterations per size")
    parser.add_argument("--iters", type=int, default=20, help="timed iterations per size")
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "nccl", "gloo"],
        help="auto: nccl when CUDA is available, gloo otherwise",
    )
    return parser.parse_args(argv)


def _device(torch, use_cuda, local_rank):
    """This rank's device: its GPU (made current), or the CPU."""
    if not use_cuda:
        return torch.device("cpu")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def _nccl_version(torch, use_cuda):
    """The NCCL torch bundles ('2.28.9'), '' without CUDA."""
    if not (use_cuda and hasattr(torch.cuda, "nccl")):
        return ""
    version = torch.cuda.nccl.version()
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def setup(backend_arg):
    """The process group joined: torch, dist, use_cuda, backend, device, rank, world, nnodes and
    torch's NCCL version, in one namespace."""
    import torch
    import torch.distributed as dist

    use_cuda = torch.cuda.is_available() and backend_arg != "gloo"
    backend = backend_arg if backend_arg != "auto" else ("nccl" if use_cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = _device(torch, use_cuda, local_rank)
    dist.init_process_group(backend=backend)
    return types.SimpleNamespace(
        torch=torch,
        dist=dist,
        use_cuda=use_cuda,
        backend=backend,
        device=device,
        rank=dist.get_rank(),
        world=dist.get_world_size(),
        nnodes=int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("WIREUP_NNODES", "1"))),
        nccl_version=_nccl_version(torch, use_cuda),
    )


def print_env():
    """The environment line (rank 0): the recorded variables and WIREUP_NCCL_TUNED_ENV, the tuned
    NCCL env file launch.sh sourced ('' when none)."""
    seen = {k: v for k, v in sorted(os.environ.items()) if k.startswith(RECORDED_PREFIXES)}
    tuned = os.environ.get("WIREUP_NCCL_TUNED_ENV", "")
    print(json.dumps({"wireup_bench_env": seen, "tuned_env": tuned}), flush=True)


def timed(rig, buf, iters):
    """Seconds of one all-reduce of buf, the slowest rank's mean over iters: CUDA events around
    the loop on GPUs, a monotonic clock on CPU (gloo)."""
    torch, dist = rig.torch, rig.dist
    if rig.use_cuda:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _step in range(iters):
            dist.all_reduce(buf)
        end.record()
        end.synchronize()
        elapsed_s = start.elapsed_time(end) / 1000.0
    else:
        begin = time.perf_counter()
        for _step in range(iters):
            dist.all_reduce(buf)
        elapsed_s = time.perf_counter() - begin
    per_iter = torch.tensor([elapsed_s / max(iters, 1)], dtype=torch.float64, device=rig.device)
    dist.all_reduce(per_iter, op=dist.ReduceOp.MAX)
    return float(per_iter.item())


def wrong_elements(rig, count, dtype):
    """Elements of a checked all-reduce that differ from the expected sum, over every rank: each
    rank contributes rank+1, so each element must equal W(W+1)/2."""
    torch, dist = rig.torch, rig.dist
    check = torch.full((count,), float(rig.rank + 1), dtype=dtype, device=rig.device)
    dist.all_reduce(check)
    expected = rig.world * (rig.world + 1) / 2.0
    wrong = torch.tensor([int((check != expected).sum().item())], dtype=torch.int64, device=rig.device)
    dist.all_reduce(wrong)
    return int(wrong.item())


def measure(rig, size, args):
    """The result line of one message size: warm-up, the timed loop, the correctness check."""
    torch, dist = rig.torch, rig.dist
    dtype = torch.float32
    elem = torch.tensor([], dtype=dtype).element_size()
    count = max(size // elem, 1)
    buf = torch.ones(count, dtype=dtype, device=rig.device)
    for _step in range(args.warmup):
        dist.all_reduce(buf)
    if rig.use_cuda:
        torch.cuda.synchronize(rig.device)
    dist.barrier()
    seconds = timed(rig, buf, args.iters)
    wrong = wrong_elements(rig, count, dtype)
    algbw = (count * elem) / seconds / 1e9 if seconds > 0 else 0.0
    busbw = algbw * 2.0 * (rig.world - 1) / rig.world
    return {
        "wireup_bench": "torch_allreduce",
        "size": count * elem,
        "count": count,
        "dtype": "float32",
        "time_us": round(seconds * 1e6, 3),
        "algbw": round(algbw, 4),
        "busbw": round(busbw, 4),
        "wrong": wrong,
        "world_size": rig.world,
        "nnodes": rig.nnodes,
        "backend": rig.backend,
        "warmup": args.warmup,
        "iters": args.iters,
        "torch_version": torch.__version__,
        "nccl_version": rig.nccl_version,
    }


def main(argv=None):
    args = parse_args(argv)
    rig = setup(args.backend)
    if rig.rank == 0:
        print_env()
    for size in sizes(parse_size(args.min_bytes), parse_size(args.max_bytes), args.factor):
        line = measure(rig, size, args)
        if rig.rank == 0:
            print(json.dumps(line, sort_keys=True), flush=True)
    rig.dist.barrier()
    rig.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
