"""CLI: python -m tests.testbed {deps,up,down,status,slurm} (run from the repository root, as root)."""

from __future__ import annotations

import argparse
import sys

from . import slurm
from .system import TestbedError, install_deps, missing_packages
from .testbed import Testbed, all_testbeds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.testbed",
        description="Local multi-node testbed for wireup (systemd-nspawn nodes).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_deps = sub.add_parser("deps", help="apt-get install the host packages the testbed needs, if missing")
    p_deps.add_argument(
        "--tests",
        action="store_true",
        help="also the tools only the checks use: shellcheck, chromium, promtool",
    )
    p_deps.add_argument("--apt-log", help="append apt's own output to this file instead of the terminal")
    p_up = sub.add_parser(
        "up", help="bring a testbed up (reused when already up) and print its inventory path"
    )
    p_up.add_argument("--name", default="default", help="testbed name (default: default)")
    p_up.add_argument("--nodes", type=int, default=3, help="number of nodes (default: 3)")
    p_up.add_argument(
        "--suites",
        default="",
        help="Debian suite per node, comma-separated (bookworm or trixie; default bookworm)",
    )
    p_down = sub.add_parser("down", help="stop a testbed's processes and remove everything it made")
    p_down.add_argument("--name", default="default", help="testbed name (default: default)")
    sub.add_parser("status", help="list this checkout's testbeds and their nodes")
    p_stop = sub.add_parser("stop-node", help="power one node off")
    p_start = sub.add_parser("start-node", help="boot a stopped node again")
    for p in (p_stop, p_start):
        p.add_argument("node", help="inventory name, e.g. node2")
        p.add_argument("--name", default="default", help="testbed name (default: default)")
    p_slurm = sub.add_parser("slurm", help="start a real Slurm on an up testbed (or stop it: --stop)")
    p_slurm.add_argument("--name", default="default", help="testbed name (default: default)")
    p_slurm.add_argument("--stop", action="store_true", help="stop Slurm's daemons instead")
    args = parser.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731  # stdout: the inventory path only
    try:
        if args.command == "deps":
            install_deps(log=log, tests=args.tests, apt_log=args.apt_log)
            left = missing_packages(checks=args.tests)
            if left:
                raise TestbedError(f"still missing after apt-get: {' '.join(left)}")
        elif args.command == "up":
            suites = [x for x in args.suites.split(",") if x] or None
            tb = Testbed(args.name, log=log).up(nodes=args.nodes, suites=suites)
            print(tb.inventory)
        elif args.command == "down":
            Testbed(args.name, log=log).down()
        elif args.command == "status":
            names = all_testbeds()
            print("\n".join(Testbed(n, log=log).describe() for n in names) if names else "no testbeds")
        elif args.command == "stop-node":
            tb = Testbed(args.name, log=log)
            _known_node(tb, args.node)
            log(f"{args.node}: {tb.stop_node(args.node)}")
        elif args.command == "start-node":
            tb = Testbed(args.name, log=log)
            _known_node(tb, args.node)
            tb.start_node(args.node)
            log(f"{args.node}: running")
        elif args.command == "slurm":
            tb = Testbed(args.name, log=log)
            if not tb.is_up():
                raise TestbedError(
                    f"testbed {args.name} is not up: python -m tests.testbed up --name {args.name}"
                )
            if args.stop:
                slurm.down(tb, log=log)
            else:
                slurm.up(tb, log=log)
    except TestbedError as exc:
        print(f"testbed: {exc}", file=sys.stderr)
        return 1
    return 0


def _known_node(tb, node):
    if node not in tb.state.get("nodes", {}):
        raise TestbedError(
            f"testbed {tb.name} has no node {node!r}; nodes: {', '.join(tb.nodes) or 'none (not up)'}"
        )


if __name__ == "__main__":
    sys.exit(main())
