"""Build a :class:`~pal_opt.ilp.program.Program` column by column and row by row, in numpy chunks.

The round program (:mod:`pal_opt.ilp.formulation`) is built with it, and so can any other
integer program: columns carry integer metadata of the caller's choosing (``kind``, ``type``,
...), rows are added in batches with their entries, and ``≤`` rows that the column bounds
already imply can be dropped as they are added.  Costs are not set column by column: the
objective is computed once all columns exist and handed to :meth:`ProgramBuilder.finish`.

Examples
--------
>>> import numpy as np
>>> b = ProgramBuilder(meta=("kind",))
>>> cols = b.add_cols(["a", "b"], lo=0, hi=[1, 3], integer=True, kind=7)
>>> b.add_rows(["pick"], 1, 1, np.array([0, 0]), cols, np.ones(2))
>>> b.add_le_rows(["cap"], np.array([5.0]), np.array([0, 0]), cols, np.ones(2))  # implied: dropped
>>> program, meta = b.finish(np.array([1.0, 2.0]))
>>> program.num_vars, program.row_names, meta["kind"].tolist()
(2, ('pick',), [7, 7])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .program import Program, read_only

__all__ = ["ProgramBuilder"]


class ProgramBuilder:
    """Accumulates columns, rows and matrix entries (see the module docstring).

    Parameters
    ----------
    meta
        Names of the integer metadata kept per column (``-1`` where a column gives none).
    """

    def __init__(self, meta: Sequence[str] = ()) -> None:
        self.meta_keys = tuple(meta)
        self.ncol = 0
        self.nrow = 0
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("lo", "hi", "integer", *self.meta_keys)}
        self.col_names: list[str] = []
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []
        self.row_names: list[str] = []
        self.ent: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._hi_cache: np.ndarray | None = None  # by hand, not cached_property: add_cols drops it

    def add_cols(self, names: list[str], *, lo: Any, hi: Any, integer: bool, **meta: Any) -> np.ndarray:
        """Add one column per name (bounds and metadata scalars or arrays); returns their indices."""
        n = len(names)
        idx = np.arange(self.ncol, self.ncol + n, dtype=np.int64)
        full = lambda v, dt: np.broadcast_to(np.asarray(v, dtype=dt), (n,)).copy()  # noqa: E731
        self.cols["lo"].append(full(lo, np.float64))
        self.cols["hi"].append(full(hi, np.float64))
        self.cols["integer"].append(full(integer, bool))
        for k in self.meta_keys:
            self.cols[k].append(full(meta.get(k, -1), np.int64))
        self.col_names.extend(names)
        self.ncol += n
        self._hi_cache = None
        return idx

    def meta(self, key: str) -> np.ndarray:
        """One metadata column of the columns added so far (int64)."""
        parts = self.cols[key]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def col_hi(self) -> np.ndarray:
        """Upper bounds of the columns added so far."""
        if self._hi_cache is None:
            self._hi_cache = np.concatenate(self.cols["hi"]) if self.cols["hi"] else np.zeros(0)
        return self._hi_cache

    def add_rows(self, names: list[str], lo: Any, hi: Any, r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        """Add rows ``lo ≤ Σ v x ≤ hi`` whose entries ``(r, c, v)`` use row indices local to this
        batch (``0 .. len(names) − 1``)."""
        n = len(names)
        self.row_lo.append(np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,)).copy())
        self.row_hi.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,)).copy())
        self.row_names.extend(names)
        self.ent.append((np.asarray(r, dtype=np.int64) + self.nrow, np.asarray(c, dtype=np.int64),
                         np.asarray(v, dtype=np.float64)))
        self.nrow += n

    def add_le_rows(self, names: list[str], hi: np.ndarray, r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        """Add ``Σ v x ≤ hi`` rows (non-negative entries on non-negative columns), dropping the
        ones the column bounds already imply (``Σ v · col_hi ≤ hi``)."""
        hi = np.asarray(hi, dtype=np.float64)
        if hi.size == 0:
            return
        reach = np.bincount(r, weights=v * self.col_hi()[c], minlength=hi.size)
        keep = reach > hi + 1e-9
        if not keep.any():
            return
        new = np.full(hi.size, -1, dtype=np.int64)
        new[keep] = np.arange(int(keep.sum()))
        m = keep[r]
        kept_names = [nm for nm, k in zip(names, keep.tolist(), strict=True) if k]
        self.add_rows(kept_names, -np.inf, hi[keep], new[r[m]], c[m], v[m])

    def finish(
        self,
        c: np.ndarray,
        obj_offset: float = 0.0,
        patch: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[Program, dict[str, np.ndarray]]:
        """The program with objective ``c·x + obj_offset``, and the read-only metadata arrays;
        ``patch`` overwrites metadata ``{key: (columns, values)}`` first."""
        cat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self.cols.items()}
        for k, (idx, val) in (patch or {}).items():
            cat[k][idx] = val
        if self.ent:
            r, cc, v = (np.concatenate([e[k] for e in self.ent]) for k in range(3))
        else:
            r = cc = np.zeros(0, dtype=np.int64)
            v = np.zeros(0)
        A = sp.csr_matrix((v, (r, cc)), shape=(self.nrow, self.ncol))
        A.sum_duplicates()
        A.sort_indices()
        program = Program(
            c=read_only(np.asarray(c, dtype=np.float64)),
            obj_offset=obj_offset,
            A=A,
            row_lo=read_only(np.concatenate(self.row_lo) if self.row_lo else np.zeros(0)),
            row_hi=read_only(np.concatenate(self.row_hi) if self.row_hi else np.zeros(0)),
            col_lo=read_only(cat["lo"].astype(np.float64)),
            col_hi=read_only(cat["hi"].astype(np.float64)),
            integrality=read_only(cat["integer"].astype(bool)),
            var_names=tuple(self.col_names),
            row_names=tuple(self.row_names),
        )
        return program, {k: read_only(cat[k].astype(np.int64)) for k in self.meta_keys}
