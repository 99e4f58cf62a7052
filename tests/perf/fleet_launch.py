"""fleet.py's launch_plan step alone at fleet sizes, without building the fleet's records (issue 39):

    .venv/bin/python -m tests.perf.fleet_launch 64,256,1024 3       # sizes, repeats (the best counts)

The step is tests.perf.fleet.step_launch_plan itself, on fleet_build.Fleet.of(N) (its nodes
through wireup_launch_node, as plan.yml gives them) and an empty results folder (the launch gate's
refusals read from it: none). The records fleet.py builds first are not what the plan reads, and
building them is most of fleet.py's wall time at 1,024 nodes. CPU seconds of this process
(time.process_time, as fleet.py). It uses only fleet.py's step, so the same file run from an older
checkout's root times that checkout's step (docs/performance.md, issue 39).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile

from tests.perf import fleet
from tests.perf import fleet_build as fb


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    sizes = [int(x) for x in argv[0].split(",")]
    args = argparse.Namespace(sample=32, repeat=int(argv[1]) if len(argv) > 1 else 1, calls=False)
    cpu = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as folder:
            store = argparse.Namespace(fleet=fb.Fleet.of(n), results_dir=folder)
            m = fleet.step_launch_plan(store, args)
        cpu[n] = m.cpu
        print(n, {"cpu": round(m.cpu, 3), "wall": round(m.wall, 3), **(m.extra or {})}, flush=True)
    for a, b in itertools.pairwise(sizes):
        print(f"growth {a} -> {b}: {cpu[b] / cpu[a]:.2f}x")


if __name__ == "__main__":
    main()
