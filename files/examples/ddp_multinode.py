#!/usr/bin/env python3
"""Example 2: multi-node DDP training under torchrun (one process per GPU, or CPU processes).

Launch it on every node with the script wireup renders (.venv/bin/ansible-playbook launch.yml), or by hand:
    torchrun --nnodes=N --nproc_per_node=P --rdzv_backend=c10d --rdzv_endpoint=MASTER:29500 \
        --rdzv_id=demo ddp_multinode.py --steps 20 [--comm-hook {none,fp16,bf16,powersgd}]
NCCL is used when CUDA is available (each process takes the GPU of its local rank), gloo otherwise.
A small model trains for a few steps on synthetic data from a fixed seed; every rank prints its loss
with its rank, the world size and its host, and at the end checks that all replicas hold the same
weights (what DDP guarantees).
"""

import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def say(line: str) -> None:
    """One write per line: ranks share the log, and print() may split text and newline."""
    os.write(sys.stdout.fileno(), (line + "\n").encode())


COMM_HOOKS = ("none", "fp16", "bf16", "powersgd")


def register_comm_hook(ddp, name: str) -> None:
    """Register the --comm-hook on the DDP model: fp16/bf16 compress each gradient bucket for the
    all-reduce, powersgd sends a rank-1 approximation (from the second step on); none keeps DDP's
    own all-reduce. What each costs or saves on your wiring: bench.yml --tags stepcost."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if name == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif name == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif name == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2
        )
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the model and the data")
    parser.add_argument(
        "--backend", choices=["auto", "nccl", "gloo"], default="auto", help="auto: nccl with CUDA, else gloo"
    )
    parser.add_argument(
        "--comm-hook",
        choices=COMM_HOOKS,
        default="none",
        help="DDP comm hook: none (default), fp16 or bf16 compression (bf16 needs NCCL), powersgd",
    )
    parser.add_argument(
        "--sleep",
        type=float,
        default=0.0,
        help="seconds to sleep after each step (to keep a job running in tests)",
    )
    return parser.parse_args()


def ranks():
    """(rank, world size, local rank) from torchrun's environment; exit naming what is missing."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        if name not in os.environ:
            sys.exit(f"ddp_multinode.py: {name} is not set: start it with torchrun (or wireup's launch.sh)")
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])


def backend_and_device(args, rank, local_rank, host):
    """(the process group's backend, this rank's device): NCCL on this rank's GPU where there is
    one (unless --backend gloo), else gloo on the CPU."""
    use_cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
    if args.comm_hook == "bf16" and backend != "nccl":
        sys.exit(
            "ddp_multinode.py: --comm-hook bf16 needs NCCL (GPUs): gloo has no bfloat16 all-reduce; use fp16"
        )
    if not use_cuda:
        return backend, torch.device("cpu")
    if local_rank >= torch.cuda.device_count():
        gpus = torch.cuda.device_count()
        sys.exit(f"rank {rank}: local rank {local_rank} but only {gpus} GPU(s) on {host}")
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return backend, device


def train(ddp, args, rank, device, line):
    """args.steps steps of a linear regression on this rank's own shard; the last loss."""
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    data = torch.Generator().manual_seed(args.seed + rank)  # each rank its own shard of the data
    true_w = torch.linspace(-1.0, 1.0, 32)
    loss = torch.zeros(())
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch, 32, generator=data)
        y = (x @ true_w).unsqueeze(1) + 0.01 * torch.randn(args.batch, 1, generator=data)
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        if step in {1, args.steps} or step % 10 == 0:
            say(f"{line} step {step}/{args.steps} loss {loss.item():.6f}")
        if args.sleep:
            time.sleep(args.sleep)
    return loss


def replicas_in_sync(model, device):
    """(in sync, min, max): DDP keeps replicas identical, so the max and min of a weight checksum
    across ranks must agree."""
    checksum = sum(p.detach().double().sum() for p in model.parameters()).reshape(1).to(device)
    lo, hi = checksum.clone(), checksum.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    return torch.allclose(lo, hi, rtol=0, atol=1e-9), lo, hi


def main():
    args = parse_args()
    rank, world, local_rank = ranks()
    host = socket.gethostname()
    backend, device = backend_and_device(args, rank, local_rank, host)
    dist.init_process_group(backend=backend, device_id=device if device.type == "cuda" else None)

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    register_comm_hook(ddp, args.comm_hook)
    started = time.time()
    loss = train(
        ddp, args, rank, device, f"rank {rank}/{world} host {host} local_rank {local_rank} {backend} {device}"
    )
    in_sync, lo, hi = replicas_in_sync(model, device)
    say(
        f"rank {rank}/{world} host {host} done: final loss {loss.item():.6f}, "
        f"{args.steps} steps in {time.time() - started:.2f} s, comm hook {args.comm_hook}, "
        f"replicas in sync: {in_sync}"
    )
    if not in_sync:
        say(f"rank {rank}: replicas differ after training ({lo.item()} vs {hi.item()})")
    dist.barrier()  # leave together: no rank exits while a peer still talks to it
    # Every result is verified and written: leave now, with that result. Tearing the process group
    # down (destroy_process_group, or the interpreter's exit running gloo's and c10d's destructors)
    # races with the peers' own teardown, and the loser aborts (SIGABRT), which failed a finished,
    # in-sync job (1 CI run in 5). os._exit skips those destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if in_sync else 1)


if __name__ == "__main__":
    main()
