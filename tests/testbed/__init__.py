"""Local multi-node testbed: systemd-nspawn Debian 12 nodes on a private bridge (see README.md)."""

from .system import TestbedError
from .testbed import Testbed, all_testbeds

__all__ = ["Testbed", "TestbedError", "all_testbeds"]
