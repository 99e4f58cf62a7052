"""The store's index (issue 39): per host, a summary of each of its records, so a reader that
needs only what a record says in short (the launch gate: which capabilities it judged, and how)
finds the newest record per host and capability without reading the old ones.

Layout: ``<results_dir>/index/<host>.json`` (strict JSON, written atomically, core/atomicfile):
``{"schema": SCHEMA, "rules": R, "records": {"<kind>/<run id>": {"sig": [size, mtime_ns, inode],
"summary": {...}}}}``. The summary is the reader's (a Summarizer the record layer passes in: the
store cannot read a record's parts); ``rules`` is the fingerprint of the reader's rules, so an
index made under other rules counts as none.

The index is a cache, never the truth: an entry counts only while its record's file has the same
size, modification time and inode as when it was summarised (``signature``, one ``os.stat``, no
read); a record with no entry or another signature is read and summarised again, and the index
rewritten (a missing, damaged, stale or other rules' index is rebuilt from the records, as the
reader walks them); a record that cannot be read is never summarised (the reader gets its error,
as without an index). Two writers that update one host's index at once may lose an entry: the
next reader finds the record without it and reads it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from ..core import atomicfile
from .results import HOST_RE, DamagedRecord, read_strict_json

SCHEMA = 1
INDEX_DIR = "index"


@dataclasses.dataclass(frozen=True)
class Summarizer:
    """The reader's side of its index: ``rules`` (a fingerprint of the rules ``summarize`` applies),
    ``summarize(record, kind) -> dict`` (strict JSON) and ``valid(summary) -> bool`` (a summary
    read back from the file is of the reader's shape: an entry that is not counts as stale)."""

    rules: str
    summarize: Callable[[dict, str], dict]
    valid: Callable[[object], bool]


def key(kind, run_id) -> str:
    return f"{kind}/{run_id}"


def index_path(results_dir, host) -> str:
    if not HOST_RE.fullmatch(str(host)):
        raise ValueError(f"host name {host!r} cannot be a file name")
    return os.path.join(results_dir, INDEX_DIR, f"{host}.json")


def signature(path) -> list[int] | None:
    """[size, mtime_ns, inode] of the file at ``path`` (a link is not followed); None when absent."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _entry_ok(entry, summarizer) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("sig"), list)
        and len(entry["sig"]) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) for n in entry["sig"])
        and summarizer.valid(entry.get("summary"))
    )


def load(results_dir, host, summarizer: Summarizer) -> dict:
    """{key: entry} of ``host``'s index; {} when there is none, it cannot be read, is not of its
    shape, or was made under another schema or other rules (each noticed: the reader rebuilds it).
    An entry not of its shape is left out (its record is read again)."""
    try:
        data = read_strict_json(index_path(results_dir, host))
    except (FileNotFoundError, DamagedRecord):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("rules") != summarizer.rules:
        return {}
    records = data.get("records")
    if not isinstance(records, dict):
        return {}
    return {k: e for k, e in records.items() if isinstance(k, str) and _entry_ok(e, summarizer)}


def save(results_dir, host, summarizer: Summarizer, entries) -> bool:
    """Write ``host``'s index atomically; False when it cannot be written (a store the reader
    may not write: the index is a cache, the answer never depends on it)."""
    data = {"schema": SCHEMA, "rules": summarizer.rules, "records": entries}
    try:
        os.makedirs(os.path.join(results_dir, INDEX_DIR), exist_ok=True)
        atomicfile.write_json(index_path(results_dir, host), data, indent=None)  # the C encoder
    except OSError:
        return False
    return True


def entry(path, summary) -> dict | None:
    """The index entry of the record at ``path`` (just written or read) with its summary; None
    when the file is gone."""
    sig = signature(path)
    return None if sig is None else {"sig": sig, "summary": summary}


def add_run(results_dir, kind, run_id, records, *, paths, summarizer: Summarizer) -> int:
    """The writer's update: each host's index gains its record of this run ({host: record} just
    stored at {host: path}); returns how many indexes were written."""
    written = 0
    for host, record in records.items():
        new = entry(paths[host], summarizer.summarize(record, kind))
        if new is None:
            continue
        entries = load(results_dir, host, summarizer)
        entries[key(kind, run_id)] = new
        written += save(results_dir, host, summarizer, entries)
    return written
