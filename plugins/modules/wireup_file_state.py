#!/usr/bin/python
"""Ansible module: read several files and globs on a node in one go, change nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wireup_file_state
short_description: Read files (content, mode, owner) and globs on a node in one module run
description:
  - Reads the node without changing it, so a role can decide from one module run which of its
    steps have anything to do (a rerun on a converged node then starts none of them).
  - For each path, whether it exists and, for a regular file, its mode, owner, group, SHA-256 and
    (when it is UTF-8 text of at most I(max_bytes)) its content.
  - For each glob, the sorted list of matching paths.
options:
  paths:
    description: Files to read.
    type: list
    elements: path
    default: []
  globs:
    description: Shell-style patterns (C(glob.glob)) to list.
    type: list
    elements: str
    default: []
  max_bytes:
    description: Content larger than this is not returned (its SHA-256 still is).
    type: int
    default: 65536
attributes:
  platform:
    support: full
    platforms: posix
    description: POSIX hosts.
extends_documentation_fragment:
  - wireup.cluster.attributes
  - wireup.cluster.attributes.read_only
author: wireup maintainers (@wireup)
"""

EXAMPLES = r"""
- name: Read the key, the source and apt's lists of a repository (as the cuda_repo role does)
  wireup_file_state:
    paths: [/etc/apt/keyrings/cuda.asc, /etc/apt/sources.list.d/cuda.sources]
    globs: ["/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_x86%5f64_*"]
"""

RETURN = r"""
files:
  description: One entry per path in I(paths), keyed by the path; only C(exists) for a missing path.
  returned: always
  type: dict
  contains:
    exists: {description: Whether the path exists, type: bool, sample: true}
    type: {description: "C(file), C(directory) or C(other)", type: str, sample: "file"}
    mode: {description: "Permission bits, four octal digits", type: str, sample: "0644"}
    owner: {description: Owner's name (the uid when it has none), type: str, sample: "root"}
    group: {description: Group's name (the gid when it has none), type: str, sample: "root"}
    size: {description: Size in bytes, type: int, sample: 74}
    sha256:
      description: SHA-256 of a regular file's bytes
      type: str
      sample: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    content:
      description: A regular file's text; null when it is not UTF-8 or larger than I(max_bytes).
      type: str
      sample: "Package: libnccl2 libnccl-dev\nPin: version 2.28.9-1+cuda13.0\nPin-Priority: 1001\n"
    error:
      description: Why a regular file could not be read (only then)
      type: str
      sample: '[Errno 13] Permission denied: ''/etc/apt/preferences.d/nccl.pref'''
globs:
  description: "{pattern: [matching paths, sorted]} for each pattern in I(globs)."
  returned: always
  type: dict
  sample: {"/etc/apt/sources.list.d/cuda*.list": ["/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list"]}
"""

import contextlib
import glob
import grp
import hashlib
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe.file_state import PathState


def _name(lookup, ident):
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def read_path(path, max_bytes) -> PathState:
    try:
        info = os.stat(path)
    except OSError:
        return {"exists": False}
    out = {
        "exists": True,
        "type": "file"
        if stat.S_ISREG(info.st_mode)
        else "directory"
        if stat.S_ISDIR(info.st_mode)
        else "other",
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "owner": _name(pwd.getpwuid, info.st_uid),
        "group": _name(grp.getgrgid, info.st_gid),
        "size": info.st_size,
        "sha256": None,
        "content": None,
    }
    if out["type"] != "file":
        return out
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        out["error"] = str(exc)
        return out
    out["sha256"] = hashlib.sha256(data).hexdigest()
    if len(data) <= max_bytes:
        with contextlib.suppress(UnicodeDecodeError):  # binary: no content, the SHA-256 still says
            out["content"] = data.decode("utf-8")
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "default": []},
            "globs": {"type": "list", "elements": "str", "default": []},
            "max_bytes": {"type": "int", "default": 65536},
        },
        supports_check_mode=True,
    )
    params = module.params
    module.exit_json(
        changed=False,
        files={path: read_path(path, params["max_bytes"]) for path in params["paths"]},
        globs={pattern: sorted(glob.glob(pattern)) for pattern in params["globs"]},
    )


if __name__ == "__main__":
    main()
