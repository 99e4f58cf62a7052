"""A stand-in `nvidia-smi` for nodes without a GPU (issue 25): it prints a captured XML for
`nvidia-smi -q -x` (and nothing else), so the GPU health read meets a fault the testbed cannot
have. Everything else it is asked answers as nvidia-smi does on a node whose GPUs are gone, so
preflight still finds no GPU there and the GPU roles skip the node."""

NO_DEVICES = "No devices were found"


def script(xml_path: str) -> str:
    """The shell text of the stand-in, printing the XML at xml_path (a path on the node)."""
    return f"""#!/bin/sh
# wireup test stand-in (tests/testbed/stand_in_smi.py): prints a captured `nvidia-smi -q -x`.
if [ "$1" = "-q" ] && [ "$2" = "-x" ]; then
  exec cat '{xml_path}'
fi
echo '{NO_DEVICES}'
exit 6
"""
