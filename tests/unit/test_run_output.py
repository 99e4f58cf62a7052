"""What a run prints (issue 38, item 4): each job's plan once, not once per node. The task is the
role's own (read from its task file), the plan is torchrun_launch.job_plan's, Ansible renders it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch
from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
CHECK = "Launch | Check the job's variables and plan"


def _node(i):
    return {"address": f"10.0.0.{i}", "interface": "eth0", "gpu_present": False, "gpu_count": 0,
            "infiniband": [], "hostname": f"n{i}", "cpus": 8}  # fmt: skip


KW = {"job": "ddp-multinode", "program": "/opt/wireup/examples/ddp_multinode.py", "base_dir": "/opt/wireup",
      "venv_path": "/opt/wireup/venv", "run_id": "r1", "group": "gpu_nodes", "node_group": "gpu_nodes",
      "nproc_per_node": 2}  # fmt: skip
NODES = {f"n{i}": _node(i) for i in (1, 2, 3)}


SLICE = "Launch | Take this node's part of the plan"


def _check(tmp_path, plan):
    """The role's slice and plan check on three nodes (local connections) given the plan its
    planner n1 made (plan.yml, issue 39): rc and output."""
    tasks = yaml.safe_load((ROOT / "roles/torchrun_launch/tasks/plan.yml").read_text())
    (tmp_path / "check.yml").write_text(yaml.safe_dump([t for t in tasks if t["name"] in (SLICE, CHECK)]))
    (tmp_path / "play.yml").write_text(
        "- hosts: gpu_nodes\n  gather_facts: false\n  tasks:\n    - ansible.builtin.import_tasks: check.yml\n"
    )
    hosts = {
        n: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "__torchrun_launch_planner": "n1", "__torchrun_launch_plan_id": "pass1"}
        for n in NODES
    }  # fmt: skip
    hosts["n1"]["__torchrun_launch_job_plan"] = dict(plan, plan_id="pass1")  # the planner's fact
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"),
    }
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory.yml", "play.yml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=busy.HANG_S,
    )  # fmt: skip


def test_each_job_s_plan_is_shown_once(tmp_path):
    plan = torchrun_launch.job_plan(list(NODES), NODES, results_dir=str(tmp_path / "results"), **KW)
    assert plan["errors"] == [] and len(plan["show"]) == 3
    run = _check(tmp_path, plan)
    assert run.returncode == 0, run.stdout + run.stderr
    for line in plan["show"]:
        assert run.stdout.count(line) == 1, run.stdout
    assert run.stdout.count("job ddp-multinode: its plan is shown on n1") == 2, run.stdout


def test_a_plan_with_errors_still_says_them(tmp_path):
    plan = torchrun_launch.job_plan([], {}, results_dir=str(tmp_path / "results"), **KW)
    assert plan["errors"] and "order" not in plan
    run = _check(tmp_path, plan)
    assert run.returncode != 0
    assert "torchrun_launch_group='gpu_nodes' has no hosts" in run.stdout, run.stdout + run.stderr


PLAYS = """\
- name: Nothing to do here
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Skipped everywhere
      ansible.builtin.debug:
        msg: never
      when: false

- name: One node at a time
  hosts: gpu_nodes
  gather_facts: false
  serial: 1
  tasks:
    - name: Say who
      ansible.builtin.debug:
        msg: "here {{ inventory_hostname }}"

- name: Nobody
  hosts: nobody
  gather_facts: false
  tasks:
    - name: Never runs
      ansible.builtin.debug:
        msg: never
"""


def _play(tmp_path, callback):
    (tmp_path / "plays.yml").write_text(PLAYS)
    hosts = {n: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable} for n in NODES}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path),
    }
    env |= {"ANSIBLE_STDOUT_CALLBACK": callback} if callback else {}
    run = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory.yml", "plays.yml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=busy.HANG_S,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_make_run_s_output_shows_each_play_once_and_only_above_its_output(tmp_path):
    """Ansible's default output (what ansible-playbook by hand keeps) names an empty play, a play
    whose hosts match nothing, and a serial play once per batch; make run's callback does not."""
    default = _play(tmp_path, None)
    assert default.count("PLAY [One node at a time]") == 3
    assert "PLAY [Nothing to do here]" in default and "PLAY [Nobody]" in default
    ours = _play(tmp_path, "wireup.cluster.wireup_run")
    assert ours.count("PLAY [One node at a time]") == 1
    assert "PLAY [Nothing to do here]" not in ours and "PLAY [Nobody]" not in ours
    assert "no hosts matched" not in ours
    # Everything else is the default callback's: the same task lines and the recap.
    assert _body(ours) == _body(default)
    assert _body(ours)[0].startswith("TASK [Say who]") and len(_body(ours)) == 5


def _body(text):
    return [
        line for line in text.splitlines() if line.startswith(("TASK [", "ok: [", "node")) or "RECAP" in line
    ]
