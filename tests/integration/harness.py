"""Drive playbooks through ansible-runner and hand back what tests assert on: per-host stats.

    result = run_playbook("site.yml", testbed.inventory, check=True)
    assert result.rc == 0, result.stdout
    assert result.stats["changed"] == {"node1": 0, "node2": 0, "node3": 0}
    assert result.unreachable_hosts == ["node3"]

The run's working directory is the repository root (ansible-runner's project_dir), so ansible.cfg,
group_vars/ and the plugins are the same as for a user's `ansible-playbook` from the repo root.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner

from tests.testbed import cache
from tests.testbed.system import flock

REPO_ROOT = Path(__file__).resolve().parents[2]
# ansible-runner's names for the recap counters -> the names tests use.
STAT_NAMES = {
    "ok": "ok",
    "changed": "changed",
    "failures": "failed",
    "dark": "unreachable",
    "skipped": "skipped",
    "rescued": "rescued",
    "ignored": "ignored",
}
CONNECTIONS = ("ssh", "paramiko", "local")


@dataclass
class PlaybookResult:
    """What one ansible-runner run produced."""

    rc: int
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    stats: dict  # {"ok"|"changed"|"failed"|"unreachable"|"skipped"|...: {host: count}}, every host present
    stdout: str
    events: list = field(repr=False)
    private_data_dir: str = ""

    @property
    def hosts(self):
        """{host: {"ok": n, "changed": n, "failed": n, "unreachable": n, "skipped": n, ...}}."""
        names = sorted({h for per_host in self.stats.values() for h in per_host})
        return {h: {stat: self.stats[stat].get(h, 0) for stat in self.stats} for h in names}

    def _with(self, stat):
        return sorted(h for h, n in self.stats.get(stat, {}).items() if n)

    @property
    def failed_hosts(self):
        return self._with("failed")

    @property
    def unreachable_hosts(self):
        return self._with("unreachable")

    @property
    def changed_hosts(self):
        return self._with("changed")

    def failure_messages(self, host=None):
        """[(host, task name, msg)] of failed and unreachable task results, in order."""
        out = []
        for ev in self.events:
            if ev.get("event") not in ("runner_on_failed", "runner_on_unreachable"):
                continue
            data = ev.get("event_data", {})
            if host is not None and data.get("host") != host:
                continue
            res = data.get("res", {}) or {}
            msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or ""
            # A loop's result says only "One or more items failed": add each failed item's own.
            items = [
                r.get("msg", "")
                for r in res.get("results", []) or []
                if isinstance(r, dict) and r.get("failed")
            ]
            out.append((data.get("host"), data.get("task", ""), " ".join([str(msg), *map(str, items)])))
        return out

    def messages(self, task_name):
        """{host: text} of the task's ok results: its msg, or for a looped task (a report that loops
        over the plan's lines) its items' msgs joined by " | "."""
        out = {}
        for host, res in self.task_results(task_name).items():
            items = res.get("results")
            out[host] = (
                " | ".join(str(r.get("msg", "")) for r in items) if items is not None else res.get("msg", "")
            )
        return out

    def skipped_hosts(self, task_name):
        """Hosts on which the task named task_name was skipped (its `when:` was false)."""
        return sorted(
            {
                ev["event_data"].get("host")
                for ev in self.events
                if ev.get("event") == "runner_on_skipped"
                and ev.get("event_data", {}).get("task") == task_name
            }
        )

    def item_keys(self, task_name, changed=True):
        """{host: [item['key'] of each (changed) loop item]} of a task looping over plan items."""
        out = {}
        for host, res in self.task_results(task_name).items():
            out[host] = [
                (r.get("item") or {}).get("key")
                for r in res.get("results", []) or []
                if not r.get("skipped") and (r.get("changed") or not changed)
            ]
        return out

    def task_results(self, task_name, host=None):
        """{host: res} of the ok/changed/failed results of the task named task_name."""
        out = {}
        for ev in self.events:
            data = ev.get("event_data", {})
            if (
                ev.get("event") in ("runner_on_ok", "runner_on_failed")
                and data.get("task") == task_name
                and (host is None or data.get("host") == host)
            ):
                out[data.get("host")] = data.get("res", {})
        return out


def run_playbook(
    playbook,
    inventory,
    extravars=None,
    *,
    check=False,
    limit=None,
    tags=None,
    connection=None,
    envvars=None,
    private_data_dir=None,
    timeout=1800,
    project_dir=REPO_ROOT,
):
    """Run playbook (relative to the repo root, or absolute) on inventory with ansible-runner.

    connection: None (the inventory's: ssh on the testbed), "paramiko" or "local" (an extra var,
    so it beats the inventory). project_dir: the run's working directory (the repository root, so
    its ansible.cfg is read; elsewhere, Ansible's defaults). Returns a PlaybookResult; never raises
    on a failed play.
    """
    if connection is not None and connection not in CONNECTIONS:
        raise ValueError(f"connection={connection!r}: use one of {', '.join(CONNECTIONS)} or None")
    playbook_path = Path(playbook) if Path(playbook).is_absolute() else REPO_ROOT / playbook
    if not playbook_path.is_file():
        raise FileNotFoundError(f"playbook {playbook_path} does not exist")
    extravars = dict(extravars or {})
    if connection is not None:
        extravars["ansible_connection"] = connection
    if private_data_dir is None:
        private_data_dir = tempfile.mkdtemp(prefix="wireup-runner-")
    # The ansible-playbook beside this interpreter (.venv/bin), even when the venv is not activated.
    env = {
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        # ansible-runner turns host key checking off unless told otherwise; keep ansible.cfg's (on).
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.update(envvars or {})
    runner = ansible_runner.run(
        private_data_dir=str(private_data_dir),
        project_dir=str(project_dir),
        playbook=str(playbook_path),
        inventory=str(Path(inventory).resolve()),
        extravars=extravars,
        cmdline="--check" if check else None,
        limit=limit,
        tags=",".join(tags) if isinstance(tags, (list, tuple)) else tags,
        envvars=env,
        quiet=True,
        timeout=timeout,
    )
    raw = runner.stats or {}
    hosts = set()
    for per_host in raw.values():
        hosts.update(per_host)
    stats = {name: {h: raw.get(key, {}).get(h, 0) for h in sorted(hosts)} for key, name in STAT_NAMES.items()}
    stdout = runner.stdout.read() if runner.stdout else ""
    return PlaybookResult(
        rc=runner.rc,
        status=runner.status,
        stats=stats,
        stdout=stdout,
        events=list(runner.events),
        private_data_dir=str(private_data_dir),
    )


def write_playbook(directory, name, text):
    """Write a throw-away playbook for a test (kept out of the repo, so the linters never see it)."""
    path = Path(directory) / name
    path.write_text(text)
    return path


def ensure_torch_venvs(testbed, base: str = "/opt/wireup") -> None:
    """Every node of the testbed has the venv with torch, made by site.yml's pytorch_venv (without
    the extra packages) unless an earlier test already made it. A node without one first gets a
    copy of the venv the role made on an earlier testbed of this machine, where there is one
    (tests/testbed/cache.py: the role then finds it complete and verifies it); otherwise the role
    installs it, and the node's venv is kept for the next testbed."""
    have = f"test -x {base}/venv/bin/torchrun"
    missing = [n for n in testbed.nodes if testbed.ssh(n, have, check=False).returncode]
    if not missing:
        return
    with flock(cache.SEED_LOCK):
        copied = [n for n in missing if _copy_kept_venv(testbed, n, base)]
        if len(copied) < len(missing):
            _install_torch_venvs(testbed)
            for node in set(missing) - set(copied):
                cache.keep_torch_venv(_venv_dir(testbed, node, base), _golden(testbed, node), base)
            return
    _install_torch_venvs(testbed)


def _install_torch_venvs(testbed) -> None:
    result = run_playbook(
        "site.yml", testbed.inventory, {"pytorch_venv_extra_packages": []}, tags=["pytorch_venv"]
    )
    assert result.rc == 0, f"{result.failure_messages()}\n{result.stdout[-3000:]}"


def _golden(testbed, node: str) -> Path:
    return Path(testbed.state["golden"][testbed.state["nodes"][node]["suite"]])


def _venv_dir(testbed, node: str, base: str) -> Path:
    """The node's venv seen from this machine (its root is an overlay mounted here)."""
    return Path(testbed.state["nodes"][node]["root"]) / base.lstrip("/") / "venv"


def _copy_kept_venv(testbed, node: str, base: str) -> bool:
    dest = _venv_dir(testbed, node, base)
    return not dest.exists() and cache.copy_kept_torch_venv(_golden(testbed, node), base, dest)
