"""The fork server that starts HiGHS's child processes (:mod:`.highs_child`).

Forking pal-opt itself is unsafe once solver threads exist in it, and starting a fresh
interpreter per solve costs a few tenths of a second.  ``multiprocessing``'s forkserver would do,
but it imports the caller's ``__main__`` in every child: a scheduler's script without an
``if __name__ == "__main__":`` guard would run again there.  So pal-opt keeps a server of its own:

* one per pal-opt process, started on the first MIP: ``python -c`` with pal-opt's ``sys.path``,
  importing numpy, highspy and :mod:`.highs_run` once (about 0.1 s), single-threaded, ignoring
  SIGINT (Ctrl-C is pal-opt's to act on);
* for each solve pal-opt makes a socket pair and passes one end to the server over the control
  socket (``SCM_RIGHTS``); the server forks, and the child (:func:`.highs_run.child_main`)
  talks to pal-opt over that end with ``multiprocessing.connection`` messages (pickled);
* the server reaps its children and, for one that did not exit with status 0, sends
  ``("exit", status)`` on the child's socket: pal-opt learns that it crashed, and of which signal;
* it ends when pal-opt does (the control socket reads end-of-file).

Unix only (``os.fork``, ``socket.send_fds``); elsewhere :func:`new_child` raises and HiGHS runs
in-process.
"""

from __future__ import annotations

import atexit
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["new_child", "describe_exit", "serve"]


class _Server:
    """pal-opt's side of the server: its process and control socket (guarded by ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None

    def start(self) -> None:
        ours, theirs = socket.socketpair()
        code = (f"import sys; sys.path[:0] = {sys.path!r}; "
                f"from pal_opt.ilp.backends.highs_server import serve; serve({theirs.fileno()})")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.control = ours

    def stop(self) -> None:
        with self.lock:
            if self.control is not None:
                self.control.close()  # the server reads end-of-file and ends
                self.control = None
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                self.proc = None


_SERVER = _Server()
atexit.register(_SERVER.stop)


def new_child() -> Connection:
    """A connection to a new child of the server (started, or restarted if it has died)."""
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        raise OSError("this platform cannot fork a child for HiGHS")
    ours, theirs = socket.socketpair()
    try:
        with _SERVER.lock:
            for attempt in (1, 2):
                if _SERVER.control is None or (_SERVER.proc is not None and _SERVER.proc.poll() is not None):
                    _SERVER.start()
                assert _SERVER.control is not None
                try:
                    socket.send_fds(_SERVER.control, [b"c"], [theirs.fileno()])
                    break
                except OSError:
                    _SERVER.control.close()
                    _SERVER.control = None
                    if attempt == 2:
                        raise
    finally:
        theirs.close()
    return Connection(ours.detach())


def describe_exit(status: int) -> str:
    """A wait status, in words: ``SIGSEGV``, ``exit status 1``."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"
    return f"exit status {os.WEXITSTATUS(status)}"


def serve(control_fd: int) -> None:
    """The server's loop (in its own process): fork a child for every socket received, reap
    children, report the ones that did not end well."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import highspy  # noqa: F401 - loaded once, before forking

    from .highs_run import child_main

    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is control:
                msg, fds, _, _ = socket.recv_fds(control, 16, 1)
                if not msg:
                    return  # pal-opt has ended; children see end-of-file on their sockets and stop
                sock = socket.socket(fileno=fds[0])
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    control.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(wake_r)
                    os.close(wake_w)
                    _run_child(child_main, sock)
                children[pid] = sock
            else:
                os.read(wake_r, 4096)
                _reap(children)


def _run_child(child_main: Any, sock: socket.socket) -> None:
    try:
        child_main(Connection(sock.detach()))
    finally:
        os._exit(1)  # child_main leaves with os._exit(0); anything else is a failure


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = children.pop(pid, None)
        if sock is None:
            continue
        if status != 0:
            try:
                Connection(os.dup(sock.fileno())).send(("exit", status))
            except OSError:
                pass  # pal-opt no longer listens to this child
        sock.close()
