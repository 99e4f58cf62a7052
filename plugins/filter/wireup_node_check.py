"""Filters for the node_check and slurm_health_check roles (issue 26): thin wrappers around
wireup.nodecheck, wireup.promtext, wireup.checkstore and wireup.slurmhealth (pure, unit-tested)."""

from __future__ import annotations

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import checkstore, nodecheck, promtext, slurmhealth, watchsettings


def wireup_check_config(host, node_facts, settings):
    """check.json's content for one node (nodecheck.config)."""
    return nodecheck.config(str(host), dict(node_facts or {}), dict(settings))


def wireup_check_bench_part(results_dir, host, build=None, size="1G"):
    """The baseline's bench part from the host's newest bench record when it PASSed ({} when it
    did not, or there is none: the baseline of the last passing bench stays)."""
    latest = promtext.latest_record(str(results_dir), str(host))
    if not latest or latest["verdict"] != "PASS":
        return {}
    return nodecheck.bench_part(latest["record"], dict(build or {}), watchsettings.size_bytes(size))


def wireup_check_textfile(results_dir, host):
    """wireup_bench.prom's text for one node from the controller's store ('' when it has nothing)."""
    return promtext.controller_text(str(results_dir), str(host))


def wireup_check_gather(hosts, hostvars):
    """The quick check's results from each host's node_check_result fact, and the hosts without one."""
    return checkstore.gather(list(hosts), {h: hostvars[h] for h in hosts if h in hostvars})


def wireup_check_result(stdout, host, stderr="", rc=None):
    """The node's wireup-check --json answer as a dict (checkstore.parse_output: an ERROR result
    when it printed something else)."""
    return checkstore.parse_output(str(host), str(stdout or ""), str(stderr or ""), rc)


def wireup_slurm_health_plan(slurp, conf_path, node, settings):
    """slurmhealth.plan from the slurped slurm.conf (a failed slurp: no such file)."""
    import base64

    found = dict(slurp or {})
    text = base64.b64decode(found["content"]).decode("utf-8", "replace") if "content" in found else None
    return slurmhealth.plan(text, str(conf_path), str(node), dict(settings))


class FilterModule:
    def filters(self):
        return {
            "wireup_check_config": _wrap(wireup_check_config),
            "wireup_check_bench_part": _wrap(wireup_check_bench_part),
            "wireup_check_textfile": _wrap(wireup_check_textfile),
            "wireup_check_gather": wireup_check_gather,
            "wireup_check_result": wireup_check_result,
            "wireup_slurm_health_plan": wireup_slurm_health_plan,
        }
