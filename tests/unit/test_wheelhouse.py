"""Hash-checked installs from a wheelhouse (issue 12, item 8): the requirements file that
wireup.core.wheelhouse makes is one pip's --require-hashes mode accepts, and a changed wheel fails it."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import wheelhouse

SHA = "a" * 64


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", ("torch", "2.13.0+cpu")),
        ("typing_extensions-4.16.0-py3-none-any.whl", ("typing-extensions", "4.16.0")),
        ("MarkupSafe-3.0.4-1build-cp311-cp311-manylinux_2_17_x86_64.whl", ("markupsafe", "3.0.4")),
        ("nvidia_nccl_cu13-2.28.9-py3-none-manylinux_2_18_x86_64.whl", ("nvidia-nccl-cu13", "2.28.9")),
        ("torch-2.13.0.tar.gz", None),
        ("README", None),
    ],
)
def test_parse_wheel_name(filename, expected):
    assert wheelhouse.parse_wheel_name(filename) == expected


def test_requirements_text_one_line_per_project_every_platform_hashed():
    text = wheelhouse.requirements_text(
        {
            "numpy-2.3.5-cp311-cp311-manylinux_2_28_x86_64.whl": "b" * 64,
            "numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl": "c" * 64,
            "torchinfo-1.8.0-py3-none-any.whl": SHA,
        }
    )
    assert text == (
        f"numpy==2.3.5 --hash=sha256:{'b' * 64} --hash=sha256:{'c' * 64}\n"
        f"torchinfo==1.8.0 --hash=sha256:{SHA}\n"
    )


@pytest.mark.parametrize(
    ("hashes", "message"),
    [
        (
            {"numpy-2.3.5-py3-none-any.whl": SHA, "numpy-2.3.4-py3-none-any.whl": SHA},
            "holds numpy 2.3.4 and 2.3.5",
        ),
        ({"notes.txt": SHA}, "notes.txt is not a wheel file name"),
        ({"x-1.0-py3-none-any.whl": "xyz"}, "is not a sha256 hex digest"),
        ({}, "the wheelhouse is empty"),
    ],
)
def test_requirements_text_refuses(hashes, message):
    with pytest.raises(ValueError, match=message):
        wheelhouse.requirements_text(hashes)


def _wheel(directory, name="wireupdemo", version="1.0", body="VALUE = 1\n"):
    """A minimal pure-Python wheel pip can install."""
    path = directory / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": body,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: wireup-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for arcname, content in files.items():
            data = content.encode()
            archive.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arcname},sha256={digest},{len(data)}")
        record.append(f"{dist}/RECORD,,")
        archive.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return path


def _pip_dry_run(wheels, requirements):
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", str(wheels),
         "--require-hashes", "-r", str(requirements), "--disable-pip-version-check", "--no-cache-dir"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_pip_accepts_the_file_and_refuses_a_changed_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels)
    requirements = tmp_path / "requirements-hashed.txt"
    requirements.write_text(wheelhouse.lock_directory(str(wheels)))
    ok = _pip_dry_run(wheels, requirements)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Would install wireupdemo-1.0" in ok.stdout
    # The wheel swapped after the file was made: same name and version, other content.
    _wheel(wheels, body="VALUE = 'swapped'\n")
    bad = _pip_dry_run(wheels, requirements)
    assert bad.returncode != 0
    assert "DO NOT MATCH THE HASHES" in bad.stderr, bad.stderr


def test_command_line(tmp_path, capsys):
    _wheel(tmp_path)
    assert wheelhouse.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("wireupdemo==1.0 --hash=sha256:")
    assert wheelhouse.main([str(tmp_path / "missing")]) == 2
    (tmp_path / "wireupdemo-2.0-py3-none-any.whl").write_bytes(b"")
    assert wheelhouse.main([str(tmp_path)]) == 1
    assert "keep one version per project" in capsys.readouterr().err
