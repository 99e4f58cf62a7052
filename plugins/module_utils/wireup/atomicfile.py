"""Writing results so that a reader sees the whole file or none of it (pure Python, stdlib only).

Every record, report and plot wireup stores on the controller goes through :func:`write_bytes`:
the data goes to a temporary file in the same folder, is flushed and fsync'ed, then renamed to its
name (``os.replace``: atomic on POSIX) and the folder is fsync'ed, so a full disk or a crash leaves
the old file or no file, never a truncated one at the final name. ``exclusive=True`` never replaces
an existing file (the store's records are written once): the finished temporary file is hard-linked
to the name, which fails with FileExistsError when it is taken.
Files are 0640 (the user's and group's only, as every result wireup stores; results.RESULTS_UMASK
makes the folders 0750): mkstemp's 0600 is widened to that, never to world-readable.

:func:`write_json` writes strict JSON: NaN and infinities are not JSON (Python's ``Infinity`` is
not read by other tools), so they are replaced by None first (:func:`finite`) and the dump runs
with ``allow_nan=False``.
"""

import contextlib
import errno
import json
import math
import os
import tempfile


def finite(data):
    """A copy of ``data`` (dicts, lists, tuples, scalars) with every NaN or infinite float None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(value) for value in data]
    return data


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # a folder that cannot be opened (some platforms): the rename itself still holds
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _link_exclusive(tmp, path):
    """Give the finished file its name unless the name is taken (FileExistsError)."""
    try:
        os.link(tmp, path)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        # A filesystem without hard links: the check and the rename are two steps there.
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "file exists", path) from err
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def write_bytes(path, data, *, exclusive=False, mode=0o640):
    """Write ``data`` (bytes) to ``path`` atomically; returns the path."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if exclusive:
            _link_exclusive(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)
    return path


def write_text(path, text, *, exclusive=False, mode=0o640):
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    return write_bytes(path, text.encode("utf-8"), exclusive=exclusive, mode=mode)


def dumps(data, **kwargs):
    """Strict JSON text of ``data`` (non-finite floats None); kwargs as json.dumps takes them."""
    return json.dumps(finite(data), allow_nan=False, **kwargs)


def write_json(path, data, *, exclusive=False, indent=1):
    """Write ``data`` as strict JSON (sorted keys, a final newline) atomically; returns the path."""
    return write_text(
        path, dumps(data, indent=indent, sort_keys=True, default=str) + "\n", exclusive=exclusive
    )
