"""Time in tests on a busy machine (issue 35 item 8): no verdict depends on spare CPU.

CI and the engineers' machine are 2 cores shared by several test runs at once (load averages of
10-20), so a test never asks how fast the machine was. A test meets time in three ways:

- **a wait for behaviour** (the run ends, the node is drained, a server answers): ``wait_until``
  with ``PATIENCE_S``. It returns as soon as the condition holds, so a generous deadline costs
  nothing on an idle machine; the deadline only ends a test whose condition never comes.
- **a hang guard** (a subprocess's ``timeout=``, a playbook's): ``HANG_S``. A hung program hangs
  for ever, so the guard sits far past the slowest run seen under load, never near it.
- **a bound the product promises** (the watchdog stops a silent node within timeout + interval +
  grace; a run past its timeout is cancelled): measured on the product's own clock and records
  (the run's stamps under runs/RUN_ID/, Slurm's Start and End, the wait's own "s waited"), not on
  the test's wall clock around process start-up and Ansible. A claim that work is cheap (a host
  list of 10 M names refused at once, a parser linear not quadratic) is a CPU claim:
  ``cpu_seconds`` counts this process's CPU time, which other processes on the machine do not
  inflate.

tests/unit/test_busy.py reads every test for wall-clock figures compared with a bound, and for
literal subprocess timeouts below ``HANG_S``.
"""

from __future__ import annotations

import contextlib
import time

# A behaviour wait's deadline: 10 x the slowest such wait seen at a load of 20 on the 2 cores
# (the watchdog tests' runs ending: under 15 s), and a failing test still ends in minutes.
PATIENCE_S = 180
# A subprocess or playbook that has not ended in this long hangs: the slowest unit-test subprocess
# took 50 s at a load of 10 (an `ansible` run of a module), 8 x that is still a hang guard.
HANG_S = 600


def wait_until(predicate, seconds: float = PATIENCE_S, every: float = 0.2) -> bool:
    """Whether ``predicate()`` came true within ``seconds`` (looked at every ``every`` s, and once
    more at the deadline). Returns at its first true look."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return bool(predicate())


class CpuTime:
    """This process's CPU seconds spent inside a ``with cpu_seconds() as used:`` block
    (``used.seconds``; read after the block)."""

    seconds = 0.0


@contextlib.contextmanager
def cpu_seconds():
    """CPU time of the block (time.process_time: this process, every thread): what the code
    costs, whatever else the machine runs."""
    used = CpuTime()
    began = time.process_time()
    try:
        yield used
    finally:
        used.seconds = time.process_time() - began
