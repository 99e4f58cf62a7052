"""History on the drain path (issue 37 item 4): launch.yml's drain and repair.yml's return write
events through record/history.py (the module wireup_history), fed with the real plans those steps
make from real scontrol captures; the node's textfile exports them and promtool accepts it."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import repair
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import history
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import metrics
from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
IDLE = (FIXTURES / "testbed_22.05.8_scontrol_show_node_o_idle.txt").read_text()
NODES = {f"n{i}": {"hostname": f"node{i}"} for i in (1, 2, 3)}
T0 = 1796630400.0  # 2026-12-07T08:00:00Z
PROMTOOL = shutil.which("promtool")


def _drained(node, reason):
    """The testbed's idle capture with ``node`` drained for ``reason``, as scontrol prints it."""
    out = []
    why = f" Reason={reason} [root@2026-12-07T08:00:00] LastBusyTime"
    for record in IDLE.splitlines():
        ours = record.split()[0] == f"NodeName={node}"
        out.append(
            record.replace("State=IDLE", "State=IDLE+DRAIN").replace(" LastBusyTime", why, 1)
            if ours
            else record
        )
    return {"rc": 0, "stdout": "\n".join(out) + "\n", "stderr": ""}


def _launch_drain():
    """launch.yml's drain step's plan: node2 (inventory host n2) FAILed, idle in Slurm."""
    argv = slurm.drain_argv("node2", "fabric run 20261207T075500Z named node2 bad")
    item = {"host": "n2", "node": "node2", "reason": argv[-1][len("Reason=") :], "argv": argv}
    return slurm.drain_plan([item], {"rc": 0, "stdout": IDLE, "stderr": ""})


def _repair_return(reason):
    """repair.yml's return plan for node2 drained for ``reason`` (a job's: cleared, no recheck)."""
    plan = repair.plan(_drained("node2", reason), NODES)
    return repair.returns(plan, {}, resume=True, check_mode=False)


def test_a_drain_then_its_return_give_the_time_out_of_service_and_the_textfile(tmp_path):
    root = str(tmp_path)
    drain = _launch_drain()
    assert [d["host"] for d in drain["drain"]] == ["n2"]
    for ev in history.item_events("drain", drain["drain"], history.who_of("ops"), when=T0):
        history.write(root, ev)
    [out] = history.read(root, "n2")
    assert (out["kind"], out["who"]) == ("drain", "controller:ops")
    assert out["why"].startswith("wireup: ") and "named node2 bad" in out["why"]
    assert history.lines({"n2": [out]}, T0 + 1800) == [
        "n2: out of service since 2026-12-07T08:00:00Z (0.5 h)"
    ]
    text = metrics.controller_text(root, "n2", now=T0 + 1800)
    assert 'wireup_node_out_of_service{host="n2"} 1' in text
    assert f'wireup_node_out_of_service_since_timestamp_seconds{{host="n2"}} {T0:.0f}' in text.replace(
        ".0}", "}"
    )
    back = _repair_return(slurm.drain_reason("rank 3 ran out of host memory", whose="job", check="job"))
    assert [r["host"] for r in back["resume"]] == ["n2"]
    for ev in history.item_events("return", back["resume"], history.who_of("ops"), when=T0 + 3600):
        history.write(root, ev)
    events = history.read(root, "n2")
    assert [e["kind"] for e in events] == ["drain", "return"]
    assert events[1]["why"] == "a job's problem: no hardware recheck needed"
    assert history.lines({"n2": events}, T0 + 4000) == ["n2: last returned 60 min after it was drained"]
    text = metrics.controller_text(root, "n2", now=T0 + 4000)
    assert 'wireup_node_out_of_service{host="n2"} 0' in text
    assert 'wireup_node_last_return_duration_seconds{host="n2"} 3600' in text
    if not PROMTOOL:
        pytest.skip("promtool missing: make deps-test installs it")
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr
    # a node with no history keeps the text it had (none here: no bench record either)
    assert metrics.controller_text(root, "n3") == ""
    assert metrics.controller_text(root, "../n2") == ""


def test_events_of_a_plan_are_checked_whole_before_any_is_written():
    good = _launch_drain()["drain"][0]
    with pytest.raises(ValueError, match="is not a host name"):
        history.item_events("drain", [good, dict(good, host="n2/../../x")], "controller:ops")
    with pytest.raises(ValueError, match="not 'reboot'"):
        history.item_events("reboot", [good], "controller:ops")  # a kind off KINDS
    with pytest.raises(ValueError, match="is not a user name"):
        history.who_of("ops; rm -rf /")
    assert history.item_events("drain", [], "controller:ops") == []


def _module(tmp_path, kind, items, check=False):
    """wireup_history run by Ansible on this machine (launch.yml and repair.yml delegate it to localhost)."""
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    args = json.dumps({"results_dir": str(tmp_path), "kind": kind, "items": items})
    argv = [str(pathlib.Path(sys.executable).with_name("ansible")), "-i", "localhost,", "-c", "local"]
    argv += ["--check"] if check else []
    argv += ["-e", f"ansible_python_interpreter={sys.executable}", "localhost"]
    argv += ["-m", "wireup.cluster.wireup_history", "-a", args]
    out = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=busy.HANG_S, check=False
    )
    return out.returncode, json.loads(out.stdout.split("=>", 1)[1])


def test_the_module_writes_each_drain_and_return_and_nothing_in_check_mode(tmp_path):
    drain = _launch_drain()["drain"]
    rc, result = _module(tmp_path, "drain", drain, check=True)
    assert rc == 0 and result["written"] == [] and not (tmp_path / "history").exists()
    rc, result = _module(tmp_path, "drain", drain)
    assert rc == 0 and result["changed"] is True
    [path] = result["written"]
    assert path.startswith(str(tmp_path / "history" / "n2")) and path.endswith("-drain.json")
    back = _repair_return(slurm.drain_reason("rank 3 ran out of host memory", whose="job", check="job"))
    rc, result = _module(tmp_path, "return", back["resume"])
    assert rc == 0 and len(result["written"]) == 1
    [d, r] = history.read(str(tmp_path), "n2")
    assert (d["kind"], r["kind"]) == ("drain", "return") and d["who"] == r["who"]
    assert d["who"].startswith("controller:")
    rc, result = _module(tmp_path, "drain", [dict(drain[0], host="../../etc")])
    assert rc != 0 and "is not a host name" in result["msg"]
    assert len(history.read(str(tmp_path), "n2")) == 2
