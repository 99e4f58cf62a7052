#!/usr/bin/env python3
"""After `run.sh bench-env` on the GPU machine: print the environment of every figure of the last
three bench runs (plain, tune, plain) and check what issue 11 item 6 asks:

- every figure (collective, torch run) names its environment (mode default|tuned, its variables);
- the plain runs and the tuning run measure default NCCL;
- after the tuning run wrote a tuned env file, the next plain run reports it as present and unused.

Usage: python3 tests/gpu/bench_env_check.py RESULTS_DIR   (exit 1 on a violation)
"""

import json
import pathlib
import sys


def main(results_dir):
    root = pathlib.Path(results_dir) / "bench"
    runs = sorted(p for p in root.iterdir() if p.is_dir())[-3:] if root.is_dir() else []
    if len(runs) < 3:
        print(f"need 3 bench runs in {results_dir}/bench, found {len(runs)}")
        return 1
    bad = []
    for index, run in enumerate(runs):
        for path in sorted(run.glob("*.json")):
            rec = json.loads(path.read_text())
            tuned = rec.get("tuned_env") or {}
            print(
                f"{run.name} {rec['host']}: {rec['verdict']}; tuned env file present={tuned.get('present')} "
                f"used={tuned.get('used')} stale={tuned.get('stale')} values={tuned.get('values')}"
            )
            figures = [(f"nccl-tests {k}", v) for k, v in sorted((rec.get("collectives") or {}).items())]
            figures += [(f"torch {k}", v) for k, v in sorted((rec.get("torch") or {}).items())]
            for name, fig in figures:
                env = fig.get("env") or {}
                verdict = (fig.get("verdict") or {}).get("verdict", "-")
                print(
                    f"  {name}: {verdict}, NCCL {env.get('mode')}, "
                    f"vars {env.get('vars')}, seen {env.get('seen')}"
                )
                if env.get("mode") != "default":
                    bad.append(f"{run.name} {rec['host']} {name}: NCCL {env.get('mode')}, expected default")
            if index == 2 and tuned.get("present") and tuned.get("used"):
                bad.append(f"{run.name} {rec['host']}: the plain run used the tuned env file")
    for line in bad:
        print("VIOLATION:", line)
    print("bench-env check:", "FAILED" if bad else "OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results"))
