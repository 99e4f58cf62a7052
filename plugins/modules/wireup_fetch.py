#!/usr/bin/python
"""Documentation of the wireup_fetch action (plugins/action/wireup_fetch.py does the work on the
controller; this file only lets ansible-doc and ansible-lint know the task's arguments)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_fetch
short_description: Fetch a file from a node into the results, 0640 in 0750 folders from the start
description:
  - M(ansible.builtin.fetch) (the same options and result), run with the results' umask (027), so
    the folders it creates on the controller are 0750 and the file it writes is 0640 from the moment
    it exists; a file fetch finds unchanged is given 0640 too.
  - ansible.builtin.fetch takes the controller's umask (0755 folders and 0644 files under the usual
    022), which a later task had to narrow; a job's log may print what the job's environment held.
  - An action plugin, run on the controller.
options:
  src:
    description: The file on the node.
    type: str
    required: true
  dest:
    description: Where it goes on the controller (with I(flat), the file's own path).
    type: str
    required: true
  flat:
    description: Take I(dest) as the file's path instead of appending the host name and I(src).
    type: bool
    default: false
  fail_on_missing:
    description: Fail when I(src) is missing on the node.
    type: bool
    default: true
  validate_checksum:
    description: Check the copy's checksum against the node's file.
    type: bool
    default: true
attributes:
  check_mode:
    support: none
    description: As ansible.builtin.fetch, it is skipped in check mode.
  diff_mode:
    support: none
    description: Writes no diff of the files it writes.
  platform:
    support: full
    platforms: posix
    description: POSIX hosts.
extends_documentation_fragment:
  - wireup.cluster.attributes
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Launch | Bring this node's log back to the controller
  wireup.cluster.wireup_fetch:
    src: /opt/wireup/jobs/example2/logs/r1.log
    dest: results/launch/r1/node1.log
    flat: true
"""

RETURN = r"""
dest:
  description: The file on the controller.
  returned: success
  type: str
  sample: "results/launch/r1/node1.log"
checksum:
  description: Its SHA1 checksum.
  returned: success
  type: str
  sample: "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"
"""
