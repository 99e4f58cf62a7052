"""wireup.probe.nvlink on the real 2x H200 capture and on synthetic cases."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import nvlink

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"


# (fixture, gpus, active per GPU, inactive per GPU, per-link GB/s, per-GPU total GB/s)
CASES = [
    ("h200x2/nvlink_s.txt", 2, [18, 18], [0, 0], 26.562, 478.116),
    ("synthetic/h100x8_nvswitch/nvlink_s.txt", 8, [18] * 8, [0] * 8, 26.562, 478.116),
    ("synthetic/h100x4_nv6_inactive/nvlink_s.txt", 4, [18, 18, 16, 18], [0, 0, 2, 0], 26.562, 424.992),
    ("synthetic/a100x2_bridge_degraded/nvlink_s.txt", 2, [12, 8], [0, 4], 25.0, 200.0),
    ("synthetic/pcie_4gpu/nvlink_s.txt", 4, [0] * 4, [0] * 4, None, 0.0),
    ("synthetic/single_gpu/nvlink_s.txt", 1, [0], [0], None, 0.0),
]


@pytest.mark.parametrize(
    ("path", "gpus", "active", "inactive", "per_link", "per_gpu"), CASES, ids=[c[0] for c in CASES]
)
def test_parse_nvlink_status(path, gpus, active, inactive, per_link, per_gpu):  # noqa: PLR0917  # parametrized
    status = nvlink.parse_nvlink_status((FIXTURES / path).read_text(encoding="utf-8"))
    assert [g["index"] for g in status["gpus"]] == list(range(gpus))
    assert [g["active"] for g in status["gpus"]] == active
    assert [g["inactive"] for g in status["gpus"]] == inactive
    totals = status["totals"]
    assert totals["gpus"] == gpus
    assert totals["active_links"] == sum(active)
    assert totals["inactive_links"] == sum(inactive)
    assert totals["per_link_gbps"] == per_link
    assert totals["per_gpu_gbps"] == per_gpu
    assert totals["gpus_with_nvlink"] == sum(1 for a in active if a)


def test_h200_exact():
    status = nvlink.parse_nvlink_status((FIXTURES / "h200x2/nvlink_s.txt").read_text(encoding="utf-8"))
    g0 = status["gpus"][0]
    assert g0["name"] == "NVIDIA H200"
    assert g0["uuid"] == "GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75"
    assert len(g0["links"]) == 18
    assert g0["links"][17] == {"link": 17, "active": True, "speed_gbps": 26.562}
    assert g0["speed_gbps"] == 26.562
    assert g0["total_gbps"] == 478.116
    assert status["totals"]["links_per_gpu"] == 18


def test_inactive_links_listed():
    status = nvlink.parse_nvlink_status(
        (FIXTURES / "synthetic/h100x4_nv6_inactive/nvlink_s.txt").read_text(encoding="utf-8")
    )
    assert status["gpus"][2]["inactive_links"] == [5, 11]
    assert status["gpus"][2]["links"][5] == {"link": 5, "active": False, "speed_gbps": None}
    assert status["totals"]["links_per_gpu"] == 16


def test_mixed_speeds_and_plain_inactive_word():
    text = (
        "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\n"
        "\t Link 0: 25.781 GB/s\n\t Link 1: 20 GB/s\n\t Link 2: Inactive\n"
    )
    gpu = nvlink.parse_nvlink_status(text)["gpus"][0]
    assert gpu["speeds_gbps"] == [20.0, 25.781]
    assert gpu["speed_gbps"] == 20.0
    assert gpu["total_gbps"] == 45.781
    assert gpu["inactive_links"] == [2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("random words\n", "no 'GPU N: NAME"),
        ("\t Link 0: 26.562 GB/s\n", "comes before any 'GPU N"),
        ("GPU 0: NVIDIA H200 (UUID: GPU-1)\n\t Link 0: fast\n", "expected 'Link N: <speed> GB/s'"),
    ],
)
def test_garbage(text, message):
    with pytest.raises(ValueError, match=message):
        nvlink.parse_nvlink_status(text)


# ---------------------------------------------------------------- issue 11: odd outputs
H200_TEXT = (FIXTURES / "h200x2" / "nvlink_s.txt").read_text(encoding="utf-8")


def test_empty_output_of_a_vm_without_nvlink_is_no_nvlink():
    # Real: 1x H200 VM, driver 580.159.04, `nvidia-smi nvlink -s` printed nothing.
    status = nvlink.parse_nvlink_status((FIXTURES / "h200x1" / "nvlink_s.txt").read_text(encoding="utf-8"))
    assert status["gpus"] == [] and status["totals"]["gpus_with_nvlink"] == 0


def test_bytes_are_refused_clearly():
    with pytest.raises(ValueError, match=r"got bytes \(decode it first\)"):
        nvlink.parse_nvlink_status(H200_TEXT.encode())


def test_colour_codes_are_stripped_other_escapes_refused():
    coloured = H200_TEXT.replace("GB/s", "\x1b[32mGB/s\x1b[0m")
    assert nvlink.parse_nvlink_status(coloured) == nvlink.parse_nvlink_status(H200_TEXT)
    with pytest.raises(ValueError, match="terminal control characters"):
        nvlink.parse_nvlink_status(H200_TEXT.replace("Link 3:", "\x1b]0;Link 3:", 1))


def test_cut_off_output_is_an_error_not_missing_links():
    lines = H200_TEXT.splitlines()
    with pytest.raises(ValueError, match="GPU 1 lists 7 links, other NVIDIA H200 GPUs 18: the output"):
        nvlink.parse_nvlink_status("\n".join(lines[:27]))
    with pytest.raises(ValueError, match=r"lists 1 GPU\(s\) but the node has 2"):
        nvlink.parse_nvlink_status("\n".join(lines[:19]), gpu_count=2)
    with pytest.raises(ValueError, match="expected 'GPU N: NAME"):
        nvlink.parse_nvlink_status("\n".join(lines[:19]) + "\nGPU 1: NVIDIA H2")
    with pytest.raises(ValueError, match="have a gap"):
        nvlink.parse_nvlink_status(H200_TEXT.replace("GPU 1:", "GPU 2:"))
