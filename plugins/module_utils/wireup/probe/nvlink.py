"""Parser for ``nvidia-smi nvlink -s`` (pure Python, stdlib only).

The format (nvidia-smi's NVLink status):

    GPU 0: NVIDIA H200 (UUID: GPU-47e4f408-...)
    \t Link 0: 26.562 GB/s
    \t Link 1: <inactive>

A GPU without NVLink prints its GPU line and no Link lines (or, on newer drivers, a line saying
the links are all inactive / NVLink is not supported); a machine without NVLink at all may print
nothing (seen on a 1x H200 VM, driver 580.159.04: tests/fixtures/h200x1/nvlink_s.txt), which is
not an error but "no NVLink".

Garbage is a ValueError that says what was expected: bytes instead of text, a line that is cut off
or carries terminal escapes that are not plain colour codes, a GPU listing fewer links than the
other GPUs of its model (the output stopped mid-GPU), GPU numbers with a gap, or fewer GPUs than
the caller knows the node has (gpu_count).
"""

import re

GPU_LINE_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+?)\)\s*$")
LINK_LINE_RE = re.compile(r"^Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<?inactive>?)\s*$", re.IGNORECASE)
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Printed instead of a GPU's Link lines when none of its links is up (seen with an RTX A6000 whose
# NVLink bridge is on two other GPUs: siboehm/bench gpu/nvlink/README.md).
ALL_INACTIVE_RE = re.compile(
    r"Unable to retrieve NVLink information as all links are inActive", re.IGNORECASE
)
COMMAND = "nvidia-smi nvlink -s"


def _empty():
    return {
        "gpus": [],
        "totals": {
            "gpus": 0,
            "gpus_with_nvlink": 0,
            "active_links": 0,
            "inactive_links": 0,
            "links_per_gpu": 0,
            "per_link_gbps": None,
            "per_gpu_gbps": 0.0,
        },
    }


def _summarize(gpu):
    active = [link for link in gpu["links"] if link["active"]]
    speeds = sorted({link["speed_gbps"] for link in active})
    gpu["active"] = len(active)
    gpu["inactive"] = len(gpu["links"]) - len(active)
    gpu["speeds_gbps"] = speeds
    # The per-link speed of the GPU: the one speed of its active links, or the slowest if mixed.
    gpu["speed_gbps"] = speeds[0] if speeds else None
    gpu["total_gbps"] = round(sum(link["speed_gbps"] for link in active), 3)
    gpu["inactive_links"] = [link["link"] for link in gpu["links"] if not link["active"]]
    return gpu


def _clean_line(number, raw):
    """One line without colour codes; other terminal control characters are refused."""
    line = ANSI_RE.sub("", raw).strip()
    if "\x1b" in line or any(ord(c) < 32 and c != "\t" for c in line):
        raise ValueError(
            f"parse_nvlink_status: line {number} {raw!r} carries terminal control characters; run "
            f"`{COMMAND}` without a terminal (its output piped) or strip them"
        )
    return line


def _read_line(gpus, number, raw):
    """Add what one line says to gpus (a GPU line starts a GPU, a link line adds to the last)."""
    what = "parse_nvlink_status"
    line = _clean_line(number, raw)
    gpu, link = GPU_LINE_RE.match(line), LINK_LINE_RE.match(line)
    current = gpus[-1] if gpus else None
    if gpu:
        index, name, uuid = int(gpu.group(1)), gpu.group(2), gpu.group(3)
        gpus.append({"index": index, "name": name, "uuid": uuid, "links": [], "all_inactive_note": False})
    elif link and current is None:
        raise ValueError(f"{what}: line {number} {line!r} comes before any 'GPU N: NAME (UUID: ...)' line")
    elif link:
        speed = float(link.group(2)) if link.group(2) is not None else None
        current["links"].append(
            {"link": int(link.group(1)), "active": speed is not None, "speed_gbps": speed}
        )
    elif line.startswith("Link "):
        raise ValueError(
            f"{what}: line {number} {line!r}: expected 'Link N: <speed> GB/s' or 'Link N: <inactive>'"
        )
    elif re.match(r"^GPU \d+:", line):
        raise ValueError(f"{what}: line {number} {line!r}: expected 'GPU N: NAME (UUID: GPU-...)'")
    elif current is not None and ALL_INACTIVE_RE.search(line):
        current["all_inactive_note"] = True  # NVML lists no link: none is up, the GPU is complete
    # Other lines (driver notes such as "NVLink is not supported") carry no link state.


def parse_nvlink_status(text, gpu_count=None):
    """Parse ``nvidia-smi nvlink -s``.

    Returns {gpus: [{index, name, uuid, links: [{link, active, speed_gbps}], active, inactive,
    inactive_links, speed_gbps, speeds_gbps, total_gbps}], totals: {gpus, gpus_with_nvlink,
    active_links, inactive_links, links_per_gpu, per_link_gbps, per_gpu_gbps}}.
    speed_gbps is unidirectional GB/s per link as nvidia-smi prints it; total_gbps is the sum over
    a GPU's active links; per_gpu_gbps is the smallest total among GPUs that have NVLink.
    gpu_count: the GPUs the node has (from --query-gpu), to tell a cut-off output; None: unknown.
    Empty output means no NVLink and gives no GPUs.
    """
    what = "parse_nvlink_status"
    if not isinstance(text, str):
        raise ValueError(
            f"{what}: expected the text output of `{COMMAND}`, got {type(text).__name__} (decode it first)"
        )
    if not text.strip():
        return _empty()
    gpus = []
    for number, raw in enumerate(text.splitlines(), start=1):
        _read_line(gpus, number, raw)
    if not gpus:
        # nvidia-smi's own failures come here: "Failed to initialize NVML: Driver/library version
        # mismatch" (newer drivers add "NVML library version: 570.124"), "NVIDIA-SMI has failed
        # because it couldn't communicate with the NVIDIA driver ...": quote what it said.
        said = [ANSI_RE.sub("", raw).strip() for raw in text.splitlines() if raw.strip()][:2]
        raise ValueError(
            f"{what}: no 'GPU N: NAME (UUID: ...)' line in the output of `{COMMAND}`; it says: "
            + " / ".join(repr(line) for line in said)
        )
    _check_complete(gpus, gpu_count, what)
    for gpu in gpus:
        _summarize(gpu)
    return {"gpus": gpus, "totals": _totals(gpus)}


def _totals(gpus):
    """The node's NVLink totals; the per-link and per-GPU figures are the slowest GPU's with NVLink."""
    with_links = [g for g in gpus if g["active"]]
    speeds = sorted({g["speed_gbps"] for g in with_links})
    return {
        "gpus": len(gpus),
        "gpus_with_nvlink": len(with_links),
        "active_links": sum(g["active"] for g in gpus),
        "inactive_links": sum(g["inactive"] for g in gpus),
        "links_per_gpu": min((g["active"] for g in with_links), default=0),
        "per_link_gbps": speeds[0] if speeds else None,
        "per_gpu_gbps": min((g["total_gbps"] for g in with_links), default=0.0),
    }


def _check_complete(gpus, gpu_count, what):
    """A cut-off output loses GPUs or links silently: refuse gaps, short GPUs and missing GPUs."""
    indexes = [g["index"] for g in gpus]
    if indexes != list(range(indexes[0], indexes[0] + len(indexes))):
        raise ValueError(f"{what}: GPU numbers {indexes} have a gap or repeat in `{COMMAND}`")
    if gpu_count is not None and len(gpus) < gpu_count:
        raise ValueError(
            f"{what}: `{COMMAND}` lists {len(gpus)} GPU(s) but the node has {gpu_count}: the output "
            "is cut off"
        )
    # nvidia-smi lists every link of a GPU, active or not: GPUs of one model list as many.
    listed = {}
    for gpu in gpus:
        listed.setdefault(gpu["name"], []).append(len(gpu["links"]))
    for gpu in gpus:
        most = max(listed[gpu["name"]])
        if len(gpu["links"]) < most and not gpu.get("all_inactive_note"):
            raise ValueError(
                f"{what}: GPU {gpu['index']} lists {len(gpu['links'])} links, other {gpu['name']} GPUs "
                f"{most}: the output of `{COMMAND}` is cut off"
            )
