"""HiGHS (via highspy): the default backend.

Translation: the program becomes numpy arrays in column-wise (CSC) form with the objective offset
(:meth:`HighsBackend._translate`), passed to HiGHS whole as a ``HighsLp``
(:func:`~.highs_run.load_model`).

Process: **each MIP runs in a child process** (:mod:`.highs_child`, forked by pal-opt's own server
:mod:`.highs_server`), because highspy 1.13.1 and 1.14.0 crash (segmentation fault) on some
round programs given a start; the crash then costs one try, and the MIP is solved again without
the start (``docs/limits.md``, "Known problems").  About 6 ms per solve.  LP relaxations run
in pal-opt's process; ``PAL_OPT_HIGHS_IN_PROCESS=1`` runs MIPs there too.

Options (set on a ``Highs`` object as they are chosen, which checks them, and kept in order for
the child):

* ``time_limit`` → ``time_limit``;
* gap: ``mip_rel_gap = 0`` and ``mip_abs_gap = abs_gap`` (or ``1e-9`` to prove optimality;
  HiGHS's default relative gap of 1e-4 would stop short of it);
* ``threads`` → ``threads`` (in pal-opt's process, HiGHS's task scheduler is released after
  every solve, as highspy itself does, so each solve starts one with its own thread count; with
  solves overlapping in one process, by the last of them to end: :class:`_Runs`);
* ``deterministic``: HiGHS's MIP search is deterministic for a given model and options; the
  seed is fixed (``random_seed``).
* warm start: ``setSolution`` with the full start vector; HiGHS checks it and keeps it as the
  first incumbent.
* ``backend_params``: ``setOptionValue(key, value)`` each, after the above; a status other
  than ``kOk`` (an unknown option, a value of the wrong type or out of range) is a rejection.

Ctrl-C: ``Highs.run()`` (or the wait for the child) runs in a helper thread
(:func:`~.base.run_interruptibly`) with highspy's user-interrupt callbacks on; a
``KeyboardInterrupt`` calls ``cancelSolve()`` (in the child: a ``"cancel"`` message), which
HiGHS acts on at its next simplex, IPM or MIP check (presolve has none: on 2,048-GPU rounds up
to about 3 s), and the backend raises :class:`~.base.BackendInterrupted` with the incumbent.

Progress (:meth:`HighsBackend._observe`, only when someone listens): highspy's MIP callbacks
(in the child, forwarded to pal-opt at most every 0.1 s) report the incumbent
(improving-solution callback) and the primal and dual bounds (the MIP interrupt callback, which
HiGHS calls at every check; the user-interrupt handling subscribes to it too, and both run).
With ``output_flag`` off HiGHS calls no logging callback.

The bound is ``mip_dual_bound``.  :meth:`HighsBackend.relaxation_bound` solves the LP
relaxation alone (dual simplex without presolve: on 2,048-GPU rounds HiGHS's presolve takes
seconds, the LP a few tenths of one), which lets :func:`pal_opt.ilp.solve_ilp` stop before the
MIP when the start placement is already within the requested gap.  ortools 9.15 and highspy
1.15.x cannot be loaded in one process; the package pins highspy 1.12–1.14, which can.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...deadline import Deadline
from ..program import Program
from . import highs_server
from .base import (
    BackendInterrupted,
    BackendOverran,
    Readout,
    RelaxationState,
    SolveOptions,
    SolverStatus,
    SolverWatch,
    ThreadedBackend,
    finite_or_none,
)
from .highs_child import ChildRun, StartFailed, isolation_enabled, start_failed
from .highs_run import Answer, answer_of, load_model

__all__ = ["HighsBackend"]

#: Absolute gap used when proven optimality is asked for.
OPTIMALITY_ABS_GAP = 1e-9
#: Relative amount the LP relaxation's optimum is lowered by before it is used as a bound.
RELAXATION_SAFETY = 1e-9


class _Runs:
    """The ``Highs.run()`` calls under way in this process.

    HiGHS's task scheduler is one static object shared by every ``Highs`` instance of the
    process, and ``resetGlobalScheduler`` tears it down: called while another thread's ``run()``
    is under way, it frees what that solve is using (a use-after-free, a segmentation fault in
    the other solve; ERGO-Code/HiGHS#3136 and #3141).  Two runs overlap when a scheduler solves
    rounds in worker threads, and when a solver that overran its deadline was abandoned
    (:class:`~.base.BackendOverran`) and still runs while the next round is solved.  So the
    scheduler is reset only by the last run to end, under the lock that a starting run takes.

    HiGHS also refuses a run whose ``threads`` differs from the count its scheduler was started
    with in the same thread (status "Not Set"); every run is in a fresh helper thread
    (:func:`~.base.run_interruptibly`), so overlapping runs with other counts do not meet it.
    """

    def __init__(self) -> None:
        self.reset_after_fork()

    def reset_after_fork(self) -> None:
        """Fresh counters: at start, and in a child forked while another thread ran HiGHS (it
        would inherit a count that never drops, or a lock held for ever)."""
        self.lock = threading.Lock()
        self.active = 0


_RUNS = _Runs()
if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_RUNS.reset_after_fork)


@dataclass
class _HighsModel:
    """A ``Highs`` object (options are set on it as they are chosen, which checks them), the
    program as arrays (:func:`~.highs_run.load_model`) and its start, and the options in the
    order they were set.  A MIP solved in a child process (:mod:`.highs_child`) also keeps that
    run and the progress watch it reports to."""

    h: Any
    arrays: dict[str, Any]  #: empty for a live model kept for hot starts
    start: np.ndarray | None
    settings: dict[str, Any] = field(default_factory=dict)
    isolated: bool = False
    watch: SolverWatch | None = None
    child: ChildRun | None = None


class HighsBackend(ThreadedBackend):
    """HiGHS branch-and-cut (highspy), each MIP in a child process (:mod:`.highs_child`)."""

    name: ClassVar[str] = "highs"
    lp_solver: ClassVar[str] = "HiGHS"
    requires: ClassVar[tuple[str, ...]] = ("highspy",)
    supports_warm_start: ClassVar[bool] = True
    supports_relaxation: ClassVar[bool] = True
    translate_seconds_per_entry: ClassVar[float] = 1e-6
    #: The stage program (:mod:`pal_opt.ilp.stageround`) is solved with presolve's probing off
    #: (rule 15).  Probing tries each binary, and the stage program has thousands (its mode
    #: columns): on 256-GPU rounds of a scheduler's loop it took most of HiGHS's time, presolve
    #: 1.38 s with it and 0.34 s without, for 35 of 9,749 columns fewer
    #: (``formulations/pipeline_round.md`` §6).  A reduction left out, not a relaxation: the
    #: optimum is the same.
    stage_params: ClassVar[dict[str, Any]] = {"presolve_rule_off": 1 << 15}
    #: For the tests of crash recovery only: the child crashes itself on this many tries (0: none).
    crash_for_test: int = 0

    @classmethod
    def _solver_version(cls) -> str:
        import highspy

        return str(highspy.Highs().version())

    def relaxation_bound(self, program: Program, options: SolveOptions,
                         state: RelaxationState | None = None) -> float | None:
        """The LP relaxation's optimum (dual simplex, presolve off), lowered by
        :data:`RELAXATION_SAFETY` relative to guard against solver tolerances.  None if HiGHS
        did not solve it (in time); with a deadline, :class:`~pal_opt.errors.TimeLimitReached`
        when there is no time to translate and start it.  Solved in pal-opt's own process.

        With ``state`` (:class:`~.base.RelaxationState`): when it holds a solved model of the
        same structure (columns, costs, matrix), only the bounds and the objective offset are
        changed on that live model and HiGHS's dual simplex goes on from its optimal basis (a
        hot start: the optimum is the new LP's, reached in a few hundred iterations); else the
        LP is translated afresh.  The solved model is kept in ``state`` for the next call."""
        import highspy

        self.relaxation_values = None
        why = None if state is None else state.mismatch(program)
        if options.deadline is not None and (state is None or why is not None):
            Deadline(options.deadline).check("translating the LP relaxation for highs",
                                             need=self.translate_estimate(program))
        if state is not None and why is None:
            model = _HighsModel(state.model, {}, None)
            _change_bounds(model.h, program)
        else:
            model = self._model(program, None)  # in this process: no server started for it
            model.h.setOptionValue("presolve", "off")
            model.h.setOptionValue("solver", "simplex")
            load_model(model.h, model.arrays, None, integer=False)
        if state is not None:
            state.clear()  # kept again below only once solved
        options = self._fit_to_deadline(options, "solving the LP relaxation")
        model.h.setOptionValue("time_limit", float(options.time_limit) if options.time_limit is not None else math.inf)
        try:
            with self._watched(model, program, "solving the LP relaxation"):
                _, interrupted = self._execute(model, options)
        except BackendOverran:
            return None
        if interrupted:
            raise BackendInterrupted(None)
        if model.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        if state is not None:
            iters = int(model.h.getInfo().simplex_iteration_count)
            state.last = (f"hot: {iters} dual simplex iterations from the last optimal basis" if why is None
                          else f"cold ({why}): {iters} simplex iterations")
            state.keep(model.h, program)
        self.relaxation_values = np.asarray(model.h.getSolution().col_value, dtype=np.float64)
        obj = float(model.h.getInfo().objective_function_value)
        return obj - RELAXATION_SAFETY * max(1.0, abs(obj))

    def _translate(self, program: Program, start: np.ndarray | None) -> _HighsModel:
        model = self._model(program, start)
        if isolation_enabled():
            try:  # now, so that the solver's time limit (set after translation) does not pay for it
                highs_server.ensure_started()
            except OSError as exc:
                start_failed(exc)
        return model

    def _model(self, program: Program, start: np.ndarray | None) -> _HighsModel:
        """A ``Highs`` object with output off and ``program`` as arrays (not yet passed to it)."""
        import highspy

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        inf = highspy.kHighsInf
        csc = program.A.tocsc()
        csc.sort_indices()
        arrays = {
            "n": program.num_vars, "m": program.num_rows, "off": float(program.obj_offset),
            "c": np.asarray(program.c, dtype=np.float64),
            "lo": np.asarray(program.col_lo, dtype=np.float64),
            "hi": np.where(np.isinf(program.col_hi), inf, program.col_hi).astype(np.float64),
            "rlo": np.where(np.isinf(program.row_lo), -inf, program.row_lo).astype(np.float64),
            "rhi": np.where(np.isinf(program.row_hi), inf, program.row_hi).astype(np.float64),
            "indptr": csc.indptr.astype(np.int32), "indices": csc.indices.astype(np.int32),
            "data": csc.data.astype(np.float64),
            "integer": np.asarray(program.integrality, dtype=bool),
        }
        return _HighsModel(h, arrays, None if start is None else np.asarray(start, dtype=np.float64))

    def _configure(self, model: _HighsModel, program: Program, options: SolveOptions) -> None:
        if options.threads is not None:
            self._set_param(model, "threads", int(options.threads))
        if options.time_limit is not None:
            self._set_param(model, "time_limit", float(options.time_limit))
        self._set_param(model, "mip_rel_gap", 0.0)
        self._set_param(model, "mip_abs_gap", float(options.abs_gap) if options.abs_gap > 0 else OPTIMALITY_ABS_GAP)
        self._set_param(model, "random_seed", int(options.seed))
        model.isolated = isolation_enabled()
        if not model.isolated:
            load_model(model.h, model.arrays, model.start, integer=True)

    def _param_model(self) -> _HighsModel:
        import highspy

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        return _HighsModel(h, {}, None)

    def _set_param(self, model: _HighsModel, key: str, value: Any) -> None:
        """Set an option on the ``Highs`` object (which checks it) and keep it for a child."""
        import highspy

        status = model.h.setOptionValue(key, value)
        if status != highspy.HighsStatus.kOk:
            raise ValueError(f"HiGHS answered {status.name} (unknown option, or a value of the wrong type or range)")
        model.settings[key] = value

    def _observe(self, model: _HighsModel, program: Program, watch: SolverWatch) -> None:
        if model.isolated:
            model.watch = watch  # the child forwards its callbacks (highs_run._forward_progress)
            return

        def bounds(event: Any) -> None:
            out = event.data_out
            watch.found(out.mip_primal_bound, out.mip_dual_bound)

        def improved(event: Any) -> None:
            watch.found(event.data_out.objective_function_value)

        model.h.cbMipInterrupt.subscribe(bounds)
        model.h.cbMipImprovingSolution.subscribe(improved)

    def _execute(self, model: _HighsModel, options: SolveOptions) -> tuple[Any, bool]:
        if model.isolated:
            watch = model.watch
            model.child = ChildRun(model.arrays, model.start, model.settings,
                                   on_found=None if watch is None else watch.found,
                                   crash_for_test=self.crash_for_test)
        else:
            model.h.HandleUserInterrupt = True  # highspy's callbacks on: cancelSolve() is acted on
        return super()._execute(model, options)

    def _run(self, model: _HighsModel) -> Any:
        if model.child is not None:
            child = model.child
            try:
                return child.run()
            except StartFailed as exc:
                start_failed(exc.__cause__ or exc)
                model.child = None
                    # after a crash, never hand HiGHS the start again in pal-opt's own process
                load_model(model.h, model.arrays, None if child.crashes else model.start, integer=True)
                model.h.HandleUserInterrupt = True
                answer = self._run_here(model)
                if child.crashes:
                    answer.info["highs_crashes"] = child.crashes
                    answer.message = f"{answer.message} (in pal-opt's process, without the start, after a crash)"
                return answer
        return self._run_here(model)

    def _run_here(self, model: _HighsModel) -> Any:
        """``Highs.run()`` in this process; the raw result is the run's :class:`Answer`."""
        _run_counted(model.h)
        return answer_of(model.h)

    def _stop(self, model: _HighsModel) -> None:
        if model.child is not None:
            model.child.cancel()
        model.h.cancelSolve()

    def _release(self, model: _HighsModel) -> None:
        if model.child is not None:
            model.child.close()

    def _read(self, model: _HighsModel, raw: Any, program: Program, options: SolveOptions, seconds: float) -> Readout:
        answer: Answer = raw
        if answer.status == "kOptimal":
            status = SolverStatus.OPTIMAL
        elif answer.status == "kInfeasible":
            status = SolverStatus.INFEASIBLE
        else:
            status = SolverStatus.FEASIBLE if answer.values is not None else SolverStatus.NO_SOLUTION
        return Readout(status, answer.values, answer.message, dict(answer.info))

    def _bound(self, model: _HighsModel, raw: Any, program: Program, options: SolveOptions, status: SolverStatus,
               objective: float | None) -> float | None:
        bound = finite_or_none(raw.dual_bound)
        if status == SolverStatus.OPTIMAL and bound is None and objective is not None:
            bound = objective
        return bound


def _run_counted(h: Any) -> Any:
    """``h.run()``, counted in :data:`_RUNS`: the last run to end resets HiGHS's task scheduler."""
    import highspy

    with _RUNS.lock:
        _RUNS.active += 1
    try:
        return h.run()
    finally:
        with _RUNS.lock:  # held through the reset: no run starts while the scheduler is torn down
            _RUNS.active -= 1
            if _RUNS.active == 0:
                highspy.Highs.resetGlobalScheduler(False)


def _change_bounds(h: Any, program: Program) -> None:
    """Set every column's and row's bounds and the objective offset of the live model ``h`` to
    ``program``'s (same structure); HiGHS keeps its basis for the next run."""
    import highspy

    inf = highspy.kHighsInf
    n, m = program.num_vars, program.num_rows
    col_hi = np.where(np.isinf(program.col_hi), inf, program.col_hi).astype(np.float64)
    h.changeColsBounds(n, np.arange(n, dtype=np.int32), np.asarray(program.col_lo, dtype=np.float64), col_hi)
    row_lo = np.where(np.isinf(program.row_lo), -inf, program.row_lo).astype(np.float64)
    row_hi = np.where(np.isinf(program.row_hi), inf, program.row_hi).astype(np.float64)
    h.changeRowsBounds(m, np.arange(m, dtype=np.int32), row_lo, row_hi)
    h.changeObjectiveOffset(float(program.obj_offset))
