"""wireup-listen: the master's half of torchrun_launch's port pre-check, on loopback."""

import pathlib
import socket
import subprocess
import sys

from tests import busy

LISTEN = pathlib.Path(__file__).resolve().parents[2] / "roles" / "torchrun_launch" / "files" / "wireup-listen"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _connected(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_counts_the_workers_that_connect():
    port = _free_port()
    # wireup-listen's own wait: it ends once both have connected, so a generous one costs nothing.
    proc = subprocess.Popen(
        [sys.executable, str(LISTEN), str(port), "2", str(busy.PATIENCE_S)], stdout=subprocess.PIPE, text=True
    )
    try:
        for _ in range(2):
            assert busy.wait_until(lambda: _connected(port), every=0.1), "wireup-listen never listened"
        out, _ = proc.communicate(timeout=busy.HANG_S)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.strip() == "2"


def test_a_port_in_use_fails_with_the_reason():
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run(
            [sys.executable, str(LISTEN), str(port), "1", "5"],
            check=False,
            capture_output=True,
            text=True,
            timeout=busy.HANG_S,
        )
    assert result.returncode == 1
    assert result.stderr.strip() == f"cannot listen on port {port}: Address already in use"


def test_nobody_connects_within_the_timeout():
    result = subprocess.run(
        [sys.executable, str(LISTEN), str(_free_port()), "3", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=busy.HANG_S,
    )
    assert result.returncode == 0 and result.stdout.strip() == "0"
