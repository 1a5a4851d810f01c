"""Process and interrupt helpers for the interrupt tests (Linux /proc)."""

from __future__ import annotations

import _thread
import gc
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _multiprocessing_helper(pid: int) -> bool:
    """multiprocessing's forkserver and resource tracker: started by the first process pool in
    this process (``pal_opt.parallel``), they live as long as it does, by design."""
    cmdline = _cmdline(pid)
    return b"multiprocessing.forkserver" in cmdline or b"multiprocessing.resource_tracker" in cmdline


def _highs_server(pid: int) -> bool:
    """The fork server of HiGHS's child processes (``pal_opt.ilp.backends.highs_server``),
    started by the first HiGHS MIP in this process and living as long as it does, by design."""
    return b"pal_opt.ilp.backends.highs_server" in _cmdline(pid)


def own_children(settle: float = 2.0) -> list[int]:
    """Solver processes of this process still alive: its direct children other than the
    long-lived helpers (multiprocessing's, HiGHS's fork server), and the HiGHS children of that
    server.  A child that has just answered may take a moment to end: waited for up to
    ``settle`` seconds."""
    give_up = time.monotonic() + settle
    while True:
        direct = children(os.getpid())
        found = [pid for pid in direct if not _multiprocessing_helper(pid) and not _highs_server(pid)]
        for server in filter(_highs_server, direct):
            found += children(server)
        if not found or time.monotonic() >= give_up:
            return found
        time.sleep(0.05)


def cbc_dirs() -> set[str]:
    """Names of the CBC backend's temporary directories that exist now."""
    return {p.name for p in Path(tempfile.gettempdir()).glob("pal_opt_cbc_*")}


def solver_threads() -> list[threading.Thread]:
    """Helper threads still running a solver call."""
    return [t for t in threading.enumerate() if t.name == "pal-opt-solver" and t.is_alive()]


def interrupt_when_solving(monkeypatch, backend: str, after: float, times: int = 1,  # type: ignore[no-untyped-def]
                           apart: float = 0.3) -> dict[str, float]:
    """Patch the backend so that ``after`` seconds into its ``solve`` the main thread gets a
    KeyboardInterrupt (``times`` of them, ``apart`` seconds apart, none once the solve has
    returned), what a SIGINT does.  Returns a dict that receives the time of the first one."""
    from pal_opt.ilp.backends import BACKENDS

    cls = BACKENDS[backend]
    orig = cls.solve
    sent: dict[str, float] = {}
    returned = threading.Event()

    def fire() -> None:
        for k in range(times):
            if returned.is_set():  # a Ctrl-C after the solve would land in whatever runs next (pytest)
                return
            if k == 0:
                sent["at"] = time.monotonic()
            _thread.interrupt_main()
            time.sleep(apart)

    def solve_with_timer(self, *a, **k):  # type: ignore[no-untyped-def]
        timer = threading.Timer(after, fire)
        timer.daemon = True
        timer.start()
        try:
            return orig(self, *a, **k)
        finally:
            returned.set()

    monkeypatch.setattr(cls, "solve", solve_with_timer)
    return sent
def sigint_default() -> None:
    """Child pre-exec: SIGINT at its default action (see :func:`popen`)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def popen(args: Sequence[str], *, sigint_ignored: bool = False, **kwargs: Any) -> subprocess.Popen[str]:
    """``subprocess.Popen(args, text=True, stdout=PIPE, stderr=PIPE, **kwargs)`` for a child that a
    test signals: it starts with SIGINT at its default action (Python then installs its
    ``KeyboardInterrupt`` handler), or ignored with ``sigint_ignored=True``, whatever this process
    inherited.

    ``exec`` keeps an ignored signal ignored, so a test run started with SIGINT ignored (``nohup``,
    ``trap '' INT``, a background job of a non-interactive shell) would otherwise hand that on
    and the child would never see the test's SIGINT.  The disposition is set in the child
    between ``fork`` and ``exec`` (``preexec_fn``: the only Python code run there).
    """
    opts: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kwargs}
    return subprocess.Popen(args, preexec_fn=_sigint_ignored if sigint_ignored else sigint_default, **opts)


def sigint_ignored(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (its ``SigIgn`` mask in ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    raise ValueError(f"no SigIgn line for process {pid}")  # pragma: no cover


#: Where Linux reports a thread's scheduler statistics.
SCHEDSTAT = Path("/proc/thread-self/schedstat")


def waited_for_a_core() -> float:
    """Seconds the calling thread has spent runnable but waiting for a core (the second field of
    ``/proc/thread-self/schedstat``, in ns); 0 where the kernel does not report it."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def timed(call: Any) -> tuple[Any, float, float]:
    """``call()``, its wall time, and how much of it the calling thread waited for a core (on a
    loaded machine, such as two pytest-xdist workers on two cores, time after a deadline that
    no time limit can help).

    The garbage collector is held off during the call: late in the whole suite the heap is large,
    and a full collection inside the call (seconds there) is not pal-opt's time to answer.  One CI
    run saw 1.17 s for a 0.5 s deadline with no wait for a core."""
    gc.disable()
    try:
        w0, t0 = waited_for_a_core(), time.monotonic()
        out = call()
        wall = time.monotonic() - t0
    finally:
        gc.enable()
    return out, wall, waited_for_a_core() - w0
