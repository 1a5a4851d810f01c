"""HiGHS (via highspy): the default backend.

Translation: the formulation is passed whole as a ``HighsLp`` in column-wise (CSC) form, with
the objective offset in ``offset_``.  Options:

* ``time_limit`` → ``time_limit``;
* gap: ``mip_rel_gap = 0`` and ``mip_abs_gap = abs_gap`` (or ``1e-9`` to prove optimality;
  HiGHS's default relative gap of 1e-4 would stop short of it);
* ``threads`` → ``threads`` (HiGHS's task scheduler is released after every solve, as highspy
  itself does, so each solve starts one with its own thread count);
* ``deterministic``: HiGHS's MIP search is deterministic for a given model and options; the
  seed is fixed (``random_seed``).
* warm start: ``setSolution`` with the full start vector; HiGHS checks it and keeps it as the
  first incumbent.

Ctrl-C: ``Highs.run()`` runs in a helper thread (:func:`~.base.run_interruptibly`) with
highspy's user-interrupt callbacks on; a ``KeyboardInterrupt`` calls ``cancelSolve()``, which
HiGHS acts on at its next simplex, IPM or MIP check (presolve has none: on 2,048-GPU rounds up
to about 3 s), and the backend raises :class:`~.base.BackendInterrupted` with the incumbent.

The bound is ``mip_dual_bound``.  :meth:`HighsBackend.relaxation_bound` solves the LP
relaxation alone (dual simplex without presolve: on 2,048-GPU rounds HiGHS's presolve takes
seconds, the LP a few tenths of one), which lets :func:`pal_opt.ilp.solve_ilp` stop before the
MIP when the start placement is already within the requested gap.  ortools 9.15 and highspy 1.15.x cannot be loaded in one
process; the package pins highspy 1.12–1.14, which can.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from ..formulation import Formulation
from .base import (
    Backend,
    BackendInterrupted,
    BackendSolution,
    SolveOptions,
    SolverStatus,
    finite_or_none,
    run_interruptibly,
)

__all__ = ["HighsBackend"]

#: Absolute gap used when proven optimality is asked for.
OPTIMALITY_ABS_GAP = 1e-9
#: Relative amount the LP relaxation's optimum is lowered by before it is used as a bound.
RELAXATION_SAFETY = 1e-9


class HighsBackend(Backend):
    """HiGHS branch-and-cut (highspy)."""

    name: ClassVar[str] = "highs"
    supports_warm_start: ClassVar[bool] = True
    integer_coefficients: ClassVar[bool] = False
    supports_relaxation: ClassVar[bool] = True

    @classmethod
    def _probe(cls) -> None:
        import highspy  # noqa: F401

    @classmethod
    def version(cls) -> str:
        import highspy

        return str(highspy.Highs().version())

    def relaxation_bound(self, form: Formulation, options: SolveOptions) -> float | None:
        """The LP relaxation's optimum (dual simplex, presolve off), lowered by
        :data:`RELAXATION_SAFETY` relative to guard against solver tolerances."""
        import highspy

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("presolve", "off")
        h.setOptionValue("solver", "simplex")
        if options.time_limit is not None:
            h.setOptionValue("time_limit", float(options.time_limit))
        lp = self._model(form)
        lp.integrality_ = []
        h.passModel(lp)
        _, interrupted = self._run(h)
        if interrupted:
            raise BackendInterrupted(None)
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        obj = float(h.getInfo().objective_function_value)
        return obj - RELAXATION_SAFETY * max(1.0, abs(obj))

    @staticmethod
    def _run(h: Any) -> tuple[Any, bool]:
        """``h.run()`` in a helper thread, stoppable with Ctrl-C (see the module docstring)."""
        import highspy

        h.HandleUserInterrupt = True

        def work() -> Any:
            try:
                return h.run()
            finally:
                highspy.Highs.resetGlobalScheduler(False)

        return run_interruptibly(work, h.cancelSolve)

    def _model(self, form: Formulation) -> Any:
        import highspy

        lp = highspy.HighsLp()
        n, m = form.num_vars, form.num_rows
        lp.num_col_ = n
        lp.num_row_ = m
        lp.col_cost_ = np.asarray(form.c, dtype=np.float64)
        lp.col_lower_ = np.asarray(form.col_lo, dtype=np.float64)
        lp.col_upper_ = np.where(np.isinf(form.col_hi), highspy.kHighsInf, form.col_hi).astype(np.float64)
        lp.row_lower_ = np.where(np.isinf(form.row_lo), -highspy.kHighsInf, form.row_lo).astype(np.float64)
        lp.row_upper_ = np.where(np.isinf(form.row_hi), highspy.kHighsInf, form.row_hi).astype(np.float64)
        lp.offset_ = float(form.obj_offset)
        csc = form.A.tocsc()
        csc.sort_indices()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = n
        lp.a_matrix_.num_row_ = m
        lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
        lp.a_matrix_.index_ = csc.indices.astype(np.int32)
        lp.a_matrix_.value_ = csc.data.astype(np.float64)
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
            for flag in form.integrality.tolist()
        ]
        return lp

    def solve(self, form: Formulation, options: SolveOptions, start: np.ndarray | None = None) -> BackendSolution:
        import highspy

        t0 = time.perf_counter()
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        if options.threads is not None:
            h.setOptionValue("threads", int(options.threads))
        if options.time_limit is not None:
            h.setOptionValue("time_limit", float(options.time_limit))
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", float(options.abs_gap) if options.abs_gap > 0 else OPTIMALITY_ABS_GAP)
        h.setOptionValue("random_seed", int(options.seed))
        h.passModel(self._model(form))
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.asarray(start, dtype=np.float64).tolist()
            sol.value_valid = True
            h.setSolution(sol)
        t1 = time.perf_counter()
        _, interrupted = self._run(h)
        t2 = time.perf_counter()
        ms = h.getModelStatus()
        info = h.getInfo()
        has_sol = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_sol else None
        bound = finite_or_none(info.mip_dual_bound)
        if ms == highspy.HighsModelStatus.kOptimal:
            status = SolverStatus.OPTIMAL
        elif ms == highspy.HighsModelStatus.kInfeasible:
            status = SolverStatus.INFEASIBLE
        else:
            status = SolverStatus.FEASIBLE if has_sol else SolverStatus.NO_SOLUTION
        objective = form.objective(values) if values is not None else None
        if status == SolverStatus.OPTIMAL and bound is None and objective is not None:
            bound = objective
        solution = BackendSolution(
            status=status,
            values=values,
            objective=objective,
            bound=bound,
            seconds=t2 - t1,
            translate_seconds=t1 - t0,
            message=h.modelStatusToString(ms),
            info={"nodes": int(info.mip_node_count), "simplex_iterations": int(info.simplex_iteration_count)},
        )
        if interrupted:
            raise BackendInterrupted(solution)
        return solution
