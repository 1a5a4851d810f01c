"""Atomic writing of output files: never a half-written file, and a command's outputs all or none.

Output goes to a temporary file in the target's directory (``.NAME.PID-N.tmp.EXT``: the target's
extension kept, for writers that read the format from it), which is flushed, synced and then
renamed over the target with :func:`os.replace`.  A crash or an interrupt (including
``KeyboardInterrupt``) leaves either the old file or the new one, never half of one, and no
temporary file behind.

A command with several outputs writes them as one group (:func:`atomic_write_files`): every
output is rendered to its temporary file first, and any failure or interrupt then removes all the
temporary files and leaves every target as it was.  Only then are they renamed into place, one
after the other, with SIGINT held off (:class:`pal_opt.sigint.SigintDeferred`: a Ctrl-C during
the renames is raised once they are all done).  A rename that fails all the same (a sticky
directory and a target owned by someone else, say) puts back the targets already replaced, from
hard links to them made before the first rename, and removes the files that did not exist
before.  All or nothing, then, as far as the operating system allows: a power cut or SIGKILL in
the middle of the renames (a few system calls) can still leave part of the group written, and a
``.NAME.PID-N.bak.EXT`` link to an old file beside it.

No :mod:`tempfile` (its import costs more than a small ``pal-opt partition``) and no
:mod:`pathlib`: the names come from the process id and a counter, each created exclusively
(``O_EXCL``: an existing name, or a symbolic link planted there, is skipped).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from ..errors import InputTypeError
from ..options import check_count, file_path, require_text
from ..sigint import SigintDeferred

__all__ = ["atomic_write_text", "atomic_write_bytes", "atomic_write_json", "atomic_write_files", "Content"]

#: An output's content: its bytes, or a function that writes it to the file name it is given
#: (a temporary file with the target's extension, e.g. ``fig.savefig``).
Content = bytes | Callable[[str], None]

_Path = TypeVar("_Path", bound="str | os.PathLike[str]")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line endings) to ``path`` atomically
    (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, require_text(text).encode("utf-8"))


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
    InputTypeError
        ``path`` is not a file path (a str or os.PathLike).
    """
    atomic_write_files({file_path(path): data})


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON (plus a final newline) to ``path`` atomically.

    NaN and infinities are refused (``ValueError``) before anything is written: they are not
    JSON, and pal-opt's own readers reject them.
    """
    if indent is not None:
        check_count(indent, "indent", 0)
    atomic_write_text(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def atomic_write_files(outputs: Mapping[_Path, Content]) -> None:
    """Write every ``{path: content}`` of ``outputs``, all or none (the module docstring).

    Each output is written as :func:`atomic_write_bytes` writes one (same checks, same
    permissions), to temporary files first; they replace their targets, in the order given, only
    once every one is complete.  A ``KeyboardInterrupt`` before then leaves every target as it
    was; one during the renames is raised after them, every target then replaced.

    Raises
    ------
    OSError
        As :func:`atomic_write_bytes`, for any of the paths (nothing written).
    ValueError
        Two paths name the same file.
    """
    if not isinstance(outputs, Mapping):
        raise InputTypeError(f"must map file paths to contents, got {type(outputs).__name__}", path="outputs")
    names = [file_path(p) for p in cast("Iterable[str | os.PathLike[str]]", outputs)]
    for name, content in zip(names, outputs.values(), strict=True):
        if not isinstance(content, bytes) and not callable(content):
            raise InputTypeError(f"must be bytes or a function writing the file, got {type(content).__name__}",
                                 path=f"outputs[{name!r}]")
    targets = [_target(name) for name in names]
    if len({os.path.realpath(t) for t in targets}) < len(targets):
        raise ValueError(f"the same file is given twice among the outputs: {', '.join(names)}")
    temps: list[str] = []
    try:
        for name, target, content in zip(names, targets, outputs.values(), strict=True):
            with SigintDeferred():  # a Ctrl-C between creating the file and recording it would leak it
                temps.append(_create(target, name, ".tmp", _exclusive))
            _render(temps[-1], target, content, name)
    except BaseException:
        _remove(temps)
        raise
    _replace_all(list(zip(temps, targets, names, strict=True)))


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise, before any work, the :class:`OSError` that writing ``path`` would (a directory or
    a device in its place, a directory that does not exist or cannot take a new file): a
    temporary file is created beside it exclusively, as the writers do, and removed."""
    name = file_path(path)
    with SigintDeferred():  # a Ctrl-C between creating the probe and removing it would leak it
        _remove([_create(_target(name), name, ".probe", _exclusive)])


def _target(name: str) -> str:
    """The file ``name`` stands for (a symbolic link followed: replacing it would cut the link),
    checked to be one that can be replaced."""
    target = os.path.realpath(name) if os.path.islink(name) else name
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, "is a directory", name)
    # a device or a FIFO: renaming over it would remove it.  Followed from ``name`` too: /dev/stdout
    # on a pipe is a link to /proc/PID/fd/1, whose target "pipe:[N]" is no path
    if any(os.path.exists(p) and not os.path.isfile(p) for p in (name, target)):
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket); give a file name", name)
    return target


def _exclusive(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _create(target: str, name: str, kind: str, make: Callable[[str], None]) -> str:
    """A new file ``.STEM.PID-N<kind>EXT`` beside ``target``, made by ``make(path)`` (which
    raises ``FileExistsError`` for a name taken); errors name ``name``, the file asked for."""
    directory, base = os.path.split(target)
    stem, ext = os.path.splitext(base)
    for attempt in range(10_000):
        path = os.path.join(directory, f".{stem}.{os.getpid()}-{attempt}{kind}{ext}")
        try:
            make(path)
        except FileExistsError:
            continue
        except OSError as exc:  # name the file the user asked for, not the temporary one
            why = exc.strerror
            if exc.errno == errno.ENOENT:  # "No such file or directory" for /proc/version misled
                where = directory or "."
                why = (f"no new file can be made in {where} ({exc.strerror})" if os.path.isdir(where)
                       else f"directory {where} does not exist")
            raise type(exc)(exc.errno, f"cannot write: {why}", name) from None
        return path
    raise FileExistsError(errno.EEXIST, "cannot write: no free temporary name beside it", name)


def _render(tmp: str, target: str, content: Content, name: str) -> None:
    """Write ``content`` to ``tmp``, sync it and give it the target's permissions (an existing
    target's, else a new file's under the umask).  A write that fails (a full disk, a quota, a
    file size limit) names ``name``, the file asked for: the error of ``write`` or ``fsync`` names
    no file, and that of a writer opening ``tmp`` itself the temporary file."""
    try:
        _write(tmp, content)
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write: {exc.strerror or exc}", name) from None
    with contextlib.suppress(OSError):
        os.chmod(tmp, os.stat(target).st_mode & 0o777 if os.path.exists(target) else 0o666 & ~_umask())


def _write(tmp: str, content: Content) -> None:
    if isinstance(content, bytes):
        with open(tmp, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
    else:
        content(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _replace_all(moves: list[tuple[str, str, str]]) -> None:
    """Rename each ``(temporary, target, name)`` over its target, SIGINT held off; a failed rename
    puts back the targets already replaced (from hard links made first) and removes the rest."""
    with SigintDeferred():
        existed = [os.path.exists(target) for _, target, _ in moves]
        # the last rename needs no way back: nothing is renamed after it
        backups = [_backup(target, name) if old else None
                   for (_, target, name), old in zip(moves[:-1], existed, strict=False)]
        done = 0
        try:
            for tmp, target, name in moves:
                try:
                    os.replace(tmp, target)
                except OSError as exc:
                    raise type(exc)(exc.errno, f"cannot write: {exc.strerror}", name) from None
                done += 1
        except BaseException:
            for (_, target, _), old, backup in reversed(list(zip(moves[:done], existed, backups, strict=False))):
                with contextlib.suppress(OSError):
                    if backup is not None:
                        os.replace(backup, target)
                    elif not old:
                        os.unlink(target)
            _remove(tmp for tmp, _, _ in moves[done:])
            raise
        finally:
            _remove(b for b in backups if b is not None)


def _backup(target: str, name: str) -> str | None:
    """A hard link to ``target`` beside it, or None where the file system makes none."""
    try:
        return _create(target, name, ".bak", lambda path: os.link(target, path))
    except OSError:
        return None


def _remove(paths: Iterable[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m
