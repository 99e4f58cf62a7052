"""Where the bench store's time goes at fleet size (issue 39; docs/performance.md): cProfile of
``fleet_build.store_bench`` storing day 1 of a synthetic fleet after day 0.

    .venv/bin/python -m tests.perf.store_profile 128        # nodes (8 GPUs each)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / ".collections") not in sys.path:
    sys.path.insert(0, str(ROOT / ".collections"))

from tests.perf import fleet_build as fb  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("nodes", type=int, help="the fleet's size")
    parser.add_argument("--top", type=int, default=40, help="rows of each table (default 40)")
    args = parser.parse_args(argv)
    fleet = fb.Fleet.of(args.nodes)
    root = Path(tempfile.mkdtemp(prefix="wireup-store-profile-"))
    try:
        results = str(root / "results")
        fb.store_bench(fb.bench_params(fleet, results, fb.run_id_of(0), 0))
        day1 = fb.bench_params(fleet, results, fb.run_id_of(1), 1)
        profile, start = cProfile.Profile(), time.process_time()
        profile.runcall(fb.store_bench, day1)
        cpu = time.process_time() - start
        print(f"store_bench, {args.nodes} nodes: {cpu:.2f} s of CPU under the profiler")
        stats = pstats.Stats(profile)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
