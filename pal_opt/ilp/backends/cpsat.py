"""OR-Tools CP-SAT.

CP-SAT needs integers everywhere.

* **Matrix and bounds.**  Every coefficient of ``A`` and every finite bound of the formulation
  is already an integer (counts of GPUs and jobs); flow variables become integer variables
  with their bounds, which loses nothing because the flow part is a network matrix.
  ``±inf`` row bounds become ``±2**62``.
* **Objective.**  Coefficients are real (``d · ln`` of factors and penalties).  They are divided
  by :data:`OBJECTIVE_PRECISION` (1e-7 cost units) and rounded to the nearest integer.  A job's
  cost is then off by at most 0.5e-7 (a slot's coefficient is one job's cost), so the chosen
  placement's true cost is within ``1e-7 × (number of jobs)`` of the optimum, and the relative
  geometric-mean error is at most 1e-7 (there are no more jobs than GPUs).  pal-opt always
  reprices the placement with :mod:`pal_opt.cost`.
* **Bound.**  CP-SAT's bound ``B`` on the scaled objective is rounded up (the scaled objective
  is an integer), multiplied back, and made conservative by subtracting the largest possible
  rounding excess: ``Σ_t n_t · max(0, max over t's variables of (precision · round(c/precision) − c))``.
* **Options.**  ``time_limit`` → ``max_time_in_seconds``; gap → ``absolute_gap_limit`` in scaled
  units (``relative_gap_limit = 0``); ``threads`` → ``num_workers`` (default 1: on small round
  programs one LP-guided worker proves optimality fastest, see the benchmark);
  ``deterministic`` → fixed ``random_seed`` and, with more than one worker,
  ``interleave_search = True``, which runs the portfolio in deterministic batches.  A wall-clock
  time limit that stops the search early is the one remaining source of run-to-run variation.
* **Warm start.**  ``solution_hint`` with every variable's start value.
* **Ctrl-C.**  OR-Tools' own SIGINT handler is switched off (``catch_sigint_signal = False``:
  it logs through absl from inside the signal handler, which can deadlock a process
  interrupted inside ``malloc``).  ``solve()`` runs in a helper thread
  (:func:`~.base.run_interruptibly`); a ``KeyboardInterrupt`` calls ``stop_search()``, CP-SAT
  returns its incumbent within a fraction of a second, and the backend raises
  :class:`~.base.BackendInterrupted` with it.
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import numpy as np

from ..formulation import KIND_KEEP, KIND_Z, Formulation
from .base import Backend, BackendInterrupted, BackendSolution, SolveOptions, SolverStatus, run_interruptibly

__all__ = ["CpSatBackend", "OBJECTIVE_PRECISION", "scaled_objective"]

#: Cost units per unit of CP-SAT's integer objective.
OBJECTIVE_PRECISION = 1e-7
_BIG = 2**62


def scaled_objective(form: Formulation, precision: float = OBJECTIVE_PRECISION) -> tuple[np.ndarray, float]:
    """Integer objective coefficients and the largest total rounding excess (cost units).

    Returns ``(q, excess)`` with ``q = round(c / precision)`` and ``excess`` such that for every
    feasible ``x``: ``c·x ≥ precision · q·x − excess``.
    """
    q = np.rint(np.asarray(form.c) / precision).astype(np.int64)
    err = q * precision - np.asarray(form.c)
    excess = 0.0
    slot = (form.var_kind <= KIND_Z) | (form.var_kind == KIND_KEEP)
    for t, jt in enumerate(form.types):
        m = slot & (form.var_type == t)
        if m.any():
            excess += jt.count * max(0.0, float(err[m].max()))
    return q, excess


class CpSatBackend(Backend):
    """OR-Tools CP-SAT."""

    name: ClassVar[str] = "cpsat"
    supports_warm_start: ClassVar[bool] = True
    integer_coefficients: ClassVar[bool] = True

    @classmethod
    def _probe(cls) -> None:
        from ortools.sat.python import cp_model  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return version("ortools")

    def _model(self, form: Formulation, q: np.ndarray, start: np.ndarray | None) -> Any:
        from ortools.sat.python import cp_model

        model = cp_model.CpModel()
        proto = model.proto
        lo = np.where(np.isinf(form.col_lo), -_BIG, form.col_lo).astype(np.int64).tolist()
        hi = np.where(np.isinf(form.col_hi), _BIG, form.col_hi).astype(np.int64).tolist()
        for name, a, b in zip(form.var_names, lo, hi, strict=True):
            v = proto.variables.add()
            v.name = name
            v.domain.extend((a, b))
        A = form.A
        data = A.data
        if data.size and not np.all(data == np.rint(data)):
            raise ValueError("CP-SAT needs integer matrix coefficients")
        rlo = np.where(np.isinf(form.row_lo), -_BIG, np.ceil(form.row_lo)).astype(np.int64).tolist()
        rhi = np.where(np.isinf(form.row_hi), _BIG, np.floor(form.row_hi)).astype(np.int64).tolist()
        ind = A.indices.tolist()
        val = data.astype(np.int64).tolist()
        ptr = A.indptr.tolist()
        for i in range(form.num_rows):
            ct = proto.constraints.add()
            ct.name = form.row_names[i]
            lin = ct.linear
            lin.vars.extend(ind[ptr[i] : ptr[i + 1]])
            lin.coeffs.extend(val[ptr[i] : ptr[i + 1]])
            lin.domain.extend((rlo[i], rhi[i]))
        nz = np.flatnonzero(q)
        proto.objective.vars.extend(nz.tolist())
        proto.objective.coeffs.extend(q[nz].tolist())
        if start is not None:
            s = np.rint(np.asarray(start)).astype(np.int64)
            proto.solution_hint.vars.extend(range(form.num_vars))
            proto.solution_hint.values.extend(s.tolist())
        return model

    def solve(self, form: Formulation, options: SolveOptions, start: np.ndarray | None = None) -> BackendSolution:
        from ortools.sat.python import cp_model

        t0 = time.perf_counter()
        q, excess = scaled_objective(form)
        model = self._model(form, q, start)
        solver = cp_model.CpSolver()
        prm = solver.parameters
        workers = int(options.threads) if options.threads else 1
        prm.num_workers = workers
        prm.random_seed = int(options.seed)
        if options.deterministic and workers > 1:
            prm.interleave_search = True
        if options.time_limit is not None:
            prm.max_time_in_seconds = float(options.time_limit)
        prm.relative_gap_limit = 0.0
        prm.absolute_gap_limit = float(options.abs_gap) / OBJECTIVE_PRECISION if options.abs_gap > 0 else 0.0
        prm.log_search_progress = False
        prm.catch_sigint_signal = False
        t1 = time.perf_counter()
        st, interrupted = run_interruptibly(lambda: solver.solve(model), solver.stop_search)
        t2 = time.perf_counter()
        has_sol = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        values = None
        objective = None
        if has_sol:
            values = np.asarray(solver.response_proto.solution, dtype=np.float64)
            objective = form.objective(values)
        bound = None
        if has_sol or st == cp_model.OPTIMAL:
            b = float(solver.best_objective_bound)
            if math.isfinite(b):
                bound = math.ceil(b - 1e-6) * OBJECTIVE_PRECISION - excess + form.obj_offset
        if st == cp_model.OPTIMAL:
            status = SolverStatus.OPTIMAL
        elif st == cp_model.INFEASIBLE:
            status = SolverStatus.INFEASIBLE
        elif st == cp_model.FEASIBLE:
            status = SolverStatus.FEASIBLE
        elif st == cp_model.MODEL_INVALID:
            from ...errors import BackendError

            raise BackendError(f"CP-SAT rejected the model: {model.validate()}")
        else:
            status = SolverStatus.NO_SOLUTION
        solution = BackendSolution(
            status=status,
            values=values,
            objective=objective,
            bound=bound,
            seconds=t2 - t1,
            translate_seconds=t1 - t0,
            message=solver.status_name(st),
            info={
                "branches": int(solver.num_branches),
                "conflicts": int(solver.num_conflicts),
                "objective_precision": OBJECTIVE_PRECISION,
                "num_workers": workers,
            },
        )
        if interrupted:
            raise BackendInterrupted(solution)
        return solution
