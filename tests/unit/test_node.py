"""Preflight's node-fact parsers, on real 2x H200 captures and documented formats."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import node

FIX = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIX / "h200x2"
NODE = FIX / "node"


def test_default_route_takes_lowest_metric():
    routes = node.parse_proc_net_route((NODE / "proc_net_route_two_defaults.txt").read_text())
    assert routes[0] == {
        "interface": "eth0",
        "destination": "0.0.0.0",
        "gateway": "192.0.2.1",
        "mask": "0.0.0.0",
        "flags": 3,
        "metric": 100,
    }
    assert node.default_route_interface(routes) == "ib0"


def test_no_default_route():
    routes = node.parse_proc_net_route((NODE / "proc_net_route_no_default.txt").read_text())
    assert routes[0]["destination"] == "192.0.2.0"
    assert routes[0]["mask"] == "255.255.255.0"
    assert node.default_route_interface(routes) == ""


def test_route_rejects_other_text():
    with pytest.raises(ValueError, match="Iface Destination"):
        node.parse_proc_net_route("default via 192.0.2.1 dev eth0\n")


def test_os_release_and_support():
    facts = node.parse_os_release((NODE / "os_release_ubuntu2404.txt").read_text())
    assert facts == {
        "id": "ubuntu",
        "version": "24.04",
        "codename": "noble",
        "pretty_name": "Ubuntu 24.04.3 LTS",
    }
    assert node.os_support("ubuntu", "24.04") == {"supported": True, "cuda_repo_distro": "ubuntu2404"}
    assert node.os_support("debian", "12") == {"supported": True, "cuda_repo_distro": "debian12"}
    assert node.os_support("ubuntu", "26.04") == {"supported": True, "cuda_repo_distro": "ubuntu2604"}
    assert node.os_support("ubuntu", "20.04") == {"supported": False, "cuda_repo_distro": ""}
    assert node.os_support("rocky", "9.4")["supported"] is False


@pytest.mark.parametrize(
    ("machine", "deb", "cuda"),
    [("x86_64", "amd64", "x86_64"), ("aarch64", "arm64", "sbsa"), ("ppc64le", "", "")],
)
def test_arch_names(machine, deb, cuda):
    assert node.arch_names(machine) == {"machine": machine, "deb": deb, "cuda": cuda}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            H200 / "proc_driver_version.txt",
            {"version": "580.159.04", "branch": "580", "kernel_module": "open"},
        ),
        (
            NODE / "proc_driver_version_proprietary_535.txt",
            {"version": "535.183.01", "branch": "535", "kernel_module": "proprietary"},
        ),
    ],
)
def test_proc_driver_version(path, expected):
    assert node.parse_proc_driver_version(path.read_text()) == expected


def test_proc_driver_version_rejects_garbage():
    with pytest.raises(ValueError, match="NVRM version"):
        node.parse_proc_driver_version("NVIDIA-SMI has failed\n")


def test_nvcc_version_h200():
    assert node.parse_nvcc_version((H200 / "nvcc_version.txt").read_text()) == {
        "version": "13.0",
        "full": "13.0.88",
    }


def test_cuda_version_json():
    assert node.parse_cuda_version_json((NODE / "cuda_version.json").read_text()) == {
        "version": "13.0",
        "full": "13.0.2",
    }


def test_nccl_header_and_package():
    assert node.parse_nccl_header((NODE / "nccl_h_excerpt.txt").read_text()) == "2.28.9"
    assert apt.nccl_release("2.28.9-1+cuda13.0") == "2.28.9"
    assert apt.nccl_release("garbage") == ""
    with pytest.raises(ValueError, match="NCCL_MAJOR"):
        node.parse_nccl_header("#define NCCL_MAJOR 2\n")


def _h200_inventory():
    # The real query_gpu.csv carries these columns among others; preflight asks for a subset
    # without header and units.
    fields = ["index", "name", "uuid", "pci.bus_id", "compute_cap", "memory.total", "driver_version"]
    text = (
        "0, NVIDIA H200, GPU-47e4f408-caf2-4eaa-9629-5a6d1365dd75, 00000000:00:06.0, 9.0, 143771, "
        "580.159.04\n"
        "1, NVIDIA H200, GPU-e3c81799-f8fd-1849-2aa3-67b5ba1b911e, 00000000:00:07.0, 9.0, 143771, "
        "580.159.04\n"
    )
    return node.parse_gpu_inventory(text, fields)


def test_gpu_summary_two_h200():
    pci = node.classify_pci_devices(
        [
            {"address": "0000:00:06.0", "vendor": "0x10de\n", "class": "0x030200\n"},
            {"address": "0000:00:07.0", "vendor": "0x10de\n", "class": "0x030200\n"},
            {"address": "0000:00:05.0", "vendor": "0x8086\n", "class": "0x030000\n"},
            {"address": "0000:00:04.0", "vendor": "0x1af4\n", "class": "0x020000\n"},
        ]
    )
    gpu = node.summarize_gpus(pci, _h200_inventory())
    assert gpu["present"] is True
    assert gpu["pci_count"] == 2
    assert gpu["count"] == 2
    assert gpu["models"] == ["NVIDIA H200"]
    assert gpu["compute_capabilities"] == ["9.0"]
    assert gpu["nvswitch_count"] == 0
    assert gpu["devices"][1]["memory_total_mib"] == 143771


def test_gpu_without_driver_and_nvswitch_box():
    devices = [
        {"address": f"0000:{bus:02x}:00.0", "vendor": "0x10de", "class": "0x030200"} for bus in range(8)
    ] + [{"address": f"0000:a{n}:00.0", "vendor": "0x10de", "class": "0x068000"} for n in range(4)]
    gpu = node.summarize_gpus(node.classify_pci_devices(devices), [])
    assert (gpu["present"], gpu["pci_count"], gpu["count"], gpu["nvswitch_count"]) == (True, 8, 0, 4)


def test_gpu_less_node():
    gpu = node.summarize_gpus(node.classify_pci_devices([]), [])
    assert gpu["present"] is False
    assert gpu["count"] == 0


def test_gpu_inventory_row_mismatch():
    with pytest.raises(ValueError, match="expected 3"):
        node.parse_gpu_inventory("0, H200\n", ["index", "name", "uuid"])


def test_secure_boot_efivar():
    assert node.parse_secure_boot_efivar(b"\x06\x00\x00\x00\x01") is True
    assert node.parse_secure_boot_efivar(b"\x06\x00\x00\x00\x00") is False
    with pytest.raises(ValueError):
        node.parse_secure_boot_efivar(b"\x06")


def test_summary_lines():
    facts = {
        "os": {"id": "ubuntu", "pretty_name": "Ubuntu 24.04.3 LTS"},
        "arch": {"machine": "x86_64"},
        "gpu": dict(
            node.summarize_gpus(
                node.classify_pci_devices(
                    [{"address": "0000:00:06.0", "vendor": "0x10de", "class": "0x030200"}] * 2
                ),
                _h200_inventory(),
            ),
            nvidia_smi_error="",
        ),
        "driver": {"version": "580.159.04", "kernel_module": "open"},
        "cuda": {"version": "13.0"},
        "nccl": {"version": ""},
        "network": {"interface": "eth0", "address": "172.16.0.5"},
        "disk": {"free_mb": 51200, "path": "/opt"},
    }
    assert node.summary(facts, "gpu-a01") == (
        "Ubuntu 24.04.3 LTS x86_64; 2 NVIDIA GPU(s) on PCI, 2x NVIDIA H200 (cc 9.0); "
        "driver 580.159.04 (open); CUDA 13.0; NCCL none; eth0 172.16.0.5; 51200 MiB free at /opt; "
        "master gpu-a01"
    )


@pytest.mark.parametrize(
    ("booted", "comm", "expected"),
    [
        (True, "systemd\n", "systemd"),
        (True, "", "systemd"),  # systemd-nspawn containers: /run/systemd/system is there
        (False, "init\n", "init"),
        (False, "tini\n", "tini"),  # a container without an init system
        (False, "", "unknown"),
    ],
)
def test_service_manager(booted, comm, expected):
    assert node.service_manager(booted, comm) == expected


def test_node_errors_name_the_fix():
    facts = {
        "os": {"id": "centos", "pretty_name": "CentOS Stream 9", "supported": False},
        "arch": {"machine": "ppc64le", "deb": ""},
        "disk": {"path": "/opt", "free_mb": 100},
    }
    assert node.node_errors(facts, 8192) == [
        "CentOS Stream 9 is not supported: wireup supports Ubuntu 22.04/24.04/26.04 "
        "and Debian 12/13 "
        "(set preflight_require_supported_os: false to try anyway)",
        "ppc64le is not supported: wireup supports x86_64 and aarch64",
        "/opt has 100 MiB free, fewer than preflight_min_free_mb (8192): free space there or move "
        "wireup_venv_path",
    ]
    ok = {"os": {"id": "debian", "supported": True}, "arch": {"machine": "x86_64", "deb": "amd64"}}
    assert node.node_errors(dict(ok, disk={"path": "/", "free_mb": 9000}), 8192) == []
    assert node.node_errors(dict(facts, arch=ok["arch"], disk={"free_mb": 0}), 0, False) == []


def test_debian_13_is_supported():
    facts = node.parse_os_release((NODE / "os_release_debian13.txt").read_text())
    assert (facts["id"], facts["version"], facts["codename"]) == ("debian", "13", "trixie")
    assert node.os_support(facts["id"], facts["version"]) == {
        "supported": True,
        "cuda_repo_distro": "debian13",
    }
