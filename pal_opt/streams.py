"""Standard output and error to a reader that may go away: ``pal-opt solve ... | head -2``.

:class:`PipeSafe` wraps ``sys.stdout`` and ``sys.stderr`` while a block runs so that, once the
reader of the pipe they write to has left, the rest of what is printed is dropped quietly
instead of ending the program with ``BrokenPipeError``.  :func:`pal_opt.cli.main` runs in one,
and so do the scripts of ``examples/`` (``python examples/scheduler_loop.py | head``)::

    from pal_opt.streams import PipeSafe

    if __name__ == "__main__":
        with PipeSafe():
            main()
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["ReaderMayLeave", "PipeSafe"]


class ReaderMayLeave:
    """``sys.stdout`` or ``sys.stderr`` inside a :class:`PipeSafe` block (all of
    :func:`pal_opt.cli.main`): once the reader of the pipe it writes to has gone away (``pal-opt
    solve ... | head -2``), the rest of what is printed is dropped quietly and the command carries
    on, so its files are still written and its exit status is its own.  Before, the first print that found the pipe closed ended the command
    with exit 1 (documented as no answer), or not, depending on who came first; and an output
    file written after the printing was not written at all.

    A write that fails otherwise (a full disk, ``> /dev/full``, an I/O error) is handled alike:
    the rest is dropped and the command carries on, and the error is kept in :attr:`lost` for
    the end (``pal-opt`` then says so in one line and exits 2; :class:`PipeSafe` raises it
    for standard output as it ends).  Before, it ended the command part way with that error, or,
    once the command was done, at the last flush, in two tracebacks and exit status 120.

    Everything but writing is the stream's (``isatty``, ``fileno``, ``encoding``...).
    """

    def __init__(self, stream: Any):
        self.stream = stream
        #: The first write error other than a reader gone away, or None.
        self.lost: OSError | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        try:
            n = self.stream.write(text)  # a caller's file-like object may return None
            return len(text) if n is None else int(n)
        except BrokenPipeError:
            self.reader_left()
        except OSError as exc:
            self._lose(exc)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self.reader_left()
        except OSError as exc:
            self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        if self.lost is None:
            self.lost = exc
        self.reader_left()

    def reader_left(self) -> None:
        """Point the stream's file descriptor at ``/dev/null``: what is still buffered, and what
        comes, goes there (and Python's last flush at exit finds nothing to complain about)."""
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self.stream.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):  # pragma: no cover - not a file: nothing buffered for it
            pass


class PipeSafe:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` are :class:`ReaderMayLeave`; at
    its end they are flushed (a reader gone still quietly) and put back, and a write to standard
    output that failed otherwise (its :attr:`~ReaderMayLeave.lost`) is raised, an ``OSError``
    naming ``standard output``, unless the block failed (a failed write to standard error has
    nowhere to be told).  A ``sys.exit(0)`` (argparse's ``--help``) is no failure: its output
    was lost all the same."""

    def __enter__(self) -> PipeSafe:
        self._saved = (sys.stdout, sys.stderr)
        # None (started with the descriptor closed, ``>&-``): print() then writes nothing, as before
        sys.stdout, sys.stderr = (s if s is None else ReaderMayLeave(s)  # type: ignore[misc]
                                  for s in (sys.stdout, sys.stderr))
        return self

    def __exit__(self, *exc: object) -> None:
        for wrapped in (sys.stdout, sys.stderr):
            if isinstance(wrapped, ReaderMayLeave):
                wrapped.flush()
        out = sys.stdout
        sys.stdout, sys.stderr = self._saved
        if isinstance(out, ReaderMayLeave) and out.lost is not None and _succeeded(exc[1]):
            raise lost_output(out.lost)


def _succeeded(exc: object) -> bool:
    """Whether a block that raised ``exc`` (None: none) ended as one that did its work."""
    return exc is None or (isinstance(exc, SystemExit) and exc.code in (0, None))


def lost_output(exc: OSError) -> OSError:
    """``exc``, a failed write to standard output, as an error naming it."""
    return OSError(exc.errno, f"cannot write: {exc.strerror or exc}; the rest of the output was dropped",
                   "standard output")
