"""wireup_wait: wait for a run on a node, printing its progress (issue 28; sacct: issue 24).

One look per interval through the task's connection, as a plain shell command: no module upload,
nothing kept between looks but the last answer, so a look costs the same after a day as after a
minute. ``judge: jobctl`` (default) runs ``ARGV... INTERVAL`` (``wireup-jobctl status JOB_DIR
RUN_ID``, which blocks up to INTERVAL s for the end); ``judge: sacct`` runs ARGV (``sacct -j ID``,
on the node that submitted the job) and sleeps the interval between looks. After each look one
line (state, time) through Ansible's display; the decisions are
plugins/module_utils/wireup/launch/wait.py's (unit-tested). It replaces command tasks retried with
until/retries, which printed ``FAILED - RETRYING`` once per look of a healthy run. The result is
the last look's, shaped as the command module's (rc, stdout, stderr), so the role's verdict reads it
as before; the task fails only when a look did (the command's error or an unusable answer),
naming the node; how the run went is the verdict's to say.
"""

from __future__ import annotations

import shlex
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.validation import check_type_float
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm, wait

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("argv", "interval", "timeout", "job", "judge", "slurm_job"))
    _supports_check_mode = True  # only looks

    def _settings(self):
        args = self._task.args
        argv = args.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, (str, int)) for a in argv):
            raise AnsibleActionFail(
                "wireup_wait: argv must be a non-empty list of words (the status command)"
            )
        judge = args.get("judge") or "jobctl"
        if judge not in wait.JUDGES:
            raise AnsibleActionFail(
                f"wireup_wait: judge must be one of {', '.join(wait.JUDGES)}, not {judge!r}"
            )
        try:
            interval = check_type_float(args.get("interval", 5))
            timeout = check_type_float(args.get("timeout", 0))
        except TypeError as err:
            raise AnsibleActionFail(
                f"wireup_wait: interval and timeout must be numbers of seconds: {err}"
            ) from err
        if interval < 0 or timeout < 0 or interval != int(interval):
            raise AnsibleActionFail("wireup_wait: interval must be whole seconds >= 0 and timeout >= 0")
        look, pause, appends = wait.JUDGES[judge]
        words = [*argv, int(interval)] if appends else argv
        command = " ".join(shlex.quote(str(a)) for a in words)
        asked = self._asked(judge, args.get("slurm_job"))
        return command, int(interval), timeout, str(args.get("job") or ""), look, pause, asked

    @staticmethod
    def _asked(judge, slurm_job):
        """The look's own arguments: the sacct judge's Slurm job id, whose rows alone count."""
        if judge != "sacct":
            return {}
        if not slurm.is_job_id(slurm_job):
            raise AnsibleActionFail(
                "wireup_wait: slurm_job must be the Slurm job id the sacct judge waits for, "
                f"not {slurm_job!r}"
            )
        return {"slurm_job": slurm_job}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        command, interval, timeout, job, look, pause, asked = self._settings()
        host = self._task.delegate_to or (task_vars or {}).get("inventory_hostname", "?")
        began, shown, looks = time.monotonic(), None, 0
        while True:
            start = time.monotonic()
            answer = self._low_level_execute_command(command)
            looks += 1
            now = time.monotonic()
            seen = look(answer, host=host, job=job, timeout=timeout, waited=now - began, **asked)
            if seen["over"]:
                break
            if wait.shows(now, shown):
                display.display(seen["line"])
                shown = now
            time.sleep(pause(interval, now - start))
        if seen["line"]:
            display.display(seen["line"])
        result.update(
            changed=False,
            rc=answer.get("rc"),
            stdout=answer.get("stdout", ""),
            stderr=answer.get("stderr", ""),
            looks=looks,
            cmd=command,
        )
        if seen["error"]:
            result.update(failed=True, msg=seen["error"])
        return result
