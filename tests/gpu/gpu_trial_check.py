"""Compare wireup's GPU fingerprint (the newest bench record with GPU figures) with the independent
measurement of tests/gpu/gpu_reference.cu (issue 25: they must agree within 5%).

    python3 tests/gpu/gpu_trial_check.py RESULTS_DIR REFERENCE_JSONL

Prints, per GPU and figure, both medians and their ratio, the GPUs' verdicts and findings, and ends
with `gpu trial check: OK (N figures within 5%)` or `gpu trial check: NOT OK (...)`. Exit code 0
either way (the line is the result); 2 when there is nothing to compare.
"""

import json
import pathlib
import sys

AGREE = 0.05


def gpus_of(record):
    """The record's judged GPUs (its gpu_trial part, wireup/capability/gpu_trial.py)."""
    return (record.get("gpu_trial") or {}).get("gpus") or []


def newest_record(results_dir):
    """(run id, host, record) of the newest bench run whose record has GPU figures, or None."""
    runs = sorted((pathlib.Path(results_dir) / "bench").glob("*"), reverse=True)
    for run in runs:
        for path in sorted(run.glob("*.json")):
            record = json.loads(path.read_text())
            if any(g.get("figures") for g in gpus_of(record)):
                return run.name, path.stem, record
    return None


def reference(lines):
    """{(gpu, figure): median} of gpu_reference's JSON lines (errors and other lines skipped)."""
    out = {}
    for raw in lines:
        text = raw.strip()
        if not text.startswith("{"):
            continue
        item = json.loads(text)
        if item.get("median") is not None:
            out[(int(item["gpu"]), item["figure"])] = float(item["median"])
    return out


def compare(record, ref):
    """[(gpu index, figure, wireup median, reference median, ratio, agrees)] for the figures both have."""
    rows = []
    for gpu in gpus_of(record):
        for figure, entry in sorted((gpu.get("figures") or {}).items()):
            theirs = ref.get((gpu.get("index"), figure))
            mine = entry.get("median")
            if theirs and mine is not None:
                ratio = mine / theirs
                rows.append((gpu["index"], figure, mine, theirs, ratio, abs(ratio - 1) <= AGREE))
    return rows


def unit(figure):
    return (1e12, "TFLOPS") if figure.endswith("_flops") else (1e9, "GB/s")


def lines_of(run_id, host, record, rows):
    trial = record.get("gpu_trial") or {}
    fp = trial.get("fingerprint") or {}
    out = [
        f"run {run_id}, {host}: verdict {record.get('verdict')}, GPU verdict {trial.get('verdict')} "
        f"({trial.get('capability')}: {', '.join(trial.get('measured') or [])})",
        f"fingerprint: {fp.get('elapsed_s')} s, windows {fp.get('seconds_per_set')} s, "
        f"torch {fp.get('torch')}, nvml {fp.get('nvml')}",
    ]
    for gpu in gpus_of(record):
        codes = ", ".join(f"{f['code']}->{f.get('remediation')}" for f in gpu.get("findings") or []) or "none"
        out.append(
            f"GPU{gpu.get('index')} {gpu.get('name')} S/N {gpu.get('serial')}: {gpu.get('verdict')}; "
            f"findings: {codes}"
        )
    for index, figure, mine, theirs, ratio, ok in rows:
        scale, name = unit(figure)
        out.append(
            f"GPU{index} {figure}: wireup {mine / scale:,.1f} {name}, reference {theirs / scale:,.1f} "
            f"{name}, ratio {ratio:.3f} {'ok' if ok else 'OFF BY MORE THAN 5%'}"
        )
    bad = [r for r in rows if not r[5]]
    if not rows:
        out.append("gpu trial check: NOT OK (no figure in common with the reference)")
    elif bad:
        out.append(f"gpu trial check: NOT OK ({len(bad)} of {len(rows)} figures differ by more than 5%)")
    else:
        out.append(f"gpu trial check: OK ({len(rows)} figures within 5%)")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = newest_record(argv[0])
    if not found:
        print("gpu trial check: NOT OK (no bench record with GPU figures)")
        return 2
    run_id, host, record = found
    ref = reference(pathlib.Path(argv[1]).read_text().splitlines()) if pathlib.Path(argv[1]).is_file() else {}
    print("\n".join(lines_of(run_id, host, record, compare(record, ref))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
