"""Fleet-scale benchmark of wireup's controller steps (issue 39): README.md, "Fleet scale".

    .venv/bin/python -m tests.perf.fleet --sizes 8,64,256,1024,4096 --days 3 --json results/perf/fleet.json
    .venv/bin/python -m tests.perf.fleet --sizes 64,256 --check      # make perf-fleet

For each size N it builds a fleet of N nodes of 8 GPUs (tests/perf/fleet_build.py: wireup's own
producers on real captures, a few bad nodes) into a temporary results store, ``--days`` days of
bench and quick-check records and one fabric run, then times each controller step of the issue's
table (STEPS) in CPU seconds of this process (time.process_time: what the step costs, whatever
else the machine runs) and wall seconds, and counts its Python function calls (cProfile, a run of
its own: the same on any machine, however busy) and the records it read. It prints a table (rows:
steps, columns: sizes) and each step's growth from one size to the next, and with ``--check``
fails when a step grows faster than linear (LINEAR_SLACK on calls, CPU_SLACK on CPU seconds).

Steps measured per host (each node's textfile, the gate
over 365 records per host) run on at most ``--sample`` hosts spread over the fleet and count N /
sampled times that (the table marks them ``~``); a step whose time at a size would pass
``--budget`` seconds, from its growth so far, is not run at that size and its estimate is shown
in brackets.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import dataclasses
import gc
import itertools
import json
import math
import os
import pathlib
import pstats
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT / ".collections") not in sys.path:
    sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.wireup.cluster.plugins.filter import wireup_fabric, wireup_launch  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import gpu_trial  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import gpujudge  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import node_check  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble  # noqa: E402
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results  # noqa: E402
from tests.perf import fleet_build as fb  # noqa: E402

# A step is linear when its calls grow by at most this x the size's growth (4.5x for 4x the nodes,
# the bound), and its CPU seconds by at most CPU_SLACK x: CPU time still moves with the
# machine's other load (caches, memory bandwidth, a shared core), calls do not; a step that is
# quadratic in work Python does not count (one json.loads of a record that grows with the fleet)
# grows 16x for 4x the nodes, past 2 x 4.
LINEAR_SLACK = 1.125
CPU_SLACK = 2.0
HISTORY_DAYS = 365
# The gate over HISTORY_DAYS records per host reads at most this many of them per host (the
# records that settle its capabilities, not every record: issue 39's store at fleet size).
GATE_READS_PER_HOST = 8


@dataclasses.dataclass
class Measure:
    """One step at one size: CPU and wall seconds (the best of the repeats), Python function calls
    (None: not counted), records read, hosts measured of the fleet's (sampled < hosts: the figures
    are scaled to the fleet), an estimate in place of a run (skipped) and what it found (extra)."""

    cpu: float = 0.0
    wall: float = 0.0
    calls: int | None = None
    reads: int = 0
    sampled: int = 0
    hosts: int = 0
    skipped: bool = False
    extra: dict = dataclasses.field(default_factory=dict)


# ---------------------------------------------------------------- measuring
class ReadCounter:
    """Counts the stored JSON documents the store reads (results.read_strict_json: host records
    and fabric records) while on."""

    def __init__(self):
        self.count = 0
        self._real = results.read_strict_json

    def __enter__(self):
        def counted(path):
            self.count += 1
            return self._real(path)

        results.read_strict_json = counted
        return self

    def __exit__(self, *exc):
        results.read_strict_json = self._real


def _once(fn, setup):
    arg = setup() if setup else None
    gc.collect()
    with ReadCounter() as reads:
        cpu, wall = time.process_time(), time.perf_counter()
        out = fn(arg) if setup else fn()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, reads.count, out


def _calls(fn, setup):
    arg = setup() if setup else None
    profile = cProfile.Profile()
    profile.enable()
    try:
        fn(arg) if setup else fn()
    finally:
        profile.disable()
    return pstats.Stats(profile).total_calls


def measure(fn, *, setup=None, repeat=1, calls=False):
    """(Measure, fn's last answer): the best CPU and wall of ``repeat`` runs; ``setup()``, when
    given, makes fn's argument afresh before each run (not timed)."""
    best, out = None, None
    for _ in range(max(1, repeat)):
        cpu, wall, reads, out = _once(fn, setup)
        if best is None or cpu < best.cpu:
            best = Measure(cpu=cpu, wall=wall, reads=reads)
    if calls:
        best.calls = _calls(fn, setup)
    return best, out


def scaled(m, sampled, hosts):
    """A per-host step measured on ``sampled`` of ``hosts`` hosts, counted for all of them."""
    factor = hosts / sampled if sampled else 1.0
    calls = None if m.calls is None else round(m.calls * factor)
    reads = round(m.reads * factor)
    return dataclasses.replace(m, cpu=m.cpu * factor, wall=m.wall * factor, calls=calls, reads=reads,
                               sampled=sampled, hosts=hosts)  # fmt: skip


def spread(hosts, count):
    """At most ``count`` hosts spread evenly over ``hosts`` (its first and last included)."""
    hosts = list(hosts)
    if count >= len(hosts):
        return hosts
    step = (len(hosts) - 1) / max(count - 1, 1)
    return [hosts[round(i * step)] for i in range(count)]


# ---------------------------------------------------------------- the store of one size
@dataclasses.dataclass
class Store:
    """A built fleet: its results folder, the last bench run (id, folder, records), the GPU trial
    of that run (the store's params), the fabric run's counts, what building measured."""

    fleet: fb.Fleet
    results_dir: str
    run_id: str = ""
    run_dir: str = ""
    records: dict = dataclasses.field(default_factory=dict)
    params: dict = dataclasses.field(default_factory=dict)
    built: dict = dataclasses.field(default_factory=dict)


def _restamp(results_dir, kind, source_run, run_id):
    """A copy of ``source_run``'s records as run ``run_id`` (the run id in each record rewritten),
    entered in the store's index as the writer enters a run (gate.index_run): the days between two
    stored runs, without judging each day again."""
    src, dst = (os.path.join(results_dir, kind, r) for r in (source_run, run_id))
    os.makedirs(dst)
    old, new = source_run.encode(), run_id.encode()
    records = {}
    for name in os.listdir(src):
        if name.endswith(".json"):
            data = pathlib.Path(src, name).read_bytes().replace(old, new)
            pathlib.Path(dst, name).write_bytes(data)
            records[name.removesuffix(".json")] = json.loads(data)
    gate.index_run(results_dir, kind, run_id, records)


def _store_day(store, day, *, calls=False):
    """The day's bench run stored by the real store and its quick check: (Measure of the bench
    store, timed or, with ``calls``, its Python calls counted instead)."""
    run_id = fb.run_id_of(day)
    params = fb.bench_params(store.fleet, store.results_dir, run_id, day)
    if calls:
        m = Measure(calls=_calls(lambda _p: fb.store_bench(params), lambda: None))
        store.run_id = run_id
    else:
        m, (store.run_id, store.run_dir, store.records) = measure(lambda: fb.store_bench(params))
    store.params = params
    fb.store_quick(store.fleet, store.results_dir, fb.run_id_of(day, 7))
    return m


def build(fleet, root, days, *, calls=False):
    """The fleet's store: day 0 and the last day stored by the real store (the last one measured:
    the step 'bench store'; with ``calls`` and 3 days or more, the day before it stored with its
    calls counted), the days between as copies of day 0, then one fabric run (measured)."""
    store = Store(fleet, os.path.join(root, "results"))
    counted = _store_day(store, 0, calls=calls and days < 3)
    for day in range(1, days - 1):
        if calls and day == days - 2:
            counted = _store_day(store, day, calls=True)
            continue
        _restamp(store.results_dir, "bench", fb.run_id_of(0), fb.run_id_of(day))
        _restamp(store.results_dir, "quick", fb.run_id_of(0, 7), fb.run_id_of(day, 7))
    store.built["store"] = _store_day(store, days - 1) if days > 1 else Measure(skipped=True)
    store.built["store"].calls = counted.calls
    store.built["fabric"] = _fabric(store, root)
    return store


def _fabric(store, root):
    """The fabric run: every round's judgement and the store, CPU and wall summed; rounds and jobs."""
    total = Measure()

    def timer(fn):
        m, out = measure(fn)
        total.cpu, total.wall, total.reads = total.cpu + m.cpu, total.wall + m.wall, total.reads + m.reads
        return out

    record, rounds, jobs = fb.fabric_run(store.fleet, store.results_dir, os.path.join(root, "jobs"), timer)
    pairs = sum(1 for p in record.get("pairs") or [] if p.get("kind", "pair") == "pair")
    total.extra = {"rounds": rounds, "jobs": jobs, "pair_jobs": pairs, "bad": record.get("bad")}
    return total


# ---------------------------------------------------------------- the steps
def step_store(store, args):
    return store.built["store"]


def step_fabric(store, args):
    return store.built["fabric"]


def _trial_sections(store):
    """The last run's GPUs joined and judged alone (gpujudge.prepare_node), as judge_run has them
    before the peers."""
    trial = store.params["gpu_trial"]
    settings = {**gpujudge.DEFAULT_SETTINGS, **(trial.get("thresholds") or {})}
    inputs = {h: gpu_trial.node_inputs(h, fact) for h, fact in sorted(trial["nodes"].items())}
    return {h: gpujudge.prepare_node(h, node, {}, settings) for h, node in inputs.items()}, settings


def step_peers(store, args):
    sections, settings = _trial_sections(store)

    def setup():
        return copy.deepcopy(sections)

    m, _out = measure(lambda s: gpujudge.judge_peers(s, settings), setup=setup, repeat=args.repeat,
                      calls=args.calls)  # fmt: skip
    return m


def _report(store, plots):
    folder = tempfile.mkdtemp(prefix="report-", dir=os.path.dirname(store.results_dir))
    try:
        with contextlib.ExitStack() as stack:
            if not plots:
                real = markdown.pyplot
                markdown.pyplot = lambda: None
                stack.callback(setattr, markdown, "pyplot", real)
            m, paths = measure(lambda: assemble.write_report(folder, store.run_id, store.records))
        m.extra = {
            "html_mb": round(os.path.getsize(paths["html"]) / 1e6, 2),
            "md_lines": pathlib.Path(paths["md"]).read_text(encoding="utf-8").count("\n"),
            "pngs": len(paths["pngs"]),
        }
        return m
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def step_report(store, args):
    return _report(store, plots=True)


def step_report_text(store, args):
    return _report(store, plots=False)


def _launch_inputs(store):
    hosts = list(store.fleet.hosts)
    reach = store.fleet.reachable()
    nodes = {h: wireup_launch.wireup_launch_node(*fb.launch_node(h), "auto") for h in reach}
    failed = wireup_fabric.launch_refusals(reach, store.results_dir)
    return hosts, reach, nodes, failed


def step_launch_plan(store, args):
    """roles/torchrun_launch/tasks/plan.yml: each job's planner named once (run_once), the plan made
    once on the planner, then every node of the play takes its own slice (all of them, not a sample:
    a slice costs the same at any size)."""
    hosts, reach, nodes, failed = _launch_inputs(store)
    settings = dict(fb.launch_settings(), play_hosts=reach, failed=failed, plan_id="fleet")
    groups = {"all": hosts, settings["group"]: hosts}

    def plan_once():
        planner = wireup_launch.wireup_launch_planners(groups, reach)[settings["group"]]
        plan = wireup_launch.wireup_launch_plan(hosts, nodes, **settings)
        return {h: wireup_launch.wireup_launch_node_plan(plan, h, "fleet", planner) for h in reach}, plan

    m, (slices, plan) = measure(plan_once, repeat=args.repeat, calls=args.calls)
    worker = slices[reach[-1]]
    shared = ("hosts", "record", "hosts_entries", "node_names", "watchdog")  # job-wide lists, shared
    m.extra = {
        "plan_mb": round(len(json.dumps(plan)) / 1e6, 2),
        "errors": len(plan["errors"]),
        # A worker's slice as JSON (what Ansible keeps of it): without and with the job-wide lists.
        "slice_own_kb": round(len(json.dumps({k: v for k, v in worker.items() if k not in shared})) / 1e3, 1),
        "slice_kb": round(len(json.dumps(worker)) / 1e3, 1),
    }
    return m


def step_textfiles(store, args):
    """Each node's wireup_bench.prom from the store (node_check.read_store, its fabric.yml task)."""
    sample = spread(store.fleet.reachable(), args.sample)

    def texts():
        for host in sample:
            node_check.read_store(store.results_dir, host, build=fb.BUILD, size="1G", textfile="auto")

    m, _out = measure(texts, repeat=args.repeat, calls=args.calls)
    return scaled(m, len(sample), len(store.fleet.reachable()))


def _gate(results_dir, hosts, args):
    m, refused = measure(lambda: wireup_fabric.launch_refusals(hosts, results_dir), repeat=args.repeat,
                         calls=args.calls)  # fmt: skip
    m.extra = {"refused": len(refused)}
    return m


def step_gate(store, args):
    """playbooks/launch.yml's one read of the store over the play's hosts (wireup_launch_refusals)."""
    return _gate(store.results_dir, list(store.fleet.hosts), args)


def history_store(fleet, root, sample):
    """HISTORY_DAYS bench records of ``sample`` hosts of the fleet without the DDP step
    (bench_stepcost: false: a capability no record ever judges), the last one stored by the store."""
    hosts = tuple(sample)
    sub = fb.Fleet(hosts, {h: k for h, k in fleet.bad.items() if h in hosts})
    results_dir = os.path.join(root, "history")
    first = fb.run_id_of(0)
    fb.store_bench(fb.bench_params(sub, results_dir, first, 0, stepcost=False))
    for day in range(1, HISTORY_DAYS):
        _restamp(results_dir, "bench", first, fb.run_id_of(day))
    return results_dir


def step_gate_history(store, args):
    """The gate when every host has HISTORY_DAYS full records and one capability no record judged."""
    sample = spread(store.fleet.hosts, args.history_hosts)
    results_dir = history_store(store.fleet, os.path.dirname(store.results_dir), sample)
    try:
        m = _gate(results_dir, sample, args)
    finally:
        shutil.rmtree(results_dir, ignore_errors=True)
    m.extra["reads_per_host"] = round(m.reads / len(sample), 1)
    return scaled(m, len(sample), len(store.fleet.hosts))


STEPS = {
    "store": ("bench store: judge and write a run (store_nodes, store_run)", step_store),
    "peers": ("GPU trial peer judgement (gpujudge.judge_peers)", step_peers),
    "report": ("bench report with plots (write_report)", step_report),
    "report_text": ("bench report without plots", step_report_text),
    "launch_plan": ("launch plan, once on the planner, and every node's slice", step_launch_plan),
    "textfiles": ("Prometheus textfiles, all nodes (node_check.read_store)", step_textfiles),
    "gate": ("launch gate, every capability judged regularly", step_gate),
    "gate_history": (
        f"launch gate, {HISTORY_DAYS} full records per host, stepcost never judged",
        step_gate_history,
    ),
    "fabric": ("fabric run: every round judged, the record stored", step_fabric),
}


# ---------------------------------------------------------------- one size, all sizes
def _estimate(prev, n, step):
    """Measure estimated for size n from the two sizes before it (their growth exponent, at
    least 1), or None without a previous figure."""
    done = [(size, m) for size, m in prev if not m.skipped and m.cpu > 0]
    if not done:
        return None
    if len(done) >= 2:
        (n1, m1), (n2, m2) = done[-2], done[-1]
        power = max(1.0, math.log(m2.cpu / m1.cpu) / math.log(n2 / n1)) if m1.cpu else 1.0
    else:
        power = 2.0 if step == "peers" else 1.0
    n0, m0 = done[-1]
    factor = (n / n0) ** power
    return Measure(cpu=m0.cpu * factor, wall=m0.wall * factor, skipped=True, hosts=n)


def run_size(n, args, history):
    """{step: Measure} for a fleet of n nodes (history: {step: [(size, Measure)]} so far)."""
    fleet = fb.Fleet.of(n)
    root = tempfile.mkdtemp(prefix=f"wireup-fleet-{n}-", dir=args.tmp)
    out = {}
    markdown.pyplot()  # matplotlib's import, once per process, is no step's
    try:
        store = build(fleet, root, args.days, calls=args.calls)
        for name in args.steps:
            guess = _estimate(history.get(name, []), n, name)
            if guess is not None and guess.cpu > args.budget and name not in ("store", "fabric"):
                out[name] = guess
                continue
            out[name] = STEPS[name][1](store, args)
            out[name].hosts = out[name].hosts or n
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# ---------------------------------------------------------------- the table and the check
def growth(a, b, field="cpu"):
    """b's figure over a's (None when either is missing or an estimate)."""
    if a is None or b is None or a.skipped or b.skipped:
        return None
    x, y = getattr(a, field), getattr(b, field)
    if not x or y is None:
        return None
    return y / x


def check(table, sizes):
    """[why a step is not linear] between each two sizes that ran, and the gate reading more
    than GATE_READS_PER_HOST records per host of HISTORY_DAYS."""
    problems = [
        f"gate_history: {m.extra['reads_per_host']} records read per host of {HISTORY_DAYS} at {n} nodes "
        f"(at most {GATE_READS_PER_HOST})"
        for n, m in table.get("gate_history", {}).items()
        if not m.skipped and m.extra.get("reads_per_host", 0) > GATE_READS_PER_HOST
    ]
    for n1, n2 in itertools.pairwise(sizes):
        limit = n2 / n1
        for name in table:
            a, b = table[name].get(n1), table[name].get(n2)
            calls, cpu = growth(a, b, "calls"), growth(a, b, "cpu")
            if calls is not None and calls > limit * LINEAR_SLACK:
                problems.append(f"{name}: {calls:.1f}x the calls from {n1} to {n2} nodes (at most "
                                f"{limit * LINEAR_SLACK:.1f}x)")  # fmt: skip
            if cpu is not None and cpu > limit * CPU_SLACK:
                problems.append(f"{name}: {cpu:.1f}x the CPU seconds from {n1} to {n2} nodes (at most "
                                f"{limit * CPU_SLACK:.1f}x)")  # fmt: skip
    return problems


def _cell(m, field="cpu"):
    if m is None or (field == "calls" and m.calls is None):
        return "-"
    if field == "calls":
        text = f"{m.calls / 1e6:,.2f} M"
    else:
        text = f"{m.cpu:.2f} s" if m.cpu < 100 else f"{m.cpu:,.0f} s"
    if m.skipped:
        return f"({text} est.)"
    return ("~" if m.sampled and m.sampled < m.hosts else "") + text


def render(table, sizes, field="cpu"):
    """The table (rows: steps, columns: sizes; CPU seconds or, field calls, Python calls) and each
    step's growth from 256 to 1,024 nodes (else between the two largest sizes)."""
    last = [s for s in sizes if s in (256, 1024)]
    pair = last if len(last) == 2 else sizes[-2:]
    what = "CPU s" if field == "cpu" else "calls"
    grow = f"growth {pair[0]:,} -> {pair[-1]:,}" if len(pair) == 2 else "growth"
    head = [f"step ({what})", *[f"{s:,}" for s in sizes], grow]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, per_size in table.items():
        g = growth(per_size.get(pair[0]), per_size.get(pair[-1]), field) if len(pair) == 2 else None
        cells = [STEPS[name][0], *[_cell(per_size.get(s), field) for s in sizes], f"{g:.1f}x" if g else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def as_json(table, sizes, args):
    return {
        "sizes": sizes,
        "days": args.days,
        "sample": args.sample,
        "history_hosts": args.history_hosts,
        "steps": {
            name: {"label": STEPS[name][0], **{str(n): dataclasses.asdict(m) for n, m in per.items()}}
            for name, per in table.items()
        },
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.perf.fleet", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="8,64,256,1024,4096", help="fleet sizes, comma-separated")
    p.add_argument("--days", type=int, default=3, help="days of bench and quick-check records (at least 2)")
    p.add_argument("--steps", default=",".join(STEPS), help="steps to run, comma-separated")
    p.add_argument("--sample", type=int, default=256, help="hosts measured of a per-host step")
    p.add_argument("--history-hosts", type=int, default=16, help=f"hosts with {HISTORY_DAYS} records")
    p.add_argument("--repeat", type=int, default=1, help="runs of each step (the best counts)")
    p.add_argument("--budget", type=float, default=600.0, help="skip a step estimated above this (s)")
    p.add_argument("--calls", action="store_true", help="count each step's Python calls (cProfile)")
    p.add_argument("--check", action="store_true", help="fail when a step grows faster than linear")
    p.add_argument("--json", help="write the figures as JSON here")
    p.add_argument("--tmp", default=None, help="where the temporary stores go (default: TMPDIR)")
    args = p.parse_args(argv)
    args.sizes = sorted({int(s) for s in args.sizes.split(",") if s})
    args.steps = [s for s in args.steps.split(",") if s]
    unknown = [s for s in args.steps if s not in STEPS]
    if unknown or args.days < 2:
        p.error(f"unknown steps {unknown} (one of {', '.join(STEPS)})" if unknown else "--days must be >= 2")
    args.calls = args.calls or args.check
    return args


def main(argv=None):
    args = parse_args(argv)
    table = {name: {} for name in args.steps}
    history = {name: [] for name in args.steps}
    for n in args.sizes:
        started = time.perf_counter()
        for name, m in run_size(n, args, history).items():
            table[name][n] = m
            history[name].append((n, m))
        print(f"# {n} nodes: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if args.json:  # after each size: a run stopped at a larger one keeps the smaller ones'
            pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            pathlib.Path(args.json).write_text(json.dumps(as_json(table, args.sizes, args), indent=1) + "\n")
    print(render(table, args.sizes))
    if args.calls:
        print()
        print(render(table, args.sizes, "calls"))
    problems = check(table, args.sizes) if args.check else []
    for line in problems:
        print(f"NOT LINEAR: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
