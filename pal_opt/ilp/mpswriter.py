"""A program's LP relaxation as free-format MPS text, written with whole-array operations.

For solvers that read files (the CBC binary's LP solver, CLP): every column continuous (no
integrality markers), every number printed exactly (Python's shortest round-trip form, so the
solver reads back the same doubles; OR-Tools' own MPS export prints six significant digits,
which changes the LP), rows ``R<i>`` and columns ``C<j>``.  The objective constant is left out
(the caller adds it back).  Rows without bounds on either side are dropped (they constrain
nothing).  Each column's objective entry is written, zero or not, so that every column appears
in ``COLUMNS`` before ``BOUNDS`` names it.
"""

from __future__ import annotations

import os

import numpy as np

from .program import Program

__all__ = ["lp_mps_text", "write_lp_mps"]


def _rows(program: Program, keep: np.ndarray) -> tuple[list[str], list[str], list[str]]:
    """``ROWS``, ``RHS`` and ``RANGES`` lines for the rows in ``keep``."""
    lo, hi = program.row_lo[keep], program.row_hi[keep]
    eq = lo == hi
    le = ~eq & np.isfinite(hi)  # ranged rows are L rows with a range
    ge = ~eq & ~le
    kind = np.where(eq, "E", np.where(le, "L", "G"))
    rhs = np.where(ge, lo, hi)
    ranged = le & np.isfinite(lo)
    rows = [f" {k} R{i}" for i, k in enumerate(kind.tolist())]
    rhs_lines = [f" RHS R{i} {v!r}" for i, v in zip(np.flatnonzero(rhs).tolist(), rhs[rhs != 0].tolist(), strict=True)]
    rng = np.flatnonzero(ranged)
    ranges = [f" RNG R{i} {v!r}" for i, v in zip(rng.tolist(), (hi[rng] - lo[rng]).tolist(), strict=True)]
    return rows, rhs_lines, ranges


def _bounds(program: Program) -> list[str]:
    """``BOUNDS`` lines: the MPS default is ``[0, inf)``; every other column is spelled out."""
    lo, hi = np.asarray(program.col_lo, dtype=np.float64), np.asarray(program.col_hi, dtype=np.float64)
    out: list[str] = []
    for j, a, b in zip(range(lo.size), lo.tolist(), hi.tolist(), strict=True):
        if a == b:
            out.append(f" FX BND C{j} {a!r}")
        elif a == -np.inf and b == np.inf:
            out.append(f" FR BND C{j} 0.0")  # CBC 2.10 misreads the line without a value
        else:
            if a == -np.inf:
                out.append(f" MI BND C{j} 0.0")
            elif a != 0 or b < 0:
                out.append(f" LO BND C{j} {a!r}")
            if b != np.inf:
                out.append(f" UP BND C{j} {b!r}")
    return out


def lp_mps_text(program: Program) -> str:
    """The LP relaxation of ``program`` (objective constant left out) as free MPS text."""
    n = program.num_vars
    keep = ~(np.isinf(program.row_lo) & np.isinf(program.row_hi))
    new_row = np.cumsum(keep) - 1
    csc = program.A.tocsc()
    csc.sort_indices()
    cols = np.repeat(np.arange(n), np.diff(csc.indptr))
    live = keep[csc.indices]
    # one objective entry per column (row -1), then its matrix entries, in column order
    all_cols = np.concatenate([np.arange(n), cols[live]])
    all_rows = np.concatenate([np.full(n, -1), new_row[csc.indices[live]]])
    all_vals = np.concatenate([np.asarray(program.c, dtype=np.float64), csc.data[live].astype(np.float64)])
    order = np.argsort(all_cols, kind="stable")
    entries = [f" C{j} {'OBJ' if i < 0 else f'R{i}'} {v!r}"
               for j, i, v in zip(all_cols[order].tolist(), all_rows[order].tolist(), all_vals[order].tolist(),
                                  strict=True)]
    rows, rhs, ranges = _rows(program, keep)
    parts = ["NAME pal_opt_lp", "ROWS", " N OBJ", *rows, "COLUMNS", *entries, "RHS", *rhs]
    if ranges:
        parts += ["RANGES", *ranges]
    parts += ["BOUNDS", *_bounds(program), "ENDATA"]
    return "\n".join(parts) + "\n"


def write_lp_mps(program: Program, path: str | os.PathLike[str]) -> None:
    """Write :func:`lp_mps_text` to ``path``."""
    with open(path, "w", encoding="ascii", newline="\n") as fh:
        fh.write(lp_mps_text(program))
