"""wireup_fetch: ansible.builtin.fetch whose files and folders are the user's and group's only from
the moment they exist (issue 35).

ansible.builtin.fetch creates the folders it needs and the file under the controller's umask: 0755
and 0644 under the usual 022. A job's log may print what the job's environment held, and every file
under the results folder is 0640 in 0750 folders (results.RESULTS_UMASK), so the role used to narrow
them in a later task: until then, and for good when the play stopped in between, every user of the
controller could read them. This action runs fetch itself (the same options, the same result) with
the results' umask, so what it creates is 0750 and at most 0640, and then gives the file its final
0640 (also when fetch found it unchanged: an older run's file keeps no wider mode). The umask is
this worker process's own (Ansible forks one per task and host) and is put back at once.
"""

from __future__ import annotations

import os
import stat

from ansible.plugins.action.fetch import ActionModule as FetchAction

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results

FILE_MODE = 0o640


class ActionModule(FetchAction):
    def run(self, tmp=None, task_vars=None):
        before = os.umask(results.RESULTS_UMASK)
        try:
            result = super().run(tmp, task_vars)
        finally:
            os.umask(before)
        dest = result.get("dest")
        if dest and not result.get("failed") and stat.S_ISREG(os.lstat(dest).st_mode):
            os.chmod(dest, FILE_MODE)
        return result
