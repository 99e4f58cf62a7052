"""DCGM's diagnostic (``dcgmi diag -r 1|2|3 -j``) read into findings: pure Python, stdlib only.

parse(text) reads both JSON shapes DCGM has printed: 3.x ``{"DCGM GPU Diagnostic": {"test_categories":
[{"category", "tests": [{"name", "results": [{"gpu_ids"|"gpu_id", "status", "info", "warnings"}]}]}]}}``
(info and warnings as strings), and 4.x ``{"DCGM Diagnostic": {...same categories...}, "metadata":
{"version", "Driver Version Detected"}}`` whose results name the GPU as ``entity_group: "GPU",
entity_id: N`` and carry ``warnings: [{"warning", "error_id", "error_severity"}]``, ``info: [...]``
and a per-test ``test_summary``. Text printed before or after the JSON (dcgmi's own warnings) is
skipped. A document that is not JSON or has no test (cut off, refused, an unsupported GPU) raises
ValueError saying so: the caller turns it into a finding, never a pass.

findings(parsed, gpus) -> one finding per failed, warned or skipped result: Fail critical, Warn
warning, Skip info; the remediation from DCGM 4's error severity where it gives one
(``SEVERITY_REMEDIATION``, dcgm_errors.h' dcgmErrorSeverity_t), else isolate for a failure (a
diagnostic that fails is a hardware fault until a person reads DCGM's message) and monitor for
the rest. gpus (health GPUs by index) name the GPU in each finding.

What each level costs (DCGM's dcgmi-diag reference): 1 ("quick") deployment checks, seconds;
2 ("medium") adds PCIe, memory and short stress tests, about 2 minutes; 3 ("long") about 15
minutes.
"""

import json

from . import gpuhealth, health

ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
# dcgm_errors.h: DCGM_ERROR_MONITOR 1, ISOLATE 2, UNKNOWN 3, TRIAGE 4, CONFIG 5, RESET 6.
SEVERITY_REMEDIATION = {1: "monitor", 2: "isolate", 3: "monitor", 4: "isolate", 5: "monitor", 6: "reset"}
_STATUS = {
    "pass": "pass",
    "fail": "fail",
    "warn": "warn",
    "warning": "warn",
    "skip": "skip",
    "skipped": "skip",
}
# Level -> seconds dcgmi may run before the role stops it (gpu_trial_dcgm_timeout overrides).
LEVEL_TIMEOUT = {1: 120, 2: 600, 3: 2400}


def _json_part(text):
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        raise ValueError("dcgmi printed no JSON document (is -j supported by this DCGM?)")
    if end <= start:
        raise ValueError("dcgmi's JSON is cut off or mangled (no closing brace)")
    try:
        return json.loads(text[start : end + 1])
    except ValueError as err:
        raise ValueError(f"dcgmi's JSON is cut off or mangled ({err})") from err


def _messages(value):
    """info/warnings as a list of (text, error_id, severity)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            text = item.get("warning") or item.get("message") or item.get("info") or ""
            out.append((" ".join(str(text).split()), item.get("error_id"), item.get("error_severity")))
        elif item is not None:
            out.append((" ".join(str(item).split()), None, None))
    return out


def _gpus_of(result):
    if result.get("entity_group") not in (None, "GPU"):
        return []
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        value = result.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        if isinstance(value, str) and value.strip():
            return [int(v) for v in value.split(",") if v.strip().isdigit()]
    return []


def _results(test):
    out = []
    for result in test.get("results") or []:
        if not isinstance(result, dict):
            continue
        status = _STATUS.get(str(result.get("status", "")).strip().lower(), "unknown")
        out.append(
            {
                "gpus": _gpus_of(result),
                "status": status,
                "warnings": _messages(result.get("warnings")),
                "info": [m[0] for m in _messages(result.get("info"))],
            }
        )
    return out


def parse(text):
    """-> {"version", "driver", "tests": [{"category", "name", "status", "results": [...]}]}."""
    doc = _json_part(str(text or ""))
    if not isinstance(doc, dict):
        raise ValueError("dcgmi's JSON is not an object")
    root = next((doc[k] for k in ROOT_KEYS if isinstance(doc.get(k), dict)), None)
    categories = (root or {}).get("test_categories")
    if not isinstance(categories, list):
        raise ValueError(
            "dcgmi's JSON has no test_categories (refused, or a shape this parser does not know)"
        )
    tests = []
    for category in categories:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or []:
            if not isinstance(test, dict):
                continue
            results = _results(test)
            summary = str((test.get("test_summary") or {}).get("status", "")).strip().lower()
            tests.append(
                {
                    "category": category.get("category"),
                    "name": str(test.get("name") or "?"),
                    "status": _STATUS.get(summary) or _worst_status(results),
                    "results": results,
                }
            )
    if not tests:
        raise ValueError("dcgmi's JSON lists no test: nothing was diagnosed")
    meta = doc.get("metadata") or {}
    return {"version": meta.get("version"), "driver": meta.get("Driver Version Detected"), "tests": tests}


def _worst_status(results):
    for status in ("fail", "warn", "skip", "pass"):
        if any(r["status"] == status for r in results):
            return status
    return "unknown"


_RANK = {"monitor": 1, "reset": 2, "isolate": 3}


def _remediation(status, warnings):
    """A failure's remediation: the strongest DCGM 4 names in its warnings' severities, else
    isolate; monitor for warnings and skips."""
    if status != "fail":
        return "monitor"
    named = [SEVERITY_REMEDIATION[s] for _t, _e, s in warnings if s in SEVERITY_REMEDIATION]
    return max(named, key=_RANK.get) if named else "isolate"


_LEVEL = {"fail": "critical", "warn": "warning", "skip": "info", "unknown": "warning"}


def findings(parsed, gpus=None, level=None):
    """One finding per non-passing result (see the module docstring)."""
    by_index = {g.get("index"): g for g in gpus or []}
    out = []
    for test in parsed["tests"]:
        for result in test["results"]:
            if result["status"] == "pass":
                continue
            text = (
                "; ".join(t for t, _e, _s in result["warnings"] if t)
                or "; ".join(result["info"])
                or "no message"
            )
            remediation = _remediation(result["status"], result["warnings"])
            for index in result["gpus"] or [None]:
                gpu = by_index.get(index) or ({"index": index} if index is not None else None)
                run = f"DCGM diag -r {level}" if level else "DCGM diag"
                who = gpuhealth.label(gpu) if gpu else "node"
                message = f"{who}: {run} {test['name']}: {result['status'].upper()}: {text[:300]}"
                severity = _LEVEL[result["status"]]
                if gpu:
                    out.append(
                        gpuhealth.gpu_finding(
                            gpu,
                            "gpu_dcgm_diag",
                            message,
                            source="dcgm",
                            remediation=remediation,
                            severity=severity,
                        )
                    )
                else:
                    found = health.finding(severity, "gpu_dcgm_diag", message)
                    out.append(dict(found, source="dcgm", remediation=remediation, gpu={}))
    return out
