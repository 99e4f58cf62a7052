#!/usr/bin/python
"""Ansible module: whether a detached wireup job's ranks still make progress on this node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_job_progress
short_description: Look whether a detached wireup job's ranks still make progress on this node
description:
  - Finds the run's ranks (the processes whose environment holds the run's C(WIREUP_JOB_TAG) and a
    C(LOCAL_RANK) - torchrun's workers, not torchrun itself nor the run's watchdog) and reads their
    CPU time from C(/proc/PID/stat); on a node with GPUs (I(nvidia_smi) given) reads every GPU's
    utilisation, power draw and limit, and memory utilisation.
  - Compares this look with the one kept by the last look in the run's folder
    (C(runs/RUN_ID/progress.json), written whole, never in check mode) and keeps this one there.
    On a node with GPUs the run is quiet while every GPU does no work (power at a quarter of its
    limit or less, and utilisation at 5 % or less or memory utilisation at 1 % or less, since a rank
    spinning in an NCCL collective reads 100 % utilisation); elsewhere while no rank's CPU
    time advances by more than 2 % of the time between the looks. Quiet for I(stall_after)
    seconds or more is C(stalled).
  - Changes nothing else; never stops the run (jobs.yml does, when asked).
options:
  job_dir:
    description: The job's folder (C(wireup_base_dir)/jobs/JOB).
    type: path
    required: true
  run_id:
    description: The run (its folder under C(runs/)).
    type: str
    required: true
  stall_after:
    description: Seconds without progress after which the run is stalled; 0 never calls it so.
    type: int
    default: 0
  nvidia_smi:
    description: nvidia-smi's path on a node with GPUs; empty on a node without.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Looks and judges in check mode too, but keeps no look (progress.json is not written).
  platform:
    support: full
    platforms: linux
    description: Reads C(/proc); Linux nodes.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Look at run 20261207T101500Z of job ddp-multinode
  wireup_job_progress:
    job_dir: /opt/wireup/jobs/ddp-multinode
    run_id: 20261207T101500Z
    stall_after: 600
"""

RETURN = r"""
progress:
  description: This node's look at the run.
  returned: always
  type: dict
  contains:
    state:
      description: >-
        C(first) (nothing to compare with yet), C(progressing), C(quiet), C(stalled),
        C(no ranks) (none of the run's ranks lives here), C(unknown) (the GPUs could not be read)
      type: str
      sample: stalled
    since:
      description: "Quiet or stalled: since when (seconds since the epoch, the node's clock)"
      type: float
      sample: 1796638862.1
    signal: {description: "C(gpu) or C(cpu): what decided", type: str, sample: cpu}
    ranks: {description: How many ranks were found, type: int, sample: 2}
    at:
      description: The look's time (seconds since the epoch, the node's clock)
      type: float
      sample: 1796639462.3
"""

import os
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import job_progress

RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _environ(pid: str) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def _stat(pid: str):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return job_progress.parse_stat(handle.read())
    except OSError:
        return None


def ranks_of(tag: str) -> dict:
    """{"PID:STARTTIME": CPU seconds} of the run's ranks (its tag and a LOCAL_RANK in their
    environment)."""
    tick = os.sysconf("SC_CLK_TCK")
    want = f"WIREUP_JOB_TAG={tag}".encode()
    ranks = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        env = _environ(pid)
        if want not in env or not any(v.startswith(b"LOCAL_RANK=") for v in env):
            continue
        read = _stat(pid)
        if read is not None and len(ranks) < job_progress.RANKS_MAX:
            ranks[f"{pid}:{read[1]}"] = read[0] / tick
    return ranks


def gpus_idle(module, nvidia_smi: str):
    """Whether every GPU is idle (None without nvidia-smi or when it could not be read)."""
    if not nvidia_smi:
        return None
    rc, out, _err = module.run_command([nvidia_smi, *job_progress.GPU_QUERY], environ_update={"LC_ALL": "C"})
    return job_progress.gpus_idle(job_progress.parse_gpu_load(out)) if rc == 0 else None


def main():
    module = AnsibleModule(
        argument_spec={
            "job_dir": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "stall_after": {"type": "int", "default": 0},
            "nvidia_smi": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not RUN_ID_RE.fullmatch(p["run_id"]):
        module.fail_json(msg=f"run_id={p['run_id']!r}: letters, digits, '_', '.' and '-' only")
    job_dir = os.path.realpath(p["job_dir"])
    kept_path = os.path.join(job_dir, "runs", p["run_id"], "progress.json")
    if not os.path.isdir(os.path.dirname(kept_path)):
        module.fail_json(msg=f"no run {p['run_id']} in {job_dir}")
    previous = job_progress.read_kept(atomicfile.read_regular(kept_path, job_progress.STATE_MAX_BYTES))
    at = time.time()
    ranks = ranks_of(f"{job_dir}:{p['run_id']}")
    found = job_progress.judge(previous, at, ranks, gpus_idle(module, p["nvidia_smi"]), p["stall_after"])
    if not module.check_mode:
        atomicfile.write_json(kept_path, found["keep"])
    module.exit_json(
        changed=False,
        progress={
            "state": found["state"],
            "since": found["since"],
            "signal": found["signal"],
            "ranks": len(ranks),
            "at": at,
        },
    )


if __name__ == "__main__":
    main()
