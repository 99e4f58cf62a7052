"""A job's logs brought back to the controller are created with their final mode, in the task that
fetches them (issue 35, item 7): ansible.builtin.fetch takes the controller's umask (0644 files in
0755 folders under the usual 022) and a later task narrowed them, so between the two, and for good
when the play stopped in between, every user of the controller could read the logs (they may print
what the job's env held). wireup.cluster.wireup_fetch (plugins/action/wireup_fetch.py) is fetch
under the results' umask: files 0640, folders 0750, from the start."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import yaml

from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def _fetch(tmp_path, src, dest):
    """One wireup.cluster.wireup_fetch task on localhost (the connection's node is this machine),
    run by ansible-playbook from the repository root under the usual umask 022."""
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"wireup.cluster.wireup_fetch": {"src": str(src), "dest": str(dest), "flat": True}}],
        }
    ]
    book = tmp_path / "fetch.yml"
    book.write_text(yaml.safe_dump(play))
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, ANSIBLE_PYTHON_INTERPRETER=sys.executable),
        preexec_fn=lambda: os.umask(0o022),
        timeout=busy.HANG_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_a_fetched_log_and_the_folders_made_for_it_have_their_final_mode(tmp_path):
    src = tmp_path / "node" / "job.log"
    src.parent.mkdir()
    src.write_text("rank 0: HF_TOKEN printed by the job\n")
    src.chmod(0o644)
    dest = tmp_path / "results" / "launch" / "r1" / "node1.log"
    _fetch(tmp_path, src, dest)
    assert dest.read_text() == src.read_text()
    assert {p.name: _mode(p) for p in (dest, dest.parent, dest.parent.parent)} == {
        "node1.log": 0o640,
        "r1": 0o750,
        "launch": 0o750,
    }
    # A log fetched again unchanged (jobs.yml logs), left 0644 by an older wireup: 0640 now too.
    dest.chmod(0o644)
    _fetch(tmp_path, src, dest)
    assert _mode(dest) == 0o640


def test_every_fetch_of_the_roles_is_wireup_fetch_and_no_task_fixes_modes_after_it():
    tasks = sorted(ROOT.glob("roles/*/tasks/*.yml"))
    text = {p.relative_to(ROOT).as_posix(): p.read_text() for p in tasks}
    assert [p for p, t in text.items() if "ansible.builtin.fetch" in t] == []
    fetching = sorted(p for p, t in text.items() if "wireup.cluster.wireup_fetch:" in t)
    assert fetching == [
        "roles/torchrun_launch/tasks/jobs.yml",
        "roles/torchrun_launch/tasks/slurm_wait.yml",
        "roles/torchrun_launch/tasks/wait.yml",
    ]
    assert [p for p, t in text.items() if "mode: u=rwX,g=rX,o=" in t] == []
