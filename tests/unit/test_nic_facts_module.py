"""wireup_nic_facts (plugins/modules) run by Ansible on a fixture tree: one read, the fact it sets."""

import json
import os
import pathlib
import subprocess
import sys

from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
TREE = ROOT / "tests/fixtures/sysfs/ndr8_one_rail_hdr_one_down"


def test_module_returns_the_fact_in_check_mode():
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    out = subprocess.run(
        [
            str(pathlib.Path(sys.executable).with_name("ansible")),
            "-i",
            "localhost,",
            "-c",
            "local",
            "--check",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "localhost",
            "-m",
            "wireup.cluster.wireup_nic_facts",
            "-a",
            f"root={TREE}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=busy.HANG_S,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.split("=>", 1)[1])
    nics = result["ansible_facts"]["gpu_topology_nics"]
    assert result["changed"] is False
    assert (nics["transport"], nics["rails"], nics["rail_gbps"]) == ("ib", 7, 200.0)
    assert [f["code"] for f in nics["findings"]] == ["nic_port_down", "nic_rate_low"]
