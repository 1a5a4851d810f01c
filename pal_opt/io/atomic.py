"""Atomic writing of output files: never a half-written file.

Output goes to a temporary file in the target's directory, which is flushed, synced and then
renamed over the target with :func:`os.replace`.  A crash or an interrupt (including
``KeyboardInterrupt``) leaves either the old file or the new one, never half of one, and no
temporary file behind.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_text", "atomic_write_bytes", "atomic_write_json"]


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line endings) to ``path`` atomically
    (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically.

    The data goes to a temporary file in the same directory, which is flushed, synced and
    renamed over ``path``; an existing file keeps its permissions.  On any failure (including
    ``KeyboardInterrupt``) the temporary file is removed and ``path`` is untouched.

    Raises
    ------
    OSError
        The directory is missing or not writable, or ``path`` is a directory, a device, a FIFO
        or a socket; the error names ``path``, not the temporary file.  A symbolic link is
        followed: the file it points to is replaced, the link kept.
    """
    target = Path(path)
    if target.is_symlink():  # write the file the link points to; replacing would cut the link
        target = Path(os.path.realpath(target))
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    if target.exists() and not target.is_file():  # a device or a FIFO: renaming over it would remove it
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket); give a file name", os.fspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:  # name the file the user asked for, not the temporary one
        raise type(exc)(exc.errno, f"cannot write: {exc.strerror}", os.fspath(path)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = os.stat(target).st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
            os.chmod(tmp, mode)
        except OSError:
            pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON (plus a final newline) to ``path`` atomically.

    NaN and infinities are refused (``ValueError``) before anything is written: they are not
    JSON, and pal-opt's own readers reject them.
    """
    atomic_write_text(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m
