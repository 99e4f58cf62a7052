"""Issue 38 item 3: every chart the report draws has one legend entry per line, none repeated.
Each chart is rendered (matplotlib's Agg backend) from a real run's records: the testbed's three
GPU-less nodes with the group's gloo run and the DDP step on CPU, a 2x H200 node from its captures,
a GPU trial of two H200 nodes, a fabric run's pairs."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import fabric
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble
from tests.unit.test_gpurecord import H200, PENDING, fact, store
from tests.unit.test_report import good_node

pytest.importorskip("matplotlib")

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
GLOO = (FIXTURES / "nccltests" / "torch_allreduce_gloo_3ranks.txt").read_text()
CPU_STEP = (FIXTURES / "stepcost" / "cpu-gloo-2ranks-torch2.13.log").read_text()


@pytest.fixture
def drawn(monkeypatch):
    """{file name: [(legend entries, labelled lines)] per axes} of every chart written."""
    charts = {}
    save = markdown.save_png

    def keep(fig, path):
        charts[pathlib.Path(path).name] = [_legend(ax) for ax in fig.axes]
        save(fig, path)

    monkeypatch.setattr(markdown, "save_png", keep)
    return charts


def _legend(ax):
    legend = ax.get_legend()
    entries = [t.get_text() for t in legend.get_texts()] if legend else []
    return entries, ax.get_legend_handles_labels()[1]


def _one_entry_per_line(charts):
    for name, axes in charts.items():
        for entries, lines in axes:
            assert entries == lines, (name, entries, lines)
            assert len(set(entries)) == len(entries), (name, entries)


def test_the_testbed_run_s_charts(tmp_path, drawn):
    node = {
        "skipped": "no NVIDIA GPU: GPU benchmarks skipped",
        "torch": {"multi_node": GLOO},
        "stepcost": {"multi_node": CPU_STEP},
    }
    _, run_dir, records = host_record.store_run(
        str(tmp_path), "20261207T060000Z", {h: node for h in ("n1", "n2", "n3")}
    )
    assemble.write_report(run_dir, "20261207T060000Z", records)
    assert sorted(drawn) == ["stepcost_group.png", "torch.png"]
    [(entries, _lines)] = drawn["torch.png"]
    assert entries == ["multi_node (3 ranks, gloo)"]  # the group's one run, drawn once
    _one_entry_per_line(drawn)


def test_a_gpu_node_s_charts(tmp_path, drawn):
    records = {
        h: host_record.build_record(h, "20261129T100000Z", good_node()) for h in ("gpu-a01", "gpu-a02")
    }
    assemble.write_report(str(tmp_path), "20261129T100000Z", records)
    assert {"busbw_gpu-a01.png", "topology_gpu-a01.png", "torch.png"} <= set(drawn)
    _one_entry_per_line(drawn)


def test_the_gpu_trial_chart(tmp_path, drawn):
    run_id = "20261203T100000Z"
    facts = {"gpu-a": fact(H200, run_id, "gpu-a"), "gpu-b": fact(PENDING, run_id, "gpu-b")}
    _rid, run_dir, records = store(tmp_path, run_id, facts)
    assemble.write_report(run_dir, run_id, records)
    assert "gpus.png" in drawn
    _one_entry_per_line(drawn)


def test_the_fabric_chart(tmp_path, drawn):
    record = {
        "run_id": "20261207T060000Z",
        "pairs": [
            {"pair": ["n1", "n2"], "round": 1, "busbw": 1.0, "verdict": "PASS", "reference_gbs": 1.1},
            {"pair": ["n3", "n4"], "round": 1, "busbw": 0.1, "verdict": "FAIL", "reference_gbs": 1.1},
        ],
    }
    assert fabric.plot(record, str(tmp_path / "fabric.png"))
    _one_entry_per_line(drawn)
