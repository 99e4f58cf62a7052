"""Writing results so that a reader sees the whole file or none of it (pure Python, stdlib only).

Every record, report and plot wireup stores on the controller, and every textfile wireup-check
writes for node_exporter on a node, goes through :func:`write_bytes`: the data goes to a temporary
file in the same folder, is flushed and fsync'ed, then renamed to its name (atomic on POSIX) and the
folder is fsync'ed, so a full disk or a crash leaves the old file or no file, never a truncated one
at the final name. ``exclusive=True`` never replaces an existing file (the store's records are
written once): the finished temporary file is hard-linked to the name, which fails with
FileExistsError when it is taken. Files are 0640 by default (the user's and group's only, as every
result wireup stores; results.RESULTS_UMASK makes the folders 0750), never world-readable unless
the caller says so (node_exporter's textfiles are 0644).

The folder may belong to someone else (Debian's node_exporter folder is the ``prometheus`` user's,
issue 35), so nothing is done by path inside it: the folder is opened once (:func:`open_folder`:
no symbolic link on the way that anyone but root or this user could have placed), the temporary
file is created in that descriptor with O_CREAT|O_EXCL|O_NOFOLLOW and its mode set on its own
descriptor (fchmod; never chmod by path, which a swapped-in link would redirect), and renamed
within the folder's descriptor. What stands at the final name (a FIFO, a symbolic link, a hard link
to another file) is replaced by the rename, never opened, written through or followed;
:func:`read_regular` reads a regular file only and never blocks on a FIFO. Still trusted: whoever
can write the folders above it without a link (root), and the folder's owner, who can always
replace what wireup wrote there after the rename (docs/security.md).

:func:`write_json` writes strict JSON: NaN and infinities are not JSON (Python's ``Infinity`` is
not read by other tools), so they are replaced by None first (:func:`finite`) and the dump runs
with ``allow_nan=False``; the copy is made only for data that holds one (:func:`dumps`).
"""

import contextlib
import errno
import json
import math
import os
import stat

# A folder on the way is opened for its name only where the system can (Linux's O_PATH: search
# permission suffices, as for a path), else for reading.
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# What open(O_NOFOLLOW) says of a link: ELOOP (Linux, macOS), EMLINK (FreeBSD).
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)
_MAX_LINKS = 40  # as the kernel's own limit on links followed in one path


def finite(data):
    """A copy of ``data`` (dicts, lists, tuples, scalars) with every NaN or infinite float None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(value) for value in data]
    return data


# ------------------------------------------------------------------------------ the folder
def trusted_owner(uid) -> bool:
    """Whether ``uid`` is root or the user this process runs as."""
    return uid in (0, os.geteuid())


def only_owner_writes(st) -> bool:
    """Whether a file or folder (os.stat_result) can be changed by its owner alone, and the owner
    is root or this user."""
    return trusted_owner(st.st_uid) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _link_trusted(folder_st, link_st) -> bool:
    """A symbolic link is as trusted as whoever could have placed it: a folder only root or this
    user can write, or a sticky folder (as /tmp) where only its owner can rename it."""
    if only_owner_writes(folder_st):
        return True
    return bool(folder_st.st_mode & stat.S_ISVTX) and trusted_owner(link_st.st_uid)


def _step(fd, name, shown):
    """(folder fd, link target or None): one component opened without following a link, or the
    target of a trusted link there (PermissionError for one others could have placed)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd), None
    except OSError as err:
        if err.errno not in (*_LINK_ERRNOS, errno.ENOTDIR):
            raise
        link_st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISLNK(link_st.st_mode):
            raise
    if not _link_trusted(os.fstat(fd), link_st):
        raise PermissionError(
            errno.EPERM,
            f"{shown} is a symbolic link in a folder others can change: not followed "
            "(make that folder root's, or name the real folder)",
        )
    return None, os.readlink(name, dir_fd=fd)


def open_folder(path) -> int:
    """A descriptor of the folder ``path`` (the caller closes it), walked one component at a time
    without following a symbolic link that someone other than root or this user could have
    placed (PermissionError naming it); NotADirectoryError/FileNotFoundError as open gives them."""
    parts = [p for p in os.path.abspath(path).split("/") if p]
    fd, links = os.open("/", _DIR_FLAGS), 0
    try:
        while parts:
            name = parts.pop(0)
            nfd, target = _step(fd, name, f"{path} ({name})")
            if target is None:
                os.close(fd)
                fd = nfd
                continue
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, f"{path}: too many symbolic links")
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                os.close(fd)
                fd = os.open("/", _DIR_FLAGS)
        return _readable(fd)
    except BaseException:
        os.close(fd)
        raise


def _readable(fd):
    """The folder itself opened for reading where this user may (its fsync needs that), else the
    descriptor of its name; either way the one folder the walk reached."""
    try:
        readable = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return fd
    os.close(fd)
    return readable


def _split(path):
    folder, name = os.path.split(os.path.abspath(path))
    if not name:
        raise IsADirectoryError(errno.EISDIR, "not a file name", path)
    return folder, name


# ------------------------------------------------------------------------------ writing
def _new_temporary(dfd, name, mode):
    """(fd, name) of a new file in the folder, created exclusively, never through a link, with
    ``mode`` set on its descriptor (the umask cannot narrow it, no path can redirect it)."""
    for _attempt in range(100):
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(tmp, _NEW_FLAGS, mode & 0o777, dir_fd=dfd)
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def _write_all(fd, data):
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _link_exclusive(dfd, tmp, name):
    """Give the finished file its name unless the name is taken (FileExistsError)."""
    try:
        os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        # A filesystem without hard links: the check and the rename are two steps there.
        if _lexists(dfd, name):
            raise FileExistsError(errno.EEXIST, "file exists", name) from err
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return
    os.unlink(tmp, dir_fd=dfd)


def _lexists(dfd, name):
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def write_bytes(path, data, *, exclusive=False, mode=0o640):
    """Write ``data`` (bytes) to ``path`` atomically; returns the path."""
    folder, name = _split(path)
    dfd = open_folder(folder)
    try:
        fd, tmp = _new_temporary(dfd, name, mode)
        try:
            _write_all(fd, data)
            if exclusive:
                _link_exclusive(dfd, tmp, name)
            else:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(dfd)
    finally:
        os.close(dfd)
    return path


def write_text(path, text, *, exclusive=False, mode=0o640):
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    return write_bytes(path, text.encode("utf-8"), exclusive=exclusive, mode=mode)


def dumps(data, **kwargs):
    """Strict JSON text of ``data`` (non-finite floats None); kwargs as json.dumps takes them.
    ``data`` is encoded as it is; only where that refuses a non-finite float is it copied
    (finite) and encoded again, so a record without one is neither copied nor encoded twice.
    Without ``indent`` json uses its C encoder (with one, its pure-Python one: ten times slower)."""
    try:
        return json.dumps(data, allow_nan=False, **kwargs)
    except ValueError:  # a NaN or an infinity (a cycle raises again below, as it did before)
        return json.dumps(finite(data), allow_nan=False, **kwargs)


def write_json(path, data, *, exclusive=False, indent=1):
    """Write ``data`` as strict JSON (sorted keys, a final newline) atomically; returns the path."""
    return write_text(
        path, dumps(data, indent=indent, sort_keys=True, default=str) + "\n", exclusive=exclusive
    )


# ------------------------------------------------------------------------------ reading, removing
def _read_upto(fd, limit):
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _open_regular(dfd, name):
    """A read-only descriptor of ``name`` when it is a regular file, else None."""
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
            return None
        return os.open(name, _READ_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno in _LINK_ERRNOS:  # swapped for a link between the two looks
            return None
        raise


def read_regular(path, limit):
    """At most ``limit`` bytes of ``path`` when it is a regular file; None when it is absent or
    anything else (a FIFO is never waited on: O_NONBLOCK; a link is not followed)."""
    folder, name = _split(path)
    dfd = open_folder(folder)
    try:
        fd = _open_regular(dfd, name)
    finally:
        os.close(dfd)
    if fd is None:
        return None
    try:
        return _read_upto(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)


def remove(path) -> bool:
    """Remove the name ``path`` (never what a link there points to); False when it was absent."""
    folder, name = _split(path)
    dfd = open_folder(folder)
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        return False
    finally:
        os.close(dfd)
    return True
