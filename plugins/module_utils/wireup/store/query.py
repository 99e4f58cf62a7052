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

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator

from . import index
from .results import HOST_RE, DamagedRecord, host_path, list_runs, read_record, run_sort_key

Found = tuple[str, str, str, "dict | ValueError"]
# (kind, run id, the record's summary or the error reading it, the record whole: a call that
# reads it when the summary came from the index)
Summarized = tuple[str, str, "dict | ValueError", Callable[[], "dict | ValueError"]]


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


# The records read while reading_once() holds (innermost last): {(path, check): (signature,
# record or error)}.
_ONCE: list[dict] = []


@contextlib.contextmanager
def reading_once():
    """Within it, each record file is read and checked once: a reader that asks for it again,
    while the file's signature (index.signature: size, modification time, inode) is the same,
    gets the record (or the error) the first read gave, the same object, which readers only read.
    wireup_bench_store's run holds it: the GPU trial's baselines and each host's baseline read the
    same newest records (issue 39). A file changed since is read again."""
    _ONCE.append({})
    try:
        yield
    finally:
        _ONCE.pop()


def _read_checked(path, record_problem) -> dict:
    """read_record, once per file and signature while reading_once() holds."""
    if not _ONCE:
        return read_record(path, record_problem)
    held, sig = _ONCE[-1], index.signature(path)
    found = held.get((path, record_problem))
    if found is None or sig is None or found[0] != sig:
        try:
            found = (sig, read_record(path, record_problem))
        except ValueError as err:
            found = (sig, err)
        held[(path, record_problem)] = found
    if isinstance(found[1], ValueError):
        raise found[1]
    return found[1]


def _read(path_of: Callable[[], str], record_problem) -> dict | ValueError | None:
    try:
        return _read_checked(path_of(), record_problem)
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


def _reader(path, record_problem, record=None) -> Callable[[], dict | ValueError]:
    """A call that gives the record at ``path`` whole (read once, on the first call)."""
    held = [] if record is None else [record]

    def whole():
        if not held:
            found = _read(lambda: path, record_problem)
            held.append(found if found is not None else DamagedRecord(f"{path}: removed while it was read"))
        return held[0]

    return whole


def _summarized(path, kind, run_id, entries, *, record_problem, summarizer) -> Summarized | None:
    """One run's record of the host, summarised: from its index entry while the file's signature
    is the entry's, else read (a new entry in ``entries``); None when the host has none."""
    sig = index.signature(path)
    name = index.key(kind, run_id)
    if sig is None:
        entries.pop(name, None)
        return None
    held = entries.get(name)
    if held is not None and held["sig"] == sig:
        return kind, run_id, held["summary"], _reader(path, record_problem)
    found = _read(lambda: path, record_problem)
    if found is None:
        return None
    if isinstance(found, ValueError):
        entries.pop(name, None)
        return kind, run_id, found, lambda: found
    summary = summarizer.summarize(found, kind)
    entries[name] = {"sig": sig, "summary": summary}
    return kind, run_id, summary, lambda: found


def summaries(results_dir, record_problem, summarizer, host, run_list) -> Iterator[Summarized]:
    """``host``'s records in ``run_list`` ((kind, run id), newest first: ``runs``), each as its
    summary (index.Summarizer) from the store's index where the index still holds it, else read
    whole (a damaged one yields its error); lazy, like ``records``: what the caller does not walk
    to is not looked at. The host's index is rewritten when the walk found it stale (on close);
    its entries of runs of these kinds that ``run_list`` does not name (removed) are dropped.
    A host name that cannot be a file name has no records."""
    if not HOST_RE.fullmatch(str(host)):
        return
    run_list = list(run_list)
    entries = index.load(results_dir, host, summarizer)
    before = dict(entries)
    listed = {index.key(kind, run_id) for kind, run_id in run_list}
    kinds = {f"{kind}/" for kind, _run in run_list}
    for gone in [k for k in entries if k not in listed and k[: k.find("/") + 1] in kinds]:
        del entries[gone]  # a run removed from the store (by hand, or by retention)
    try:
        for kind, run_id in run_list:
            path = host_path(results_dir, run_id, host, kind)
            found = _summarized(
                path, kind, run_id, entries, record_problem=record_problem, summarizer=summarizer
            )
            if found is not None:
                yield found
    finally:
        if entries != before:
            index.save(results_dir, host, summarizer, entries)
