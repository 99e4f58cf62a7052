"""Parser for ``nvidia-smi nvlink -s`` (pure Python, stdlib only).

The format (nvidia-smi's NVLink status):

    GPU 0: NVIDIA H200 (UUID: GPU-47e4f408-...)
    \t Link 0: 26.562 GB/s
    \t Link 1: <inactive>

A GPU without NVLink prints its GPU line and no Link lines (or, on newer drivers, a line saying
the links are all inactive / NVLink is not supported).
"""

import re

GPU_LINE_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+?)\)\s*$")
LINK_LINE_RE = re.compile(r"^Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<?inactive>?)\s*$", re.IGNORECASE)


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


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s``.

    Returns {gpus: [{index, name, uuid, links: [{link, active, speed_gbps}], active, inactive,
    inactive_links, speed_gbps, speeds_gbps, total_gbps}], totals: {gpus, gpus_with_nvlink,
    active_links, inactive_links, links_per_gpu, per_link_gbps, per_gpu_gbps}}.
    speed_gbps is unidirectional GB/s per link as nvidia-smi prints it; total_gbps is the sum over
    a GPU's active links; per_gpu_gbps is the smallest total among GPUs that have NVLink.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("parse_nvlink_status: the output of `nvidia-smi nvlink -s` is empty")
    gpus = []
    current = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        m = GPU_LINE_RE.match(line)
        if m:
            current = {"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3), "links": []}
            gpus.append(current)
            continue
        m = LINK_LINE_RE.match(line)
        if m:
            if current is None:
                raise ValueError(
                    f"parse_nvlink_status: line {number} {line!r} comes before any "
                    "'GPU N: NAME (UUID: ...)' line"
                )
            speed = float(m.group(2)) if m.group(2) is not None else None
            current["links"].append(
                {"link": int(m.group(1)), "active": speed is not None, "speed_gbps": speed}
            )
            continue
        if line.startswith("Link "):
            raise ValueError(
                f"parse_nvlink_status: line {number} {line!r}: expected 'Link N: <speed> GB/s' "
                "or 'Link N: <inactive>'"
            )
        # Other lines (driver notes such as "NVLink is not supported") carry no link state.
    if not gpus:
        raise ValueError(
            "parse_nvlink_status: no 'GPU N: NAME (UUID: ...)' line in the output of `nvidia-smi nvlink -s`"
        )
    for gpu in gpus:
        _summarize(gpu)
    with_links = [g for g in gpus if g["active"]]
    speeds = sorted({g["speed_gbps"] for g in with_links})
    totals = {
        "gpus": len(gpus),
        "gpus_with_nvlink": len(with_links),
        "active_links": sum(g["active"] for g in gpus),
        "inactive_links": sum(g["inactive"] for g in gpus),
        "links_per_gpu": min((g["active"] for g in with_links), default=0),
        "per_link_gbps": speeds[0] if speeds else None,
        "per_gpu_gbps": min((g["total_gbps"] for g in with_links), default=0.0),
    }
    return {"gpus": gpus, "totals": totals}
