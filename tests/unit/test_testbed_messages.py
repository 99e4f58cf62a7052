"""What the testbed tells its user (issue 12, item 7): host packages apt is about to upgrade, and
how to bring back a node powered off with stop-node."""

from __future__ import annotations

from pathlib import Path

from tests.testbed import system, testbed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "host"


def test_simulated_upgrades_on_a_real_apt_simulation():
    text = (FIXTURES / "apt_get_s_debian12.txt").read_text()
    upgrades = system.simulated_upgrades(text)
    assert upgrades[:2] == [
        ("base-files", "12.4+deb12u11", "12.4+deb12u15"),
        ("bash", "5.2.15-2+b8", "5.2.15-2+b13"),
    ]
    names = [name for name, _, _ in upgrades]
    # A new install (no installed version) and the Conf lines are not upgrades.
    assert "sl" not in names
    assert len(upgrades) == sum(1 for line in text.splitlines() if line.split()[:3][-1].startswith("["))


def test_simulated_upgrades_none():
    assert (
        system.simulated_upgrades("Reading package lists...\nInst sl (5.02-1+b1 Debian:12.15 [amd64])\n")
        == []
    )


def _bed(monkeypatch, running, *, ready=True, http_alive=True):
    bed = testbed.Testbed("unit-msg")
    bed.state = {
        "ready": ready,
        "http": {"pid": 1, "start": 1},
        "nodes": {n: {"index": i, "address": f"10.0.0.{i}"} for i, n in enumerate(sorted(running), 1)},
    }
    monkeypatch.setattr(testbed.Testbed, "node_running", lambda self, node: running[node])
    monkeypatch.setattr(testbed, "is_our_process", lambda pid, start: http_alive)
    return bed


def test_a_stopped_node_points_to_start_node(monkeypatch):
    bed = _bed(monkeypatch, {"node1": True, "node2": False, "node3": True})
    advice = bed._not_up_advice()
    assert advice == (
        "up, 1 node(s) stopped (boot again: python -m tests.testbed start-node node2 --name unit-msg)"
    )
    assert "down, then up" not in advice


def test_a_broken_testbed_still_says_down_then_up(monkeypatch):
    assert "down, then up" in _bed(monkeypatch, {"node1": False}, ready=False)._not_up_advice()
    assert "down, then up" in _bed(monkeypatch, {"node1": False}, http_alive=False)._not_up_advice()
