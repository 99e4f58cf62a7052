"""Secrets never reach the controller's results (issue 23, item 7): the host record keeps a secret's
name with '<redacted>', the report (md and html) prints no secret value, and the store module
writes its files 0640 in 0750 folders without printing a secret."""

import base64
import json
import os
import pathlib
import stat
import subprocess
import sys

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import bench
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
NCCL = ROOT / "tests/fixtures/nccltests"
SECRETS = ("hf_s3cr3tvalue", "wandb-0123456789", "ghp_listedvalue", "pw4index", "hubtoken99")
ENV = {
    "HF_TOKEN": "hf_s3cr3tvalue",
    "WANDB_API_KEY": "wandb-0123456789",
    "GITHUB_PAT": "ghp_listedvalue",  # secret only because wireup_secret_env lists it
    "PIP_INDEX_URL": "https://me:pw4index@pypi.example.com/simple",
    "NCCL_NVLS_ENABLE": "0",
}
# The torch benchmark's own line: a TORCH_ variable is recorded from what the process saw.
SEEN = json.dumps(
    {"wireup_bench_env": {"TORCH_HUB_TOKEN": "hubtoken99", "NCCL_NVLS_ENABLE": "0"}, "tuned_env": ""}
)


def _node(**extra):
    torch_log = (NCCL / "torch_allreduce_gloo_3ranks.txt").read_text() + SEEN + "\n"
    node = {
        "skipped": "no NVIDIA GPU",
        "torch": {"multi_node": torch_log},
        "env": dict(ENV),
        "figure_env": {"nccl_tests": dict(ENV), "torch": dict(ENV, TORCH_HUB_TOKEN="hubtoken99")},
        "tuning": {"env": dict(ENV), "best": {}, "candidates": [{"env": dict(ENV), "busbw": 1.0}]},
        "secret_env": ["GITHUB_PAT"],
    }
    node.update(extra)
    return node


def _leaks(text):
    return [s for s in SECRETS if s in text]


def test_host_record_keeps_names_not_values():
    rec = host_record.build_record("node1", "20261201T000000Z", _node())
    assert _leaks(json.dumps(rec)) == []
    assert rec["env"] == {
        "HF_TOKEN": "<redacted>",
        "WANDB_API_KEY": "<redacted>",
        "GITHUB_PAT": "<redacted>",
        "PIP_INDEX_URL": "https://***@pypi.example.com/simple",
        "NCCL_NVLS_ENABLE": "0",
    }
    env = rec["torch"]["multi_node"]["env"]
    assert env["seen"] == {"TORCH_HUB_TOKEN": "<redacted>", "NCCL_NVLS_ENABLE": "0"}
    assert env["vars"]["TORCH_HUB_TOKEN"] == "<redacted>"
    assert rec["tuning"]["env"]["HF_TOKEN"] == "<redacted>"


def test_stored_host_json_has_no_secret(tmp_path):
    _, run_dir, _ = host_record.store_run(str(tmp_path), "20261201T000000Z", {"node1": _node()})
    text = (pathlib.Path(run_dir) / "node1.json").read_text()
    assert _leaks(text) == [] and '"HF_TOKEN": "<redacted>"' in text


def test_report_of_a_host_without_figures_prints_no_secret(tmp_path, monkeypatch):
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    # A record as an older wireup stored it (unredacted), and one built now.
    old = host_record.unreachable_record("node2", "20261201T000000Z", "gone")
    old.update(verdict="N/A", findings=[], env=dict(ENV, GITHUB_PAT="not-listed-here"))
    new = host_record.build_record("node1", "20261201T000000Z", _node(torch={}))
    out = assemble.write_report(str(tmp_path), "20261201T000000Z", {"node1": new, "node2": old})
    md, page = pathlib.Path(out["md"]).read_text(), pathlib.Path(out["html"]).read_text()
    assert _leaks(md) == [] and _leaks(page) == []
    # report.md escapes node text (a "<" becomes "&lt;"), so the marker reads <redacted> when shown.
    assert "HF_TOKEN=&lt;redacted>" in md and "GITHUB_PAT=&lt;redacted>" in md
    assert "HF_TOKEN=&lt;redacted&gt;" in page
    assert "PIP_INDEX_URL=https://***@pypi.example.com/simple" in md


def test_store_module_redacts_listed_names_and_writes_private_files(tmp_path):
    """wireup_bench_store run by Ansible: secret_env reaches the records, nothing secret is printed,
    files are 0640 and folders 0750 whatever the controller's umask."""
    node = _node(torch={}, figure_env={})
    args = {
        "results_dir": str(tmp_path / "results"),
        "run_id": "20261201T000000Z",
        "nodes": {"node1": node},
        "thresholds": {
            "pass_ratio": 0.9,
            "warn_ratio": 0.75,
            "min_bytes": 1 << 30,
            "tolerance": 0.1,
            "torch_goal": 0.97,
        },
        "secret_env": ["GITHUB_PAT"],
    }
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    out = subprocess.run(
        [str(pathlib.Path(sys.executable).with_name("ansible")), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", "localhost",
         "-m", "wireup.cluster.wireup_bench_store", "-a", json.dumps(args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=busy.HANG_S, check=False,
        preexec_fn=lambda: os.umask(0o022),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    printed = out.stdout.split("=>", 1)[1]
    assert _leaks(printed) == []
    run = tmp_path / "results" / "bench" / "20261201T000000Z"
    files = sorted(run.iterdir())
    assert {p.name for p in files} >= {"node1.json", "report.md", "report.html"}
    for path in files:
        assert _leaks(path.read_text(errors="replace")) == [], path.name
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path.name
    for folder in (tmp_path / "results", tmp_path / "results" / "bench", run):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o750, folder


def test_node_results_hand_the_controller_no_secret():
    """What the report play's variables and the store's arguments hold (bench.node_results, kept by
    the bench role as __bench_result): no secret value of the plan's env nor of nccl-tests' -J JSON."""
    from tests.unit.test_bench_plan import DEFAULTS as defaults  # the plan's defaults: not the play's

    settings = dict(
        defaults, bench_dir="/opt/wireup/bench", bench_torch_max_bytes=defaults["bench_max_bytes"]
    )
    settings.update(
        wireup_base_dir="/opt/wireup", wireup_job_env=dict(ENV), bench_env={"TORCH_HUB_TOKEN": "hubtoken99"}
    )
    names = {"wireup_base_dir": "base_dir", "wireup_job_env": "job_env"}
    settings = bench.BenchSettings(
        **{names.get(k, k.removeprefix("bench_")): v for k, v in settings.items()}, stepcost_only=False
    )
    node = {"gpu": {"present": True, "count": 2}, "driver": {"version": "580.159.04"}, "cuda": {}, "nccl": {}}
    build = {"bin_dir": "/opt/wireup/nccl-tests/build", "json": True, "version": "v2.19.6"}
    plan = bench.plan(node, settings, build, "", "gpu-a01")
    assert _leaks(json.dumps(plan)) != []  # the plan itself must hold them: the processes need them
    text = (NCCL / "h200x2_v2.19.6_all_reduce_perf.json").read_text()
    data = json.loads(text)
    data["env"] += [f"{k}={v}" for k, v in ENV.items()]
    full = json.dumps(data)
    runs = {"results": [{"item": r, "rc": 0, "stdout": "", "stderr": ""} for r in plan["nccl_runs"]]}
    jsons = {
        "results": [
            {"item": r, "content": base64.b64encode(full.encode()).decode()} for r in plan["nccl_runs"]
        ]
    }
    facts = {
        "plan": plan,
        "node": node,
        "build": build,
        "nccl_runs": runs,
        "nccl_json": jsons,
        "host": "gpu-a01",
    }
    out = bench.node_results(dict(facts, secret_env=["GITHUB_PAT"]))
    assert _leaks(json.dumps(out)) == []
    assert out["env"]["HF_TOKEN"] == "<redacted>" and out["env"]["NCCL_NVLS_ENABLE"] == "0"
    redacted = json.loads(out["nccl_tests"]["all_reduce"]["json"])
    assert "HF_TOKEN=<redacted>" in redacted["env"] and redacted["results"] == data["results"]
    # A -J JSON cut off inside a secret's value hides what is left of it.
    cut = full[: full.index("hf_s3cr3tvalue") + 5]
    jsons["results"][0]["content"] = base64.b64encode(cut.encode()).decode()
    shown = json.dumps(bench.node_results(dict(facts, secret_env=["GITHUB_PAT"])))
    assert "hf_s3" not in shown and "HF_TOKEN=<redacted>" in shown
