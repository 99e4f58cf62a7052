#!/usr/bin/python
"""Ansible module: the quick check through Slurm (issue 39), run on the group's Slurm submit host."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_quick_slurm
short_description: Run wireup-check on every node in one Slurm job step, or say why not
description:
  - Runs on the group's master (C(delegate_to), C(run_once)), where C(scontrol) and C(srun) reach
    the cluster. With I(via) C(auto) or C(slurm) reads C(scontrol show node -o) once and decides the
    path (wireup/plans/node_check_slurm.py C(route)) - Slurm only when it knows every node of
    I(names) and none is drained, down or not responding.
  - On the Slurm path runs one C(srun) over the nodes, one task per node (C(srun_argv) - the
    nodes, C(--immediate=)I(wait), C(--time) from I(timeout), I(options)), each task running
    I(check_argv) and printing one line, and returns srun's output as it is - the controller reads
    it (C(parse), filter wireup_node_check_slurm_results), not this host.
  - On the Ansible path (I(via) C(ansible), or C(auto) where Slurm cannot run the step) runs
    nothing and says why; the caller runs the check with a task per node.
  - Changes nothing (wireup-check writes its own textfile on each node, as it does when Ansible
    runs it).
options:
  via:
    description: node_check_via.
    type: str
    choices: [auto, ansible, slurm]
    default: auto
  names:
    description: Each host of the play and its Slurm node name (its hostname).
    type: dict
    required: true
  check_argv:
    description: wireup-check's command line on each node (the node_check plan's C(quick_argv)).
    type: list
    elements: str
    required: true
  options:
    description: srun's options (node_check_slurm_options, the sbatch option grammar).
    type: dict
    default: {}
  wait:
    description: Seconds srun waits for the nodes (C(--immediate)).
    type: int
    default: 30
  timeout:
    description: node_check_timeout (the step's C(--time) follows from it).
    type: int
    default: 10
  bench:
    description: node_check_bench (a minute more of C(--time)).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Runs in check mode too (the check is read-only; its argv says C(--textfile never) there).
  platform:
    support: full
    platforms: posix
    description: A Slurm submit host.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Node check | The quick check through Slurm where it can run there
  wireup.cluster.wireup_quick_slurm:
    via: auto
    names: {node1: gpu-a01, node2: gpu-a02}
    check_argv: [/usr/local/sbin/wireup-check, --config, /etc/wireup/check.json, --json]
    options: {reservation: maint}
  delegate_to: gpu-a01
  run_once: true
"""

RETURN = r"""
route:
  description: The path (node_check_slurm.Route).
  returned: always
  type: dict
  contains:
    via:
      description: ansible or slurm.
      type: str
      sample: slurm
    tasks:
      description: node_check's task file that runs the check (quick.yml or quick_slurm.yml).
      type: str
      sample: quick_slurm.yml
    why:
      description: Why this path, one line.
      type: str
      sample: "one Slurm job step: Slurm knows all 2 node(s) and can start a job step on each"
    names:
      description: Each host's Slurm node name.
      type: dict
      sample: {node1: gpu-a01, node2: gpu-a02}
    errors:
      description: Why node_check_via slurm cannot be followed (the run stops).
      type: list
      elements: str
      sample: []
srun:
  description: The Slurm path's srun, as it ran on this host; empty on the Ansible path.
  returned: always
  type: dict
  contains:
    argv:
      description: srun's command line.
      type: list
      elements: str
      sample: [srun, --job-name=wireup-quick, --nodelist=gpu-a01,gpu-a02]
    rc:
      description: srun's exit code (null when srun is not on PATH).
      type: int
      sample: 0
    stdout:
      description: What the tasks printed, a line each.
      type: str
      sample: "wireup-quick gpu-a01 0 eyJ2ZXJkaWN0IjogIlBBU1MifQ== "
    stderr:
      description: srun's own messages.
      type: str
      sample: ""
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import node_check_slurm


def _run(module, argv):
    """argv's registered-result shape ({rc, stdout, stderr}); rc None when its program is missing."""
    if module.get_bin_path(argv[0]) is None:
        return {"rc": None, "stdout": "", "stderr": f"no {argv[0]} on the submit host's PATH"}
    rc, stdout, stderr = module.run_command(argv, environ_update={"LC_ALL": "C"})
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


def main():
    module = AnsibleModule(
        argument_spec={
            "via": {"type": "str", "choices": ["auto", "ansible", "slurm"], "default": "auto"},
            "names": {"type": "dict", "required": True},
            "check_argv": {"type": "list", "elements": "str", "required": True},
            "options": {"type": "dict", "default": {}},
            "wait": {"type": "int", "default": 30},
            "timeout": {"type": "int", "default": 10},
            "bench": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    names = {str(h): str(n) for h, n in p["names"].items()}
    show = _run(module, slurm.node_state_argv(None)) if p["via"] != "ansible" else None
    route = node_check_slurm.route(p["via"], names, show)
    answer = {}  # srun's output, read on the controller (node_check_slurm.parse), never here
    if route["via"] == "slurm" and not route["errors"]:
        try:
            argv = node_check_slurm.srun_argv(
                names,
                p["check_argv"],
                options=p["options"],
                wait=p["wait"],
                timeout=p["timeout"],
                bench=p["bench"],
            )
        except ValueError as exc:
            module.fail_json(msg=str(exc), route=route)
        answer = dict(_run(module, argv), argv=argv)
    module.exit_json(changed=False, route=route, srun=answer)


if __name__ == "__main__":
    main()
