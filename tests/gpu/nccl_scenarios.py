"""Real NCCL_DEBUG=INFO logs of healthy and failing two-rank runs on the lent GPU machine, for the
parser's fixtures (tests/fixtures/ncclinfo/). Run on the device, from the repository root:

    python3 tests/gpu/nccl_scenarios.py OUTDIR [SCENARIO ...]

Each scenario starts two processes of this file (``--rank 0|1``) on GPU ``rank % GPUs`` with the
environment it names, a c10d store on loopback, and one all_reduce (and a few more for the timed
ones); each rank's stdout+stderr goes to ``OUTDIR/<scenario>_rank<N>.txt`` and a line per rank with
its exit code to ``OUTDIR/index.txt``. Every process is bounded (``timeout``) and killed by PID.
With one GPU, both ranks sit on GPU 0 and ``NCCL_HOSTID`` differs per rank, so NCCL treats them as
two hosts and must use its network transport (NET/Socket: the machine has no IB).
"""

import argparse
import datetime
import os
import pathlib
import subprocess
import sys
import time

TWO_HOSTS = {"NCCL_HOSTID": "wireup-cap-{rank}"}
SCENARIOS = {
    # name: (environment for both ranks, what rank 1 does, seconds allowed)
    "socket_lo": ({**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo"}, "run", 60),
    "socket_lo_subsys_all": (
        {**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG_SUBSYS": "ALL"},
        "run",
        60,
    ),
    "socket_lo_timestamps": (
        {**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG_TIMESTAMP_FORMAT": "[%F %T.%f] "},
        "run",
        60,
    ),
    "socket_lo_ib_disabled": ({**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1"}, "run", 60),
    "socket_nsocks4_nthreads2": (
        {**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo", "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "2"},
        "run",
        60,
    ),
    # NCCL told to use IB where there is none: it must say so and fail.
    "net_ib_forced_no_ib": ({**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo", "NCCL_NET": "IB"}, "run", 60),
    # An interface that does not exist: bootstrap finds none.
    "socket_ifname_missing": ({**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "wfabmissing0"}, "run", 60),
    # Rank 1 dies in the middle of a loop of all_reduces: rank 0's NCCL sees the peer close.
    "peer_killed_mid_run": ({**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo"}, "die", 90),
    # No NCCL_HOSTID: one host, two ranks on one GPU (NCCL refuses a duplicate GPU).
    "one_host_same_gpu": ({"NCCL_SOCKET_IFNAME": "lo"}, "run", 60),
    # WARN only (what most production jobs run with): the failure case above, quieter.
    "net_ib_forced_warn_level": (
        {**TWO_HOSTS, "NCCL_SOCKET_IFNAME": "lo", "NCCL_NET": "IB", "NCCL_DEBUG": "WARN"},
        "run",
        60,
    ),
}


def worker(rank: int, port: int, mode: str) -> int:
    import torch
    import torch.distributed as dist

    hostid = os.environ.get("NCCL_HOSTID")
    if hostid:
        os.environ["NCCL_HOSTID"] = hostid.format(rank=rank)
    gpus = torch.cuda.device_count()
    torch.cuda.set_device(rank % gpus)
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=40))
    dist.init_process_group(
        "nccl",
        store=store,
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=40),
        device_id=torch.device("cuda", rank % gpus),
    )
    x = torch.ones(64 << 20, device="cuda")  # 256 MiB of fp32
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {rank}: first all_reduce ok, x[0]={x[0].item()}", flush=True)
    if mode == "die":
        for step in range(200):
            if rank == 1 and step == 20:
                print("rank 1: exiting on purpose in the middle of the loop", flush=True)
                os._exit(9)
            dist.all_reduce(x)
        torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: done", flush=True)
    return 0


def run_scenario(name: str, outdir: pathlib.Path, port: int) -> list[str]:
    env_extra, mode, limit = SCENARIOS[name]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ)
        env.update({"NCCL_DEBUG": "INFO", **env_extra})
        if "NCCL_HOSTID" not in env_extra:
            env.pop("NCCL_HOSTID", None)
        log = (outdir / f"{name}_rank{rank}.txt").open("w")
        cmd = ["timeout", "-s", "KILL", str(limit), sys.executable, __file__, "--rank", str(rank)]
        cmd += ["--port", str(port), "--mode", mode]
        procs.append((rank, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    lines = []
    start = time.monotonic()
    for rank, proc, log in procs:
        rc = proc.wait()
        log.close()
        lines.append(f"{name} rank{rank} rc={rc} after {time.monotonic() - start:.1f} s")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--port", type=int, default=29611)
    ap.add_argument("--mode", default="run")
    args = ap.parse_args()
    if args.rank is not None:
        return worker(args.rank, args.port, args.mode)
    outdir = pathlib.Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    index = []
    for i, name in enumerate(args.scenarios or SCENARIOS):
        index += run_scenario(name, outdir, args.port + i)
        print(index[-2], index[-1], sep="\n", flush=True)
    (outdir / "index.txt").write_text("\n".join(index) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
