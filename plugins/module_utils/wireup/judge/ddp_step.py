"""What the wiring costs a training step: the arithmetic of the DDP step benchmark (issue 16).

files/bench/ddp_step.py prints one JSON line per model size with the median and spread of the step
time of each configuration: ``compute`` (the step under DDP's no_sync(): no gradient all-reduce),
``none`` (the full DDP step), and the full step with each comm hook (``fp16``, ``bf16``,
``powersgd``; a hook that cannot run says why under ``skipped``). From those:

- exposed communication = full step - compute-only step (medians): the part of the gradient
  all-reduce that backward did not hide. Clamping: a negative difference (the full step measured
  faster than compute alone) is 0; it is noise when it lies within the noise band, half the
  interquartile range of each of the two configurations added up, or NOISE_FLOOR (2%) of the
  compute step, whichever is larger; beyond that band the figure is marked ``inconsistent`` and
  the sentence says not to act on it. With one process (world size 1) there is no all-reduce:
  exposed is 0 by definition, whatever the two medians say.
- share = exposed / full step, in [0, 1] (exposed <= full by construction once clamped; a full step
  of 0 ms, impossible on a real machine, gives no share).
- effective all-reduce bandwidth of the step (no hook): the gradient bytes over the exposed time,
  as bus bandwidth (x 2(n-1)/n, nccl-tests' definition), against the reference all-reduce figure
  of the same node or group at the size nearest one DDP bucket (see reference()). Below
  OVERLAP_RATIO (0.5) of it the step loses more time than a plain, unoverlapped all-reduce of every
  gradient at the wire's speed would take: the overlap or the bucket size is the problem, not the
  wire. Fully hidden communication (exposed 0) has no effective bandwidth (None).
- hook effect = full step with the hook / full step without - 1 (negative: faster).
- the sentence (sentence()): one line a user can act on.
- the verdict: each figure against the same figure (same model size, ranks, backend, precision,
  batch) of the host's last passing run: WARN when the full step got slower than the baseline
  tolerance (a warning finding, and the host's verdict is at least WARN), PASS otherwise (the first
  run has no baseline and becomes it). A PASS adds nothing to the host's verdict: a run of the step
  benchmark alone (`--tags stepcost`) stays N/A, so it never becomes the baseline the nccl-tests
  figures of the next run are compared with.

Pure functions, stdlib only; host_record.build_record and report/assemble.py call them.
"""

import json
import math

from ..core import checks
from ..probe.bench_output import figure as figure_at
from ..probe.bench_output import figure_sizes
from ..probe.health import finding

HOOKS = ("none", "fp16", "bf16", "powersgd")
# Below this share no hook is worth its accuracy risk: "no hook needed".
NO_HOOK_SHARE = 0.10
# A hook is recommended when it cuts the full step by at least this much.
HOOK_MIN_GAIN = 0.05
# Smallest noise band, as a fraction of the compute-only step.
NOISE_FLOOR = 0.02
# Effective step busbw / reference busbw below this: overlap or buckets, not the wire.
OVERLAP_RATIO = 0.5
SCOPES = ("single_node", "multi_node")


def parse_log(text):
    """The result lines of ddp_step.py in a log ([] when none): other lines, stderr glued to a
    line, a line cut off mid-way and odd bytes are skipped."""
    out = []
    for line in str(text or "").splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            item, _end = json.JSONDecoder().raw_decode(line[start:])
        except ValueError:
            continue
        if (
            isinstance(item, dict)
            and item.get("wireup_bench") == "ddp_step"
            and isinstance(item.get("configs"), dict)
        ):
            out.append(item)
    return out


def hook_label(hook, rank=None):
    return {
        "none": "no hook",
        "fp16": "fp16 compression",
        "bf16": "bf16 compression",
        "powersgd": f"PowerSGD rank {rank}" if rank else "PowerSGD",
    }.get(hook, hook)


def _median(config):
    value = (config or {}).get("median_ms")
    return float(value) if checks.is_finite_number(value) else None


def _half_iqr(config):
    config = config or {}
    low, high = config.get("p25_ms"), config.get("p75_ms")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and high >= low:
        return (high - low) / 2.0
    return 0.0


def exposed(compute, full, world_size):
    """{exposed_ms, share, noise_ms, clamped, inconsistent} of one full-step configuration against
    compute-only (both ddp_step.py config dicts). Rules in the module docstring."""
    comp, step = _median(compute), _median(full)
    if comp is None or step is None:
        return {"exposed_ms": None, "share": None, "noise_ms": None, "clamped": False, "inconsistent": False}
    noise = max(_half_iqr(compute) + _half_iqr(full), NOISE_FLOOR * comp)
    raw = step - comp
    if int(world_size or 1) <= 1:
        # One process: DDP has nobody to all-reduce with; any difference is noise.
        return {
            "exposed_ms": 0.0,
            "share": 0.0,
            "noise_ms": round(noise, 4),
            "clamped": raw != 0,
            "inconsistent": False,
        }
    value = max(raw, 0.0)
    share = None if step <= 0 else min(max(value / step, 0.0), 1.0)
    return {
        "exposed_ms": round(value, 4),
        "share": None if share is None else round(share, 4),
        "noise_ms": round(noise, 4),
        "clamped": raw < 0,
        "inconsistent": raw < -noise,
    }


def step_busbw(grad_bytes, exposed_ms, world_size):
    """{algbw, busbw} in GB/s of the gradient all-reduce as the step saw it (bytes over the exposed
    time); None when nothing was exposed or there is one rank."""
    world = int(world_size or 1)
    if world <= 1 or not grad_bytes or not exposed_ms or exposed_ms <= 0:
        return None
    algbw = grad_bytes / (exposed_ms / 1000.0) / 1e9
    return {"algbw": round(algbw, 4), "busbw": round(algbw * 2.0 * (world - 1) / world, 4)}


def reference(rows, grad_bytes, bucket_cap_mb=25.0):
    """The all-reduce row nearest (in log size) to what DDP all-reduces at once: one bucket
    (bucket_cap_mb MiB), or all the gradients when they are smaller. {size, busbw} or None."""
    target = min(int(grad_bytes or 0), int(float(bucket_cap_mb or 25.0) * (1 << 20))) or (25 << 20)
    sizes = [s for s in figure_sizes(rows or [], "all_reduce") if s > 0]
    if not sizes:
        return None
    size = min(sizes, key=lambda s: (abs(math.log2(s / target)), -s))
    return {"size": size, "busbw": figure_at(rows, size, "all_reduce")}


def _hook_entries(configs, world):
    """{hook: entry} of every configuration ddp_step.py timed (a skipped one says why)."""
    compute = configs.get("compute") or {}
    none_ms = _median(configs.get("none"))
    hooks = {}
    for hook in HOOKS:
        config = configs.get(hook)
        if config is None:
            continue
        if config.get("skipped") or _median(config) is None:
            hooks[hook] = {"skipped": config.get("skipped") or "no step time"}
            continue
        entry = {
            "step_ms": _median(config),
            "spread_ms": [config.get("p25_ms"), config.get("p75_ms")],
            "label": hook_label(hook, config.get("rank")),
            **exposed(compute, config, world),
        }
        if hook != "none" and none_ms:
            entry["vs_none"] = round(entry["step_ms"] / none_ms - 1.0, 4)
        hooks[hook] = entry
    return hooks


def _effective(fig, ref):
    """The step's all-reduce bandwidth (no hook) and, with a reference, its ratio to it."""
    none = fig["hooks"].get("none") or {}
    world = fig["world_size"]
    eff = step_busbw(fig["grad_bytes"], none.get("exposed_ms"), world) if none.get("step_ms") else None
    effective = dict(eff or {})
    near = reference(ref.get("rows"), fig["grad_bytes"], fig["bucket_cap_mb"]) if ref and world > 1 else None
    if near:
        effective["reference"] = {"source": ref.get("source", ""), "run_id": ref.get("run_id", ""), **near}
        if eff and near["busbw"]:
            effective["ratio"] = round(eff["busbw"] / near["busbw"], 4)
    return effective


def _best_hook(hooks):
    """(the hook with the shortest full step, its gain over no hook), or (None, None)."""
    none_ms = (hooks.get("none") or {}).get("step_ms")
    ran = {h: e for h, e in hooks.items() if h != "none" and e.get("step_ms") is not None}
    if not ran or not none_ms:
        return None, None
    best = min(ran, key=lambda h: ran[h]["step_ms"])
    return best, round(1.0 - ran[best]["step_ms"] / none_ms, 4)


# The figure's fields copied from ddp_step.py's result line.
_RESULT_FIELDS = (
    "params",
    "grad_bytes",
    "nnodes",
    "backend",
    "precision",
    "batch",
    "bucket_cap_mb",
    "iters",
    "warmup",
    "device",
)


def figure(result, ref=None):
    """One model size's figure from a ddp_step.py result line and the reference all-reduce
    ({source, run_id, rows} or None)."""
    configs = result.get("configs") or {}
    world = int(result.get("world_size") or 1)
    compute = configs.get("compute") or {}
    hooks = _hook_entries(configs, world)
    fig = {key: result.get(key) for key in _RESULT_FIELDS}
    fig.update(
        world_size=world,
        compute_ms=_median(compute),
        compute_spread_ms=[compute.get("p25_ms"), compute.get("p75_ms")],
        hooks=hooks,
        share=(hooks.get("none") or {}).get("share"),
        torch_version=result.get("torch_version", ""),
        nccl_version=result.get("nccl_version", ""),
    )
    fig["effective"] = _effective(fig, ref)
    fig["best_hook"], fig["best_gain"] = _best_hook(hooks)
    fig["sentence"] = sentence(fig)
    return fig


def _ms(value):
    return "-" if value is None else (f"{value:.1f}" if value >= 10 else f"{value:.2f}")


def sentence(fig):
    """The one sentence a user can act on (rules in order):
    no full step -> say so; one process -> no communication at all; full step faster than compute
    beyond the noise -> do not act on it; share < NO_HOOK_SHARE -> no hook needed; a hook cutting
    the step by >= HOOK_MIN_GAIN -> name it and its gain; else the wire or the overlap is the limit
    (by the effective bandwidth against the reference; without a reference, what is left to try).
    An overlap problem (effective busbw < OVERLAP_RATIO x reference) is named after a hook too."""
    none = (fig.get("hooks") or {}).get("none") or {}
    said = _sentence_without_comm(fig, none)
    if said or advice_holds(fig):
        return said or _sentence_with_comm(fig, none)
    return _sentence_off_gpu(fig, none)


def advice_holds(fig):
    """The one rule for what a figure may advise (issue 38): comm hooks, bucket_cap_mb and the
    wire against the overlap are GPU-over-NCCL questions, so only a figure measured there draws
    them. A CPU run over gloo shows that DDP's gradient all-reduce runs across the ranks and what
    it cost on that machine, nothing about a GPU job's communication."""
    return fig.get("backend") == "nccl" and fig.get("device") in (None, "cuda")


def _sentence_off_gpu(fig, none):
    """What a figure measured off GPUs (gloo, CPU) does show, and that it advises nothing."""
    share = none.get("share") or 0.0
    return (
        f"Communication is {share * 100:.0f}% of a step here ({_ms(none.get('exposed_ms'))} of "
        f"{_ms(none['step_ms'])} ms) on {fig.get('device') or 'CPU'} over {fig.get('backend') or '?'}: "
        f"DDP's gradient all-reduce ran across the {fig.get('world_size')} ranks and this is what it cost "
        "on this machine, not what it would cost a GPU job over NCCL (no tuning advice from this run)."
    )


def _sentence_without_comm(fig, none):
    """sentence()'s first rules: no full step, one process, a figure not to act on ('' past them)."""
    if none.get("step_ms") is None:
        return "The DDP step benchmark gave no full-step time here: nothing to say about communication."
    if int(fig.get("world_size") or 1) <= 1:
        return (
            "One process: DDP has no gradient all-reduce, so communication costs nothing here (step "
            f"{_ms(none['step_ms'])} ms, all compute); run it on 2+ GPUs or nodes to see what the "
            "wiring costs."
        )
    if none.get("inconsistent"):
        return (
            f"The full DDP step ({_ms(none['step_ms'])} ms) measured faster than compute alone "
            f"({_ms(fig.get('compute_ms'))} ms) beyond the noise: the machine was busy or the figure is "
            "unreliable; rerun before acting on it."
        )
    return ""


def _overlap_clause(effective):
    """'; the step's all-reduce reaches only N% ...' when overlap or buckets are the problem, else ''."""
    if effective.get("ratio") is None or effective["ratio"] >= OVERLAP_RATIO:
        return ""
    ref = effective.get("reference") or {}
    return (
        f"; the step's all-reduce reaches only {effective['ratio'] * 100:.0f}% of the "
        f"{ref.get('busbw', 0):.1f} GB/s {ref.get('source') or 'all-reduce'} figure, so overlap or "
        "bucket size (bucket_cap_mb), not the wire, is the problem"
    )


def _sentence_with_comm(fig, none):
    """sentence()'s rules for a step that communicates: no hook needed, a hook, overlap, the wire."""
    share = none.get("share") or 0.0
    head = (
        f"Communication is {share * 100:.0f}% of a step here ({_ms(none.get('exposed_ms'))} of "
        f"{_ms(none['step_ms'])} ms)"
    )
    if share < NO_HOOK_SHARE:
        return head + "; no hook needed."
    effective = fig.get("effective") or {}
    overlap = _overlap_clause(effective)
    gain = fig.get("best_gain")
    if fig.get("best_hook") and gain is not None and gain >= HOOK_MIN_GAIN:
        label = (fig["hooks"][fig["best_hook"]] or {}).get("label") or fig["best_hook"]
        return f"{head}; {label} cuts the step by {gain * 100:.0f}%{overlap}."
    if overlap:
        return f"{head}; no comm hook cuts it by {HOOK_MIN_GAIN * 100:.0f}% or more{overlap}."
    if effective.get("ratio") is not None:
        return (
            f"{head}; no comm hook cuts it by {HOOK_MIN_GAIN * 100:.0f}% or more and the step's all-reduce "
            f"runs at {effective['ratio'] * 100:.0f}% of the all-reduce figure: the wire is the limit "
            "(faster links, or fewer all-reduces per sample: a larger batch or gradient accumulation)."
        )
    return (
        f"{head}; no comm hook cuts it by {HOOK_MIN_GAIN * 100:.0f}% or more: faster links, fewer "
        "all-reduces per sample (a larger batch, gradient accumulation) or another bucket_cap_mb are left "
        "(no all-reduce figure of this node or group to tell the wire from the overlap)."
    )


def _same_setup(a, b):
    keys = ("params", "world_size", "backend", "precision", "batch")
    return all(a.get(k) == b.get(k) for k in keys)


def compare(fig, base_fig, tolerance, base_run):
    """{verdict, baseline_step_ms, change[, finding]} of a figure against the same figure of the
    last passing run; verdict PASS without a comparable baseline (the first run sets it)."""
    step = ((fig.get("hooks") or {}).get("none") or {}).get("step_ms")
    if not base_fig or step is None:
        return {"verdict": "PASS" if step is not None else "N/A", "run_id": None}
    old = ((base_fig.get("hooks") or {}).get("none") or {}).get("step_ms")
    if not old:
        return {"verdict": "PASS", "run_id": None}
    change = step / old - 1.0
    out = {"verdict": "PASS", "run_id": base_run, "baseline_step_ms": old, "change": round(change, 4)}
    if change > tolerance:
        out["verdict"] = "WARN"
        base_share = ((base_fig.get("hooks") or {}).get("none") or {}).get("share")
        share = fig.get("share")
        out["finding"] = finding(
            "warning",
            "stepcost_slower",
            f"DDP step ({human_count(fig.get('params'))} params, {fig.get('world_size')} ranks) "
            f"{_ms(step)} ms is {change * 100:.0f}% slower than {_ms(old)} ms in the last passing run "
            f"{base_run} (tolerance {tolerance * 100:.0f}%); communication share "
            f"{_pct(share)} now, {_pct(base_share)} then",
            source="stepcost",
        )
    return out


def human_count(count):
    """2101248 -> '2.1M', 1000000000 -> '1G' (decimal: parameter counts)."""
    if not isinstance(count, (int, float)):
        return "?"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(int(count))


def _pct(value):
    return "-" if value is None else f"{value * 100:.0f}%"


def spread_logs(logs):
    """{host: {single_node|multi_node: text}} with the group's multi_node run given to every host
    that took part: only global rank 0 prints results, on one host (the first host whose log has a
    result line, else the first host's log, which then yields no figure)."""
    out = {host: dict(texts or {}) for host, texts in (logs or {}).items()}
    multi = {host: texts["multi_node"] for host, texts in out.items() if texts.get("multi_node") is not None}
    if multi:
        printed = [host for host in sorted(multi) if parse_log(multi[host])]
        owner = printed[0] if printed else sorted(multi)[0]
        for host in multi:
            out[host]["multi_node"] = multi[owner]
    return out


def _reference_for(scope, record, baseline):
    """The all-reduce figure a scope is compared with: nccl-tests all_reduce of the node (single
    node), the torch all-reduce across the group (multi node); this run's, else the last passing
    run's."""
    for source, run in ((record, record.get("run_id")), (baseline or {}, (baseline or {}).get("run_id"))):
        if scope == "single_node":
            rows = ((source.get("collectives") or {}).get("all_reduce") or {}).get("rows")
            label = "nccl-tests all_reduce"
        else:
            rows = ((source.get("torch") or {}).get("multi_node") or {}).get("rows")
            label = "torch all_reduce across the group"
        if rows:
            return {"source": label, "run_id": run, "rows": rows}
    return None


def judge_host(texts, record, baseline=None, tolerance=0.10):
    """(stepcost part of the host record, findings, verdicts) from the host's ddp_step.py logs
    {single_node|multi_node: text}; record is the host record so far (its all-reduce figures are
    the reference), baseline the last passing run's record or None."""
    out, findings = {}, []
    for scope in SCOPES:
        text = (texts or {}).get(scope)
        if text is None:
            continue
        results = parse_log(text)
        if not results:
            findings.append(
                finding(
                    "warning",
                    "stepcost_no_results",
                    f"DDP step benchmark ({scope}) printed no result line",
                    source="stepcost",
                )
            )
            continue
        ref = _reference_for(scope, record, baseline)
        figures = [_judged_figure(scope, result, ref, baseline, tolerance) for result in results]
        findings += [f for fig in figures for f in fig.pop("_findings")]
        out[scope] = sorted(figures, key=lambda f: f.get("params") or 0)
    verdicts = ["WARN" for figures in out.values() for fig in figures if fig["verdict"] == "WARN"]
    return out, findings, verdicts


def _judged_figure(scope, result, ref, baseline, tolerance):
    """One figure with its verdict and baseline against the same figure of the last passing run;
    its findings under "_findings" (judge_host takes them out)."""
    fig = figure(result, ref)
    base_part = ((baseline or {}).get("stepcost") or {}).get(scope) or []
    base_fig = next((b for b in base_part if _same_setup(fig, b)), None)
    judged = compare(fig, base_fig, tolerance, (baseline or {}).get("run_id"))
    fig["verdict"] = judged.pop("verdict")
    found = [judged.pop("finding")] if "finding" in judged else []
    fig["baseline"] = judged
    if (fig["hooks"].get("none") or {}).get("inconsistent"):
        found.append(
            finding(
                "warning",
                "stepcost_inconsistent",
                f"DDP step ({scope}, {human_count(fig.get('params'))} params): " + fig["sentence"],
                source="stepcost",
            )
        )
    fig["_findings"] = found
    return fig


def summary(record):
    """Short parts for the host's summary line: 'step single_node 1.0G: comm 4%, no hook needed'."""
    parts = []
    for scope in SCOPES:
        for fig in (record.get("stepcost") or {}).get(scope) or []:
            none = (fig.get("hooks") or {}).get("none") or {}
            if none.get("step_ms") is None:
                continue
            text = f"DDP step {scope} {human_count(fig.get('params'))} ({fig.get('world_size')} ranks): "
            if int(fig.get("world_size") or 1) <= 1:
                text += "1 process, no communication"
            else:
                text += f"comm {_pct(fig.get('share'))} of {_ms(none['step_ms'])} ms"
                gain = fig.get("best_gain")
                if advice_holds(fig) and fig.get("best_hook") and gain is not None and gain >= HOOK_MIN_GAIN:
                    text += f", {fig['best_hook']} hook cuts the step by {gain * 100:.0f}%"
            parts.append(text)
    return parts
