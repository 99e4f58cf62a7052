"""Local multi-node testbed: systemd-nspawn Debian 12 nodes on a private bridge (see README.md)."""
