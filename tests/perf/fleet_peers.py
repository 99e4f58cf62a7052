"""The GPU peer judgement alone at fleet sizes, without building a fleet (issue 39):

    .venv/bin/python -m tests.perf.fleet_peers 64,256,1024,4096

N nodes of 8 H200 GPUs made by tests/unit/test_gpujudge.py's own node builder (each GPU through
gpujudge.prepare_node; node i's figures at 1 +- 3%, seeded by i), then gpujudge.judge_peers timed
in CPU seconds of this process (time.process_time). fleet.py's ``peers`` step measures the same
function on the fleet that wireup's producers build, at the cost of building it.
"""

from __future__ import annotations

import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT / ".collections") not in sys.path:
    sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpujudge  # noqa: E402
from tests.unit import test_gpujudge as t  # noqa: E402


def sections(n):
    out = {}
    for i in range(n):
        rng = random.Random(i)
        figures = {g: {k: v * (1 + rng.uniform(-0.03, 0.03)) for k, v in t.HEALTHY.items()} for g in range(8)}
        host = f"n{i:04d}"
        out[host] = gpujudge.prepare_node(host, t.eight(f"{i:04d}", figures), {}, gpujudge.DEFAULT_SETTINGS)
    return out


def main(argv):
    for n in (int(x) for x in argv[0].split(",")):
        nodes = sections(n)
        cpu = time.process_time()
        named = gpujudge.judge_peers(nodes, gpujudge.DEFAULT_SETTINGS)
        cpu = time.process_time() - cpu
        found = sum(len(g["findings"]) for s in nodes.values() for g in s["gpus"])
        print(f"{n} nodes: {cpu:.2f} s CPU, {found} GPU findings, {len(named)} nodes named", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["64,256,1024"])
