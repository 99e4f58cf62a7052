"""Python's cyclic garbage collector paused for a step that allocates much and makes no reference
cycles (issue 39): each collection such a step triggers walks every object alive, the fleet's
records and node data included, so the step's cost grows with what else is in memory, not with
its own work. Reference counting still frees what the step drops; the few cycles it may make
(an exception's traceback) are collected once the collector is on again."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused():
    """The cyclic collector off while the block runs, on again after it. A caller's own choice (a
    collector already paused) is kept."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
