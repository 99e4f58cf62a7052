#!/usr/bin/python
"""Documentation of the wireup_wait action (plugins/action/wireup_wait.py does the work on the
controller; this file only lets ansible-doc and ansible-lint know the task's arguments)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_wait
short_description: Wait for a wireup-jobctl run or a Slurm job, one progress line per look
description:
  - Runs I(argv) followed by I(interval) on the node (C(wireup-jobctl status JOB_DIR RUN_ID), which
    blocks up to I(interval) seconds for the run's end) through the task's connection, as a plain
    shell command, until the run is no longer running there or I(timeout) seconds have passed.
  - After each look, prints one line for the node, its state and elapsed time (at most one a
    second); at the end, how the run ended there. It prints no C(FAILED - RETRYING) lines while all
    is well, as an C(until)/C(retries) task does.
  - Each look costs the same (nothing but the last answer is kept), however long the run.
  - Fails only when a look fails (jobctl's error, or an answer that is no status line), naming the
    node; how the run went is for the caller to judge from C(stdout).
  - An action plugin, run on the controller; the node needs only the status command.
options:
  argv:
    description: The status command, without the interval (it is appended).
    type: list
    elements: str
    required: true
  interval:
    description: Seconds each look may block on the node (whole seconds; 0 looks at once).
    type: int
    default: 5
  timeout:
    description:
      - Stop waiting once the run's elapsed time (or the wait's own) reaches this; 0 waits without limit.
    type: float
    default: 0
  job:
    description: The job's name, for the progress lines.
    type: str
    default: ""
  judge:
    description:
      - What the look runs and how its answer is read.
      - C(jobctl) appends I(interval) to I(argv) (C(wireup-jobctl status) blocks up to it on the node)
        and waits while the run's state is running.
      - C(sacct) runs I(argv) as it is (C(sacct --parsable2 --noheader -j ID
        --format=JobID,State,ExitCode,NodeList,End) on the node that submitted the job), sleeps
        I(interval) seconds (at least one) between looks and waits while the job's state is not
        final; I(timeout) counts by the controller's clock.
    type: str
    choices: [jobctl, sacct]
    default: jobctl
  slurm_job:
    description:
      - For I(judge=sacct), the Slurm job id it waits for (digits, or C(ARRAY_TASK)); required there.
      - Only rows of that job count; an answer with another job's row, or a host list of more names
        than a job can have, fails the wait naming the node.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: It only looks.
  platform:
    support: full
    platforms: posix
    description: POSIX hosts.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Launch | Wait for the run to end on this node
  wireup_wait:
    argv: [/opt/wireup/bin/wireup-jobctl, status, /opt/wireup/jobs/example2, r1]
    interval: 5
    timeout: 1800
    job: example2
  register: __torchrun_launch_status

- name: Launch | Slurm | Follow the job with sacct until it ends
  wireup_wait:
    argv: [sacct, --parsable2, --noheader, -j, "4711", "--format=JobID,State,ExitCode,NodeList,End"]
    judge: sacct
    slurm_job: "4711"
    interval: 5
    timeout: 1800
    job: example2
  register: __torchrun_launch_sacct
  run_once: true
  delegate_to: node1
"""

RETURN = r"""
rc:
  description: The last look's exit status.
  returned: always
  type: int
  sample: 0
stdout:
  description: The last look's answer (wireup-jobctl's JSON status line).
  returned: always
  type: str
  sample: >-
    {"state": "exited", "rc": 0, "started": 1764434695.2, "ended": 1764434731.9, "elapsed": 36.7,
    "log": "/opt/wireup/jobs/example2/logs/r1.log", "reason": ""}
stderr:
  description: The last look's error output.
  returned: always
  type: str
  sample: ""
looks:
  description: How many looks the wait took.
  returned: always
  type: int
  sample: 4
cmd:
  description: The shell command each look ran.
  returned: always
  type: str
  sample: "/opt/wireup/bin/wireup-jobctl status /opt/wireup/jobs/example2 r1 30"
"""
