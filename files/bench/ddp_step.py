#!/usr/bin/env python3
"""DDP step benchmark: what gradient communication costs one training step, with each comm hook.

Run under torchrun (one process per GPU, or one per CPU node). A synthetic model of --params
parameters (a stack of Linear(width, width) + ReLU layers) trains at a fixed batch per rank with
DistributedDataParallel. For each model size, per configuration, after --warmup untimed steps it
times --iters steps of each (forward, backward, SGD step; the slowest rank's time of each step),
the configurations interleaved in a rotating order so that a busy moment hits them all alike:

  compute   the same step under no_sync(): no gradient all-reduce at all
  none      the full DDP step: gradient buckets all-reduced, overlapped with backward
  fp16      the full step with the fp16_compress hook (buckets cast to fp16 for the all-reduce)
  bf16      the full step with the bf16_compress hook (GPU/NCCL only: gloo has no bf16 all-reduce)
  powersgd  the full step with PowerSGD at --powersgd-rank (low-rank gradient compression)

On GPUs the weights and gradients are fp32 and the forward/backward run in bf16 (autocast), as
mixed-precision training does: the compression hooks then halve the all-reduced bytes. On CPU
nodes (gloo) everything is fp32 and sizes are small.

Rank 0 prints the environment it saw once, then ONE JSON line per model size:

  {"wireup_bench": "ddp_step", "params": N, "grad_bytes": B, "world_size": W, "backend": "nccl",
   "configs": {"compute": {"median_ms": ..., "p25_ms": ..., "p75_ms": ..., "min_ms": ...,
   "max_ms": ..., "steps": N}, "none": {...}, "bf16": {"skipped": "why"}, ...}, ...}

--out FILE also writes those lines to FILE. plugins/module_utils/wireup/judge/ddp_step.py turns them into
the communication share, the hooks' effect and the sentence of the report. By hand on one node:
    torchrun --standalone --nproc-per-node 2 ddp_step.py --params 1G
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time
import types

CONFIGS = ("compute", "none", "fp16", "bf16", "powersgd")
HOOKS = ("none", "fp16", "bf16", "powersgd")
# Variables that change what NCCL, gloo or torch do (the same list as torch_allreduce.py).
RECORDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "NVSHMEM_", "UCX_", "FI_", "LD_LIBRARY_PATH")


def parse_count(text):
    """'125M', '1G', '2.5M', '300K', '5000' -> a parameter count (decimal units: 1M = 10**6)."""
    units = {"K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9}
    text = str(text).strip().upper()
    try:
        value = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise ValueError(f"parameter count {text!r} is not like 5000, 300K, 125M or 1G") from None
    if value < 1 or not math.isfinite(value):
        raise ValueError(f"parameter count {text!r} must be at least 1")
    return int(value)


def plan_model(params, width):
    """(width, layers): Linear(width, width) layers whose parameters (width**2 + width each) come
    closest to params. A width too large for params shrinks to the largest that fits one layer."""
    width = max(1, int(width))
    if params < width * width + width:
        width = max(1, int((math.sqrt(4 * params + 1) - 1) / 2))
    layers = max(1, round(params / (width * width + width)))
    return width, layers


def spread(seconds):
    """Median and spread of per-step times (seconds) in milliseconds."""
    values = sorted(float(s) * 1000.0 for s in seconds)
    if not values:
        return {"median_ms": None, "steps": 0}

    def quantile(q):
        pos = (len(values) - 1) * q
        low = math.floor(pos)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (pos - low)

    return {
        "median_ms": round(quantile(0.5), 4),
        "p25_ms": round(quantile(0.25), 4),
        "p75_ms": round(quantile(0.75), 4),
        "min_ms": round(values[0], 4),
        "max_ms": round(values[-1], 4),
        "steps": len(values),
    }


def hook_unavailable(hook, backend):
    """Why a hook cannot run with this backend ('' when it can)."""
    if hook == "bf16" and backend != "nccl":
        return "bf16_compress needs NCCL (GPU): gloo has no bfloat16 all-reduce"
    return ""


def register_hook(ddp, hook, powersgd_rank=4):
    """Register the named comm hook on a DDP model (none: DDP's own all-reduce); returns its state."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if hook == "none":
        return None
    if hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return None
    if hook == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        return None
    if hook == "powersgd":
        # start_powerSGD_iter=2: compress from the second step on (the warm-up covers the first),
        # not after PowerSGD's default 1,000 plain all-reduce steps.
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=powersgd_rank, start_powerSGD_iter=2
        )
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        return state
    raise ValueError(f"unknown comm hook {hook!r}: use one of {', '.join(HOOKS)}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--params",
        default="auto",
        help="model sizes, comma-separated (125M,1G); auto: 500M on GPUs, 1M on CPU",
    )
    parser.add_argument("--width", type=int, default=0, help="layer width (default 4096 on GPUs, 512 on CPU)")
    parser.add_argument(
        "--batch", type=int, default=0, help="samples per rank and step (default 4096 GPU, 64 CPU)"
    )
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per configuration (at least 3)")
    parser.add_argument("--iters", type=int, default=20, help="timed steps per configuration")
    parser.add_argument(
        "--hooks",
        default=",".join(HOOKS),
        help="comm hooks to time, comma-separated, from none,fp16,bf16,powersgd (default: all)",
    )
    parser.add_argument("--powersgd-rank", type=int, default=4, help="PowerSGD matrix approximation rank")
    parser.add_argument(
        "--bucket-cap-mb", type=float, default=25.0, help="DDP bucket size (DDP's default 25)"
    )
    parser.add_argument(
        "--backend", default="auto", choices=["auto", "nccl", "gloo"], help="auto: nccl with CUDA, else gloo"
    )
    parser.add_argument("--out", default="", help="also write the result lines to this file (rank 0)")
    args = parser.parse_args(argv)
    hooks = [h.strip() for h in args.hooks.split(",") if h.strip()]
    bad = [h for h in hooks if h not in HOOKS]
    if bad or not hooks:
        parser.error(f"--hooks {args.hooks!r}: use names from {','.join(HOOKS)}")
    if args.warmup < 3 or args.iters < 1:
        parser.error("--warmup must be >= 3 (PowerSGD compresses from its second step) and --iters >= 1")
    args.hook_list = hooks
    return args


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


def setup(args):
    """The process group joined, with what every model size shares: torch and its modules, use_cuda,
    backend, device, local_rank, rank, world, nnodes, torch's NCCL version, the model sizes, the
    default width, the batch per rank and the precision, in one namespace."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    use_cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = _device(torch, use_cuda, local_rank)
    dist.init_process_group(backend=backend, device_id=device if use_cuda else None)
    asked = ("500M" if use_cuda else "1M") if args.params == "auto" else args.params
    return types.SimpleNamespace(
        torch=torch,
        dist=dist,
        nn=nn,
        ddp_class=DistributedDataParallel,
        use_cuda=use_cuda,
        backend=backend,
        device=device,
        local_rank=local_rank,
        rank=dist.get_rank(),
        world=dist.get_world_size(),
        nnodes=int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("WIREUP_NNODES", "1"))),
        nccl_version=_nccl_version(torch, use_cuda),
        sizes=[parse_count(p) for p in asked.split(",")],
        width_default=4096 if use_cuda else 512,
        batch=args.batch or (4096 if use_cuda else 64),
        # GPUs: fp32 weights and gradients, bf16 compute (autocast), as mixed-precision training runs.
        precision="bf16-autocast" if use_cuda else "fp32",
    )


def print_env():
    """The environment line (rank 0): the recorded variables and the tuned env file launch.sh sourced."""
    seen = {k: v for k, v in sorted(os.environ.items()) if k.startswith(RECORDED_PREFIXES)}
    print(
        json.dumps({"wireup_bench_env": seen, "tuned_env": os.environ.get("WIREUP_NCCL_TUNED_ENV", "")}),
        flush=True,
    )


def sync(rig):
    if rig.use_cuda:
        rig.torch.cuda.synchronize(rig.device)


def build(rig, width, layers):
    """The synthetic model: layers of Linear(width, width) + ReLU, the same weights on every rank
    and configuration."""
    nn = rig.nn
    rig.torch.manual_seed(1234)
    blocks = []
    for _layer in range(layers):
        linear = nn.Linear(width, width, device=rig.device)  # made and initialised in place
        nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")  # keeps activations O(1)
        nn.init.zeros_(linear.bias)
        blocks += [linear, nn.ReLU()]
    return nn.Sequential(*blocks)


def step(rig, run, data):
    """One training step of a run (ddp, optimizer, quiet_comm: under no_sync(), no all-reduce)."""
    ddp, optimizer, quiet_comm = run
    optimizer.zero_grad(set_to_none=True)
    autocast = (
        rig.torch.autocast(device_type="cuda", dtype=rig.torch.bfloat16)
        if rig.use_cuda
        else contextlib.nullcontext()
    )
    with autocast, ddp.no_sync() if quiet_comm else contextlib.nullcontext():
        loss = ddp(data).float().pow(2).mean()
        loss.backward()
    optimizer.step()


def make_runs(rig, args, width, layers):
    """(runs {config: (ddp, optimizer, quiet_comm)}, configs with each hook that cannot run, the
    model's parameters and gradient bytes). compute-only runs on the model of the plain DDP step
    (no hook), under no_sync(); every hook gets a model and DDP wrapper of its own (a DDP model
    takes one hook, once)."""
    runs, configs, actual, grad_bytes = {}, {}, 0, 0
    for hook in ["none", *[h for h in args.hook_list if h != "none"]]:
        why = hook_unavailable(hook, rig.backend)
        if why:
            configs[hook] = {"skipped": why}
            continue
        model = build(rig, width, layers)
        actual = sum(p.numel() for p in model.parameters())
        grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        device_ids = [rig.local_rank] if rig.use_cuda else None
        ddp = rig.ddp_class(model, device_ids=device_ids, bucket_cap_mb=args.bucket_cap_mb)
        register_hook(ddp, hook, args.powersgd_rank)
        optimizer = rig.torch.optim.SGD(ddp.parameters(), lr=1e-6)
        if hook == "none":
            runs["compute"] = (ddp, optimizer, True)
        if hook in args.hook_list:
            runs[hook] = (ddp, optimizer, False)
    return runs, configs, actual, grad_bytes


def time_runs(rig, runs, data, args):
    """{config: spread of its step times}: warm-up, then the timed steps interleaved in an order
    that rotates each round (a busy moment of the machine, a shared CPU or another job's traffic,
    falls on every configuration alike instead of on one of them)."""
    names = list(runs)
    for _step in range(args.warmup):
        for name in names:
            step(rig, runs[name], data)
    sync(rig)
    rig.dist.barrier()
    times = {name: [] for name in names}
    for i in range(args.iters):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            sync(rig)
            begin = time.perf_counter()
            step(rig, runs[name], data)
            sync(rig)
            times[name].append(time.perf_counter() - begin)
    out = {}
    for name in names:
        # Each step's time is the slowest rank's: a step ends for the job when its last rank ends.
        slowest = rig.torch.tensor(times[name], dtype=rig.torch.float64, device=rig.device)
        rig.dist.all_reduce(slowest, op=rig.dist.ReduceOp.MAX)
        out[name] = spread(slowest.tolist())
    return out


def measure(rig, args, params):
    """The result line of one model size."""
    width, layers = plan_model(params, args.width or rig.width_default)
    runs, configs, actual, grad_bytes = make_runs(rig, args, width, layers)
    gen = rig.torch.Generator(device="cpu").manual_seed(4321 + rig.rank)
    data = rig.torch.randn(rig.batch, width, generator=gen).to(rig.device)
    configs.update(time_runs(rig, runs, data, args))
    if "powersgd" in configs and "steps" in configs["powersgd"]:
        configs["powersgd"]["rank"] = args.powersgd_rank
    # Free this size's models before the next size is made.
    runs = data = None
    if rig.use_cuda:
        rig.torch.cuda.empty_cache()
    return {
        "wireup_bench": "ddp_step",
        "params": actual,
        "params_asked": params,
        "width": width,
        "layers": layers,
        "batch": rig.batch,
        "precision": rig.precision,
        "grad_bytes": grad_bytes,
        "bucket_cap_mb": args.bucket_cap_mb,
        "world_size": rig.world,
        "nnodes": rig.nnodes,
        "backend": rig.backend,
        "device": rig.device.type,
        "warmup": args.warmup,
        "iters": args.iters,
        "configs": configs,
        "torch_version": rig.torch.__version__,
        "nccl_version": rig.nccl_version,
    }


def main(argv=None):
    args = parse_args(argv)
    rig = setup(args)
    if rig.rank == 0:
        print_env()
    out_lines = []
    for params in rig.sizes:
        line = measure(rig, args, params)
        if rig.rank == 0:
            text = json.dumps(line, sort_keys=True)
            out_lines.append(text)
            print(text, flush=True)
    if rig.rank == 0 and args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write("\n".join(out_lines) + "\n")
    rig.dist.barrier()
    # Leave without tearing the process group down (its destructors race with the peers').
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
