"""A solver-neutral mixed-integer linear program: what every backend takes.

``min c·x + obj_offset`` subject to ``row_lo ≤ A x ≤ row_hi``, ``col_lo ≤ x ≤ col_hi`` and
``x_i`` integer where ``integrality[i]``.  Infinite bounds are ``±inf``.

A :class:`Program` knows nothing of GPUs, jobs or rounds: the round program
(:class:`~pal_opt.ilp.formulation.Formulation`) is one, and any other integer program (a pipeline
partitioner, a configuration program) can be built as one and solved by every backend in
:mod:`pal_opt.ilp.backends`.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> p = Program.from_arrays(c=[1.0, 2.0], A=sp.csr_matrix([[1.0, 1.0]]), row_lo=[1.0], row_hi=[1.0],
...                         col_lo=[0.0, 0.0], col_hi=[1.0, 1.0], integrality=[True, True])
>>> p.num_vars, p.num_rows, p.objective(np.array([1.0, 0.0])), p.is_feasible(np.array([1.0, 1.0]))
(2, 1, 1.0, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import counted

__all__ = ["Program", "read_only"]


@dataclass(frozen=True, eq=False)
class Program:
    """A mixed-integer linear program in sparse, solver-neutral form.

    Attributes
    ----------
    c, obj_offset
        Objective coefficients (one per column) and constant.
    A
        Constraint matrix, ``scipy.sparse.csr_matrix`` of shape (rows, columns).
    row_lo, row_hi
        Row bounds (``-inf`` / ``inf`` where absent; equal for an equality row).
    col_lo, col_hi
        Column bounds.
    integrality
        Boolean per column: must the column be integer?
    var_names, row_names
        Deterministic, LP-format-safe names.
    col_group, group_limit
        Optional rounding information for solvers that need integer objective coefficients
        (CP-SAT): ``col_group[i]`` is the group of column ``i`` (``-1``: none), and every
        feasible solution satisfies ``Σ_{i in group g} x_i ≤ group_limit[g]`` with ``x_i ≥ 0``
        there (a fact the rows imply; it is not a constraint).  It only tightens the bound on the
        error of a rounded objective (:meth:`rounding_excess`); None: every column on its own.
    """

    c: np.ndarray
    obj_offset: float
    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integrality: np.ndarray
    var_names: tuple[str, ...]
    row_names: tuple[str, ...]
    col_group: np.ndarray | None = None
    group_limit: np.ndarray | None = None

    @classmethod
    def from_arrays(
        cls,
        *,
        c: Any,
        A: Any,
        row_lo: Any,
        row_hi: Any,
        col_lo: Any,
        col_hi: Any,
        integrality: Any,
        obj_offset: float = 0.0,
        var_names: Sequence[str] | None = None,
        row_names: Sequence[str] | None = None,
    ) -> Program:
        """A program from array-likes (names default to ``x{i}`` and ``r{i}``); the arrays are
        copied, converted to float64 / bool and made read-only."""
        cc = read_only(np.asarray(c, dtype=np.float64))
        mat = sp.csr_matrix(A, dtype=np.float64, shape=(len(row_lo), cc.size))
        mat.sort_indices()
        return cls(
            c=cc,
            obj_offset=float(obj_offset),
            A=mat,
            row_lo=read_only(np.asarray(row_lo, dtype=np.float64)),
            row_hi=read_only(np.asarray(row_hi, dtype=np.float64)),
            col_lo=read_only(np.asarray(col_lo, dtype=np.float64)),
            col_hi=read_only(np.asarray(col_hi, dtype=np.float64)),
            integrality=read_only(np.asarray(integrality, dtype=bool)),
            var_names=tuple(var_names) if var_names is not None else tuple(f"x{i}" for i in range(cc.size)),
            row_names=tuple(row_names) if row_names is not None else tuple(f"r{i}" for i in range(len(row_lo))),
        )

    def __repr__(self) -> str:
        """Its size, not its arrays (the dataclass's repr printed every coefficient and name)."""
        return (f"<{type(self).__name__}: {counted(self.num_vars, 'variable')} "
                f"({int(np.count_nonzero(self.integrality))} integer), {counted(self.num_rows, 'row')}, "
                f"{counted(int(self.A.nnz), 'nonzero')}>")

    @property
    def num_vars(self) -> int:
        return int(self.c.size)

    @property
    def num_rows(self) -> int:
        return int(self.row_lo.size)

    def objective(self, values: np.ndarray) -> float:
        """Program objective ``c·values + obj_offset``."""
        return float(np.dot(self.c, values)) + self.obj_offset

    def row_activity(self, values: np.ndarray) -> np.ndarray:
        """``A @ values``."""
        return np.asarray(self.A @ values).ravel()

    def is_feasible(self, values: np.ndarray, tol: float = 1e-6) -> bool:
        """Whether ``values`` satisfies every row, bound and integrality requirement."""
        v = np.asarray(values, dtype=np.float64)
        act = self.row_activity(v)
        ok = bool(np.all(act >= self.row_lo - tol) and np.all(act <= self.row_hi + tol))
        ok &= bool(np.all(v >= self.col_lo - tol) and np.all(v <= self.col_hi + tol))
        vi = v[self.integrality]
        return ok and bool(np.all(np.abs(vi - np.round(vi)) <= tol))

    def rounding_excess(self, rounded_c: np.ndarray) -> float:
        """The largest amount by which ``rounded_c·x`` can exceed ``c·x`` over feasible ``x``.

        Columns of a group (:attr:`col_group`) contribute ``group_limit[g] · max(0, max error
        over the group)``; every other column ``max(err · col_lo, err · col_hi)`` (infinite
        when the relevant bound is).  Used by backends that round the objective, so that their
        bound stays valid in real units.
        """
        err = np.asarray(rounded_c, dtype=np.float64) - np.asarray(self.c)
        excess = 0.0
        alone = np.ones(self.num_vars, dtype=bool)
        if self.col_group is not None and self.group_limit is not None:
            for g, limit in enumerate(np.asarray(self.group_limit).tolist()):
                m = self.col_group == g
                if m.any():
                    excess += limit * max(0.0, float(err[m].max()))
            alone = self.col_group < 0
        off = alone & (err != 0)
        if off.any():
            e = err[off]
            with np.errstate(invalid="ignore"):
                worst = np.maximum(e * self.col_lo[off], e * self.col_hi[off])
            excess += float(np.sum(np.maximum(worst, 0.0)))
        return excess


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a contiguous array that cannot be written to (a copy only when ``a`` is not
    contiguous)."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a
