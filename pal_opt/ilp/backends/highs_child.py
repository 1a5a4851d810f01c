"""HiGHS's branch-and-cut in a child process, so that a crash inside HiGHS costs one solve, not pal-opt.

Why: highspy 1.13.1 and 1.14.0 end the whole process with a segmentation fault (in
``HEkk::moveLp``, after a presolve restart) on some round programs given a start solution
(``docs/limits.md``, "Known problems"; the round is ``tests/data/highs_crash_round.npz``).  No
Python code can catch that in the process where it happens.  A scheduler's round loop must not
die of it, so :class:`~.highs.HighsBackend` runs each MIP in a child process:

* the children are forked by pal-opt's own fork server (:mod:`.highs_server`), which has
  imported highspy once: never ``fork`` from pal-opt itself, whose solver threads make forking
  unsafe, and not ``multiprocessing``'s forkserver, which would import the caller's
  ``__main__`` in every child.  A solve costs about 6 ms more than in-process (measured on the
  2-core machine on a 4-column program; about 0.1 s more for the first in a process, to start
  the server);
* the program goes to the child as numpy arrays with the options pal-opt set (in order), and the
  answer (status, values, figures, bound) comes back over a socket;
* progress: the child forwards HiGHS's incumbent and bound callbacks, at most every
  :data:`~.highs_run.FORWARD_SECONDS`; Ctrl-C and time-limit stops are one ``"cancel"``
  message per child (stop requests repeat while the solver runs; more messages could fill the
  socket of a child that does not read), on which the child calls ``cancelSolve()``;
* **a crash** (the child ends without answering; the server tells its signal) is logged as a
  warning and the MIP is solved again once, in a new child, with what remains of the time
  limit: without the start solution if it had one (the trigger seen so far), else with the next
  random seed.  A second crash is answered "no solution" (:func:`pal_opt.ilp.solve_ilp` then
  falls back as on a time limit); ``info["highs_crashes"]`` counts them and the message says
  what happened;
* a child still running when the solve is given up (deadline, second Ctrl-C) is killed: its
  pid comes first, and no blocking I/O is done under the lock that :meth:`ChildRun.close`
  takes;
* if no process can be started for the second try, the MIP is solved in pal-opt's process, but
  never again with the start that crashed.

``PAL_OPT_HIGHS_IN_PROCESS=1`` in the environment runs HiGHS in pal-opt's own process again (for
profiling or debugging); so does a platform without ``fork`` (Windows) or a server that could
not start, with a warning once (:func:`start_failed`).  LP relaxations are always solved
in-process: they keep a live model for hot starts and have not crashed.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from typing import Any

import numpy as np

from . import highs_server
from .highs_run import Answer

__all__ = ["ChildRun", "StartFailed", "start_failed", "isolation_enabled"]

log = logging.getLogger(__name__)

#: Environment variable that, set to ``1``, runs HiGHS in pal-opt's own process.
IN_PROCESS_ENV = "PAL_OPT_HIGHS_IN_PROCESS"
#: Below this many seconds left of the time limit, a crashed solve is not tried again.
MIN_RETRY_SECONDS = 0.05

_in_process_only = False


def isolation_enabled() -> bool:
    """Whether MIPs are solved in a child process: unless ``PAL_OPT_HIGHS_IN_PROCESS=1``, or
    starting one has failed before in this process (:func:`start_failed`)."""
    if _in_process_only:
        return False
    return os.environ.get(IN_PROCESS_ENV, "").strip() not in {"1", "true", "yes"}


class StartFailed(Exception):  # noqa: N818 - an event: the caller solves in-process instead
    """No child process could be started here (no ``fork`` on this platform, or the server
    could not be started)."""


class ChildRun:
    """One MIP solved in child processes, with one more try after a crash (see the module).

    ``on_found(incumbent, bound)`` receives forwarded progress (None: none asked for).  Thread
    safety: :meth:`run` runs in the solver helper thread; :meth:`cancel` and :meth:`close` are
    called from the thread that waits for it.
    """

    def __init__(self, arrays: dict[str, Any], start: np.ndarray | None, settings: dict[str, Any],
                 on_found: Any = None, crash_for_test: int = 0):
        self.arrays = arrays
        self.start = start
        self.settings = dict(settings)
        self.on_found = on_found
        self.crash_for_test = crash_for_test
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid: int | None = None
        self._cancelled = False
        self._cancel_sent = False
        self._closed = False
        #: Crashes so far (for an in-process fallback after one: :class:`~.highs.HighsBackend`).
        self.crashes = 0

    def run(self) -> Answer:
        """Solve; after a crash, once more (without the start, else with the next seed)."""
        t0 = time.monotonic()
        first = self._attempt(self.start, self.settings, self.crash_for_test > 0)
        if first.status != "crashed":
            return first
        why = first.message
        with self._lock:
            closed, cancelled = self._closed, self._cancelled
        if closed:  # given up and killed by us: not a crash
            return Answer("crashed", f"the HiGHS process was stopped ({why})", None, None)
        if highs_server.ending():  # pal-opt is ending and its server killed the child
            told = why if "pal-opt is ending" in why else f"the HiGHS process was stopped: pal-opt is ending ({why})"
            return Answer("crashed", told, None, None)
        self.crashes = 1
        limit = self.settings.get("time_limit")
        left = None if limit is None or not math.isfinite(limit) else limit - (time.monotonic() - t0)
        if cancelled or (left is not None and left < MIN_RETRY_SECONDS):
            reason = "the solve was interrupted" if cancelled else "no time is left"
            log.warning("HiGHS crashed (%s); %s, so it is not solved again", why, reason)
            return Answer("crashed", f"HiGHS crashed ({why}); {reason}", None, None, {"highs_crashes": 1})
        settings = dict(self.settings)
        if left is not None:
            settings["time_limit"] = left
        if self.start is not None:
            change = "without the start solution"
        else:
            settings["random_seed"] = int(settings.get("random_seed", 0)) + 1
            change = f"with random_seed {settings['random_seed']}"
        log.warning("HiGHS crashed (%s); solving the program again in a new process, %s", why, change)
        second = self._attempt(None, settings, self.crash_for_test > 1)
        with self._lock:
            closed = self._closed
        if second.status == "crashed" and (closed or highs_server.ending()):
            stopped = "pal-opt is ending" if highs_server.ending() else "the second try was stopped"
            second.message = f"HiGHS crashed ({why}); {stopped}"
            second.info["highs_crashes"] = 1
            return second
        if second.status == "crashed":
            self.crashes = 2
            second.message = f"HiGHS crashed twice ({why}; then {second.message})"
            second.info["highs_crashes"] = 2
            log.warning("%s: no solution from HiGHS for this program", second.message)
            return second
        second.message = f"{second.message} (after HiGHS crashed with the first try: {why}; solved again {change})"
        second.info["highs_crashes"] = 1
        return second

    def _attempt(self, start: np.ndarray | None, settings: dict[str, Any], crash: bool) -> Answer:
        """One child: learn its pid, send it the program, collect its answer.  No blocking I/O
        is done under the lock, so :meth:`close` can always kill the child."""
        with self._lock:
            if self._closed:
                return Answer("crashed", "given up before it started", None, None)
            self._cancel_sent = False
        if highs_server.ending():  # no new server while the process ends: it would outlive it
            return Answer("crashed", "not started: pal-opt is ending", None, None)
        try:
            conn = highs_server.new_child()
        except Exception as exc:
            raise StartFailed(exc) from exc
        try:
            if not conn.poll(highs_server.READY_SECONDS):
                return Answer("crashed", "the HiGHS server did not start a process", None, None)
            _, pid = conn.recv()
            with self._lock:
                self._pid = pid
                closed = self._closed
            if closed:
                self._kill()
                return Answer("crashed", "given up before it started", None, None)
            conn.send(("solve", self.arrays, start, settings, self.on_found is not None, crash))
            with self._lock:  # cancels go out only now, never interleaved with the program
                self._conn = conn
                cancelled = self._cancelled
            if cancelled:
                self._send_cancel()
            return self._collect(conn)
        except (OSError, EOFError) as exc:
            return Answer("crashed", f"lost the HiGHS process ({type(exc).__name__}: {exc})", None, None)
        finally:
            with self._lock:
                self._conn = self._pid = None
            conn.close()

    def _collect(self, conn: Any) -> Answer:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return Answer("crashed", "the HiGHS process ended without answering", None, None)
            kind = message[0]
            if kind == "done":
                answer: Answer = message[1]
                return answer
            if kind == "exit":
                return Answer("crashed", f"{highs_server.describe_exit(message[1])} in the HiGHS process", None, None)
            if kind == "found" and self.on_found is not None:
                self.on_found(message[1], message[2])

    def _send_cancel(self) -> None:
        """Send ``"cancel"`` once per child (a stop is requested again and again while the
        solver runs; one message is enough, and more could fill the socket of a child that does
        not read)."""
        with self._lock:
            conn = self._conn
            if conn is None or self._cancel_sent:
                return
            self._cancel_sent = True
        try:
            conn.send("cancel")  # a few bytes: never blocks on a socket that holds nothing else
        except (OSError, ValueError):
            pass  # the child has ended (or the pipe is closed): nothing to stop

    def cancel(self) -> None:
        """Ask the running child to stop (it answers with its incumbent); no more tries after this."""
        with self._lock:
            self._cancelled = True
        self._send_cancel()

    def close(self) -> None:
        """Kill a child still running (the solve was given up) and start no other."""
        with self._lock:
            self._closed = True
        self._kill()

    def _kill(self) -> None:
        with self._lock:
            pid = self._pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # already ended


def start_failed(exc: BaseException) -> None:
    """Log, once per process, that children cannot be started here; from then on HiGHS runs in
    pal-opt's own process (:func:`isolation_enabled` is False)."""
    global _in_process_only
    if not _in_process_only:
        _in_process_only = True
        log.warning("cannot start a process for HiGHS (%s: %s); solving in pal-opt's own process from now on, "
                    "where a crash inside HiGHS would end it", type(exc).__name__, exc)
