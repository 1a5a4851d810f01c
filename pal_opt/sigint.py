"""A Ctrl-C held off across a short step that must not be cut in two (:class:`SigintDeferred`),
a SIGTERM noted while a child process runs (:class:`SigtermNoted`), and the clean-up a pool
worker runs on SIGTERM before it dies (:func:`clean_up_on_sigterm`, :func:`at_sigterm`).

Used where a ``KeyboardInterrupt`` in the middle would leave a worse state than one just after:
starting the CBC process (:mod:`pal_opt.ilp.backends.cbc`: a CBC nobody could stop) and renaming
a command's outputs into place (:func:`pal_opt.io.atomic.atomic_write_files`: some outputs new,
others old).  The held Ctrl-C is not lost: it is raised as ``KeyboardInterrupt`` when the step
ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["SigintDeferred", "SigtermNoted", "at_sigterm", "clean_up_on_sigterm", "sigterm_clean_up_held"]

#: What a pool worker does on SIGTERM before it dies (:func:`clean_up_on_sigterm`).
_HOOKS: list[Callable[[], None]] = []
#: Sections of :func:`sigterm_clean_up_held` open, and whether a SIGTERM waits for them to end.
_held = 0
_sigterm_waiting = False


class SigintDeferred:
    """While the ``with`` block runs, a SIGINT is held back; it is raised as
    ``KeyboardInterrupt`` once the block has ended without an exception of its own (after an
    exception, that exception propagates and the held Ctrl-C is dropped).

    Only in the main thread (where Python runs signal handlers) and only over a Python-level
    handler: with SIGINT ignored (``nohup``) or at its default action, or in another thread,
    it changes nothing.  ``pending`` says whether a SIGINT arrived.
    """

    def __init__(self) -> None:
        self.pending = False
        self.saved: Any = None

    def __enter__(self) -> SigintDeferred:
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGINT)
            if callable(handler):
                self.saved = handler
                signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: object) -> None:
        self.pending = True

    def __exit__(self, *exc: object) -> None:
        if self.saved is not None:
            signal.signal(signal.SIGINT, self.saved)
        if self.pending and exc[0] is None:
            raise KeyboardInterrupt


class SigtermNoted:
    """While the ``with`` block runs, a SIGTERM only sets ``pending``; the block polls it, stops
    its child process, and calls :meth:`die`, which ends this process by SIGTERM as the default
    action would have.

    For a step that waits on a child in a Python loop (CBC, :mod:`pal_opt.ilp.backends.cbc`):
    SIGTERM's default action (``timeout``, ``kill``, a Kubernetes pod stopping) would end pal-opt
    at once and leave the child running, and its files behind, until its own time limit.  Only in
    the main thread and only over the default action: a handler someone installed, or SIGTERM
    ignored, is left alone, and then this changes nothing.
    """

    def __init__(self) -> None:
        self.pending = False
        self.installed = False

    def __enter__(self) -> SigtermNoted:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self._note)
            self.installed = True
        return self

    def _note(self, signum: int, frame: object) -> None:
        self.pending = True

    def __exit__(self, *exc: object) -> None:
        if self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            self.installed = False

    def die(self) -> None:
        """End the process by SIGTERM, its default action restored (what would have happened
        without this guard, only later).  A process the signal cannot end so (PID 1 of a
        container: the kernel drops a default-action signal it sends itself) exits with status
        143, the shell's code for death by SIGTERM: it was asked to stop, and what it was doing
        is gone."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        os._exit(128 + signal.SIGTERM)  # only reached where the signal did not end the process


def at_sigterm(hook: Callable[[], None]) -> None:
    """Register ``hook`` (idempotent) to run in a process set up by :func:`clean_up_on_sigterm`
    when SIGTERM comes: CBC's module kills the CBCs it started and removes their directories."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def clean_up_on_sigterm() -> None:
    """The initializer of pal-opt's pool workers (:func:`pal_opt.parallel.make_executor`): on
    SIGTERM (the parent's :meth:`~pal_opt.parallel.ExecutorHandle.results` sends it when it is
    itself terminated) the hooks of :func:`at_sigterm` run, then the worker dies of SIGTERM.

    The default action would end the worker at once, whatever it was doing: while it wrote a
    CBC model, or read CBC's solution, its files stayed behind; while CBC ran (outside
    :class:`SigtermNoted`'s reach, since a worker's task may be anywhere in its solve), CBC ran on.
    """
    signal.signal(signal.SIGTERM, _clean_up_and_die)


@contextlib.contextmanager
def sigterm_clean_up_held() -> Iterator[None]:
    """A step that makes something the clean-up must know of (a directory, a process) and then
    records it: a pool worker's SIGTERM that comes inside waits for the step's end (the record
    made), then cleans up and dies.  Elsewhere (no :func:`clean_up_on_sigterm`) a no-op.

    Without it, a SIGTERM between ``mkdir`` and the record left the directory behind, and one
    between CBC's ``fork`` and the record left CBC running (found by review)."""
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if _held == 0 and _sigterm_waiting:
            _clean_up_and_die(signal.SIGTERM, None)


def _clean_up_and_die(signum: int, frame: object) -> None:
    global _sigterm_waiting
    if _held:  # inside sigterm_clean_up_held: its end does this
        _sigterm_waiting = True
        return
    for hook in list(_HOOKS):
        try:
            hook()
        except Exception:  # noqa: BLE001,S110 - dying anyway: one failed clean-up must not stop the others
            pass
    SigtermNoted().die()
