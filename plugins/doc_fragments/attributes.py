"""The ``attributes:`` wireup's modules share, written once (Ansible's doc-fragment convention:
a module names them in ``extends_documentation_fragment`` and documents only what is its own; a
module's own entry wins over the fragment's)."""

from __future__ import annotations


class ModuleDocFragment:
    """``wireup.cluster.attributes`` (every module) and ``wireup.cluster.attributes.read_only``
    (the probes that only read a node or the controller)."""

    # Every wireup module: none writes a diff (a module that writes files says which in its own entry).
    DOCUMENTATION = r"""
options: {}
attributes:
  diff_mode:
    support: none
    description: Writes no diff.
"""

    # A probe that changes nothing: check mode reads exactly as a run does.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Only reads; the same in check mode.
"""
