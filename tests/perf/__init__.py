"""Provisioning-speed benchmark of wireup on the local testbed (see README.md)."""
