"""What every solver backend shares: its options, its answer, and the template every backend fills in.

A backend solves a :class:`~pal_opt.ilp.program.Program` (any mixed-integer linear program; it
knows nothing of rounds, GPUs or jobs) and reads the answer back.  It never decodes GPU sets and
never prices placements; :mod:`pal_opt.ilp.solve` does both through :mod:`pal_opt.cost`.

:meth:`Backend.solve` is a template: the flow is the same for every solver and lives here,

1. an empty program (no columns) is answered without a solver;
2. :meth:`~Backend._translate` the program (and the start vector) into the solver's model;
   With a deadline (``SolveOptions.deadline``), translation is not started when
   :meth:`~Backend.translate_estimate` says it cannot end in time, and the solver's time limit
   becomes what is left after translating, less the time it may take to stop
   (:meth:`~Backend.solver_time_limit`); either way short of time raises
   :class:`~pal_opt.errors.TimeLimitReached`;
3. :meth:`~Backend._configure` it from :class:`SolveOptions` (time limit, gap, threads,
   determinism, seed), then hand each of ``options.backend_params`` to
   :meth:`~Backend._set_param` (a parameter the solver rejects is an
   :class:`~pal_opt.errors.OptionError` naming it);
4. :meth:`~Backend._execute` the solver so that Ctrl-C can stop it
   (:class:`ThreadedBackend` runs an in-process solver in a helper thread with
   :func:`run_interruptibly`); when someone listens to progress (:mod:`pal_opt.progress`),
   :meth:`~Backend._observe` first wires the solver's callbacks (or log) to a
   :class:`SolverWatch`, which the waiting loop reports every :data:`POLL_SECONDS`
   (:func:`poll_progress`); an in-process solver that runs past its time limit is asked to stop,
   and one still running at the deadline is abandoned (:class:`BackendOverran`: the answer is
   "no solution");
5. :meth:`~Backend._read` its status, values, message and figures, then
   :meth:`~Backend._bound`; the objective is ``program.objective(values)``;
6. :meth:`~Backend._release` what the run held (always), and on an interrupt raise
   :class:`BackendInterrupted` with the solution read.

A new backend is one module with a subclass that implements the hooks marked abstract, plus one
line registering it (:func:`pal_opt.ilp.backends.register_backend`).
"""

from __future__ import annotations

import contextvars
import enum
import importlib
import importlib.util
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeVar

import numpy as np

from ... import progress
from ...deadline import Deadline
from ...errors import OptionError, TimeLimitReached
from ..program import Program

__all__ = [
    "SolverStatus",
    "SolveOptions",
    "BackendSolution",
    "Readout",
    "RelaxationState",
    "Backend",
    "ThreadedBackend",
    "BackendInterrupted",
    "BackendAbandoned",
    "SAME_PRESS_SECONDS",
    "is_second_press",
    "BackendOverran",
    "SolverWatch",
    "poll_progress",
    "abandoned_solvers",
    "empty_solution",
    "finite_or_none",
    "run_interruptibly",
]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Seconds between two checks of the solver thread (a finished solve is seen at once).
POLL_SECONDS = 0.1
#: A second SIGINT within this many seconds of the first is the same Ctrl-C: ``timeout -s INT``
#: signals the command and then its whole process group, so the command gets two at once, and
#: gave up on a CP-SAT solve it meant to stop (keeping nothing) where one press was meant.
SAME_PRESS_SECONDS = 0.2
#: Name of the helper threads that run solver calls (see :func:`run_interruptibly`).
SOLVER_THREAD_NAME = "pal-opt-solver"
#: A solver is not started with less time than this (seconds) before its deadline.
MIN_SOLVER_SECONDS = 0.05


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
        Wall-clock seconds for the solver, or None for no limit.
    deadline
        A ``time.monotonic()`` value by which :meth:`Backend.solve` must have returned
        (translation included), or None; the time limit is shortened to fit.
    abs_gap
        Absolute gap in objective units at which the solver may stop; 0 asks for proven
        optimality (each backend then uses a tiny tolerance of its own).
    threads
        Worker threads, or None for the backend's default.
    deterministic
        Same model + options → same answer (see each backend for how).
    seed
        Random seed handed to the solver.
    backend_params
        Solver parameters passed straight through, after pal-opt's own settings (so they win):
        HiGHS options (``setOptionValue``), CP-SAT ``SatParameters`` fields by name (an enum
        field also takes its value's name), CBC command-line options (``{"maxNodes": 100}`` is
        ``-maxNodes 100``; a None value passes the option alone).  A parameter the solver
        rejects raises :class:`~pal_opt.errors.OptionError` naming it.
    """

    time_limit: float | None = None
    deadline: float | None = None
    abs_gap: float = 0.0
    threads: int | None = None
    deterministic: bool = True
    seed: int = 0
    backend_params: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        params = self.backend_params
        if not isinstance(params, Mapping) or not all(isinstance(k, str) and k for k in params):
            raise OptionError(f"backend_params must map parameter names to values, got {params!r}")
        object.__setattr__(self, "backend_params", dict(params))


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
        Time to translate the program into the solver's model and configure it.
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


@dataclass
class RelaxationState:
    """An LP relaxation kept solved between calls of :meth:`Backend.relaxation_bound`, so that
    the next LP of the same structure (same columns, costs and matrix; only bounds differ)
    starts from the last optimal basis (:mod:`pal_opt.ilp.warm`).  Backends that cannot restart
    ignore it.

    Attributes
    ----------
    model
        The backend's live solved model (None: nothing kept).
    c, A
        The kept program's costs and matrix (CSR), to tell whether the next one matches.
    last
        How the last LP started (``"hot: ..."`` or ``"cold: <why>"``), for ``info``.
    """

    model: Any = None
    c: np.ndarray | None = None
    A: Any = None
    last: str = "cold: no LP solved yet"

    def mismatch(self, program: Program) -> str | None:
        """Why ``program`` cannot start from the kept model (None: it can)."""
        if self.model is None or self.c is None:
            return "no LP kept"
        A = program.A
        same = (self.c.shape == program.c.shape and self.A.shape == A.shape and np.array_equal(self.c, program.c)
                and np.array_equal(self.A.indptr, A.indptr) and np.array_equal(self.A.indices, A.indices)
                and np.array_equal(self.A.data, A.data))
        return None if same else "the relaxation's columns or matrix changed"

    def keep(self, model: Any, program: Program) -> None:
        """Keep ``model``, solved, as the start of the next LP."""
        self.model, self.c, self.A = model, np.array(program.c, copy=True), program.A.copy()

    def clear(self) -> None:
        """Forget the kept model."""
        self.model, self.c, self.A = None, None, None


@dataclass(frozen=True)
class Readout:
    """What a backend reads back from its solver after a run (:meth:`Backend._read`)."""

    status: SolverStatus
    values: np.ndarray | None
    message: str
    info: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """A solver backend: the template :meth:`solve` and the hooks a solver fills in.

    Class attributes
    ----------------
    name
        Registry name (``"highs"``, ``"cpsat"``, ``"cbc"``).
    requires
        Modules the solver needs (the availability probe imports them).
    supports_warm_start
        Whether a start vector is handed to the solver.
    integer_coefficients
        Whether the solver needs integer objective coefficients (CP-SAT: the objective is
        scaled by a documented precision and rounded).
    supports_relaxation
        Whether :meth:`relaxation_bound` solves the LP relaxation (else it returns None).
    relaxation_max_entries
        Matrix entries plus columns up to which the backend's LP solver is quick on the
        flow-free relaxations of large rounds (None: any size); above it
        :mod:`pal_opt.ilp.scale` asks HiGHS when installed.
    translate_seconds_per_entry
        Seconds that translating takes per matrix entry and column (an estimate with room to
        spare, measured on two busy cores): :meth:`translate_estimate`.
    stop_seconds
        Seconds the solver may take to return after its time limit or a stop request.
    preempt_params
        Solver parameters for the programs with drop variables (``ilp-preempt``), under the
        caller's ``backend_params``.
    stage_params
        Solver parameters for the stage program (rounds with pipeline jobs,
        :func:`~pal_opt.ilp.stageround.solve_stage_round`; with ``ilp-preempt`` too), under the
        caller's ``backend_params``.
    """

    name: ClassVar[str]
    #: The LP solver behind :meth:`relaxation_bound`, as messages name it.
    lp_solver: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    supports_warm_start: ClassVar[bool] = False
    integer_coefficients: ClassVar[bool] = False
    supports_relaxation: ClassVar[bool] = False
    relaxation_max_entries: ClassVar[int | None] = None
    translate_seconds_per_entry: ClassVar[float] = 3e-5
    stop_seconds: ClassVar[float] = 0.3
    preempt_params: ClassVar[dict[str, Any]] = {}
    stage_params: ClassVar[dict[str, Any]] = {}
    _available: ClassVar[bool | None] = None
    _import_error: ClassVar[str | None] = None
    _version: ClassVar[str | None] = None

    # ------------------------------------------------------------------ availability, version
    @classmethod
    def _probe(cls) -> None:
        """Import the solver (every module in :attr:`requires`); raise ImportError (or anything) if
        it cannot be used.  Override to check more (CBC: that its binary runs)."""
        for module in cls.requires:
            importlib.import_module(module)

    @classmethod
    def is_available(cls) -> bool:
        """Whether the solver can be imported (probed once per class; the error is kept for
        messages)."""
        if cls.__dict__.get("_available") is None:
            try:
                cls._probe()
            except Exception as exc:  # noqa: BLE001 - any import failure makes it unavailable
                cls._available = False
                cls._import_error = f"{type(exc).__name__}: {exc}"
            else:
                cls._available = True
                cls._import_error = None
        return bool(cls._available)

    @classmethod
    def is_installed(cls) -> bool:
        """Whether the top-level packages of :attr:`requires` can be found, without importing
        anything (OR-Tools takes about half a second to import); :meth:`is_available` says
        whether the solver actually works."""
        if cls.__dict__.get("_available") is not None:
            return bool(cls._available)
        return all(importlib.util.find_spec(m.split(".")[0]) is not None for m in cls.requires)

    @classmethod
    def import_error(cls) -> str | None:
        """Why the backend is unavailable (None if it is available)."""
        cls.is_available()
        return cls._import_error

    @classmethod
    def version(cls) -> str:
        """Solver version string (asked once per class)."""
        known = cls.__dict__.get("_version")
        if known is None:
            known = cls._version = cls._solver_version()
        return known

    @classmethod
    @abstractmethod
    def _solver_version(cls) -> str:
        """Ask the solver for its version."""

    # ------------------------------------------------------------------ deadlines
    def translate_estimate(self, program: Program) -> float:
        """Seconds translating ``program`` may take (:attr:`translate_seconds_per_entry`)."""
        return 0.02 + self.translate_seconds_per_entry * (program.A.nnz + program.num_vars)

    def solver_time_limit(self, seconds_left: float) -> float:
        """The time limit to give the solver when ``seconds_left`` remain before the deadline
        (default: less :attr:`stop_seconds`)."""
        return seconds_left - self.stop_seconds

    def _fit_to_deadline(self, options: SolveOptions, stage: str) -> SolveOptions:
        """``options`` with the time limit shortened to what the deadline leaves (unchanged
        without one); :class:`~pal_opt.errors.TimeLimitReached` if that is less than
        :data:`MIN_SOLVER_SECONDS`."""
        if options.deadline is None:
            return options
        left = Deadline(options.deadline).left()
        limit = self.solver_time_limit(left)
        if limit < MIN_SOLVER_SECONDS:
            raise TimeLimitReached(stage, need=left - limit + MIN_SOLVER_SECONDS, left=left)
        if options.time_limit is not None:
            limit = min(limit, options.time_limit)
        return replace(options, time_limit=limit)

    # ------------------------------------------------------------------ the template
    def _apply_params(self, model: Any, params: Mapping[str, Any]) -> None:
        """Set each of the caller's ``params`` on ``model`` (:meth:`_set_param`); one the solver
        refuses is an :class:`OptionError` naming it and the solver's reason."""
        for key, value in params.items():
            try:
                self._set_param(model, key, value)
            except Exception as exc:  # noqa: BLE001 - any rejection by the solver
                raise OptionError(f"{self.name} rejected backend parameter {key!r} = {value!r}: {exc}") from None

    def _param_model(self) -> Any:
        """A model with nothing to solve on which :meth:`_set_param` checks a parameter as it does
        before a solve (:meth:`check_params`); None (this default) when the backend cannot check
        one without a program."""
        return None

    def check_params(self, params: Mapping[str, Any]) -> None:
        """Raise the :class:`OptionError` that :meth:`solve` raises for a parameter of ``params``
        the solver refuses, without a program: a solve that ends before its solver runs (a start
        within the gap of the bound, a repair with nothing to re-place) would otherwise take a
        misspelt parameter without a word.  A backend without :meth:`_param_model` checks at
        :meth:`solve` only."""
        model = self._param_model() if params else None
        if model is not None:
            self._apply_params(model, params)

    def solve(self, program: Program, options: SolveOptions, start: np.ndarray | None = None) -> BackendSolution:
        """Solve ``program``; ``start`` is a feasible vector to warm-start from (or None).

        Raises
        ------
        BackendInterrupted
            On Ctrl-C, once the solver has stopped, with what it had.
        OptionError
            For a backend parameter the solver rejects, or a start vector of the wrong size.
        BackendError
            If the solver fails or rejects the model.
        """
        if start is not None and np.shape(start) != (program.num_vars,):
            raise OptionError(f"the start vector has shape {np.shape(start)}, the program {program.num_vars} columns")
        if program.num_vars == 0:
            return empty_solution(program)
        stage = f"running {self.name}"
        if options.deadline is not None:
            Deadline(options.deadline).check(f"translating the program for {self.name}",
                                             need=self.translate_estimate(program))
        t0 = time.perf_counter()
        progress.report(stage=f"translating the program for {self.name}")
        model = self._translate(program, start if self.supports_warm_start else None)
        try:
            options = self._fit_to_deadline(options, stage)
            self._configure(model, program, options)
            self._apply_params(model, options.backend_params)
            t1 = time.perf_counter()
            try:
                with self._watched(model, program, "solving"):
                    raw, interrupted = self._execute(model, options)
            except BackendOverran as exc:
                return BackendSolution(SolverStatus.NO_SOLUTION, None, None, None, time.perf_counter() - t1,
                                       translate_seconds=t1 - t0, message=str(exc))
            t2 = time.perf_counter()
            out = self._read(model, raw, program, options, t2 - t1)
            # asked to stop at the deadline, a solver calls it an interruption ("Interrupted by
            # user"); one that reached its own limit meanwhile says so, and is left to say it
            if self.stopped_at_deadline and out.status != SolverStatus.OPTIMAL and "time limit" not in out.message.lower():
                out = replace(out, message=f"time limit reached (pal-opt stopped {self.name}, whose own limit had not "
                                           f"ended the run; it said: {out.message})")
            objective = program.objective(out.values) if out.values is not None else None
            bound = self._bound(model, raw, program, options, out.status, objective)
        finally:
            self._release(model)
        solution = BackendSolution(status=out.status, values=out.values, objective=objective, bound=bound,
                                   seconds=t2 - t1, translate_seconds=t1 - t0, message=out.message, info=out.info)
        if interrupted:
            raise BackendInterrupted(solution)
        return solution

    def relaxation_bound(self, program: Program, options: SolveOptions,
                         state: RelaxationState | None = None) -> float | None:
        """A valid lower bound from the LP relaxation, or None (default: not supported).
        ``state``: a :class:`RelaxationState` to restart from and to keep the solved LP in
        (backends that cannot restart ignore it).  A backend that can also sets
        :attr:`relaxation_values` to the LP's optimal column values."""
        return None

    #: Whether the last run was stopped by pal-opt at the deadline, its own time limit not having
    #: ended it (:meth:`ThreadedBackend._interruptible`); its message then says so.
    stopped_at_deadline: bool = False

    #: The optimal column values of the last LP relaxation :meth:`relaxation_bound` solved, when
    #: the backend reads them (HiGHS); None otherwise.
    relaxation_values: np.ndarray | None = None

    # ------------------------------------------------------------------ the hooks
    @abstractmethod
    def _translate(self, program: Program, start: np.ndarray | None) -> Any:
        """The solver's model of ``program`` (with ``start`` as its warm start, if given)."""

    @abstractmethod
    def _configure(self, model: Any, program: Program, options: SolveOptions) -> None:
        """Apply the time limit, gap, threads, determinism and seed of ``options`` to ``model``."""

    @abstractmethod
    def _set_param(self, model: Any, key: str, value: Any) -> None:
        """Set one solver parameter by its solver name; raise (anything) if the solver rejects it."""

    @abstractmethod
    def _execute(self, model: Any, options: SolveOptions) -> tuple[Any, bool]:
        """Run the solver so that Ctrl-C can stop it: ``(its raw result, whether an interrupt was
        acted on)``; a second Ctrl-C raises :class:`BackendAbandoned`."""

    @abstractmethod
    def _read(self, model: Any, raw: Any, program: Program, options: SolveOptions, seconds: float) -> Readout:
        """Status, solution values, message and figures after a run of ``seconds``."""

    @abstractmethod
    def _bound(
        self, model: Any, raw: Any, program: Program, options: SolveOptions, status: SolverStatus,
        objective: float | None,
    ) -> float | None:
        """A valid lower bound on the program optimum in program units (None if none)."""

    def _release(self, model: Any) -> None:  # noqa: B027 - optional hook, nothing to free by default
        """Free what the run held (files, processes); called however the solve ends."""

    def _observe(self, model: Any, program: Program, watch: SolverWatch) -> None:  # noqa: B027 - optional hook
        """Have the solver tell ``watch`` its incumbent and bound (program units) as they improve:
        subscribe its callbacks, or set ``watch.refresh`` to read them from its log.  Called
        before :meth:`_execute`, only when someone listens to progress; by default the solver
        says nothing and only the elapsed time is reported."""

    @contextmanager
    def _watched(self, model: Any, program: Program, stage: str, observe: bool = True) -> Iterator[None]:
        """While the block runs, :func:`poll_progress` reports ``stage`` with a
        :class:`SolverWatch` that :meth:`_observe` wired to the solver (a no-op when no one
        listens to progress); with ``observe`` False (a solver call :meth:`_observe` does not
        know, such as an LP relaxation's) only the elapsed time is reported."""
        if not progress.active():
            yield
            return
        watch = SolverWatch(self.name, stage)
        if observe:
            self._observe(model, program, watch)
        token = _watching.set(watch)
        try:
            yield
        finally:
            _watching.reset(token)


class ThreadedBackend(Backend):
    """A backend whose solver is a blocking in-process call that releases the GIL and can be asked
    to stop from another thread: :meth:`_execute` runs :meth:`_run` in a helper thread with
    :func:`run_interruptibly`, and a Ctrl-C calls :meth:`_stop`.  With a deadline, a solver still
    running :attr:`~Backend.stop_seconds` after its time limit is asked to stop too, and one still
    running at the deadline is abandoned (:class:`BackendOverran`)."""

    def _execute(self, model: Any, options: SolveOptions) -> tuple[Any, bool]:
        return self._interruptible(lambda: self._run(model), lambda: self._stop(model), options)

    def _interruptible(self, work: Callable[[], T], stop: Callable[[], None], options: SolveOptions) -> tuple[T, bool]:
        """:func:`run_interruptibly` with the deadline of ``options``: ``stop()`` once the time
        limit (plus half of :attr:`~Backend.stop_seconds`) has passed, abandoned at the deadline.
        Also for solver calls other than :meth:`_run` (an LP relaxation's)."""
        self.stopped_at_deadline = False
        if options.deadline is None:
            return run_interruptibly(work, stop)
        give_up_at = options.deadline
        stop_at = min(time.monotonic() + (options.time_limit or 0.0) + 0.5 * self.stop_seconds, give_up_at)
        stops: list[None] = []

        def counted_stop() -> None:
            stops.append(None)
            stop()

        value, interrupted = run_interruptibly(work, counted_stop, stop_at=stop_at, give_up_at=give_up_at,
                                               name=self.name)
        # stopped without a Ctrl-C: by the deadline (the solver then says "interrupted by user")
        self.stopped_at_deadline = bool(stops) and not interrupted
        return value, interrupted

    @abstractmethod
    def _run(self, model: Any) -> Any:
        """The blocking solver call; its value is the raw result handed to :meth:`_read`."""

    @abstractmethod
    def _stop(self, model: Any) -> None:
        """Ask the running solver to stop (thread-safe; may be called more than once)."""


class SolverWatch:
    """What a running solver has found so far, for progress reports.

    The solver's callbacks (in its own thread) or its log (read by :attr:`refresh`) call
    :meth:`found`; the waiting loop calls :meth:`report` (through :func:`poll_progress`).  Values
    are in program units (``c·x + obj_offset``); the incumbent only goes down, the bound only up.
    """

    def __init__(self, backend: str, stage: str = "solving"):
        self.backend = backend
        self.stage = stage
        self.incumbent: float | None = None
        self.bound: float | None = None
        #: Called before each report (e.g. to read the solver's log); None: nothing to read.
        self.refresh: Callable[[], None] | None = None
        self.started = time.perf_counter()

    def found(self, incumbent: float | None = None, bound: float | None = None) -> None:
        """Record a solution's objective and/or a lower bound (non-finite values are ignored)."""
        inc, low = finite_or_none(incumbent), finite_or_none(bound)
        if inc is not None and (self.incumbent is None or inc < self.incumbent):
            self.incumbent = inc
        if low is not None and (self.bound is None or low > self.bound):
            self.bound = low

    def report(self, stopping: bool = False) -> None:
        """Report the stage, the seconds since the watch began, and what was found."""
        if self.refresh is not None:
            self.refresh()
        fields: dict[str, Any] = {"stage": self.stage, "backend": self.backend,
                                  "seconds": time.perf_counter() - self.started, "stopping": stopping}
        if self.incumbent is not None:
            fields["incumbent"] = self.incumbent
        if self.bound is not None:
            fields["bound"] = self.bound
        progress.report(**fields)


_watching: contextvars.ContextVar[SolverWatch | None] = contextvars.ContextVar("pal_opt_solver_watch", default=None)


def poll_progress(stopping: bool = False) -> None:
    """Report the running solver's progress, from the loop that waits for it (every
    :data:`POLL_SECONDS`, whether or not the solver said anything).  A no-op unless
    :meth:`Backend.solve` watches the solver; never raises (a failing reporter is logged at
    debug level), so that the loop always goes on to stop or collect its solver."""
    watch = _watching.get()
    if watch is None:
        return
    try:
        watch.report(stopping)
    except Exception:  # noqa: BLE001 - progress must never cost the solve
        log.debug("progress report failed", exc_info=True)


def empty_solution(program: Program) -> BackendSolution:
    """The answer for a program without columns: optimal at ``obj_offset`` when every row admits an
    activity of 0, else infeasible."""
    ok = bool(np.all(program.row_lo <= 0) and np.all(program.row_hi >= 0))
    value = program.obj_offset if ok else None
    return BackendSolution(
        status=SolverStatus.OPTIMAL if ok else SolverStatus.INFEASIBLE,
        values=np.zeros(0) if ok else None, objective=value, bound=value, seconds=0.0,
        message="empty program" if ok else "empty program with an unsatisfiable row",
    )


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


class BackendOverran(Exception):  # noqa: N818 - an event, like KeyboardInterrupt, not an error
    """A solver that had not returned by its deadline, though asked to stop: abandoned in its
    helper thread, where it may run on until it looks at the stop request (HiGHS does not while
    it presolves).  :meth:`Backend.solve` answers "no solution"; the ``pal-opt`` command ends
    with ``os._exit`` while such a solver still runs (see :func:`abandoned_solvers`)."""


class BackendAbandoned(KeyboardInterrupt):
    """A second Ctrl-C while a backend waited for its stopped solver: the caller gives up at once
    and keeps nothing (:func:`pal_opt.ilp.solve_ilp` re-raises a plain ``KeyboardInterrupt``)."""


def run_interruptibly(
    work: Callable[[], T], stop: Callable[[], None], *, stop_at: float | None = None, give_up_at: float | None = None,
    name: str = "the solver",
) -> tuple[T, bool]:
    """Run ``work()`` (a blocking solver call that releases the GIL) so that Ctrl-C can stop it.

    ``work`` runs in a helper thread while the calling thread waits on it; Python delivers
    ``KeyboardInterrupt`` to the main thread, which is then free to act on it.

    * First ``KeyboardInterrupt``: ``stop()`` asks the solver to stop (it must be safe to call
      from another thread, and more than once: it is repeated every :data:`POLL_SECONDS` until
      the solver returns, since a request made before the solver is ready can be lost), and the
      wait goes on until the solver returns what it has.
    * Second ``KeyboardInterrupt`` (not within :data:`SAME_PRESS_SECONDS` of the first, which
      is the same press delivered twice): stop waiting and raise :class:`BackendAbandoned` at once; the
      helper thread is a daemon, so its solver may run on until its own limit but never blocks
      interpreter exit.  A C++ solver still running when the interpreter exits can abort the
      process (``terminate called``); :func:`abandoned_solvers` tells whether one is, and the
      ``pal-opt`` command then ends with ``os._exit``.

    Deadlines (``time.monotonic()`` values): from ``stop_at`` on, ``stop()`` is called as for a
    Ctrl-C (but the call returns normally); at ``give_up_at`` the wait ends with
    :class:`BackendOverran` and the helper thread is left to finish on its own.

    Returns ``(work's value, whether an interrupt was acted on)``; an exception raised by
    ``work`` is re-raised in the caller.  Called from any thread but the main one (a scheduler
    that solves in worker threads), the same holds but for Ctrl-C, which Python delivers to the
    main thread only: the deadlines and progress reports are the waiting thread's, so a worker
    thread's solve keeps its time limit and its progress as the main thread's does (``work``
    once ran directly there, and nothing stopped a solver past its limit: 12.6 s for a 1.5 s
    limit).
    """
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
    interrupted = stop_now = False
    first_press = math.inf
    started = False
    stop_at = math.inf if stop_at is None else stop_at
    give_up_at = math.inf if give_up_at is None else give_up_at
    while True:
        # every step, thread start included, is inside the try: a Ctrl-C that lands anywhere
        # here is acted on (stop requested), never lost with the solver left running
        try:
            if not started:
                started = True
                thread.start()
            if stop_now:  # here, inside the try: a Ctrl-C during the request is caught as well
                stop_now = False
                stop()
            _wait(done, stop, interrupted, stop_at, give_up_at, name)
            break
        except KeyboardInterrupt:
            if interrupted:
                if is_second_press(first_press):
                    raise BackendAbandoned() from None
                continue
            interrupted, first_press, stop_now = True, time.monotonic(), True
    if "error" in box:
        raise box["error"]
    return box["value"], interrupted


def _wait(done: threading.Event, stop: Callable[[], None], interrupted: bool, stop_at: float, give_up_at: float,
          name: str) -> None:
    """:func:`run_interruptibly`'s wait for the solver thread: ``stop()`` once stopping
    (``interrupted`` or past ``stop_at``), repeated every :data:`POLL_SECONDS` (not in a tight
    loop), and :class:`BackendOverran` at ``give_up_at``."""
    while not done.is_set():
        now = time.monotonic()
        if now >= give_up_at:
            raise BackendOverran(f"{name} had not stopped by the deadline (abandoned, it may run on)")
        until_stop = POLL_SECONDS if (interrupted or now >= stop_at) else stop_at - now
        done.wait(max(min(POLL_SECONDS, until_stop, give_up_at - now), 0.001))
        late = time.monotonic() >= stop_at
        if (interrupted or late) and not done.is_set():
            stop()  # again: a request made before the solver could take it may be lost
        poll_progress(interrupted)


def is_second_press(first_press: float) -> bool:
    """Whether a Ctrl-C now, after one acted on at ``first_press`` (``time.monotonic()``), is a
    second press rather than the first delivered twice (:data:`SAME_PRESS_SECONDS`)."""
    return time.monotonic() - first_press >= SAME_PRESS_SECONDS


def abandoned_solvers() -> int:
    """How many helper threads still run a solver call (after a second Ctrl-C gave up on them)."""
    return sum(1 for t in threading.enumerate() if t.name == SOLVER_THREAD_NAME and t.is_alive())


def finite_or_none(x: float | None) -> float | None:
    """``x`` if it is a finite float, else None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
