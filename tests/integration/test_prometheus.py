"""wireup's figures and verdicts in a real Prometheus (issue 26): Debian 12's prometheus-node-exporter
on the session testbed's nodes (in the golden image, disabled there: started here, stopped after)
and Debian's prometheus server on this machine (its config, rules and data in a temp dir, on a
loopback port, started and stopped by PID) scraping them every second over the testbed bridge.

The controller's store gets real bench records (the 2x H200's: healthy for node1 and node3, the
NCCL_P2P_DISABLE=1 run that FAILed for node2) and a fabric record; node_check's after_bench (what
bench.yml runs after its report) writes each node's wireup_bench.prom, and refuses the H200 records
as baselines (the testbed nodes have no GPUs); then the quick check runs against baselines taken by
hand, node2's with a stand-in fault (a rail its baseline claims and it lacks), and writes
wireup_check.prom. Prometheus' HTTP API then has the last bench's figures, node2's FAIL verdicts,
the README's two PromQL queries answer as the README says, and its alert rule is pending for node2.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import results
from tests import busy

from .harness import REPO_ROOT, run_playbook, write_playbook

pytestmark = pytest.mark.integration

NODES = ["node1", "node2", "node3"]
RECORDS = {
    "node1": REPO_ROOT / "docs/example-h200x2/healthy/localhost.json",
    "node2": REPO_ROOT / "docs/example-h200x2/p2p-disabled/localhost.json",
    "node3": REPO_ROOT / "tests/fixtures/h200x2/bench_record_2026-11-29_healthy.json",
}
RUN_ID = "20261202T090000Z"
BASELINE = "/var/lib/wireup/check/baseline.json"
CHECK = "/usr/local/sbin/wireup-check"
EXPORTER = "prometheus-node-exporter"
PLAY = """\
- name: Preflight
  ansible.builtin.import_playbook: {repo}/playbooks/preflight.yml

# What bench.yml runs after its report, then what --tags quick runs: node_check's entry points and
# bench_report's quick tasks.
- name: After a bench, then the quick check
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Baseline and figures
      ansible.builtin.import_role:
        name: wireup.cluster.node_check
        tasks_from: after_bench
    - name: Quick check
      ansible.builtin.import_role:
        name: wireup.cluster.node_check
        tasks_from: quick

- name: Quick check's records
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Store and report
      ansible.builtin.import_role:
        name: wireup.cluster.bench_report
        tasks_from: quick
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # loopback and the testbed only
        return answer.read().decode()


@pytest.fixture(scope="module")
def exporters(testbed):
    """node_exporter running on every node (port 9100), stopped again after the module."""
    for node in NODES:
        testbed.ssh(node, f"systemctl start {EXPORTER}")
    for node in NODES:  # waits for behaviour: generous, they end when it answers (tests/busy.py)
        up = busy.wait_until(lambda n=node: _answers(f"http://{testbed.address(n)}:9100/metrics"), every=0.3)
        assert up, f"node_exporter on {node} does not answer"
    try:
        yield testbed
    finally:
        for node in NODES:
            testbed.ssh(node, f"systemctl stop {EXPORTER}", check=False)


def _answers(url) -> bool:
    try:
        _get(url)
    except OSError:
        return False
    return True


def _readme_blocks():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("### Prometheus") :]
    return re.findall(r"```(promql|yaml)\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def prometheus(exporters, tmp_path_factory):
    """A prometheus server scraping the nodes every second with the README's alert rule; stopped
    by its PID after the module."""
    folder = tmp_path_factory.mktemp("prometheus")
    [rules] = [text for kind, text in _readme_blocks() if kind == "yaml"]
    (folder / "rules.yml").write_text(rules)
    targets = [f"{exporters.address(n)}:9100" for n in NODES]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(folder / "rules.yml")],
        "scrape_configs": [{"job_name": "wireup-testbed", "static_configs": [{"targets": targets}]}],
    }
    (folder / "prometheus.yml").write_text(json.dumps(config))
    port = _free_port()
    log = (folder / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # A wait for behaviour (it ends once prometheus is ready, or has exited).
        busy.wait_until(lambda: proc.poll() is not None or _answers(f"{url}/-/ready"), every=0.3)
        assert proc.poll() is None, (folder / "prometheus.log").read_text()[-2000:]
        assert _answers(f"{url}/-/ready"), f"prometheus not ready in {busy.PATIENCE_S} s"
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)  # busy: a grace before SIGKILL, no verdict
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def query(url, expr):
    """[(labels, value)] of an instant query."""
    answer = json.loads(_get(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"))
    assert answer["status"] == "success", answer
    return [(r["metric"], float(r["value"][1])) for r in answer["data"]["result"]]


def wait_for(url, expr):
    """The query's answer once it has one (a wait for behaviour: scrapes every 1 s, generous
    deadline, tests/busy.py); [] if it never does."""
    found = []

    def answered():
        found[:] = query(url, expr)
        return bool(found)

    busy.wait_until(answered, every=0.5)
    return found


def _store(results_dir):
    for host, path in RECORDS.items():
        record = dict(json.loads(path.read_text()), host=host, run_id=RUN_ID)
        results.write_host(results_dir, RUN_ID, host, record)
    fabric = results_dir / "fabric" / "20261202T091000Z"
    fabric.mkdir(parents=True)
    pairs = [
        {"round": 1, "pair": ["node1", "node2"], "kind": "pair", "busbw": 0.021},
        {"round": 2, "pair": ["node1", "node3"], "kind": "pair", "busbw": 0.48},
    ]
    record = {
        "run_id": "20261202T091000Z",
        "kind": "fabric",
        "verdicts": {"node1": "PASS", "node2": "FAIL", "node3": "PASS"},
        "nodes": {"node2": {"state": "bad", "evidence": ["round 1 with node1: 0.021 GB/s FAIL"]}},
        "pairs": pairs,
    }
    (fabric / "fabric.json").write_text(json.dumps(record))


def test_prometheus_scrapes_the_last_bench_and_a_failing_nodes_verdict(prometheus, testbed, tmp_path):
    results_dir = tmp_path / "results"
    _store(results_dir)
    # wireup-check on every node first, as the README installs it alone (the test does not rely on
    # an earlier module of the session having installed it).
    start = time.monotonic()
    installed = run_playbook(
        "site.yml", testbed.inventory, {"wireup_results_dir": str(results_dir)}, tags=["node_check"]
    )
    print(f"[prometheus] site.yml --tags node_check rc={installed.rc} in {time.monotonic() - start:.0f} s")
    assert installed.rc == 0, f"{installed.failure_messages()}\n{installed.stdout[-3000:]}"
    for node in NODES:
        testbed.ssh(
            node, f"test -s {BASELINE} && cp -p {BASELINE} {BASELINE}.it; {CHECK} --write-baseline --manual"
        )
    rail = {"name": "mlx5_0:1", "kind": "ib", "up": True, "gbps": 400.0, "watched": True}
    testbed.ssh(
        "node2",
        f"python3 -c \"import json; p='{BASELINE}'; d=json.load(open(p)); "
        f"d['node']['ports'].append({rail!r}); json.dump(d, open(p, 'w'))\"",
    )
    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "group_vars")
    play = write_playbook(tmp_path, "after_bench_and_quick.yml", PLAY.format(repo=REPO_ROOT))
    extra = {"wireup_results_dir": str(results_dir), "bench_fail_on_fail": False}
    try:
        start = time.monotonic()
        result = run_playbook(play, testbed.inventory, extra)
        print(f"[prometheus] after_bench + quick rc={result.rc} in {time.monotonic() - start:.0f} s")
        assert result.rc == 0, f"{result.failure_messages()}\n{result.stdout[-3000:]}"
        out = " ".join(result.stdout.split())
        for node in ("node1", "node3"):  # PASS records of a 2-GPU node: not this GPU-less node's baseline
            assert (
                f"wireup-check: FAIL {node}: baseline not written: nvidia-smi lists 0 GPU(s) now, "
                "the bench record 2" in out
            )
        assert (
            f"wireup-check: baseline of node2 kept: its latest bench record ({RUN_ID}) is FAIL, not PASS"
            in out
        )
        assert re.search(r"'node2: FAIL, [^']*? - NIC mlx5_0:1 missing", out)

        url = prometheus
        start = time.monotonic()
        busbw = wait_for(url, 'wireup_bench_busbw_bytes_per_second{host="node1",collective="all_reduce"}')
        print(f"[prometheus] first wireup figure queried after {time.monotonic() - start:.1f} s")
        record = json.loads(RECORDS["node1"].read_text())["collectives"]["all_reduce"]["verdict"]
        assert [(m["size_bytes"], v) for m, v in busbw] == [
            (str(record["size"]), pytest.approx(record["measured_busbw"] * 1e9))
        ]
        assert busbw[0][0]["job"] == "wireup-testbed" and busbw[0][0]["instance"].endswith(":9100")
        verdicts = {m["host"]: m["verdict"] for m, v in wait_for(url, "wireup_bench_verdict == 1")}
        assert verdicts == {"node1": "PASS", "node2": "FAIL", "node3": "PASS"}
        assert {m["host"] for m, _ in wait_for(url, 'wireup_fabric_verdict{verdict="FAIL"} == 1')} == {
            "node2"
        }
        assert wait_for(url, 'wireup_check_verdict{host="node2",verdict="FAIL"}')[0][1] == 1
        [q_check, q_busbw] = [text for kind, text in _readme_blocks() if kind == "promql"]
        assert {m["host"] for m, _ in query(url, q_check)} == {"node2"}
        slow = query(url, q_busbw)
        assert {m["host"] for m, _ in slow} == {"node2"} and slow[0][1] == pytest.approx(27.702742, rel=1e-6)
        alerts = []

        def alerted():
            alerts[:] = json.loads(_get(f"{url}/api/v1/alerts"))["data"]["alerts"]
            return bool(alerts)

        busy.wait_until(alerted, every=0.5)  # pending for 5 minutes: the wait ends long before
        assert [(a["labels"]["alertname"], a["labels"]["host"], a["state"]) for a in alerts] == [
            ("WireupNodeFailing", "node2", "pending")  # firing after 5 minutes
        ]
    finally:
        for node in NODES:
            testbed.ssh(
                node, f"rm -f {BASELINE}; test -f {BASELINE}.it && mv {BASELINE}.it {BASELINE}", check=False
            )
