"""CBC through PuLP (``PULP_CBC_CMD``, the CBC binary bundled with PuLP).

Translation: one PuLP variable per column (names kept), one constraint per row (equalities,
``≤`` or ``≥``; a ranged row becomes two).  The objective constant is kept out of the PuLP
model and added back by pal-opt, so the figures CBC prints are ``c·x`` alone.

Options: ``preprocess on`` (see :data:`CBC_OPTIONS`); ``time_limit`` → ``timeLimit``; gap → ``gapAbs`` (``allow``; ``1e-9`` to prove
optimality) with ``gapRel = 0``; ``threads`` → ``threads`` when above 1.  CBC's
single-threaded search is deterministic.  Warm start: every variable's ``setInitialValue`` and
``warmStart=True`` (PuLP hands CBC a MIP start file).

PuLP reports no bound, so CBC's log is written to a temporary file and read: ``Lower bound:``
when the search stopped early (printed with few digits, so one unit of its last printed digit
is subtracted), else the objective minus the allowed gap.  Each solve starts one CBC process,
which costs tens of milliseconds.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import tempfile
import time
from typing import Any, ClassVar

import numpy as np

from ..formulation import Formulation
from .base import Backend, BackendSolution, SolveOptions, SolverStatus

__all__ = ["CbcBackend"]

OPTIMALITY_ABS_GAP = 1e-9
#: Extra CBC options.  ``preprocess on`` keeps CBC's preprocessing but without its default SOS
#: detection: with SOS rows CBC 2.10.3 can return a "solution" whose integer variables are
#: fractional (seen on the type rows ``Σ slots = n_t`` after a MIP start).
CBC_OPTIONS: tuple[str, ...] = ("preprocess on",)
_LOWER = re.compile(r"^Lower bound:\s+(\S+)", re.M)
_VERSION = re.compile(r"Version:\s*(\S+)")


def _conservative(text: str) -> float:
    """A printed number lowered by one unit of its last printed digit."""
    x = float(text)
    mant = text.lower().split("e")[0]
    if "." in mant:
        step = 10.0 ** -(len(mant.split(".")[1]))
    else:
        step = 1.0
    if "e" in text.lower():
        step *= 10.0 ** int(text.lower().split("e")[1])
    return x - step


class CbcBackend(Backend):
    """CBC via PuLP."""

    name: ClassVar[str] = "cbc"
    supports_warm_start: ClassVar[bool] = True
    integer_coefficients: ClassVar[bool] = False
    _version: ClassVar[str | None] = None

    @classmethod
    def _probe(cls) -> None:
        import pulp

        if not pulp.PULP_CBC_CMD(msg=False).available():
            raise ImportError("PuLP is installed but its CBC binary cannot be run")

    @classmethod
    def version(cls) -> str:
        import pulp

        if cls._version is None:
            cbc = "?"
            try:
                out = subprocess.run(
                    [pulp.PULP_CBC_CMD(msg=False).path, "-quit"],
                    capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                ).stdout
                m = _VERSION.search(out)
                if m:
                    cbc = m.group(1)
            except (OSError, subprocess.SubprocessError):
                pass
            cls._version = f"{cbc} (PuLP {pulp.__version__})"
        return cls._version

    def _model(self, form: Formulation, start: np.ndarray | None) -> tuple[Any, list[Any]]:
        import pulp

        prob = pulp.LpProblem("pal_opt_round", pulp.LpMinimize)
        lo = [None if math.isinf(v) else float(v) for v in form.col_lo.tolist()]
        hi = [None if math.isinf(v) else float(v) for v in form.col_hi.tolist()]
        cats = [pulp.LpInteger if f else pulp.LpContinuous for f in form.integrality.tolist()]
        xs = [pulp.LpVariable(nm, lowBound=a, upBound=b, cat=ct) for nm, a, b, ct in zip(form.var_names, lo, hi, cats, strict=True)]
        c = form.c.tolist()
        prob.setObjective(pulp.LpAffineExpression([(xs[i], c[i]) for i in np.flatnonzero(form.c).tolist()]))
        A = form.A
        ind, val, ptr = A.indices.tolist(), A.data.tolist(), A.indptr.tolist()
        rlo, rhi = form.row_lo.tolist(), form.row_hi.tolist()
        for i, name in enumerate(form.row_names):
            expr = pulp.LpAffineExpression([(xs[j], a) for j, a in zip(ind[ptr[i] : ptr[i + 1]], val[ptr[i] : ptr[i + 1]], strict=True)])
            a, b = rlo[i], rhi[i]
            if a == b:
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintEQ, rhs=b), name)
                continue
            if not math.isinf(b):
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=b), name if math.isinf(a) else name + "_hi")
            if not math.isinf(a):
                prob.addConstraint(pulp.LpConstraint(expr, pulp.LpConstraintGE, rhs=a), name if math.isinf(b) else name + "_lo")
        if start is not None:
            for x, v in zip(xs, np.asarray(start, dtype=np.float64).tolist(), strict=True):
                x.setInitialValue(round(v) if x.cat == pulp.LpInteger else v)
        return prob, xs

    def solve(self, form: Formulation, options: SolveOptions, start: np.ndarray | None = None) -> BackendSolution:
        import pulp

        t0 = time.perf_counter()
        prob, xs = self._model(form, start)
        fd, log_path = tempfile.mkstemp(prefix="pal_opt_cbc_", suffix=".log")
        os.close(fd)
        gap = float(options.abs_gap) if options.abs_gap > 0 else OPTIMALITY_ABS_GAP
        kwargs: dict[str, Any] = dict(msg=False, gapRel=0, gapAbs=gap, logPath=log_path, warmStart=start is not None,
                                      options=list(CBC_OPTIONS))
        if options.time_limit is not None:
            kwargs["timeLimit"] = float(options.time_limit)
        if options.threads is not None and options.threads > 1:
            kwargs["threads"] = int(options.threads)
        solver = pulp.PULP_CBC_CMD(**kwargs)
        t1 = time.perf_counter()
        try:
            prob.solve(solver)
            with open(log_path, encoding="utf-8", errors="replace") as fh:
                log = fh.read()
        finally:
            try:
                os.remove(log_path)
            except OSError:
                pass
        t2 = time.perf_counter()
        m = _VERSION.search(log)
        if m and CbcBackend._version is None:
            CbcBackend._version = f"{m.group(1)} (PuLP {pulp.__version__})"
        sol_status = prob.sol_status
        values = None
        objective = None
        if sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            values = np.asarray([x.varValue if x.varValue is not None else 0.0 for x in xs], dtype=np.float64)
            objective = form.objective(values)
        bound = None
        lb = _LOWER.search(log)
        if lb:
            try:
                bound = _conservative(lb.group(1)) + form.obj_offset
            except ValueError:
                bound = None
        if sol_status == pulp.LpSolutionOptimal:
            status = SolverStatus.OPTIMAL
            if bound is None and objective is not None:
                bound = objective - gap
        elif sol_status == pulp.LpSolutionIntegerFeasible:
            status = SolverStatus.FEASIBLE
        elif prob.status == pulp.LpStatusInfeasible:
            status = SolverStatus.INFEASIBLE
        else:
            status = SolverStatus.NO_SOLUTION
        if bound is not None and objective is not None:
            bound = min(bound, objective)
        result_line = next((ln for ln in log.splitlines() if ln.startswith("Result - ")), "")
        return BackendSolution(
            status=status,
            values=values,
            objective=objective,
            bound=bound,
            seconds=t2 - t1,
            translate_seconds=t1 - t0,
            message=result_line[len("Result - "):] or pulp.LpStatus.get(prob.status, "unknown"),
            info={},
        )
