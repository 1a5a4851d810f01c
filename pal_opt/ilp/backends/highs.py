"""HiGHS (via highspy): the default backend.

Translation: the program is passed whole as a ``HighsLp`` in column-wise (CSC) form, with
the objective offset in ``offset_``.  Options:

* ``time_limit`` → ``time_limit``;
* gap: ``mip_rel_gap = 0`` and ``mip_abs_gap = abs_gap`` (or ``1e-9`` to prove optimality;
  HiGHS's default relative gap of 1e-4 would stop short of it);
* ``threads`` → ``threads`` (HiGHS's task scheduler is released after every solve, as highspy
  itself does, so each solve starts one with its own thread count; with solves overlapping in
  one process, by the last of them to end: :class:`_Runs`);
* ``deterministic``: HiGHS's MIP search is deterministic for a given model and options; the
  seed is fixed (``random_seed``).
* warm start: ``setSolution`` with the full start vector; HiGHS checks it and keeps it as the
  first incumbent.
* ``backend_params``: ``setOptionValue(key, value)`` each, after the above; a status other
  than ``kOk`` (an unknown option, a value of the wrong type or out of range) is a rejection.

Ctrl-C: ``Highs.run()`` runs in a helper thread (:func:`~.base.run_interruptibly`) with
highspy's user-interrupt callbacks on; a ``KeyboardInterrupt`` calls ``cancelSolve()``, which
HiGHS acts on at its next simplex, IPM or MIP check (presolve has none: on 2,048-GPU rounds up
to about 3 s), and the backend raises :class:`~.base.BackendInterrupted` with the incumbent.

Progress (:meth:`HighsBackend._observe`, only when someone listens): highspy's MIP callbacks
report the incumbent (improving-solution callback) and the primal and dual bounds (the MIP
interrupt callback, which HiGHS calls at every check; the user-interrupt handling subscribes to
it too, and both run).  With ``output_flag`` off HiGHS calls no logging callback.

The bound is ``mip_dual_bound``.  :meth:`HighsBackend.relaxation_bound` solves the LP
relaxation alone (dual simplex without presolve: on 2,048-GPU rounds HiGHS's presolve takes
seconds, the LP a few tenths of one), which lets :func:`pal_opt.ilp.solve_ilp` stop before the
MIP when the start placement is already within the requested gap.  ortools 9.15 and highspy 1.15.x cannot be loaded in one
process; the package pins highspy 1.12–1.14, which can.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...deadline import Deadline
from ..program import Program
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
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0


_RUNS = _Runs()


@dataclass
class _HighsModel:
    """A ``Highs`` object and what it is handed once configured: the ``HighsLp`` and the start."""

    h: Any
    lp: Any
    start: np.ndarray | None


class HighsBackend(ThreadedBackend):
    """HiGHS branch-and-cut (highspy)."""

    name: ClassVar[str] = "highs"
    requires: ClassVar[tuple[str, ...]] = ("highspy",)
    supports_warm_start: ClassVar[bool] = True
    supports_relaxation: ClassVar[bool] = True
    translate_seconds_per_entry: ClassVar[float] = 1e-6

    @classmethod
    def _solver_version(cls) -> str:
        import highspy

        return str(highspy.Highs().version())

    def relaxation_bound(self, program: Program, options: SolveOptions,
                         state: RelaxationState | None = None) -> float | None:
        """The LP relaxation's optimum (dual simplex, presolve off), lowered by
        :data:`RELAXATION_SAFETY` relative to guard against solver tolerances.  None if HiGHS
        did not solve it (in time); with a deadline, :class:`~pal_opt.errors.TimeLimitReached`
        when there is no time to translate and start it.

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
            model = _HighsModel(state.model, None, None)
            _change_bounds(model.h, program)
        else:
            model = self._translate(program, None)
            model.h.setOptionValue("presolve", "off")
            model.h.setOptionValue("solver", "simplex")
            model.lp.integrality_ = []
            model.h.passModel(model.lp)
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
        import highspy

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        lp = highspy.HighsLp()
        n, m = program.num_vars, program.num_rows
        lp.num_col_ = n
        lp.num_row_ = m
        lp.col_cost_ = np.asarray(program.c, dtype=np.float64)
        lp.col_lower_ = np.asarray(program.col_lo, dtype=np.float64)
        lp.col_upper_ = np.where(np.isinf(program.col_hi), highspy.kHighsInf, program.col_hi).astype(np.float64)
        lp.row_lower_ = np.where(np.isinf(program.row_lo), -highspy.kHighsInf, program.row_lo).astype(np.float64)
        lp.row_upper_ = np.where(np.isinf(program.row_hi), highspy.kHighsInf, program.row_hi).astype(np.float64)
        lp.offset_ = float(program.obj_offset)
        csc = program.A.tocsc()
        csc.sort_indices()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = n
        lp.a_matrix_.num_row_ = m
        lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
        lp.a_matrix_.index_ = csc.indices.astype(np.int32)
        lp.a_matrix_.value_ = csc.data.astype(np.float64)
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
            for flag in program.integrality.tolist()
        ]
        return _HighsModel(h, lp, start)

    def _configure(self, model: _HighsModel, program: Program, options: SolveOptions) -> None:
        import highspy

        h = model.h
        if options.threads is not None:
            h.setOptionValue("threads", int(options.threads))
        if options.time_limit is not None:
            h.setOptionValue("time_limit", float(options.time_limit))
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", float(options.abs_gap) if options.abs_gap > 0 else OPTIMALITY_ABS_GAP)
        h.setOptionValue("random_seed", int(options.seed))
        h.passModel(model.lp)
        if model.start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.asarray(model.start, dtype=np.float64).tolist()
            sol.value_valid = True
            h.setSolution(sol)

    def _set_param(self, model: _HighsModel, key: str, value: Any) -> None:
        import highspy

        status = model.h.setOptionValue(key, value)
        if status != highspy.HighsStatus.kOk:
            raise ValueError(f"HiGHS answered {status.name} (unknown option, or a value of the wrong type or range)")

    def _observe(self, model: _HighsModel, program: Program, watch: SolverWatch) -> None:
        def bounds(event: Any) -> None:
            out = event.data_out
            watch.found(out.mip_primal_bound, out.mip_dual_bound)

        def improved(event: Any) -> None:
            watch.found(event.data_out.objective_function_value)

        model.h.cbMipInterrupt.subscribe(bounds)
        model.h.cbMipImprovingSolution.subscribe(improved)

    def _execute(self, model: _HighsModel, options: SolveOptions) -> tuple[Any, bool]:
        model.h.HandleUserInterrupt = True  # highspy's callbacks on: cancelSolve() is acted on
        return super()._execute(model, options)

    def _run(self, model: _HighsModel) -> Any:
        import highspy

        with _RUNS.lock:
            _RUNS.active += 1
        try:
            return model.h.run()
        finally:
            with _RUNS.lock:  # held through the reset: no run starts while the scheduler is torn down
                _RUNS.active -= 1
                if _RUNS.active == 0:
                    highspy.Highs.resetGlobalScheduler(False)

    def _stop(self, model: _HighsModel) -> None:
        model.h.cancelSolve()

    def _read(self, model: _HighsModel, raw: Any, program: Program, options: SolveOptions, seconds: float) -> Readout:
        import highspy

        h = model.h
        ms = h.getModelStatus()
        info = h.getInfo()
        has_sol = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_sol else None
        if ms == highspy.HighsModelStatus.kOptimal:
            status = SolverStatus.OPTIMAL
        elif ms == highspy.HighsModelStatus.kInfeasible:
            status = SolverStatus.INFEASIBLE
        else:
            status = SolverStatus.FEASIBLE if has_sol else SolverStatus.NO_SOLUTION
        return Readout(status, values, h.modelStatusToString(ms),
                       {"nodes": int(info.mip_node_count), "simplex_iterations": int(info.simplex_iteration_count)})

    def _bound(self, model: _HighsModel, raw: Any, program: Program, options: SolveOptions, status: SolverStatus,
               objective: float | None) -> float | None:
        bound = finite_or_none(model.h.getInfo().mip_dual_bound)
        if status == SolverStatus.OPTIMAL and bound is None and objective is not None:
            bound = objective
        return bound


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
