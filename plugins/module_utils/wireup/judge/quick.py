"""The quick node check (wireup-check, issue 26): what a node is now against the baseline wireup
wrote on it at its last passing bench (pure Python, stdlib only; no Ansible imports: this package
is copied onto every node and run there by the node's own python3, see check/run.py).

The parts compared, each named in the one line the check prints:
- the GPUs (by UUID, so a GPU is itself in another slot): one gone or replaced;
- the GPU-GPU links of ``nvidia-smi topo -m`` (a class changed: NV18 -> NV12, NV -> SYS);
- NVLink per GPU (``nvidia-smi nvlink -s``): fewer active links, a lower per-link speed;
- PCIe per GPU (``--query-gpu``): a narrower link width, a lower maximum generation (the current
  generation is left alone: idle GPUs step it down to save power);
- NIC ports and interfaces (nics.parse_nic_facts): a rail port or a physical interface that was
  up is gone or down, or runs at a lower rate;
- GPU health (wireup.probe.gpuhealth, issue 25, where this wireup has it): findings whose remediation is
  isolate, reset or reboot;
- optionally nccl-tests all_reduce at one size against the bench's figure at that size.

Verdicts and exit codes: PASS 0; FAIL 1 (a part is worse, or nvidia-smi fails); ERROR 2 (an input
cannot be read: the baseline, a config, an output that does not parse: the check fails closed);
NO_BASELINE: the node has not passed a bench since wireup-check was installed: exit 0 and says so,
or exit 3 with node_check_require_baseline (README "Quick check").
"""

from __future__ import annotations

import time
from typing import TypedDict

from ..probe.health import GpuFinding
from ..probe.topology import link_class_key

SCHEMA = 1
KIND = "wireup-check-baseline"
EXIT = {"PASS": 0, "FAIL": 1, "ERROR": 2, "NO_BASELINE": 3}
# --query-gpu fields the check reads (topology.combine_topology's names).
QUERY_FIELDS = (
    "index,name,uuid,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
    "pcie.link.width.max"
)
# Remediation classes of wireup.probe.gpuhealth findings that fail the check; "monitor" is kept in the
# metrics only.
FAILING_REMEDIATIONS = ("isolate", "reset", "reboot")
# The order problems are named in the one line: what costs a job most first.
RANKS = ("gpu", "nvidia_smi", "nvlink", "link", "pcie", "gpu_health", "nic", "bench")


def when(seconds) -> str:
    """Unix seconds as the line writes them (UTC, ISO 8601); '?' when unknown."""
    if not isinstance(seconds, (int, float)):
        return "?"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# ------------------------------------------------------------------------------ the node's state
def _gpu_state(gpu):
    nvl = gpu.get("nvlink") or {}
    pcie = gpu.get("pcie") or {}
    return {
        "index": gpu.get("index"),
        "uuid": gpu.get("uuid"),
        "bus_id": gpu.get("bus_id"),
        "name": gpu.get("name"),
        "nvlink": {"active": nvl.get("active"), "speed_gbps": nvl.get("speed_gbps")} if nvl else None,
        "pcie": {
            "width_current": pcie.get("width_current"),
            "width_max": pcie.get("width_max"),
            "gen_max": pcie.get("gen_max"),
        },
    }


def _ports(nic_facts):
    """Every IB/RoCE/EFA port and network interface with whether the check watches it: rail ports
    that are active, physical interfaces that are up (IPoIB netdevs excepted: their port is
    watched), and the interface(s) NCCL's socket transport would use (a testbed's veth)."""
    facts = nic_facts or {}
    devices = set(facts.get("devices") or []) if facts.get("transport") == "socket" else set()
    out = []
    for p in facts.get("ib_ports") or []:
        up = bool(p.get("active"))
        rail = p.get("role", "rail") == "rail"
        out.append(
            {
                "name": p["name"],
                "kind": p.get("kind") or "ib",
                "up": up,
                "gbps": p.get("rate_gbps"),
                "watched": up and rail,
            }
        )
    for i in facts.get("interfaces") or []:
        up = i.get("operstate") in ("up", "unknown")
        mbps = i.get("speed_mbps")
        out.append(
            {
                "name": i["name"],
                "kind": i.get("type") or "net",
                "up": up,
                "gbps": mbps / 1000.0 if isinstance(mbps, (int, float)) else None,
                # IPoIB netdevs follow their HCA port, which is watched itself.
                "watched": up
                and i.get("type") != "infiniband"
                and (not i.get("virtual") or i["name"] in devices),
            }
        )
    return out


def node_state(topology=None, nic_facts=None) -> dict:
    """The parts the check compares, from topology.combine_topology's dict (None: the GPUs were
    not read) and nics.parse_nic_facts' dict."""
    topo = topology or {}
    return {
        # None: not read (no nvidia-smi, or it failed): the GPU parts are not compared then.
        "gpus": [_gpu_state(g) for g in topo.get("gpus") or []] if topology is not None else None,
        "links": [{"a": lk["a"], "b": lk["b"], "class": lk["class"]} for lk in topo.get("links") or []],
        "ports": _ports(nic_facts),
    }


# ------------------------------------------------------------------------------ the baseline
class BenchFigure(TypedDict, total=False):
    collective: str
    size: int
    busbw: float
    ngpus: int


class NcclTestsBuild(TypedDict, total=False):
    bin_dir: str
    ld_library_path: str


class BenchPart(TypedDict):
    """What a baseline keeps of the passing bench record it was taken at (bench_part)."""

    run_id: str
    gpu_count: int
    links: list[tuple[str, str, str]]
    figure: BenchFigure
    nccl_tests: NcclTestsBuild


def bench_part(record, build=None, size=None, collective="all_reduce") -> BenchPart:
    """What the baseline keeps of the node's passing bench record (host_record.build_record's shape):
    run id, GPU count, link classes, and the figure of ``collective`` at ``size`` bytes with the
    nccl-tests build that measured it (nccl_tests_build: bin_dir, ld_library_path) for the
    check's optional benchmark. ValueError when the record did not PASS (the baseline is the last
    PASSING bench)."""
    from ..probe.bench_output import figure

    if (record or {}).get("verdict") != "PASS":
        raise ValueError(
            f"the record of run {(record or {}).get('run_id')} is {(record or {}).get('verdict')}, not PASS: "
            "the baseline is the node's last passing bench"
        )
    topo = record.get("topology") or {}
    entry = {}
    if size:
        rows = ((record.get("collectives") or {}).get(collective) or {}).get("rows") or []
        busbw = figure(rows, int(size), collective)
        if busbw is not None:
            entry = {
                "collective": collective,
                "size": int(size),
                "busbw": busbw,
                "ngpus": topo.get("gpu_count"),
            }
    build = build or {}
    return {
        "run_id": record.get("run_id"),
        "gpu_count": int(topo.get("gpu_count") or 0),
        "links": sorted((lk["a"], lk["b"], lk["class"]) for lk in topo.get("links") or []),
        "figure": entry,
        "nccl_tests": {
            "bin_dir": build.get("bin_dir") or "",
            "ld_library_path": build.get("ld_library_path") or "",
        }
        if build.get("bin_dir")
        else {},
    }


def bench_part_problem(part) -> str:
    """What makes a bench part (bench_part's dict, as the controller sends it) unusable ('' when
    it is fine): wireup-check refuses to write a baseline from it."""
    if not isinstance(part, dict) or not isinstance(part.get("run_id"), str) or not part["run_id"]:
        return "no run_id"
    if isinstance(part.get("gpu_count"), bool) or not isinstance(part.get("gpu_count"), int):
        return "gpu_count is not a number"
    links = part.get("links")
    if not isinstance(links, list) or not all(
        isinstance(x, (list, tuple)) and len(x) == 3 and all(isinstance(v, str) for v in x) for x in links
    ):
        return "links is not a list of [GPU, GPU, class]"
    for key in ("figure", "nccl_tests"):
        if not isinstance(part.get(key, {}), dict):
            return f"{key} is not an object"
    return ""


def record_mismatch(bench, state) -> str:
    """Why the node now is not what its bench record judged ('' when it is): a baseline is written
    only for the node the verdict was about."""
    gpus, links = (
        len(state.get("gpus") or []),
        sorted((lk["a"], lk["b"], lk["class"]) for lk in state.get("links") or []),
    )
    if gpus != int(bench.get("gpu_count") or 0):
        return f"nvidia-smi lists {gpus} GPU(s) now, the bench record {bench.get('gpu_count')}"
    if [list(x) for x in links] != [list(x) for x in bench.get("links") or []]:
        return "the GPU-GPU link classes of nvidia-smi topo -m differ from the bench record's"
    return ""


def baseline_doc(host, bench, state, *, taken="bench", now=None, gpu_health=None) -> dict:
    """The baseline file's content: the node's state (as the check reads it) when its bench
    passed, with that bench's part (bench_part). taken: bench, or manual (wireup-check
    --write-baseline --manual: accepted by hand)."""
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "host": host,
        "taken": taken,
        "time": float(now if now is not None else time.time()),
        "bench": bench,
        "node": dict(state, gpus=state.get("gpus") or []),  # no nvidia-smi then: no GPU
        "gpu_health": gpu_health,
    }


# The keys compare() reads from each entry of the baseline's node part, and their type.
ENTRY_KEYS = {"links": {"a": str, "b": str, "class": str}, "ports": {"name": str}, "gpus": {}}


def _parts_problem(node, bench) -> str:
    """What is wrong with the node and bench parts of a baseline ('' when nothing)."""
    for key, needs in ENTRY_KEYS.items():
        if not isinstance(node.get(key), list) or not all(isinstance(x, dict) for x in node[key]):
            return f"node.{key} is not a list of entries"
        for field, kind in needs.items():
            if not all(isinstance(x.get(field), kind) for x in node[key]):
                return f"an entry of node.{key} has no {field}"
    for key in ("figure", "nccl_tests"):  # the benchmark's plan reads them
        if not isinstance(bench.get(key, {}), dict):
            return f"bench.{key} is not an object"
    return ""


def baseline_problem(doc) -> str:
    """What makes a baseline file unusable ('' when it is fine): the check refuses it (ERROR)
    rather than compare with half a baseline."""
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        return f"not a {KIND} document"
    if doc.get("schema") != SCHEMA:
        return f"schema {doc.get('schema')!r}, this wireup-check reads {SCHEMA}: run bench.yml again"
    node, bench = doc.get("node"), doc.get("bench")
    if not isinstance(node, dict) or not isinstance(bench, dict):
        return "no node or bench part"
    if not isinstance(doc.get("gpu_health"), (dict, list, type(None))):
        return "gpu_health is not a health read"
    if not isinstance(doc.get("time"), (int, float)):
        return "no time"
    return _parts_problem(node, bench)


def since(doc) -> str:
    """'at the last passing bench 2026-12-01T01:02:03Z' (or 'in the baseline taken by hand ...')."""
    what = "the baseline taken by hand" if doc.get("taken") == "manual" else "the last passing bench"
    return f"at {what} {when(doc.get('time'))}"


# ------------------------------------------------------------------------------ comparing
class Problem(TypedDict):
    """One part worse than the baseline, or a read that failed: kind (RANKS), part (what it is
    about: GPU1 00000000:07:00.0, NIC mlx5_5:1), message (one line)."""

    kind: str
    part: str
    message: str


def _problem(kind, part, message) -> Problem:
    return {"kind": kind, "part": part, "message": message}


def _gpu_name(gpu):
    return f"GPU{gpu.get('index')} {gpu.get('bus_id') or ''}".strip()


def _match(base_gpus, now_gpus):
    """[(baseline GPU, the GPU now or None)]: by UUID, else by bus id."""
    by_uuid = {g.get("uuid"): g for g in now_gpus if g.get("uuid")}
    by_bus = {g.get("bus_id"): g for g in now_gpus if g.get("bus_id")}
    return [(b, by_uuid.get(b.get("uuid")) or by_bus.get(b.get("bus_id"))) for b in base_gpus]


def _gpu_problems(base_gpus, now_gpus, at):
    out = []
    for b, n in _match(base_gpus, now_gpus):
        if n is None:
            out.append(
                _problem(
                    "gpu",
                    _gpu_name(b),
                    f"{_gpu_name(b)} ({b.get('uuid')}) gone: nvidia-smi lists {len(now_gpus)} GPU(s), "
                    f"{len(base_gpus)} {at}",
                )
            )
        elif b.get("uuid") and n.get("uuid") != b.get("uuid"):
            out.append(
                _problem(
                    "gpu",
                    _gpu_name(n),
                    f"{_gpu_name(n)} is {n.get('uuid')}, was {b.get('uuid')} {at}: run bench.yml to prove it",
                )
            )
    return out


def _nvlink_problems(pairs, at):
    out = []
    for b, n in pairs:
        bl, nl = (b.get("nvlink") or {}), ((n or {}).get("nvlink") or {})
        was = bl.get("active") or 0
        if n is None or not was:
            continue
        now = nl.get("active") or 0
        if now < was:
            out.append(
                _problem(
                    "nvlink",
                    _gpu_name(n),
                    f"{_gpu_name(n)} NVLink {was - now} of {was} links down (was {was} {at})",
                )
            )
        elif isinstance(nl.get("speed_gbps"), (int, float)) and nl["speed_gbps"] < (
            bl.get("speed_gbps") or 0
        ):
            out.append(
                _problem(
                    "nvlink",
                    _gpu_name(n),
                    f"{_gpu_name(n)} NVLink at {nl['speed_gbps']:g} GB/s per link "
                    f"(was {bl['speed_gbps']:g} {at})",
                )
            )
    return out


def _pcie_problems(pairs, at):
    out = []
    for b, n in pairs:
        if n is None:
            continue
        bp, np_ = b.get("pcie") or {}, n.get("pcie") or {}
        for key, label, fmt in (("width_current", "width", "x{}"), ("gen_max", "max generation", "Gen{}")):
            was, now = bp.get(key), np_.get(key)
            if isinstance(was, int) and isinstance(now, int) and now < was:
                out.append(
                    _problem(
                        "pcie",
                        _gpu_name(n),
                        f"{_gpu_name(n)} PCIe {label} {fmt.format(now)} (was {fmt.format(was)} {at})",
                    )
                )
    return out


def _link_problems(base_links, now_links, at):
    now = {(lk["a"], lk["b"]): lk["class"] for lk in now_links}
    out = []
    for lk in base_links:
        cls = now.get((lk["a"], lk["b"]))
        if cls != lk["class"]:
            worse = cls is None or link_class_key(cls) > link_class_key(lk["class"])
            out.append(
                _problem(
                    "link",
                    f"{lk['a']}-{lk['b']}",
                    f"{lk['a']}-{lk['b']} link {cls or 'missing'} (was {lk['class']} {at})"
                    + ("" if worse else ": the wiring changed, run bench.yml to prove it"),
                )
            )
    return out


def _rate(port):
    return f"{port['gbps']:g} Gb/s" if isinstance(port.get("gbps"), (int, float)) else "rate unknown"


def _nic_problems(base_ports, now_ports, at):
    now = {p["name"]: p for p in now_ports}
    out = []
    for b in (p for p in base_ports if p.get("watched")):
        n = now.get(b["name"])
        was = f"up at {_rate(b)}"
        if n is None:
            message = f"NIC {b['name']} missing (was {was} {at})"
        elif not n.get("up"):
            message = f"NIC {b['name']} down (was {was} {at})"
        elif (
            isinstance(b.get("gbps"), (int, float))
            and isinstance(n.get("gbps"), (int, float))
            and n["gbps"] < b["gbps"]
        ):
            message = f"NIC {b['name']} at {_rate(n)} (was {_rate(b)} {at})"
        else:
            continue
        out.append(_problem("nic", f"NIC {b['name']}", message))
    return out


def compare(baseline, now) -> list:
    """Every part worse now than in the baseline (baseline_doc's dict; now: node_state's), in the
    order RANKS names them; the GPU parts only where the GPUs were read (now["gpus"] not None)."""
    at = since(baseline)
    base = baseline["node"]
    out = _nic_problems(base["ports"], now.get("ports") or [], at)
    if now.get("gpus") is not None:  # else nvidia-smi's own problem names the GPUs' part
        pairs = _match(base["gpus"], now["gpus"])
        out += (
            _gpu_problems(base["gpus"], now["gpus"], at)
            + _nvlink_problems(pairs, at)
            + _link_problems(base["links"], now.get("links") or [], at)
            + _pcie_problems(pairs, at)
        )
    return sorted(out, key=lambda p: RANKS.index(p["kind"]))


def gpu_health_problems(findings: list[GpuFinding]) -> list[Problem]:
    """Problems of wireup.probe.gpuhealth's findings that call for action (FAILING_REMEDIATIONS); a
    finding names its GPU by health.GpuIdentity ({index, bus_id, uuid, serial}, or {})."""
    out = []
    for f in findings or []:
        if f.get("remediation") in FAILING_REMEDIATIONS:
            gpu = f.get("gpu") if isinstance(f.get("gpu"), dict) else {}
            part = f"GPU{gpu['index']}" if gpu.get("index") is not None else "GPU health"
            said = f.get("message") or f.get("code") or "finding"
            out.append(_problem("gpu_health", part, f"{part} {f['remediation']}: {said}"))
    return out


def bench_problem(figure, measured, tolerance, at) -> list:
    """The optional benchmark against the baseline's figure: [] when within ``tolerance``, when
    the baseline has no figure at that size (said in the line instead), or when none was run.
    ``measured``: {busbw, size, collective, error}."""
    if not measured:
        return []
    name = f"{measured.get('collective', 'all_reduce')} at {measured.get('size')} bytes"
    if measured.get("error"):
        return [_problem("bench", name, f"{name} failed: {measured['error']}")]
    busbw, was = measured.get("busbw"), (figure or {}).get("busbw")
    if busbw is None or not was:
        return []
    if busbw < (1 - float(tolerance)) * was:
        return [
            _problem(
                "bench",
                name,
                f"{name} {busbw:.1f} GB/s, {100 * busbw / was:.0f}% of {was:.1f} GB/s {at} "
                f"(tolerance {100 * float(tolerance):.0f}%)",
            )
        ]
    return []


# ------------------------------------------------------------------------------ the verdict
def _summary(now, baseline):
    gpus = now.get("gpus") or []
    links = sum((g.get("nvlink") or {}).get("active") or 0 for g in gpus)
    watched = sum(1 for p in (baseline or {}).get("node", {}).get("ports", []) if p.get("watched"))
    parts = [f"{len(gpus)} GPU(s)"]
    if links:
        parts.append(f"{links} NVLinks")
    parts.append(f"{watched} NIC port(s)")
    return ", ".join(parts)


def verdict(problems, *, errors=(), baseline=None, require_baseline=False) -> str:
    """PASS, FAIL, ERROR or NO_BASELINE (see the module docstring)."""
    if errors:
        return "ERROR"
    if problems:
        return "FAIL"
    if baseline is None:
        return "NO_BASELINE" if require_baseline else "PASS"
    return "PASS"


def line(result) -> str:
    """The one line the check prints (result: result()'s dict)."""
    host, v = result.get("host") or "?", result["verdict"]
    return f"wireup-check: {v} {host}: {reason(result)}"


def drain_finding(result) -> str:
    """What a drain says (slurm.drain_reason makes it one line with "wireup: " before it): the
    worst part of a FAIL, as the line says it; for a check that could not judge, that it could not
    check and why ("wireup-check ERROR node2: could not check: the baseline ... is not JSON")."""
    if result["verdict"] == "ERROR":
        return f"wireup-check ERROR {result.get('host') or '?'}: could not check: {result['errors'][0]}"
    return reason(result)


# Whose problem a failed check is (slurm.OWNERS): the driver not answering or a check that could
# not read the node is the node's software; every other part (GPUs, NVLink, PCIe, GPU health,
# NICs, the benchmark) its hardware.
_SOFTWARE_KINDS = frozenset({"nvidia_smi"})


def drain_whose(result) -> str:
    """ "sw" or "hw" for a failed check's drain reason, from its worst problem (ERROR: "sw")."""
    if result["verdict"] == "ERROR" or not result.get("problems"):
        return "sw"
    return "sw" if result["problems"][0]["kind"] in _SOFTWARE_KINDS else "hw"


def reason(result) -> str:
    """The line without its 'wireup-check: VERDICT HOST: ' head (Slurm's drain reason takes it).
    Notes (a part skipped, metrics not written) follow a healthy line only: a failing one names the
    worst part first, then how many more."""
    host = result.get("host") or "?"
    notes = "".join(f"; {n}" for n in result.get("notes") or [])
    if result["verdict"] == "ERROR":
        return f"{result['errors'][0]} (cannot check: failing closed)"
    if result["problems"]:
        first, rest = result["problems"][0], result["problems"][1:]
        more = f" (+{len(rest)} more: {', '.join(p['part'] for p in rest[:4])})" if rest else ""
        return f"{first['message']}{more}"
    if result.get("baseline") is None:
        why = f"{host} has not passed bench.yml since wireup-check was installed: nothing to compare with"
        return f"no baseline ({why}){notes}"
    return f"{_summary(result.get('now') or {}, result['baseline'])} as {since(result['baseline'])}{notes}"


class CheckRun(TypedDict):
    """One run of wireup-check (result()): what checkrun prints, drains with (drain_finding) and
    writes for node_exporter (metrics.check_families), and --json prints (less the baseline's
    body and the health read). The extras a run adds are RUN_EXTRAS, all or some."""

    host: str
    verdict: str
    exit: int
    line: str
    problems: list[Problem]
    errors: list[str]
    notes: list[str]
    now: dict
    baseline: dict | None
    baseline_time: float | None
    time: float | None
    seconds: float | None
    bench: dict
    gpu_findings: list[GpuFinding]
    gpu_health: dict | None


# result()'s keyword arguments kept as they are; a run that stopped early has time and seconds only.
RUN_EXTRAS = ("time", "seconds", "bench", "gpu_findings", "gpu_health")


def result(host, baseline, now, *, found=None, require_baseline=False, **extra) -> CheckRun:
    """The check's answer: verdict, exit code, the one line, the problems (compare's, plus the
    GPU-health and benchmark ones in ``found``), the state read, and ``extra`` (RUN_EXTRAS: time,
    seconds, bench, gpu_findings, gpu_health; another name is a TypeError). found: {errors,
    problems, notes} of the reads."""
    unknown = sorted(set(extra) - set(RUN_EXTRAS))
    if unknown:
        raise TypeError(f"result() takes no {', '.join(unknown)}: CheckRun has {', '.join(RUN_EXTRAS)}")
    found = found or {}
    problems = (compare(baseline, now) if baseline is not None and now is not None else []) + list(
        found.get("problems") or []
    )
    problems.sort(key=lambda p: RANKS.index(p["kind"]))
    errors = list(found.get("errors") or [])
    v = verdict(problems, errors=errors, baseline=baseline, require_baseline=require_baseline)
    out = {
        "host": host,
        "verdict": v,
        "exit": EXIT[v],
        "problems": problems,
        "errors": errors,
        "notes": list(found.get("notes") or []),
        "now": now or {},
        "baseline": baseline,
        "baseline_time": (baseline or {}).get("time"),
        "time": None,
        "seconds": None,
        "bench": {},
        "gpu_findings": [],
        "gpu_health": None,
        **extra,
    }
    out["line"] = line(out)
    return out
