"""wireup.core.apt: dpkg's one read and the version grammars the package roles share."""

from __future__ import annotations

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt as p


def test_parse_dpkg_status():
    text = (
        "libnccl2 hi  2.28.9-1+cuda13.0\n"
        "libnccl-dev ii  2.28.9-1+cuda13.0\n"
        "cuda-drivers-580 un  \n"
        "libfoo:amd64 ii  1.0-1\n"
    )
    assert p.parse_dpkg_status(text) == {
        "libnccl2": {"version": "2.28.9-1+cuda13.0", "held": True},
        "libnccl-dev": {"version": "2.28.9-1+cuda13.0", "held": False},
        "libfoo": {"version": "1.0-1", "held": False},
    }
