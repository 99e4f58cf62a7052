"""A/B no-op reruns of site.yml from two checkouts on ONE converged testbed node, alternating.

    sudo .venv/bin/python -m tests.perf.provision_bench --sizes 1 --configs project --reruns 1 \\
        --no-launch --keep --name ab --out /tmp/ab          # converge one node, keep it up
    sudo .venv/bin/python -m tests.perf.ab_rerun /tmp/ab /path/to/before /path/to/after --rounds 10
    sudo .venv/bin/python -m tests.testbed down --name ab

Both checkouts' site.yml must leave the same converged node (each rerun must report changed=0; a
run that does not is flagged). Rounds alternate which side goes first; each run gets a fresh ssh
ControlPath directory and its checkout's own ansible.cfg and .venv, as provision_bench runs them.
The first converges differ by seconds from one run to the next on a shared machine (pip's install
of torch is most of one); reruns on the same node, interleaved, compare what a change does to a
no-op rerun. Prints each run and the medians; writes ab.json and ab.log into the setup folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.perf.provision_bench import parse_recap


def rerun(tree: Path, setup: Path, control_dir: Path) -> tuple[float, dict, str]:
    """(seconds, the node's recap, the output) of one site.yml run from ``tree``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_CONFIG=str(tree / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_SSH_CONTROL_PATH_DIR=tempfile.mkdtemp(dir=control_dir),
    )
    inventory = setup / "inventories" / "node1.yml"
    argv = [str(tree / ".venv/bin/ansible-playbook"), "-i", str(inventory), "site.yml"]
    argv += ["-e", f"@{setup / 'repo-vars.json'}"]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    return time.monotonic() - start, parse_recap(proc.stdout).get("node1") or {}, proc.stdout


def clean(recap: dict) -> bool:
    """A no-op rerun: the node answered, nothing failed, nothing changed."""
    return bool(recap) and recap["changed"] == 0 and recap["failed"] == 0 and recap["unreachable"] == 0


def order(round_index: int) -> tuple[str, str]:
    """Who goes first in a round: before in even rounds, after in odd ones."""
    return ("before", "after") if round_index % 2 == 0 else ("after", "before")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.perf.ab_rerun", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("setup", type=Path, help="provision_bench's --out folder of a kept one-node testbed")
    parser.add_argument("before", type=Path, help="the checkout measured first")
    parser.add_argument("after", type=Path, help="the checkout it is compared with")
    parser.add_argument("--rounds", type=int, default=10, help="reruns per side (default 10)")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    control_dir = Path(tempfile.mkdtemp(prefix="ab-cp-"))
    times, flagged = {"before": [], "after": []}, 0
    with (args.setup / "ab.log").open("w") as log:
        for index in range(args.rounds):
            for side in order(index):
                load = os.getloadavg()[0]
                seconds, recap, out = rerun(trees[side], args.setup, control_dir)
                times[side].append(seconds)
                ok = clean(recap)
                flagged += not ok
                line = f"round {index + 1} {side}: {seconds:.2f} s, {recap or 'no recap'}, load {load:.2f}"
                print(line if ok else f"{line} FLAGGED", flush=True)
                log.write(f"{line}\n" + ("" if ok else out[-3000:]))
    for side, values in times.items():
        spread = f"{min(values):.2f}-{max(values):.2f}"
        print(f"{side}: median {statistics.median(values):.2f} s (n={len(values)}, {spread})")
    (args.setup / "ab.json").write_text(json.dumps(times))
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
