"""pytorch_venv on the 3-node testbed: torch CPU from the testbed's wheelhouse URL, in the order
check (fresh nodes) -> apply -> check -> apply, the last two with changed=0; the verification's
local fact on every node; reuse of a preinstalled torch (system site packages of a base venv,
as on the lent H200 machine); bad input stopped before any change, naming the variable.

Timings are printed (pytest -s) because a 966 MB venv on 2 shared cores takes a while."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .harness import run_playbook

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ROLE_DEFAULTS = REPO / "roles" / "pytorch_venv" / "defaults" / "main.yml"
GROUP_VARS = REPO / "group_vars" / "all.yml"
TAGS = ["pytorch_venv"]
REPORT_TASK = "PyTorch venv | Report torch"
PIP_TASK = "PyTorch venv | Install with pip (torch, the extras, or the hash-checked requirements)"
STEPS = "PyTorch venv | Build the venv and install what it lacks (the plan's steps, each a task file)"
VENV_FILES = "PyTorch venv | Link the base virtualenv's site-packages, provide torchrun for a reused torch"
FACT = "/etc/ansible/facts.d/wireup_torch.fact"


def _pin(name, path):
    return yaml.safe_load(path.read_text())[name]


@pytest.fixture(scope="module")
def wheelhouse(testbed):
    """The testbed serves torch and its dependencies; the role's default extra packages are
    added to the same folder (pinned, pure-Python wheels from PyPI)."""
    wheels = Path(testbed.www_dir) / "wheels"
    extras = _pin("pytorch_venv_extra_packages", ROLE_DEFAULTS)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels), *extras],
        check=True,
    )
    return wheels


def _timed(label, *args, **kwargs):
    start = time.monotonic()
    result = run_playbook(*args, **kwargs)
    print(f"[pytorch_venv] {label}: rc={result.rc} in {time.monotonic() - start:.0f} s")
    return result


def _assert_clean(result, label):
    assert result.rc == 0 and result.failed_hosts == [] and result.unreachable_hosts == [], (
        f"{label}: {result.failure_messages()}\n{result.stdout[-4000:]}"
    )


def test_install_from_wheelhouse_then_idempotent(testbed, wheelhouse, tmp_path):
    nodes = sorted(testbed.nodes)
    torch_pin = _pin("pytorch_venv_torch_version", GROUP_VARS)
    # The session testbed is shared: another test may have run site.yml already. Start from nodes
    # without this role's results.
    for node in nodes:
        testbed.ssh(node, f"rm -rf /opt/wireup/venv /opt/wireup/reuse /opt/wireup/reuse-facts {FACT}")

    fresh_check = _timed("check on fresh nodes", "site.yml", testbed.inventory, check=True, tags=TAGS)
    _assert_clean(fresh_check, "--check on fresh nodes")
    assert all(fresh_check.stats["changed"][n] > 0 for n in nodes), fresh_check.stats
    # Nothing exists yet, so the verification waits for the real run, and the report says so.
    assert fresh_check.task_results("PyTorch venv | Import torch in the venv") == {}
    reports = fresh_check.task_results(REPORT_TASK)
    assert sorted(reports) == nodes and all(
        "torch is verified on the real run" in r["msg"] for r in reports.values()
    )

    apply = _timed(f"install on {len(nodes)} nodes", "site.yml", testbed.inventory, tags=TAGS)
    _assert_clean(apply, "first run")
    installs = {host for host, keys in apply.item_keys(PIP_TASK).items() if "torch" in keys}
    assert installs == set(nodes)
    reports = apply.task_results(REPORT_TASK)
    assert sorted(reports) == nodes
    for node, res in reports.items():
        assert f"torch {torch_pin}+cpu (installed)" in res["msg"], (node, res["msg"])

    for node in nodes:
        proc = testbed.ssh(node, f"cat {FACT}")
        fact = json.loads(proc.stdout)
        assert fact["torch_version"] == f"{torch_pin}+cpu"
        assert fact["variant"] == "cpu" and fact["cuda_version"] == "" and not fact["cuda_available"]
        assert fact["torch_path"].startswith("/opt/wireup/venv/lib/python3.11/site-packages/torch/")
        assert fact["preinstalled"] is False
        pip = testbed.ssh(node, "/opt/wireup/venv/bin/python -m pip list --format=freeze").stdout
        assert f"torch=={torch_pin}+cpu" in pip.split()
        assert "torchinfo==1.8.0" in pip.split()

    again_check = _timed("idempotent check", "site.yml", testbed.inventory, check=True, tags=TAGS)
    _assert_clean(again_check, "second --check")
    assert set(again_check.stats["changed"].values()) == {0}, again_check.stats
    # With the venv in place, check mode verifies torch for real.
    assert sorted(again_check.task_results(REPORT_TASK)) == nodes

    again = _timed("idempotent run", "site.yml", testbed.inventory, tags=TAGS)
    _assert_clean(again, "second run")
    assert set(again.stats["changed"].values()) == {0}, again.stats
    # Issue 14: each task entry costs the controller a fork per host, even skipped. The role ran
    # 38 per host on a no-op rerun before its plan (probe, plan, builtins; apt and pip folded away).
    entries = _role_entries(again)
    print(f"[pytorch_venv] task entries per host on a no-op rerun: {entries}")
    assert all(count <= 18 for count in entries.values()) and sorted(entries) == nodes, entries


def _role_entries(result):
    """{host: task entries of this role that ran or were skipped} in one run."""
    counts = {}
    for ev in result.events:
        data = ev.get("event_data", {})
        if ev.get("event") in ("runner_on_ok", "runner_on_skipped", "runner_on_failed") and (
            data.get("role") == "pytorch_venv"
        ):
            counts[data["host"]] = counts.get(data["host"], 0) + 1
    return counts


def test_reuse_preinstalled_torch_from_a_base_venv(testbed, wheelhouse):
    """The H200 machine's layout: torch lives in a base venv; the wireup venv is built from that
    venv's python with system site packages, and torch is NOT installed again."""
    node = sorted(testbed.nodes)[0]
    base = "/opt/wireup/venv"  # built by the previous test: plays the image's /opt/torch/.venv
    testbed.ssh(node, f"test -x {base}/bin/python3")
    extravars = {
        "pytorch_venv_base_python": f"{base}/bin/python3",
        "pytorch_venv_system_site_packages": True,
        "pytorch_venv_accept_preinstalled": ">=2.11",
        "pytorch_venv_path": "/opt/wireup/reuse",
        "pytorch_venv_fact_dir": "/opt/wireup/reuse-facts",
    }
    first = _timed("reuse a base venv torch", "site.yml", testbed.inventory, extravars, tags=TAGS, limit=node)
    _assert_clean(first, "reuse run")
    assert "torch" not in first.item_keys(PIP_TASK, changed=False).get(node, []), (
        "torch was installed although the base venv has an acceptable one"
    )
    fact = json.loads(testbed.ssh(node, "cat /opt/wireup/reuse-facts/wireup_torch.fact").stdout)
    assert fact["preinstalled"] is True
    assert fact["torch_path"].startswith(f"{base}/lib/python3.11/site-packages/torch/")
    assert fact["venv"] == "/opt/wireup/reuse"
    # launch scripts call <venv>/bin/torchrun: present although torch was not installed here.
    usage = testbed.ssh(node, "/opt/wireup/reuse/bin/torchrun --help").stdout
    assert "usage: torchrun" in usage
    second = _timed("reuse, second run", "site.yml", testbed.inventory, extravars, tags=TAGS, limit=node)
    _assert_clean(second, "reuse second run")
    assert second.stats["changed"][node] == 0, second.stats
    # The probe read the base torch from torch/version.py: pip has nothing to do, so the
    # wheelhouse is not shipped; the probe found bin/torchrun, the flag and the .pth as planned
    # (pytorch_venv.plan's changes), so the venv's builtins are not even included.
    assert (
        second.task_results(
            "PyTorch venv | Ship the wheelhouse and the hash-checked requirements file to the node"
        )
        == {}
    )
    assert second.task_results(VENV_FILES) == {}
    # Nor is pip: the extras the previous test installed into the base venv are visible through the
    # .pth link (the probe's site_installed), so pip would only say "already satisfied".
    steps = second.task_results(STEPS).get(node, {}).get("results", [])
    assert [r.get("__pytorch_venv_step") for r in steps] == [], steps
    assert first.task_results(PIP_TASK) == {}, "pip ran for extras the base venv already has"
    assert first.item_keys(VENV_FILES) == {node: ["pth", "torchrun"]}
    reused = second.task_results(REPORT_TASK)[node]["msg"]
    assert "2.13.0+cpu" in reused and "reusing it" in reused, reused


@pytest.mark.parametrize(
    ("extravars", "needle"),
    [
        ({"pytorch_venv_extra_packages": ["torchinfo"]}, "pytorch_venv_extra_packages"),
        ({"pytorch_venv_wheelhouse_dir": "/nonexistent/wheels"}, "pytorch_venv_wheelhouse_dir"),
        ({"pytorch_venv_torch_version": "2.99.0"}, "pytorch_venv_torch_variants"),
    ],
)
def test_bad_input_stops_before_any_change(testbed, extravars, needle):
    node = sorted(testbed.nodes)[-1]
    result = run_playbook("site.yml", testbed.inventory, extravars, tags=TAGS, limit=node)
    assert result.failed_hosts == [node]
    assert result.stats["changed"][node] == 0
    assert any(needle in msg for _, _, msg in result.failure_messages(node)), result.failure_messages(node)
