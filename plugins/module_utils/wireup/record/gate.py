"""launch.yml's gate over the host records, per capability (pure Python, stdlib only).

bench.yml stores a host record for a full run and for its partial runs (``--tags bench``,
``stepcost``, ``gpu_health``, ``gpu_trial``; issue 25), and the quick check stores one under
``results/quick/`` (issue 26). A partial run measures only part of a node, so the newest record
alone cannot say whether the node may run a job: a ``--tags gpu_health`` record (verdict N/A)
after a full bench that FAILed on a bad NVLink says nothing of the links. The gate therefore
judges each capability on its own:

* :func:`measured`: what a record measured, from its parts (every record, old or new, carries
  them: a record from before this rule counts as measuring everything its parts hold):
  links (``collectives``, nccl-tests), torch (``torch``), stepcost (``stepcost``), gpu_health
  (a ``gpu_trial`` part of either capability: the trial reads health too), gpu_trial (a
  ``gpu_trial`` part whose capability is gpu_trial), node_check (a quick record; and a bench
  record that measured the links, after which bench.yml's node_check after_bench takes the
  quick-check baseline anew). A FAIL record that shows none of them counts for every capability.
* :func:`capability_verdicts`: each measured capability's verdict: the part's own verdict where
  it has one (``gpu_trial.verdict`` for both GPU capabilities; node_check.check_verdict for a
  quick check), else the record's. Fail closed: a FAIL record whose parts explain no FAIL
  counts as FAIL for every capability it measured.
* :func:`host_failures`: for one host, every record, newest first across results/bench and
  results/quick (the store's run order, results.run_sort_key; a quick run of the same id counts
  as the newer), until each capability has its newest record that judged it (PASS, WARN or FAIL:
  N/A is no verdict and settles nothing): a FAIL there refuses the host,
  and a record that cannot be read before every capability is settled refuses it too (it may
  hold what is missing): the gate never reads past a damaged record. Nor past a DAMAGED one (a
  run whose answer from the node could not be judged, issue 35: host_record.damaged_record), nor one
  that is not where it says it is (another host's or run's) or of a run dated in the future
  (host_record.load_record): each refuses the host as DAMAGED.

The gate walks a host's records through the store's index (issue 39, store/index.py): each record's
summary (:func:`index_summary`: its verdict and the capabilities it judged) is kept beside the
records, so a record is read whole only where the gate needs more than its summary (a FAIL's
findings, a DAMAGED record's reason) or where the index does not hold it as it is on disk (a
record written without the index, changed, or summarised under other rules: the fingerprint of
_RULE_MODULES' source).
Its answer is the one a walk over every record gives.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
import sys
from typing import TypedDict

from ..capability import fabric, node_check
from ..capability import registry as capability_registry
from ..capability.registry import CAPABILITIES as REGISTRY
from ..probe import gpuhealth
from ..store import index, query
from ..store import results as store
from . import host_record

# The capabilities the gate judges, in the registry's order (capability/registry.py): links,
# torch, stepcost, gpu_health, gpu_trial, node_check.
CAPABILITIES = capability_registry.names()
# The kinds of record the gate reads (results.KINDS), in the order a shared run id is read.
GATE_KINDS = ("bench", node_check.KIND)
# The verdicts that settle a capability: N/A (not judged: a health read that could not read the
# GPUs) and UNREACHABLE are no verdict, so an older record of the capability still counts.
JUDGED = ("PASS", "WARN", "FAIL")


class Failure(TypedDict):
    """One record that refuses a host: FAIL for the capabilities it is the newest record of, or
    DAMAGED (it cannot be read, and it is newer than these capabilities' newest readable record)."""

    verdict: str
    kind: str
    run_id: str
    capabilities: list[str]
    reason: str


def measured(record, kind, *, registry=REGISTRY) -> list[str]:
    """The capabilities ``record`` (a record of this kind) measured, in the registry's order: each
    capability's own rule (Capability.measured); a FAIL record that shows none counts for all."""
    found = [cap.name for cap in registry if cap.measured and cap.measured(record, kind)]
    if not found and record.get("verdict") == "FAIL":
        return list(capability_registry.names(registry))
    return found


def _part_verdicts(record, registry) -> dict[str, str]:
    """The verdicts the record's parts give themselves (the GPU trial's, the quick check's)."""
    out = {}
    for cap in registry:
        verdict = cap.verdict(record) if cap.verdict else None
        if verdict:
            out[cap.name] = verdict
    return out


def capability_verdicts(record, kind, *, registry=REGISTRY) -> dict[str, str]:
    """{capability: verdict} for each capability the record measured (fail closed: a FAIL record
    whose parts name no FAIL fails every capability it measured)."""
    caps = measured(record, kind, registry=registry)
    own = _part_verdicts(record, registry)
    verdicts = {cap: own.get(cap) or record.get("verdict") for cap in caps}
    if record.get("verdict") == "FAIL" and "FAIL" not in verdicts.values():
        return dict.fromkeys(caps, "FAIL")
    return verdicts


def store_runs(results_dir, now=None):
    """[(kind, run id)] of every bench and quick run in the store, newest first in the store's one
    order (query.runs: the run's own time; a run dated in the future comes last; a quick run of
    the same id counts as the newer)."""
    return query.runs(results_dir, GATE_KINDS, now=now)


def _findings_text(record) -> str:
    """The record's first three critical findings (a GPU finding in gpuhealth.short's form: the
    GPU, the finding, the remediation), or 'see its report'."""
    critical = [
        gpuhealth.short(f) or f.get("message", "")
        for f in record.get("findings") or []
        if isinstance(f, dict) and f.get("severity") == "critical"
    ]
    return "; ".join(critical[:3]) or "see its report"


def _failed(host, kind, run_id, record, caps) -> Failure:
    why = _findings_text(record)
    reason = f"{kind} run {run_id} FAILed on {host}: {why} (its newest record of {', '.join(caps)})"
    return {"verdict": "FAIL", "kind": kind, "run_id": run_id, "capabilities": caps, "reason": reason}


def _damaged(host, kind, run_id, err, caps) -> Failure:
    reason = (
        f"latest {kind} record of {host} cannot be read: {err}; it is newer than {host}'s newest "
        f"readable record of {', '.join(caps)}: rerun bench.yml on it (or move the file away)"
    )
    return {"verdict": "DAMAGED", "kind": kind, "run_id": run_id, "capabilities": caps, "reason": reason}


def _not_judged(host, kind, run_id, record, caps) -> Failure:
    reason = (
        f"{kind} run {run_id} could not judge {host}: {record['damaged']}; it is newer than {host}'s "
        f"newest judged record of {', '.join(caps)}: rerun bench.yml on it"
    )
    return {"verdict": "DAMAGED", "kind": kind, "run_id": run_id, "capabilities": caps, "reason": reason}


def index_summary(record, kind) -> dict:
    """What the gate needs of a record to walk past it (the store's index keeps it): its verdict
    and {capability: verdict} of each capability it judged (capability_verdicts, JUDGED only)."""
    judged = {c: v for c, v in capability_verdicts(record, kind).items() if v in JUDGED}
    return {"verdict": record.get("verdict"), "caps": judged}


def _summary_ok(summary) -> bool:
    """A summary read back from the index is index_summary's shape (else its record is read)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("verdict"), str):
        return False
    caps = summary.get("caps")
    return isinstance(caps, dict) and all(c in CAPABILITIES and v in JUDGED for c, v in caps.items())


# The modules whose rules a summary applies: the gate's walk and verdicts (this module), what each
# capability measured and its own verdict (capability/registry.py's entries), the quick check's
# verdict (capability/node_check.py). The index keeps their source's fingerprint, so a summary made
# under other rules (wireup updated) is made again from its record: any change to these modules
# rebuilds the index once, which costs one read of each record.
_RULE_MODULES = (sys.modules[__name__], capability_registry, node_check)


@functools.lru_cache(maxsize=1)
def summarizer() -> index.Summarizer:
    """The gate's side of the store's index: its rules' fingerprint (the source of _RULE_MODULES;
    without a source to read, a fresh one per process: no index is trusted)."""
    try:
        text = "".join(inspect.getsource(module) for module in _RULE_MODULES) + repr((CAPABILITIES, JUDGED))
        rules = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    except (OSError, TypeError):
        rules = "unknown-" + os.urandom(8).hex()
    return index.Summarizer(rules, index_summary, _summary_ok)


def index_run(results_dir, kind, run_id, records) -> int:
    """The writer's update of the store's index: each host's record of the run just stored
    ({host: record}: host_record.store_run's) enters its host's index; how many were written."""
    paths = {host: store.host_path(results_dir, run_id, host, kind) for host in records}
    return index.add_run(results_dir, kind, run_id, records, paths=paths, summarizer=summarizer())


def _stop(host, kind, run_id, caps, *, found, whole) -> Failure | None:
    """The failure that ends the walk at this record: it cannot be read, or could not judge the
    host (a DAMAGED record, read whole for its reason); None when the walk goes on."""
    if isinstance(found, ValueError):
        return _damaged(host, kind, run_id, found, caps)
    if found["verdict"] == store.DAMAGED:
        record = whole()
        if isinstance(record, ValueError):
            return _damaged(host, kind, run_id, record, caps)
        return _not_judged(host, kind, run_id, record, caps)
    return None


def host_failures(results_dir, runs, host) -> list[Failure]:
    """Why the gate refuses ``host`` ([] when it need not), walking ``runs`` (store_runs) newest
    first until every capability has its newest record or a record cannot be read (each record's
    summary from the store's index, read whole only for a FAIL's findings and where the index does
    not hold it: query.summaries); a host name that cannot be a file name has no record ([])."""
    open_caps, failures = set(CAPABILITIES), []
    walk = query.summaries(results_dir, host_record.record_problem, summarizer(), host, runs)
    with contextlib.closing(walk):
        for kind, run_id, found, whole in walk:
            if not open_caps:
                break
            caps = [c for c in CAPABILITIES if c in open_caps]
            stop = _stop(host, kind, run_id, caps, found=found, whole=whole)
            if stop is not None:
                return [*failures, stop]
            verdicts = {c: v for c, v in found["caps"].items() if c in open_caps}
            open_caps -= set(verdicts)
            failed = [c for c in CAPABILITIES if verdicts.get(c) == "FAIL"]
            if not failed:
                continue
            record = whole()
            if isinstance(record, ValueError):
                return [*failures, _damaged(host, kind, run_id, record, caps)]
            failures.append(_failed(host, kind, run_id, record, failed))
    return failures


def refusals(hosts, failures=None, fabric_record=None):
    """Launch's rule: {host: reason} for each host with a record that refuses it (``failures``
    {host: [gate.Failure]} from :func:`latest_verdicts`: per capability, its newest record FAILed
    or a newer record cannot be read) or whose latest fabric verdict is FAIL (a damaged fabric
    record refuses every host: it cannot tell which nodes it failed). A gate that cannot read a
    verdict refuses: it never fails open."""
    rec = fabric_record or {}
    reasons = {host: _refusal(host, (failures or {}).get(host) or [], rec) for host in hosts}
    return {host: reason for host, reason in reasons.items() if reason}


def _refusal(host, failures, rec):
    """Why launch must refuse host ('' when it need not): its host records' failures (each one's
    reason), else the fabric record's."""
    if failures:
        return "; ".join(f["reason"] for f in failures)
    return _fabric_refusal(host, rec)


def _fabric_refusal(host, rec):
    """Why the fabric record refuses host: it cannot be read, or it named host bad ('' when neither)."""
    if rec.get("damaged"):
        return (
            f"latest fabric record cannot be read: {rec['damaged']}; it cannot say whether {host} "
            "passed: rerun bench.yml --tags fabric (or move the file away)"
        )
    if rec.get("verdicts", {}).get(host) == "FAIL":
        ev = "; ".join(rec.get("nodes", {}).get(host, {}).get("evidence", []))
        return f"fabric run {rec.get('run_id', '?')} named {host} bad: {ev}"
    return ""


def latest_verdicts(results_dir, hosts):
    """(failures, fabric_record) from the controller's store, for :func:`refusals`: failures
    {host: [gate.Failure]} for each host that a host record refuses (gate.host_failures: per
    capability, the newest bench or quick record that measured it FAILed, or a record newer than
    one capability's newest readable record cannot be read, naming the file) and the newest fabric
    run that has a record (results/fabric/<run>/fabric.json; ``{"damaged": why}`` when it cannot
    be read). A host never benchmarked has no failures; the gate never reads past a damaged record."""
    runs = store_runs(results_dir)
    failures = {host: host_failures(results_dir, runs, host) for host in hosts}
    return {h: f for h, f in failures.items() if f}, fabric.latest_fabric(results_dir)
