#!/usr/bin/env python3
"""Example 1: single-node DDP with torch.multiprocessing.spawn (no torchrun needed).

    python ddp_single_node.py [--nproc N] [--steps 20] [--comm-hook {none,fp16,bf16,powersgd}]
One process per GPU (NCCL) when CUDA is available, else --nproc CPU processes (gloo, default 2).
A small model trains for a few steps on synthetic data from a fixed seed; every rank prints its loss
with its rank, the world size and its host. Through wireup: .venv/bin/ansible-playbook launch.yml
-e torchrun_launch_launcher=python -e torchrun_launch_program=/opt/wireup/examples/ddp_single_node.py
(a one-node group).
"""

import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
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
    parser.add_argument(
        "--nproc", type=int, default=0, help="processes: default one per GPU, or 2 on a machine without CUDA"
    )
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
    return parser.parse_args()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def worker(rank: int, world: int, args, port: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    host = socket.gethostname()
    use_cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend=backend, rank=rank, world_size=world, device_id=device if use_cuda else None
    )

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[rank] if use_cuda else None)
    register_comm_hook(ddp, args.comm_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    data = torch.Generator().manual_seed(args.seed + rank)
    true_w = torch.linspace(-1.0, 1.0, 32)

    started = time.time()
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
            say(
                f"rank {rank}/{world} host {host} {backend} {device} step {step}/{args.steps} "
                f"loss {loss.item():.6f}"
            )
    say(
        f"rank {rank}/{world} host {host} done: final loss {loss.item():.6f}, "
        f"{args.steps} steps in {time.time() - started:.2f} s, comm hook {args.comm_hook}"
    )
    dist.barrier()  # leave together: no rank exits while a peer still talks to it
    # Done and written: leave without the process group's teardown, which races with the peers'
    # (a gloo/c10d abort, SIGABRT, after a finished job). mp.spawn sees exit code 0.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    args = parse_args()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and args.backend != "gloo" else 0
    world = args.nproc or gpus or 2
    backend = args.backend if args.backend != "auto" else ("nccl" if gpus else "gloo")
    if args.comm_hook == "bf16" and backend != "nccl":
        sys.exit("ddp_single_node.py: --comm-hook bf16 needs NCCL (GPUs): gloo has no bfloat16 all-reduce")
    if gpus and world > gpus:
        sys.exit(f"ddp_single_node.py: --nproc {world} exceeds the {gpus} GPU(s) found")
    mp.spawn(worker, args=(world, args, free_port()), nprocs=world, join=True)


if __name__ == "__main__":
    main()
