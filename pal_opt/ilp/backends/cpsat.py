"""OR-Tools CP-SAT.

CP-SAT needs integers everywhere.

* **Matrix and bounds.**  Every coefficient of ``A`` and every finite bound of the program must
  be an integer (in the round program they are counts of GPUs and jobs); continuous columns
  become integer variables with their bounds, which loses nothing in the round program because
  its flow part is a network matrix.  ``±inf`` bounds become ``±2**62``.
* **Objective.**  Coefficients are real (``d · ln`` of factors and penalties).  They are divided
  by :data:`OBJECTIVE_PRECISION` (1e-7 cost units) and rounded to the nearest integer.  A job's
  cost is then off by at most 0.5e-7 (a slot's coefficient is one job's cost), so the chosen
  placement's true cost is within ``1e-7 × (number of jobs)`` of the optimum, and the relative
  geometric-mean error is at most 1e-7 (there are no more jobs than GPUs).  pal-opt always
  reprices the placement with :mod:`pal_opt.cost`.
* **Bound.**  CP-SAT's bound ``B`` on the scaled objective is rounded up (the scaled objective
  is an integer), multiplied back, and made conservative by subtracting the largest possible
  rounding excess (:meth:`~pal_opt.ilp.program.Program.rounding_excess`; for the round
  program ``Σ_t n_t · max(0, max over t's variables of (precision · round(c/precision) − c))``).
* **Options.**  ``time_limit`` → ``max_time_in_seconds``; gap → ``absolute_gap_limit`` in scaled
  units (``relative_gap_limit = 0``); ``threads`` → ``num_workers`` (default 1: on small round
  programs one LP-guided worker proves optimality fastest, see the benchmark);
  ``deterministic`` → fixed ``random_seed`` and, with more than one worker,
  ``interleave_search = True``, which runs the portfolio in deterministic batches.  A wall-clock
  time limit that stops the search early is the one remaining source of run-to-run variation.
  ``backend_params``: ``SatParameters`` fields set by name after the above (an enum field also
  takes its value's name, e.g. ``{"search_branching": "FIXED_SEARCH"}``).
* **Programs with drop variables** (``ilp-preempt``, :attr:`CpSatBackend.preempt_params`):
  ``linearization_level = 2`` unless the caller sets it.  CP-SAT's default LP (level 1) leaves
  out most of those programs' constraints from its relaxation, so it found the optimum at once
  but could not prove it: a 16-GPU round with two pipelines stayed at a 1,114 % gap for 60 s,
  proven in 0.035 s at level 2, where HiGHS takes 0.025 s.  Measured on one core, 2026-12-06:
  ``mid-32x8`` 12.1 s → 2.6 s, ``racked-64x8`` 35.7 s → 27.9 s, a 256-GPU round of Sia's three
  types still at 0.12 % after 30 s → proven in 12.1 s.  On the plain round program level 2 is no
  better (a 512-GPU round took 3.9 s instead of 0.9 s), so ``ilp`` keeps the default.
* **Warm start.**  ``solution_hint`` with every variable's start value.
* **Progress** (:meth:`CpSatBackend._observe`, only when someone listens): a solution callback
  reports each improving solution's objective and CP-SAT's ``best_bound_callback`` each better
  bound, both converted back to program units as above.  They only observe: the search is the
  same with or without them.
* **Ctrl-C.**  OR-Tools' own SIGINT handler is switched off (``catch_sigint_signal = False``:
  it logs through absl from inside the signal handler, which can deadlock a process
  interrupted inside ``malloc``).  ``solve()`` runs in a helper thread
  (:func:`~.base.run_interruptibly`); a ``KeyboardInterrupt`` calls ``stop_search()``, CP-SAT
  returns its incumbent within a fraction of a second, and the backend raises
  :class:`~.base.BackendInterrupted` with it.
* **LP relaxation** (:meth:`CpSatBackend.relaxation_bound`, which lets
  :func:`pal_opt.ilp.solve_ilp` stop before the search when the start placement is already
  within the requested gap).  CP-SAT itself has no LP-only mode, so the bound comes from
  OR-Tools' own LP solver, GLOP (primal simplex, its presolve off: see :data:`GLOP_PARAMETERS`),
  on the program in real coefficients (no objective scaling).  The model is handed over whole
  (``model_builder_helper.ModelBuilderHelper.fill_model_from_sparse_data``: a few milliseconds
  on 2,048-GPU rounds, where the LP takes about half a second).  Its optimum is lowered by
  :data:`RELAXATION_SAFETY` relative (GLOP's feasibility tolerances); None when GLOP did not
  prove it optimal in time.  ``solve()`` runs in a helper thread like the search;
  ``interrupt_solve()`` stops it on Ctrl-C or at the deadline.  GLOP is slow on the flow-free
  relaxations of very large rounds (95 s at 65,536 GPUs, where HiGHS takes 5 s), so
  :mod:`pal_opt.ilp.scale` hands those above :attr:`CpSatBackend.relaxation_max_entries` to
  HiGHS when it is installed, and :func:`pal_opt.ilp.solve.solve_ilp` does the same with round
  programs with GPU types (:data:`pal_opt.ilp.solve.PROGRAM_LP_OWN_MAX_ENTRIES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...deadline import Deadline
from ...errors import BackendError, OptionError
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
)

__all__ = ["CpSatBackend", "OBJECTIVE_PRECISION", "RELAXATION_SAFETY", "GLOP_PARAMETERS", "scaled_objective"]

#: Cost units per unit of CP-SAT's integer objective.
OBJECTIVE_PRECISION = 1e-7
_BIG = 2**62
#: Relative amount GLOP's LP optimum is lowered by before it is used as a bound (its primal and
#: dual feasibility tolerances are of the order of 1e-7; on 2,048-GPU rounds GLOP's and CLP's
#: optima agree to the last printed digit and lie 1e-9 relative above HiGHS's).
RELAXATION_SAFETY = 1e-7
#: GLOP parameters for the LP relaxation: on 2,048-GPU round programs the primal simplex without
#: presolve takes 0.40 s, with presolve 0.57 s, the dual simplex 0.7-0.9 s (PDLP: 3.5 s).
GLOP_PARAMETERS = "use_preprocessing: false"
#: Seconds per matrix entry and column to hand the program to GLOP (measured: 2 ms for 110,000).
LP_TRANSLATE_SECONDS_PER_ENTRY = 2e-7


def scaled_objective(program: Program, precision: float = OBJECTIVE_PRECISION) -> tuple[np.ndarray, float]:
    """Integer objective coefficients and the largest total rounding excess (cost units).

    Returns ``(q, excess)`` with ``q = round(c / precision)`` and ``excess`` such that for every
    feasible ``x``: ``c·x ≥ precision · q·x − excess``.
    """
    q = np.rint(np.asarray(program.c) / precision).astype(np.int64)
    return q, program.rounding_excess(q * precision)


@dataclass
class _CpSatModel:
    """The CP model, its solver and what reading the answer back needs."""

    model: Any
    solver: Any
    excess: float
    workers: int = 1
    callback: Any = None  # a CpSolverSolutionCallback while progress is watched


class CpSatBackend(ThreadedBackend):
    """OR-Tools CP-SAT."""

    name: ClassVar[str] = "cpsat"
    lp_solver: ClassVar[str] = "GLOP"
    integer_coefficients: ClassVar[bool] = True
    supports_warm_start: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("ortools.sat.python.cp_model",)
    translate_seconds_per_entry: ClassVar[float] = 7e-6
    supports_relaxation: ClassVar[bool] = True
    #: the module's *Programs with drop variables*
    preempt_params: ClassVar[dict[str, Any]] = {"linearization_level": 2}
    #: GLOP solves the flow-free relaxation of an 8,192-GPU round (160,000 entries and columns
    #: with Longhorn factors, 230,000 with synthetic ones) in 1.5-2.5 s (HiGHS 0.8 s) and 6.7 s
    #: (HiGHS 5.1 s), of a 16,384-GPU one (360,000) in 31 s (HiGHS 13 s), of a 65,536-GPU one
    #: (1.1 million) in 95 s (HiGHS 4.7 s).
    relaxation_max_entries: ClassVar[int | None] = 250_000

    @classmethod
    def _solver_version(cls) -> str:
        from importlib.metadata import version

        return version("ortools")

    def relaxation_bound(self, program: Program, options: SolveOptions,
                         state: RelaxationState | None = None) -> float | None:
        """The LP relaxation's optimum by GLOP (module docstring), lowered by
        :data:`RELAXATION_SAFETY` relative.  None if GLOP did not prove it optimal (in time);
        with a deadline, :class:`~pal_opt.errors.TimeLimitReached` when there is no time to
        translate and start it; :class:`~.base.BackendInterrupted` (without a solution) on Ctrl-C.
        ``state`` only records that the LP started cold (GLOP's model is not kept between rounds)."""
        from ortools.linear_solver.python import model_builder_helper as mbh

        if state is not None:
            state.last = "cold: GLOP's model is not kept between rounds"
        if options.deadline is not None:
            need = 0.02 + LP_TRANSLATE_SECONDS_PER_ENTRY * (program.A.nnz + program.num_vars)
            Deadline(options.deadline).check("translating the LP relaxation for GLOP", need=need)
        lp: Any = mbh.ModelBuilderHelper()  # OR-Tools' stubs type the arrays wrongly
        lp.fill_model_from_sparse_data(
            np.asarray(program.col_lo, dtype=np.float64), np.asarray(program.col_hi, dtype=np.float64),
            np.asarray(program.c, dtype=np.float64), np.asarray(program.row_lo, dtype=np.float64),
            np.asarray(program.row_hi, dtype=np.float64), program.A.tocsr().astype(np.float64))
        glop: Any = mbh.ModelSolverHelper("glop")
        glop.set_solver_specific_parameters(GLOP_PARAMETERS)
        options = self._fit_to_deadline(options, "solving the LP relaxation")
        if options.time_limit is not None:
            glop.set_time_limit_in_seconds(float(options.time_limit))

        def stop() -> None:
            glop.interrupt_solve()

        try:
            with self._watched(None, program, "solving the LP relaxation (GLOP)", observe=False):
                _, interrupted = self._interruptible(lambda: glop.solve(lp), stop, options)
        except BackendOverran:
            return None
        if interrupted:
            raise BackendInterrupted(None)
        if glop.status() != mbh.SolveStatus.OPTIMAL:
            return None
        obj = float(glop.objective_value()) + float(program.obj_offset)
        return obj - RELAXATION_SAFETY * max(1.0, abs(obj))

    def _translate(self, program: Program, start: np.ndarray | None) -> _CpSatModel:
        from ortools.sat.python import cp_model

        q, excess = scaled_objective(program)
        model = cp_model.CpModel()
        proto = model.proto
        lo = np.where(np.isinf(program.col_lo), -_BIG, program.col_lo).astype(np.int64).tolist()
        hi = np.where(np.isinf(program.col_hi), _BIG, program.col_hi).astype(np.int64).tolist()
        for name, a, b in zip(program.var_names, lo, hi, strict=True):
            v = proto.variables.add()
            v.name = name
            v.domain.extend((a, b))
        A = program.A
        data = A.data
        if data.size and not np.all(data == np.rint(data)):
            raise ValueError("CP-SAT needs integer matrix coefficients")
        rlo = np.where(np.isinf(program.row_lo), -_BIG, np.ceil(program.row_lo)).astype(np.int64).tolist()
        rhi = np.where(np.isinf(program.row_hi), _BIG, np.floor(program.row_hi)).astype(np.int64).tolist()
        ind, val, ptr = A.indices.tolist(), data.astype(np.int64).tolist(), A.indptr.tolist()
        for i in range(program.num_rows):
            ct = proto.constraints.add()
            ct.name = program.row_names[i]
            lin = ct.linear
            lin.vars.extend(ind[ptr[i] : ptr[i + 1]])
            lin.coeffs.extend(val[ptr[i] : ptr[i + 1]])
            lin.domain.extend((rlo[i], rhi[i]))
        nz = np.flatnonzero(q)
        proto.objective.vars.extend(nz.tolist())
        proto.objective.coeffs.extend(q[nz].tolist())
        if start is not None:
            s = np.rint(np.asarray(start)).astype(np.int64)
            proto.solution_hint.vars.extend(range(program.num_vars))
            proto.solution_hint.values.extend(s.tolist())
        return _CpSatModel(model, cp_model.CpSolver(), excess)

    def _configure(self, model: _CpSatModel, program: Program, options: SolveOptions) -> None:
        prm = model.solver.parameters
        model.workers = workers = int(options.threads) if options.threads else 1
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

    def _param_model(self) -> _CpSatModel:
        from ortools.sat.python import cp_model

        return _CpSatModel(None, cp_model.CpSolver(), 0.0)

    def _set_param(self, model: _CpSatModel, key: str, value: Any) -> None:
        prm = model.solver.parameters
        if key.startswith("_") or not hasattr(prm, key) or callable(getattr(prm, key)):
            raise AttributeError("no such SatParameters field")
        if isinstance(value, str) and isinstance(getattr(type(prm), value, None), type(getattr(prm, key))):
            value = getattr(type(prm), value)  # an enum field given by its value's name
        setattr(prm, key, value)
        if key == "num_workers":
            model.workers = int(value)

    def _observe(self, model: _CpSatModel, program: Program, watch: SolverWatch) -> None:
        from ortools.sat.python import cp_model

        class Found(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                watch.found(self.objective_value * OBJECTIVE_PRECISION + program.obj_offset,
                            _bound_units(self.best_objective_bound, model, program))

        model.callback = Found()
        model.solver.best_bound_callback = lambda b: watch.found(bound=_bound_units(b, model, program))

    def _run(self, model: _CpSatModel) -> Any:
        return model.solver.solve(model.model, model.callback)

    def _stop(self, model: _CpSatModel) -> None:
        model.solver.stop_search()

    def _read(self, model: _CpSatModel, raw: Any, program: Program, options: SolveOptions, seconds: float) -> Readout:
        from ortools.sat.python import cp_model

        st, solver = raw, model.solver
        if st == cp_model.MODEL_INVALID:
            why = model.model.validate()
            if not why:  # the model is valid: a parameter is not (--backend-param max_time_in_seconds=-5)
                raise OptionError(f"cpsat rejected backend parameter(s): {solver.solution_info()}")
            raise BackendError(f"CP-SAT rejected the model: {why}")
        statuses = {cp_model.OPTIMAL: SolverStatus.OPTIMAL, cp_model.INFEASIBLE: SolverStatus.INFEASIBLE,
                    cp_model.FEASIBLE: SolverStatus.FEASIBLE}
        values = None
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            values = np.asarray(solver.response_proto.solution, dtype=np.float64)
        info = {"branches": int(solver.num_branches), "conflicts": int(solver.num_conflicts),
                "objective_precision": OBJECTIVE_PRECISION, "num_workers": model.workers}
        return Readout(statuses.get(st, SolverStatus.NO_SOLUTION), values, solver.status_name(st), info)

    def _bound(self, model: _CpSatModel, raw: Any, program: Program, options: SolveOptions, status: SolverStatus,
               objective: float | None) -> float | None:
        if status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            return None
        return _bound_units(model.solver.best_objective_bound, model, program)


def _bound_units(scaled: float, model: _CpSatModel, program: Program) -> float | None:
    """CP-SAT's bound on the scaled objective as a valid bound in program units (None if it is
    not finite)."""
    b = float(scaled)
    if not math.isfinite(b):
        return None
    return math.ceil(b - 1e-6) * OBJECTIVE_PRECISION - model.excess + program.obj_offset
