"""The store's one newest-first query (issue 36): every reader that looks for a host's newest
record (the launch gate, the baselines, the textfiles) walks the store through it, in the store's
one order of runs (results.run_sort_key: the run's own time; a run dated in the future last).

``runs`` names the runs, newest first; ``records`` reads them, one at a time, and yields
``(kind, run_id, host, record | error)``: the record, checked whole by the record layer's
``record_problem`` (record/host_record.py; the store cannot import it), or the ValueError that
reading it raised (results.DamagedRecord for a record that cannot be used, a plain ValueError for
a host name that cannot be a file name). A missing record is skipped. The caller decides what an
error means and stops when it has what it wants: nothing is read past that (the generator is lazy),
so an index under this query (issue 39) can replace ``runs`` without a caller listing every run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator

from .results import host_path, list_runs, read_record, run_sort_key

Found = tuple[str, str, str, "dict | ValueError"]


def runs(results_dir, kinds=("bench",), *, before=None, now=None) -> list[tuple[str, str]]:
    """[(kind, run id)] of the store's runs of these kinds, newest first; when two kinds hold the
    same run id, the kind later in ``kinds`` counts as the newer. ``before``: only runs older than
    that run id (the store's order)."""
    now = time.time() if now is None else now
    found = [(kind, run_id) for kind in kinds for run_id in list_runs(results_dir, kind)]
    if before is not None:
        limit = run_sort_key(before)
        found = [(kind, run_id) for kind, run_id in found if run_sort_key(run_id) < limit]
    return sorted(found, key=lambda kr: (run_sort_key(kr[1], now), kinds.index(kr[0])), reverse=True)


def _run_hosts(results_dir, kind, run_id) -> list[tuple[str, str]]:
    """[(host, path)] of every record file of one run ([] when its folder cannot be listed)."""
    folder = os.path.join(results_dir, kind, run_id)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []
    return [(name[:-5], os.path.join(folder, name)) for name in names]


def _read(path_of: Callable[[], str], record_problem) -> dict | ValueError | None:
    try:
        return read_record(path_of(), record_problem)
    except FileNotFoundError:
        return None
    except ValueError as err:  # results.DamagedRecord, or a host name that is no file name
        return err


def records(
    results_dir, record_problem, kinds=("bench",), *, host=None, before=None, run_list: Iterable | None = None
) -> Iterator[Found]:
    """(kind, run_id, host, record | ValueError) newest first: ``host``'s record of each run, or
    every host's when ``host`` is None (in host name order within a run). ``run_list``: the runs
    to walk ((kind, run id), newest first: ``runs``), read once for many hosts."""
    for kind, run_id in runs(results_dir, kinds, before=before) if run_list is None else run_list:
        if host is not None:
            pairs = [(host, lambda k=kind, r=run_id: host_path(results_dir, r, host, k))]
        else:
            pairs = [(name, lambda p=path: p) for name, path in _run_hosts(results_dir, kind, run_id)]
        for name, path_of in pairs:
            found = _read(path_of, record_problem)
            if found is not None:
                yield kind, run_id, name, found
