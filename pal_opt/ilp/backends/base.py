"""What every solver backend shares: its options, its answer and the abstract base class.

A backend only *translates* a :class:`~pal_opt.ilp.formulation.Formulation` into its solver's
model, solves it and reads the answer back (build → solve → extract).  It never decodes GPU sets
and never prices placements; :mod:`pal_opt.ilp.solve` does both through :mod:`pal_opt.cost`.
"""

from __future__ import annotations

import enum
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..formulation import Formulation

__all__ = [
    "SolverStatus",
    "SolveOptions",
    "BackendSolution",
    "Backend",
    "BackendInterrupted",
    "BackendAbandoned",
    "abandoned_solvers",
    "run_interruptibly",
]

T = TypeVar("T")

#: Seconds between two checks of the solver thread (a finished solve is seen at once).
POLL_SECONDS = 0.1
#: Name of the helper threads that run solver calls (see :func:`run_interruptibly`).
SOLVER_THREAD_NAME = "pal-opt-solver"


class SolverStatus(enum.StrEnum):
    """What the solver reports, before pal-opt turns it into a :class:`~pal_opt.result.Status`."""

    OPTIMAL = "optimal"  #: proven optimal within the requested gap
    FEASIBLE = "feasible"  #: a solution, not proven within the requested gap (time limit)
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no-solution"  #: stopped (time limit) without any solution


@dataclass(frozen=True)
class SolveOptions:
    """Solver-independent options.

    Attributes
    ----------
    time_limit
        Wall-clock seconds, or None for no limit.
    abs_gap
        Absolute gap in objective units at which the solver may stop; 0 asks for proven
        optimality (each backend then uses a tiny tolerance of its own).
    threads
        Worker threads, or None for the backend's default.
    deterministic
        Same model + options → same answer (see each backend for how).
    seed
        Random seed handed to the solver.
    """

    time_limit: float | None = None
    abs_gap: float = 0.0
    threads: int | None = None
    deterministic: bool = True
    seed: int = 0


@dataclass
class BackendSolution:
    """A backend's answer in program units.

    Attributes
    ----------
    status
        :class:`SolverStatus`.
    values
        Solution vector (None without a solution).
    objective
        ``c·values + obj_offset`` as the solver saw it (None without a solution).
    bound
        A valid lower bound on the program optimum (None if the solver gave none).
    seconds
        Time inside the solver call (translation excluded).
    translate_seconds
        Time to translate the formulation into the solver's model.
    message
        Solver status text.
    info
        Extra solver figures (nodes, iterations, ...).
    """

    status: SolverStatus
    values: np.ndarray | None
    objective: float | None
    bound: float | None
    seconds: float
    translate_seconds: float = 0.0
    message: str = ""
    info: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """A solver backend.

    Class attributes
    ----------------
    name
        Registry name (``"highs"``, ``"cpsat"``, ``"cbc"``).
    supports_warm_start
        Whether a start vector is handed to the solver.
    integer_coefficients
        Whether the solver needs integer objective coefficients (CP-SAT: the objective is
        scaled by a documented precision and rounded).
    supports_relaxation
        Whether :meth:`relaxation_bound` solves the LP relaxation (else it returns None).
    """

    name: ClassVar[str]
    supports_warm_start: ClassVar[bool] = False
    integer_coefficients: ClassVar[bool] = False
    supports_relaxation: ClassVar[bool] = False
    _available: ClassVar[bool | None] = None
    _import_error: ClassVar[str | None] = None

    @classmethod
    @abstractmethod
    def _probe(cls) -> None:
        """Import the solver; raise ImportError (or anything) if it cannot be used."""

    @classmethod
    def is_available(cls) -> bool:
        """Whether the solver can be imported (cached; the error is kept for messages)."""
        if cls._available is None:
            try:
                cls._probe()
            except Exception as exc:  # noqa: BLE001 - any import failure makes it unavailable
                cls._available = False
                cls._import_error = f"{type(exc).__name__}: {exc}"
            else:
                cls._available = True
                cls._import_error = None
        return cls._available

    @classmethod
    def import_error(cls) -> str | None:
        """Why the backend is unavailable (None if it is available)."""
        cls.is_available()
        return cls._import_error

    @classmethod
    @abstractmethod
    def version(cls) -> str:
        """Solver version string."""

    @abstractmethod
    def solve(self, form: Formulation, options: SolveOptions, start: np.ndarray | None = None) -> BackendSolution:
        """Solve ``form``; ``start`` is a feasible vector to warm-start from (or None)."""

    def relaxation_bound(self, form: Formulation, options: SolveOptions) -> float | None:
        """A valid lower bound from the LP relaxation, or None (default: not supported)."""
        return None


class BackendInterrupted(KeyboardInterrupt):
    """A Ctrl-C that a backend acted on: its solver was asked to stop and has stopped.

    ``solution`` is what the solver had when it stopped (its incumbent, if any), or None when
    the backend could not collect anything (e.g. a second Ctrl-C, or a solver that had to be
    killed).  :func:`pal_opt.ilp.solve_ilp` turns it into
    :class:`~pal_opt.errors.SolveInterrupted` with a priced placement.
    """

    def __init__(self, solution: BackendSolution | None = None):
        self.solution = solution
        super().__init__("solver interrupted")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.solution,))


class BackendAbandoned(KeyboardInterrupt):
    """A second Ctrl-C while a backend waited for its stopped solver: the caller gives up at once
    and keeps nothing (:func:`pal_opt.ilp.solve_ilp` re-raises a plain ``KeyboardInterrupt``)."""


def run_interruptibly(work: Callable[[], T], stop: Callable[[], None]) -> tuple[T, bool]:
    """Run ``work()`` (a blocking solver call that releases the GIL) so that Ctrl-C can stop it.

    ``work`` runs in a helper thread while the calling thread waits on it; Python delivers
    ``KeyboardInterrupt`` to the main thread, which is then free to act on it.

    * First ``KeyboardInterrupt``: ``stop()`` asks the solver to stop (it must be safe to call
      from another thread, and more than once: it is repeated every :data:`POLL_SECONDS` until
      the solver returns, since a request made before the solver is ready can be lost), and the
      wait goes on until the solver returns what it has.
    * Second ``KeyboardInterrupt``: stop waiting and raise :class:`BackendAbandoned` at once; the
      helper thread is a daemon, so its solver may run on until its own limit but never blocks
      interpreter exit.  A C++ solver still running when the interpreter exits can abort the
      process (``terminate called``); :func:`abandoned_solvers` tells whether one is, and the
      ``pal-opt`` command then ends with ``os._exit``.

    Returns ``(work's value, whether an interrupt was acted on)``; an exception raised by
    ``work`` is re-raised in the caller.  Called from any thread but the main one (a scheduler
    that solves in worker threads), ``work`` runs directly: Python delivers Ctrl-C only to the
    main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return work(), False
    box: dict[str, Any] = {}
    # an Event, not Thread.join: CPython 3.11 can mark a thread finished when a join() on it is
    # interrupted by KeyboardInterrupt (gh-90882)
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name=SOLVER_THREAD_NAME, daemon=True)
    interrupted = False
    started = False
    while True:
        # every step, thread start included, is inside the try: a Ctrl-C that lands anywhere
        # here is acted on (stop requested), never lost with the solver left running
        try:
            if not started:
                started = True
                thread.start()
            while not done.is_set():
                done.wait(POLL_SECONDS)
                if interrupted and not done.is_set():
                    stop()  # again: a request made before the solver could take it may be lost
            break
        except KeyboardInterrupt:
            if interrupted:
                raise BackendAbandoned() from None
            interrupted = True
            stop()
    if "error" in box:
        raise box["error"]
    return box["value"], interrupted


def abandoned_solvers() -> int:
    """How many helper threads still run a solver call (after a second Ctrl-C gave up on them)."""
    return sum(1 for t in threading.enumerate() if t.name == SOLVER_THREAD_NAME and t.is_alive())


def finite_or_none(x: float | None) -> float | None:
    """``x`` if it is a finite float, else None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
