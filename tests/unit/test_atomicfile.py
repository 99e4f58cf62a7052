"""atomicfile (issue 35 item 5): a file is written whole into a folder that someone else may own
(Debian's node_exporter folder belongs to the `prometheus` user): the temporary file is created
with O_EXCL|O_NOFOLLOW and its mode set on its descriptor (never by path), the rename happens
inside the folder's descriptor, what stands at the final name (a FIFO, a symbolic link) is replaced,
never opened or followed, and the folder is reached without a symbolic link that someone other than
root (or the writing user) could have placed."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import atomicfile

# The attacker of issue 35: whoever owns the folder swaps every temporary file for a symbolic link
# to a root-only file, as fast as it can, while wireup writes.
SWAPPER = """
import os, sys
folder, victim = sys.argv[1], sys.argv[2]
while True:
    for name in os.listdir(folder):
        if name.endswith(".tmp"):
            try:
                os.unlink(os.path.join(folder, name))
                os.symlink(victim, os.path.join(folder, name))
            except OSError:
                pass
"""


def _mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_swapped_temporary_file_never_changes_the_mode_of_what_it_points_to(tmp_path):
    """Before: os.chmod(tmp) by path followed the swapped-in link: the root-only file became 0644
    at the first write (seen 3 of 3 times)."""
    folder, victim = tmp_path / "prom", tmp_path / "shadow"
    folder.mkdir()
    victim.write_text("root only\n")
    victim.chmod(0o600)
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder), str(victim)])
    try:
        time.sleep(0.2)
        for _ in range(200):
            # The swapper may win a rename (the folder is its own); what matters is what it cannot do.
            with contextlib.suppress(OSError):
                atomicfile.write_text(str(folder / "wireup_check.prom"), "wireup_x 1\n", mode=0o644)
            assert _mode(victim) == 0o600
    finally:
        swapper.kill()
        swapper.wait()
    assert victim.read_text() == "root only\n"


def test_the_mode_is_set_on_the_descriptor_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        atomicfile.write_text(str(tmp_path / "a.prom"), "x\n", mode=0o644)
        atomicfile.write_text(str(tmp_path / "b.json"), "{}\n")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.prom") == 0o644 and _mode(tmp_path / "b.json") == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.prom", "b.json"]  # no temporary left


def test_a_symlink_or_fifo_at_the_name_is_replaced_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    victim.chmod(0o600)
    (tmp_path / "link.prom").symlink_to(victim)
    atomicfile.write_text(str(tmp_path / "link.prom"), "new\n", mode=0o644)
    assert victim.read_text() == "keep\n" and _mode(victim) == 0o600
    assert stat.S_ISREG(os.lstat(tmp_path / "link.prom").st_mode)
    os.mkfifo(tmp_path / "fifo.prom")
    atomicfile.write_text(str(tmp_path / "fifo.prom"), "new\n", mode=0o644)
    assert (tmp_path / "fifo.prom").read_text() == "new\n"


def test_read_regular_reads_files_only_and_never_blocks_on_a_fifo(tmp_path):
    (tmp_path / "f").write_text("abc")
    assert atomicfile.read_regular(str(tmp_path / "f"), 10) == b"abc"
    assert atomicfile.read_regular(str(tmp_path / "f"), 2) == b"ab"
    assert atomicfile.read_regular(str(tmp_path / "absent"), 10) is None
    os.mkfifo(tmp_path / "fifo")
    assert atomicfile.read_regular(str(tmp_path / "fifo"), 10) is None  # returns at once
    (tmp_path / "link").symlink_to(tmp_path / "f")
    assert atomicfile.read_regular(str(tmp_path / "link"), 10) is None


def test_a_folder_reached_through_a_link_others_could_place_is_refused(tmp_path):
    """A symbolic link is followed only where root or this user alone could have put it: in a
    folder nobody else can write, or (sticky, as /tmp) its owner is root or this user."""
    target = tmp_path / "etc"
    target.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # the prometheus user's folder, as far as root is concerned
    (shared / "node-exporter").symlink_to(target)
    with pytest.raises(PermissionError, match=r"symbolic link .* others can change"):
        atomicfile.write_text(str(shared / "node-exporter" / "wireup_check.prom"), "x\n")
    with pytest.raises(PermissionError, match="symbolic link"):
        atomicfile.read_regular(str(shared / "node-exporter" / "wireup_check.prom"), 10)
    assert list(target.iterdir()) == []
    # The same link in a folder only root can change is followed (Debian's /var/run -> /run).
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    (mine / "node-exporter").symlink_to(target)
    atomicfile.write_text(str(mine / "node-exporter" / "wireup_check.prom"), "x\n")
    assert (target / "wireup_check.prom").read_text() == "x\n"
    # In a sticky folder a link stays trusted only when root or this user owns it.
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "ok").symlink_to(target)
    atomicfile.write_text(str(sticky / "ok" / "a.prom"), "x\n")
    (sticky / "theirs").symlink_to(target)
    os.lchown(sticky / "theirs", 4242, 4242)
    with pytest.raises(PermissionError, match="symbolic link"):
        atomicfile.write_text(str(sticky / "theirs" / "b.prom"), "x\n")


def test_remove_unlinks_the_name_never_what_it_points_to(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "wireup_check.prom").symlink_to(victim)
    assert atomicfile.remove(str(tmp_path / "wireup_check.prom")) is True
    assert victim.read_text() == "keep\n" and not os.path.lexists(tmp_path / "wireup_check.prom")
    assert atomicfile.remove(str(tmp_path / "wireup_check.prom")) is False


def test_exclusive_still_refuses_a_taken_name_even_a_dangling_link(tmp_path):
    atomicfile.write_json(str(tmp_path / "r.json"), {"a": 1}, exclusive=True)
    with pytest.raises(FileExistsError):
        atomicfile.write_json(str(tmp_path / "r.json"), {"a": 2}, exclusive=True)
    (tmp_path / "d.json").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        atomicfile.write_json(str(tmp_path / "d.json"), {"a": 2}, exclusive=True)
    assert not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json", "r.json"]
