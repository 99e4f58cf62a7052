"""Integration tests: playbooks driven by ansible-runner on the local testbed."""
