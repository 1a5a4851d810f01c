"""The fork server that starts HiGHS's child processes (:mod:`.highs_child`).

Forking pal-opt itself is unsafe once solver threads exist in it, and starting a fresh
interpreter per solve costs a few tenths of a second.  ``multiprocessing``'s forkserver would do,
but it imports the caller's ``__main__`` in every child: a scheduler's script without an
``if __name__ == "__main__":`` guard would run again there.  So pal-opt keeps a server of its own:

* one per pal-opt process, started when the first MIP is translated (so that its time limit
  does not pay for it): ``python -c`` with pal-opt's own directory first on ``sys.path`` and
  the caller's entries made absolute, in a session of its own (a Ctrl-C at the terminal is
  pal-opt's to act on), importing numpy, highspy and :mod:`.highs_run` once (0.1-0.3 s), then
  writing one byte to say it is ready: a server that fails to start (its error goes to standard
  error) raises :class:`OSError` here, and HiGHS runs in-process from then on;
* for each solve pal-opt makes a socket pair and passes one end to the server over the control
  socket (``SCM_RIGHTS``); the server forks, sends ``("pid", pid)`` on that end (so that pal-opt
  can kill the child whatever it is doing), and the child (:func:`.highs_run.child_main`),
  which holds no other solve's socket, talks to pal-opt over it with
  ``multiprocessing.connection`` messages (pickled);
* the server reaps its children and, for one that did not exit with status 0, sends
  ``("exit", status)`` on the child's socket: pal-opt learns that it crashed, and of which signal;
* it ends when pal-opt does (the control socket reads end-of-file), killing and reaping the
  children still running first; pal-opt waits for it at exit (:func:`stop_server`), so no
  HiGHS process outlives pal-opt.  A process forked from pal-opt forgets its parent's server
  (``os.register_at_fork``) and starts its own.

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

__all__ = ["new_child", "describe_exit", "serve", "stop_server", "ending"]


#: Seconds the server may take to import highspy and say it is ready.
READY_SECONDS = 60.0
#: Seconds the server may take to end once pal-opt has closed its control socket, before it is
#: killed.  One in its loop ends in milliseconds; one still importing HiGHS is killed.
STOP_SECONDS = 1.0


def _server_path() -> list[str]:
    """``sys.path`` for the server: the directory pal-opt is imported from first, then this
    process's entries made absolute (``''`` is the working directory, which the server shares
    now but a relative entry would not mean the same after a ``chdir``)."""
    import pal_opt

    home = os.path.dirname(os.path.dirname(os.path.abspath(pal_opt.__file__)))
    rest = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    return [home, *(p for p in rest if p != home)]


class _Server:
    """pal-opt's side of the server: its process and control socket (guarded by ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        #: Set when this process is ending (``atexit``, or the CLI before ``os._exit``): a solve
        #: still running in another thread then loses its child to the stop, not to a crash.
        self.ending = False

    def running(self) -> bool:
        return self.control is not None and self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the server and wait until it has imported HiGHS and says so; raise OSError if it
        does not (its own error is on standard error)."""
        self.discard()
        ours, theirs = socket.socketpair()
        code = (f"import sys; sys.path[:0] = {_server_path()!r}; "
                f"from pal_opt.ilp.backends.highs_server import serve; serve({theirs.fileno()})")
        try:
            # a session of its own: a Ctrl-C at the terminal is pal-opt's to act on, never the server's
            self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()],
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        self.control = ours
        ours.settimeout(READY_SECONDS)
        try:
            ready = ours.recv(1)
        except OSError as exc:
            self.discard()
            raise OSError(f"the HiGHS server did not start ({exc})") from None
        if ready != b"R":
            self.discard()
            raise OSError("the HiGHS server ended while starting (its error is above)")
        ours.settimeout(None)

    def discard(self) -> None:
        """Close the control socket (a running server reads end-of-file, kills and reaps its
        children, and ends), wait for the server to end (killed after :data:`STOP_SECONDS`: one
        still importing HiGHS reads nothing until it is done) and forget it."""
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc)
                self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        """End the server and its children before this process ends.  A thread that was given up
        on (a second Ctrl-C) may hold the lock while it starts the server: then the server is
        killed without it."""
        if self.lock.acquire(timeout=STOP_SECONDS):
            try:
                self.discard()
            finally:
                self.lock.release()
            return
        proc = self.proc
        if proc is not None and proc.poll() is None:
            _kill_group(proc)

    def reset_after_fork(self) -> None:
        """In a process forked from this one: the server is the parent's (its socket is closed
        here, the parent keeps its own) and the lock may have been held at the fork."""
        self.lock = threading.Lock()
        self.ending = False
        if self.control is not None:
            self.control.close()
        self.control = None
        self.proc = None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the server and its children: they share its process group (it leads a session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # pragma: no cover - ended meanwhile
        proc.kill()


_SERVER = _Server()


def stop_server(*, ending: bool = False) -> None:
    """End the server, if one runs, and every child of it, and wait until they have ended (a
    later solve starts a new server).

    With ``ending`` this process is ending: at exit (``atexit``), and in the CLI before it ends
    with ``os._exit`` (when a solver thread was given up on, or under ``--time-limit``), where
    ``atexit`` does not run.  A solve still running in another thread (a daemon thread of a
    scheduler) then ends as stopped, not as a HiGHS crash to be solved again."""
    if ending:
        _SERVER.ending = True
    _SERVER.stop()


def ending() -> bool:
    """Whether this process is ending (:func:`stop_server` with ``ending``)."""
    return _SERVER.ending


atexit.register(stop_server, ending=True)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SERVER.reset_after_fork)


def _check_platform() -> None:
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        raise OSError("this platform cannot fork a child for HiGHS")


def ensure_started() -> None:
    """Start the server now if it is not running (so that the first solve's time limit does not
    pay for it); OSError if it cannot be."""
    _check_platform()
    if _SERVER.ending:  # a server started now would outlive this process
        return
    with _SERVER.lock:
        if not _SERVER.running():
            _SERVER.start()


def new_child() -> Connection:
    """A connection to a new child of the server (started, or restarted if it has died); the
    first message on it is ``("pid", pid)`` from the server."""
    _check_platform()
    ours, theirs = socket.socketpair()
    try:
        with _SERVER.lock:
            for attempt in (1, 2):
                if not _SERVER.running():
                    _SERVER.start()
                assert _SERVER.control is not None
                try:
                    socket.send_fds(_SERVER.control, [b"c"], [theirs.fileno()])
                    break
                except OSError:
                    _SERVER.discard()
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
    """The server's loop (in its own process): say ready, then fork a child for every socket
    received, tell pal-opt its pid, reap children, report the ones that did not end well.  It
    ends quietly when pal-opt has ended (its control socket closed), also while starting: a
    pal-opt killed while its server imported HiGHS left a ``BrokenPipeError`` traceback on the
    terminal.  It ends with ``os._exit(0)``, without the interpreter's teardown."""
    try:
        _serve(control_fd)
    except (BrokenPipeError, ConnectionResetError):
        pass  # pal-opt has ended: there is no one to tell
    # Skip the interpreter's teardown (0.1-0.2 s with numpy and highspy loaded, measured with
    # strace): pal-opt waits for this process at exit (stop_server), also under --time-limit.
    sys.stderr.flush()
    os._exit(0)


def _serve(control_fd: int) -> None:
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
    control.sendall(b"R")
    while True:
        for key, _ in sel.select():
            if key.fileobj is control:
                msg, fds, _, _ = socket.recv_fds(control, 16, 1)
                if not msg:  # pal-opt has ended or is ending: no one will read a child's answer
                    _end_children(children)
                    return
                sock = socket.socket(fileno=fds[0])
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    control.close()
                    for sibling in children.values():  # never hold another solve's socket open
                        sibling.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(wake_r)
                    os.close(wake_w)
                    _run_child(child_main, sock)
                children[pid] = sock
                _send(sock, ("pid", pid))
            else:
                os.read(wake_r, 4096)
                _reap(children)


def _send(sock: socket.socket, message: Any) -> None:
    """Send ``message`` on a copy of ``sock`` (a child's: pal-opt reads it)."""
    try:
        Connection(os.dup(sock.fileno())).send(message)
    except OSError:
        pass  # pal-opt no longer listens to this child


def _run_child(child_main: Any, sock: socket.socket) -> None:
    try:
        child_main(Connection(sock.detach()))
    finally:
        os._exit(1)  # child_main leaves with os._exit(0); anything else is a failure


def _end_children(children: dict[int, socket.socket]) -> None:
    """Kill the children still running and wait for them, so that none outlives the server (and
    pal-opt, which waits for the server)."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - ended and not reaped yet: a zombie
            pass
    for pid, sock in children.items():
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # pragma: no cover - reaped already
            pass
        sock.close()
    children.clear()


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
            _send(sock, ("exit", status))
        sock.close()
