#!/usr/bin/env python3
"""Launch-latency probe: the program provision_bench.py runs through launch.yml on every rank.

It prints one line per rank with two wall-clock times (seconds since the epoch):
  started  the rank's program began executing (torchrun started it; before torch is imported)
  joined   init_process_group returned: every rank of the job has joined the process group
then meets the other ranks at a barrier and exits. The testbed's nodes share the controller's
kernel clock, so these times compare directly with the time the benchmark started launch.yml.
"""

import time

STARTED = time.time()

import os  # noqa: E402  # after the first clock reading on purpose
import socket  # noqa: E402

import torch.distributed as dist  # noqa: E402


def main():
    for name in ("RANK", "WORLD_SIZE"):
        if name not in os.environ:
            raise SystemExit(f"launch_probe.py: {name} is not set: start it with torchrun (launch.yml)")
    dist.init_process_group(backend="gloo")
    joined = time.time()
    dist.barrier()
    print(
        f"wireup-perf-probe rank={os.environ['RANK']} world={os.environ['WORLD_SIZE']} "
        f"host={socket.gethostname()} started={STARTED:.3f} joined={joined:.3f}",
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
