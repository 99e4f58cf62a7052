"""A stand-in `nvidia-smi` for nodes without a GPU (issue 25): it prints a captured XML for
`nvidia-smi -q -x` (and nothing else), so the GPU health read meets a fault the testbed cannot
have. Everything else it is asked answers as nvidia-smi does on a node whose GPUs are gone, so
preflight still finds no GPU there and the GPU roles skip the node.

With ``node_reads`` (issue 35) it also prints captures for the other reads of wireup-check
(`topo -m`, `nvlink -s`, `--query-gpu=...`): a node whose GPUs are there, as slurmd's health check
sees it. Install that one only after the plays that must find no GPU (preflight would see GPUs)."""

NO_DEVICES = "No devices were found"
# wireup-check's reads (run._smi_commands): the first argument -> the capture printed.
NODE_READS = {"topo": "topo_m.txt", "nvlink": "nvlink_s.txt", "--query-gpu=*": "query_gpu.csv"}


def _node_reads(folder: str) -> str:
    cases = "".join(f"  {arg}) exec cat '{folder}/{name}' ;;\n" for arg, name in NODE_READS.items())
    # repair.yml's idle check (issue 37): no process on the GPUs prints nothing, exit code 0
    idle = "  --query-compute-apps=*) exit 0 ;;\n"
    return f'case "$1" in\n{cases}{idle}esac\n'


def script(xml_path: str, node_reads: str = "") -> str:
    """The shell text of the stand-in, printing the XML at xml_path (a path on the node); with
    node_reads (a folder on the node holding NODE_READS' files) those reads too."""
    return f"""#!/bin/sh
# wireup test stand-in (tests/testbed/stand_in_smi.py): prints a captured `nvidia-smi -q -x`.
if [ "$1" = "-q" ] && [ "$2" = "-x" ]; then
  exec cat '{xml_path}'
fi
{_node_reads(node_reads) if node_reads else ""}echo '{NO_DEVICES}'
exit 6
"""
