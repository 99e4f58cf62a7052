"""wireup_file_state (plugins/modules): what one read of a node reports."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import pwd

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "wireup_file_state", ROOT / "plugins/modules/wireup_file_state.py"
)
file_state = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(file_state)


def test_read_path(tmp_path):
    me = pwd.getpwuid(os.geteuid()).pw_name
    text = tmp_path / "key.asc"
    text.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    text.chmod(0o644)
    got = file_state.read_path(str(text), 65536)
    assert got == {
        "exists": True,
        "type": "file",
        "mode": "0644",
        "owner": me,
        "group": got["group"],
        "size": text.stat().st_size,
        "sha256": hashlib.sha256(text.read_bytes()).hexdigest(),
        "content": text.read_text(),
    }
    assert file_state.read_path(str(tmp_path / "absent"), 65536) == {"exists": False}
    folder = file_state.read_path(str(tmp_path), 65536)
    assert folder["type"] == "directory" and folder["content"] is None
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00")
    assert file_state.read_path(str(binary), 65536)["content"] is None  # not text: no content
    big = file_state.read_path(str(text), 4)
    assert big["content"] is None and big["sha256"]  # too large: only its checksum
