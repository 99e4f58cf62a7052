"""Aggregate callback for provision_bench.py --profile: wall time and changed hosts per task.

Enabled only by the benchmark's profiling run (ANSIBLE_CALLBACKS_ENABLED=wireup_perf_profile and
ANSIBLE_CALLBACK_PLUGINS pointing here); it writes JSON to $WIREUP_PERF_PROFILE at the end:
{"tasks": [{"name", "path", "role", "seconds", "starts", "hosts", "changed": [host, ...]}], "plays": n}
A task's time runs from its start to the start of the next task (or play, or the end), as
profile_tasks measures it; a task started several times (loops of include_tasks) is summed.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: wireup_perf_profile
type: aggregate
short_description: per-task wall time and changed hosts, as JSON (wireup provision benchmark)
description: Writes the JSON file named by the WIREUP_PERF_PROFILE environment variable.
requirements: [enable in configuration]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "wireup_perf_profile"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._tasks = {}
        self._current = None
        self._since = None
        self._plays = 0
        self._gaps = 0.0
        self._t0 = time.monotonic()

    def _close(self):
        now = time.monotonic()
        if self._current is not None:
            self._tasks[self._current]["seconds"] += now - self._since
        elif self._since is not None:
            self._gaps += now - self._since
        self._current, self._since = None, now

    def _start(self, task):
        self._close()
        key = task.get_path() or task.get_name()
        rec = self._tasks.setdefault(
            key,
            {
                "name": task.get_name(),
                "path": task.get_path() or "",
                "role": task._role.get_name() if getattr(task, "_role", None) else "",
                "action": task.action,
                "seconds": 0.0,
                "starts": 0,
                "hosts": [],
                "changed": [],
                "skipped": [],
            },
        )
        rec["starts"] += 1
        self._current = key

    def v2_playbook_on_play_start(self, play):
        self._close()
        self._plays += 1

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def _result(self, result):
        if self._current is None:
            return
        rec = self._tasks[self._current]
        host = result._host.get_name()
        if host not in rec["hosts"]:
            rec["hosts"].append(host)
        if result._result.get("changed") and host not in rec["changed"]:
            rec["changed"].append(host)

    def v2_runner_on_ok(self, result):
        self._result(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result)

    def v2_runner_on_skipped(self, result):
        self._result(result)
        rec = self._tasks.get(self._current)
        if rec is not None and result._host.get_name() not in rec["skipped"]:
            rec["skipped"].append(result._host.get_name())

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("WIREUP_PERF_PROFILE")
        if not path:
            return
        data = {
            "total_seconds": time.monotonic() - self._t0,
            "between_tasks_seconds": self._gaps,
            "plays": self._plays,
            "tasks": sorted(self._tasks.values(), key=lambda r: -r["seconds"]),
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
