"""make run's stdout callback: Ansible's default output, each play's banner once, above its output."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: wireup_run
type: stdout
short_description: Ansible's default output, with each play's banner once and only above output
description:
  - The default callback's output with one change, for the long runs of C(make run) (bench.yml has
    eleven plays, most of which have nothing to do in a given run). A play's C(PLAY [...]) banner is
    printed with the first task banner of that play, and once per play. A play that prints nothing
    (every task skipped, no host matched, a tag that leaves it empty) shows no banner, and a play run
    in batches (C(serial)) shows one, not one per batch.
  - C(make run) sets it (C(ANSIBLE_STDOUT_CALLBACK=wireup.cluster.wireup_run)); ansible-playbook run
    by hand keeps Ansible's own output.
author: wireup (!UNKNOWN)
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as stdout in configuration
"""

from ansible.plugins.callback.default import CallbackModule as DefaultCallback


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "wireup.cluster.wireup_run"

    def __init__(self):
        super().__init__()
        self._play_to_show = None
        self._play_shown = None

    def v2_playbook_on_play_start(self, play):
        """Keep the play; its banner waits for the play's first output (one per play, not batch)."""
        self._play = play
        self._play_to_show = play

    def v2_playbook_on_no_hosts_matched(self):
        """Nothing ran and nothing is shown."""

    def v2_runner_retry(self, result):
        self._show_play()
        super().v2_runner_retry(result)

    def _print_task_banner(self, task):
        self._show_play()
        super()._print_task_banner(task)

    def _show_play(self):
        play, self._play_to_show = self._play_to_show, None
        if play is not None and play._uuid != self._play_shown:
            self._play_shown = play._uuid
            super().v2_playbook_on_play_start(play)
