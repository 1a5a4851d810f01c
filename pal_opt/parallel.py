"""Where independent tasks run: a local process pool by default, or a Dask cluster.

The partitioned solver (:func:`pal_opt.ilp.partition.solve_partitioned`) and the benchmark
sweeps (``benchmarks/suite.py``) submit independent, picklable tasks to a
:class:`concurrent.futures.Executor`.  :func:`make_executor` returns one:

* ``None`` (default): a local :class:`~concurrent.futures.ProcessPoolExecutor` with
  ``workers`` processes (default: the number of CPUs), started with the ``forkserver`` method
  where available (``spawn`` elsewhere; never ``fork``, which is unsafe once solver threads
  exist in the parent).  ``max_tasks_per_child=1`` gives every task a fresh process.  Its
  workers clean up before they die of SIGTERM (:func:`~pal_opt.sigint.clean_up_on_sigterm`),
  and :meth:`ExecutorHandle.results` sends them one when this process is sent one;
* ``"serial"``: tasks run in the calling process, one after the other (:class:`SerialExecutor`);
* a scheduler address (``"tcp://host:8786"``), a ``dask.distributed.Client`` or a
  ``LocalCluster``: the tasks go to that Dask cluster through ``Client.get_executor``.  Dask is
  an optional extra (``pip install 'pal-opt[dask]'``); it is imported only here and only then,
  and a missing install raises :class:`~pal_opt.errors.BackendUnavailableError` saying so;
* an existing :class:`concurrent.futures.Executor`: used as it is (the caller closes it).

Use it as a context manager: executors it created are shut down (and Dask clients it opened
closed) on exit; executors handed in are left running.  Left on an exception, the tasks not yet
started are cancelled; on a ``KeyboardInterrupt`` (Ctrl-C) a local pool's workers are stopped too.

Peak memory of a task
---------------------
:func:`measure_peak` runs a callable and reports the peak resident set size (RSS) reached
while it ran.  On Linux it resets the kernel's high-water mark first (writing ``5`` to
``/proc/self/clear_refs``) and reads ``VmHWM`` from ``/proc/self/status`` afterwards, so the
figure belongs to this task even in a long-lived worker, as long as the worker runs one task
at a time (process pools do; give Dask workers one thread each).  Where the reset is not
possible it falls back to ``ru_maxrss``, which is then only meaningful in a fresh process
(``max_tasks_per_child=1``); the ``method`` field says which was used.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import multiprocessing.util as mp_util
import os
import re
import resource
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool  # a submodule: cf.process exists only once imported
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import BackendError, BackendUnavailableError, OptionError
from .options import check_callbacks
from .sigint import SigtermNoted, clean_up_on_sigterm

__all__ = [
    "SerialExecutor",
    "make_executor",
    "ExecutorHandle",
    "as_completed_indexed",
    "PeakMemory",
    "measure_peak",
    "current_rss",
    "remove_pool_directory",
]

T = TypeVar("T")

ExecutorSpec = Any  # None | "serial" | address str | dask Client | dask cluster | cf.Executor

#: Seconds between looks at a SIGTERM while waiting on a local pool's tasks.
WAIT_POLL_SECONDS = 0.1
#: Seconds a local pool's workers get to end after SIGTERM (a worker's CBC is killed, its
#: directory removed) before they are killed.
STOP_GRACE_SECONDS = 5.0


class SerialExecutor(cf.Executor):
    """Runs each submitted call at once in the calling process (a ``concurrent.futures`` executor)."""

    def __init__(self) -> None:
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:  # type: ignore[override]
        if self._shutdown:
            raise RuntimeError("cannot submit after shutdown")
        fut: cf.Future[T] = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - delivered through the future, as a pool would
            fut.set_exception(exc)
        # KeyboardInterrupt (Ctrl-C) and SystemExit propagate at once: the calls not yet
        # submitted are then never run, as with a pool that is shut down
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True


@dataclass
class ExecutorHandle:
    """An executor plus what to close when done (context manager).

    Attributes
    ----------
    executor
        The :class:`concurrent.futures.Executor` to submit to.
    kind
        ``"serial"``, ``"process"``, ``"dask"`` or ``"external"``.
    workers
        Number of parallel workers (Dask: at the time of creation), for information.
    owned
        Whether :meth:`close` shuts the executor down.
    """

    executor: cf.Executor
    kind: str
    workers: int
    owned: bool = True
    _client: Any = None

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:
        future = self.executor.submit(fn, *args, **kwargs)
        if self.kind == "process":  # the pool has started: its directory, for remove_pool_directory
            _POOL_DIRS.add(mp_util.get_temp_dir())
        return future

    def results(self, futures: Sequence[cf.Future[Any]],
                on_done: Callable[[list[bool]], None] | None = None) -> list[Any]:
        """The futures' results, in order (a task's error is re-raised).

        ``on_done``, if given, is called in this thread with whether each future is done (in
        order): once as the wait starts, then each time more of them are done, last with every
        one done (unless the wait was interrupted).  It is the tasks' progress, counted in tasks.

        On a local process pool this module created, the wait is one where a SIGTERM
        (``timeout``, ``kill``, a Kubernetes pod stopping) is noted
        (:class:`~pal_opt.sigint.SigtermNoted`: main thread, over the default action): the pool's
        workers are sent SIGTERM too (a worker's CBC dies with it and its directory is removed),
        then this process dies of SIGTERM as its default action would have had it.  Before, the
        workers and their solvers ran on to their time limits after pal-opt had gone.

        Raises
        ------
        BackendError
            A worker of a local process pool that died (``BrokenProcessPool``, as its cause):
            killed, out of memory, or a script without the ``if __name__ == "__main__":`` guard,
            whose workers each import it and start a pool of their own.
        InputTypeError
            ``on_done`` neither None nor callable (before any wait)."""
        check_callbacks(on_done=on_done)
        if self.kind == "process" and self.owned:
            with SigtermNoted() as term:
                _wait_all(futures, on_done, lambda: term.pending)
                if term.pending:
                    self._stop_workers()
                    self.executor.shutdown(wait=True, cancel_futures=True)
                    remove_pool_directory()  # exit handlers will not run
                    term.die()
        elif on_done is not None:
            _wait_all(futures, on_done, lambda: False)
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool as exc:
            if self.kind != "process":
                raise
            raise BackendError(
                "a worker process of the local pool died before it returned (killed, out of memory, or a script "
                "without the `if __name__ == \"__main__\":` guard: each worker imports the main module, which then "
                "starts a pool of its own); guard the script's entry point, or give executor='serial'") from exc

    def _stop_workers(self) -> None:
        """SIGTERM to the local pool's workers; SIGKILL to those not gone within
        :data:`STOP_GRACE_SECONDS`."""
        # ProcessPoolExecutor has no public way to stop its workers before Python 3.14
        # (terminate_workers); its ``_processes`` map is the one handle on them
        terminate = getattr(self.executor, "terminate_workers", None)
        if terminate is not None:
            terminate()
            return
        procs = list((getattr(self.executor, "_processes", None) or {}).values())
        for proc in procs:
            proc.terminate()
        end = time.monotonic() + STOP_GRACE_SECONDS
        for proc in procs:
            proc.join(max(end - time.monotonic(), 0.0))
            if proc.is_alive():
                proc.kill()

    def close(self, *, cancel: bool = False, stop: bool = False) -> None:
        """Shut down what :func:`make_executor` created (no-op for executors handed in).

        ``cancel``: the tasks not yet started are cancelled (else they all run first); ``stop``
        (a local pool): its workers are sent SIGTERM, so the running tasks end too."""
        if not self.owned:
            return
        if stop and self.kind == "process":
            self._stop_workers()
        if self.kind == "dask":  # Dask's executor has no cancel_futures: wait=False cancels
            self.executor.shutdown(wait=not (cancel or stop))
        else:
            self.executor.shutdown(wait=True, cancel_futures=cancel or stop)
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> ExecutorHandle:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        # left on an error, the tasks not started are not run; on a Ctrl-C
        # (KeyboardInterrupt) the running ones are stopped as well.  Before, ``shutdown(wait=True)``
        # ran every queued task first: a Ctrl-C of ``benchmarks/suite.py`` ran the rest of the
        # sweep without a word, and a second one left the process hanging
        self.close(cancel=exc_type is not None,
                   stop=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))


#: multiprocessing's directories of the pools this process made (:func:`remove_pool_directory`).
_POOL_DIRS: set[str] = set()


def remove_pool_directory() -> None:
    """Remove the directory multiprocessing made for this process's pools (its forkserver's
    socket), for a process that ends with ``os._exit`` (:func:`pal_opt.cli.run`), where
    multiprocessing's own exit handler does not run.  No pool can start after this."""
    for path in _POOL_DIRS:
        shutil.rmtree(path, ignore_errors=True)


def _mp_context() -> Any:
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


#: Seconds to wait for a Dask scheduler to answer before giving up.
CONNECT_SECONDS = 10.0


def _dask_client(spec: Any, timeout: float = CONNECT_SECONDS) -> tuple[Any, bool]:
    """A ``distributed.Client`` for ``spec`` (waiting at most ``timeout`` s to connect) and whether
    we opened it."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise BackendUnavailableError(
            "running on a Dask cluster needs dask.distributed, which is not installed "
            f"({exc}); install it with: pip install 'pal-opt[dask]'"
        ) from None
    if isinstance(spec, Client):
        return spec, False
    address = spec if isinstance(spec, str) else getattr(spec, "scheduler_address", None)
    if not isinstance(address, str):
        raise OptionError(f"cannot make a Dask client from {type(spec).__name__}")
    try:
        return Client(address, timeout=timeout), True
    except (OSError, ValueError) as exc:  # unreachable (a TimeoutError is an OSError), or a bad address
        raise OptionError(f"cannot reach the Dask scheduler at {address!r} within {timeout:.3g} s: "
                          f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def make_executor(
    spec: ExecutorSpec = None,
    *,
    workers: int | None = None,
    max_tasks_per_child: int | None = None,
    connect_timeout: float | None = None,
) -> ExecutorHandle:
    """An executor for independent tasks (see the module docstring).

    Parameters
    ----------
    spec
        ``None`` (local process pool), ``"serial"``, a Dask scheduler address, a Dask
        ``Client`` or cluster object (anything with ``scheduler_address``), or an existing
        :class:`concurrent.futures.Executor` (wrapped, not owned).
    workers
        Processes of the local pool (default: ``os.cpu_count()``).  Ignored otherwise.
    max_tasks_per_child
        Local pool only: restart a worker after this many tasks (1 = a fresh process per task).
    connect_timeout
        A Dask address or cluster only: seconds to wait for its scheduler (default
        :data:`CONNECT_SECONDS`; a solve under a time limit passes what its limit leaves).

    Returns
    -------
    ExecutorHandle

    Raises
    ------
    BackendUnavailableError
        A Dask address or object was given but ``dask.distributed`` is not installed.
    OptionError
        For a spec of an unknown kind or a bad worker count.

    Examples
    --------
    >>> with make_executor("serial") as ex:
    ...     ex.submit(pow, 2, 10).result()
    1024
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise OptionError(f"workers must be a positive integer, got {workers!r}")
    if spec is None:
        n = workers or os.cpu_count() or 1
        kw: dict[str, Any] = {"max_workers": n, "mp_context": _mp_context(), "initializer": clean_up_on_sigterm}
        if max_tasks_per_child is not None:
            kw["max_tasks_per_child"] = int(max_tasks_per_child)
        return ExecutorHandle(cf.ProcessPoolExecutor(**kw), "process", n)
    if isinstance(spec, str) and spec == "serial":
        return ExecutorHandle(SerialExecutor(), "serial", 1)
    if isinstance(spec, ExecutorHandle):
        return ExecutorHandle(spec.executor, spec.kind, spec.workers, owned=False)
    if isinstance(spec, cf.Executor):
        n = int(getattr(spec, "_max_workers", 1) or 1)
        return ExecutorHandle(spec, "external", n, owned=False)
    if isinstance(spec, str) or hasattr(spec, "scheduler_address") or type(spec).__name__ == "Client":
        client, opened = _dask_client(spec, CONNECT_SECONDS if connect_timeout is None else connect_timeout)
        try:
            n = max(1, sum(int(w.get("nthreads", 1)) for w in client.scheduler_info().get("workers", {}).values()))
        except Exception:  # noqa: BLE001 - informational only
            n = 1
        ex = client.get_executor(pure=False)
        return ExecutorHandle(ex, "dask", n, owned=True, _client=client if opened else None)
    raise OptionError(
        f"executor must be None, 'serial', a Dask scheduler address / Client / cluster, or a "
        f"concurrent.futures.Executor; got {type(spec).__name__}"
    )


def _wait_all(futures: Sequence[cf.Future[Any]], on_done: Callable[[list[bool]], None] | None,
              stop: Callable[[], bool]) -> None:
    """Wait until every future is done or ``stop()``, looking every :data:`WAIT_POLL_SECONDS`;
    ``on_done`` (:meth:`ExecutorHandle.results`) hears of each change."""
    told: list[bool] | None = None
    waiting = set(futures)
    while True:
        if on_done is not None:
            done = [f.done() for f in futures]
            if done != told:
                on_done(done)
                told = done
        if not waiting or stop():
            return
        waiting = cf.wait(waiting, timeout=WAIT_POLL_SECONDS).not_done


def as_completed_indexed(futures: Iterable[cf.Future[T]]) -> Iterator[tuple[int, T]]:
    """Yield ``(index, result)`` as the futures finish (results re-raise task errors)."""
    futs = list(futures)
    index = {id(f): i for i, f in enumerate(futs)}
    for f in cf.as_completed(futs):
        yield index[id(f)], f.result()


# ------------------------------------------------------------------------- memory
_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"
_KB = re.compile(r"^(VmHWM|VmRSS):\s+(\d+)\s+kB", re.M)


def _status_kb() -> dict[str, int]:
    try:
        with open(_STATUS, encoding="ascii") as fh:
            return {k: int(v) for k, v in _KB.findall(fh.read())}
    except OSError:
        return {}


def current_rss() -> int | None:
    """Resident set size of this process in bytes (Linux), else None."""
    kb = _status_kb().get("VmRSS")
    return None if kb is None else kb * 1024


def _reset_hwm() -> bool:
    try:
        with open(_CLEAR_REFS, "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _ru_maxrss() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) if sys.platform == "darwin" else int(r) * 1024


@dataclass(frozen=True)
class PeakMemory:
    """Peak memory of one call.

    Attributes
    ----------
    peak_rss
        Highest resident set size of the process while the call ran (bytes).
    start_rss
        Resident set size just before the call (bytes; None if unknown).
    method
        ``"vmhwm-reset"`` (Linux high-water mark reset before the call: exact for the call) or
        ``"ru_maxrss"`` (the process's lifetime peak: exact only in a fresh process).
    seconds
        Wall time of the call.
    """

    peak_rss: int
    start_rss: int | None
    method: str
    seconds: float

    @property
    def delta(self) -> int | None:
        """``peak_rss − start_rss`` (bytes), the call's own growth; None if unknown."""
        return None if self.start_rss is None else max(0, self.peak_rss - self.start_rss)


def measure_peak(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> tuple[T, PeakMemory]:
    """Run ``fn(*args, **kwargs)`` and return its result with its :class:`PeakMemory`.

    Examples
    --------
    >>> out, mem = measure_peak(sum, range(1000))
    >>> out, mem.peak_rss > 0
    (499500, True)
    """
    start = current_rss()
    reset = _reset_hwm()
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    secs = time.perf_counter() - t0
    if reset:
        hwm = _status_kb().get("VmHWM")
        if hwm is not None:
            return out, PeakMemory(hwm * 1024, start, "vmhwm-reset", secs)
    return out, PeakMemory(_ru_maxrss(), start, "ru_maxrss", secs)
