"""The testbed's Debian 13 nodes: apt sources per suite, and the suites it builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testbed import cache
from tests.testbed.system import TestbedError

# This machine's /etc/apt/sources.list.d/debian.sources (Debian 12 image, 2026-12-01).
DEBIAN_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
# Its one-line source of another vendor, whose suite names bookworm too: left as it is.
OTHER = "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"


def test_trixie_nodes_get_the_archive_for_their_suite(monkeypatch):
    monkeypatch.setattr(cache, "host_codename", lambda: "bookworm")
    files = {
        Path("/etc/apt/sources.list.d/debian.sources"): DEBIAN_SOURCES,
        Path("/etc/apt/sources.list.d/google-cloud-sdk.list"): OTHER,
    }
    trixie = cache.node_apt_sources("trixie", files)
    text = trixie[Path("/etc/apt/sources.list.d/debian.sources")]
    assert "Suites: trixie trixie-updates\n" in text and "Suites: trixie-security\n" in text
    assert "bookworm" not in text
    assert trixie[Path("/etc/apt/sources.list.d/google-cloud-sdk.list")] == OTHER
    assert cache.node_apt_sources("bookworm", files) == files


def test_only_known_suites_and_one_golden_tree_each():
    assert cache.check_suite("trixie") == "trixie"
    with pytest.raises(TestbedError, match="bookworm, trixie"):
        cache.check_suite("sid")
    assert cache.golden_key("bookworm") != cache.golden_key("trixie")
