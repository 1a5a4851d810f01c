"""A flow-free relaxation of the round program: a valid lower bound at any scale.

The round program (:mod:`pal_opt.ilp.formulation`) routes every pool's GPUs through flow
variables per (node, GPU class); at tens of thousands of GPUs those flows are most of the
program and its build.  The relaxation built here keeps the slot variables and drops the flows:
every profile (classes whose factor levels order the free GPUs alike) keeps its own
*cumulative* capacity per node, and the profiles are coupled only by each node's count of free
GPUs.  Its LP optimum is therefore at most the LP optimum of the round program, hence at most
the cost of every placement of the admitted jobs (``formulations/round_ilp.md`` §11 has the
proof), so it is a *valid* bound whatever the size.

Columns, for every job type *t* (class, demand, penalties) of profile *p*:

* ``x[t,k]`` for every cell *k* = (server, level *v*) holding free GPUs of level *v* of *p*,
  when the server has at least ``d_t`` free GPUs of level ≤ *v*; ``y[t,k]`` likewise per (rack,
  level) for gangs (``d_t ≥ 2``, racked clusters); ``z[t,v]`` per level for gangs.  Cost: what
  every cost term charges a type-*t* job on GPUs of level *v* spanning that topology level
  (``CostTerm.slots``), exactly as the round program prices its slots.
* ``w[k]`` (continuous, cost 0): the GPUs of level ≤ *v* of a cell's node left over for the
  next level up, so that one row per cell states the cumulative capacity
  ``Σ_{v' ≤ v} Σ_t d_t · slots(v') ≤ A(v)`` with one entry per slot column.

Rows: one per job type (``Σ slots = n_t``), one per cell of every chain (server, rack,
cluster) and, with several profiles, one per server and rack (``Σ d_t · slots ≤`` its free
GPUs).  Every slot column enters its own node's chain and the chains of the nodes above it.

The program is a :class:`~pal_opt.ilp.program.Program`, solved as an LP by any backend that
solves relaxations (:meth:`~pal_opt.ilp.backends.base.Backend.relaxation_bound`).  It applies
to rounds without GPU types and where moving a running admitted job is not charged
(:func:`applies`); :func:`build_relaxation` returns None otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..cost import cost_terms, left_out_charge
from ..gputypes import has_types
from ..model import Cluster, GpuState, Job, JobId, Level, RoundInstance
from .program import Program, read_only
from .running import moving_is_charged

__all__ = ["Relaxation", "applies", "build_relaxation"]


@dataclass(frozen=True)
class Relaxation:
    """The flow-free relaxation of one round and its size.

    Attributes
    ----------
    program
        The LP (all columns continuous).
    profiles
        The classes of each profile.
    levels
        Factor levels per profile.
    types
        The job types ``(class, demand, penalties)``, in the order of their rows.
    slots
        One row per slot column: ``(column, type, topology level, node, factor level)``.
    """

    program: Program
    profiles: tuple[tuple[str, ...], ...]
    levels: tuple[int, ...]
    types: tuple[tuple[str, int, tuple[float, float, float]], ...]
    slots: np.ndarray
    slot_caps: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def used_types(self) -> tuple[tuple[str, int, tuple[float, float, float]], ...]:
        """The job types some admitted job has (a type row ``Σ slots = n_t`` with ``n_t > 0``),
        in row order: what a warm re-solve keeps for the next round (not :attr:`types`, which
        also holds the types kept from earlier rounds, and would grow round after round)."""
        counts = self.program.row_lo[: len(self.types)]
        return tuple(t for t, n in zip(self.types, counts, strict=True) if n > 0)

    def with_counts(self, instance: RoundInstance, admitted: Sequence[int]) -> Relaxation | None:
        """This relaxation for another admitted set on the same free GPUs and factors: only the
        type rows (``Σ slots = n_t``), the slot columns' bounds ``min(n_t, GPUs of the cell's
        level and below // d_t)`` and the objective constant depend on the counts, so the rest is
        kept.  The program is the one :func:`build_relaxation` builds with ``also=self.types``
        (a test compares them); None when an admitted job's type has no row here."""
        row = {t: k for k, t in enumerate(self.types)}
        counts = np.zeros(len(self.types))
        for i in admitted:
            k = row.get(_job_type(instance.jobs[i]))
            if k is None:
                return None
            counts[k] += 1
        prog = self.program
        lo, hi = np.array(prog.row_lo, dtype=np.float64), np.array(prog.row_hi, dtype=np.float64)
        lo[: counts.size] = hi[: counts.size] = counts
        col_hi = np.array(prog.col_hi, dtype=np.float64)
        col_hi[self.slots[:, 0]] = np.minimum(counts[self.slots[:, 1]], self.slot_caps)
        offset = left_out_charge(instance, {instance.jobs[i].id for i in admitted})
        program = replace(prog, row_lo=read_only(lo), row_hi=read_only(hi), col_hi=read_only(col_hi),
                          obj_offset=float(offset))  # matrix, costs and names shared, not copied
        return replace(self, program=program)

    def slot_values(self, instance: RoundInstance, placement: Mapping[JobId, Sequence[int]],
                    factors: Mapping[str, np.ndarray]) -> np.ndarray:
        """The slot columns' values of a placement of the admitted jobs (other columns 0): each
        job counts in the slot of its type, the topology level its GPUs span (its server or
        rack there) and the highest factor level among them (``formulations/round_ilp.md``
        §11).  With these fixed the relaxation is feasible, and its objective is the
        placement's cost; a test checks both."""
        cl = instance.cluster
        free = cl.state == GpuState.FREE
        where = {tuple(int(v) for v in row[1:]): int(row[0]) for row in self.slots}
        tid = {key: n for n, key in enumerate(self.types)}
        pos_of = {int(g): n for n, g in enumerate(cl.gpu_ids)}
        out = np.zeros(self.program.num_vars)
        for job in instance.jobs:
            if job.id not in placement:
                continue
            pos = np.asarray([pos_of[int(g)] for g in placement[job.id]], dtype=np.int64)
            vals = np.unique(np.asarray(factors[job.perfclass], dtype=np.float64)[free])
            level = int(np.searchsorted(vals, np.asarray(factors[job.perfclass], dtype=np.float64)[pos].max()))
            span = int(cl.span_level_pos(pos))
            node = {0: int(cl.server_of[pos[0]]), 1: int(cl.rack_of[pos[0]]), 2: 0}[span]
            loc = job.locality
            t = tid[(job.perfclass, job.demand, (float(loc[0]), float(loc[1]), float(loc[2])))]
            out[where[(t, span, node, level)]] += 1
        return out

    def summary(self) -> dict[str, object]:
        """Sizes for ``PlacementResult.info``."""
        p = self.program
        return {"relaxation_columns": p.num_vars, "relaxation_rows": p.num_rows,
                "relaxation_nonzeros": int(p.A.nnz), "relaxation_levels": list(self.levels)}


def applies(instance: RoundInstance, admitted: Sequence[int]) -> bool:
    """Whether :func:`build_relaxation` covers the round: no GPU types, no admitted job with
    pipeline stages (it prices a job at its slowest GPU, as the round program does, above a
    pipeline's pace: no bound of the stage program), and no admitted running job whose move the
    cost terms charge for (the round program would have keep columns)."""
    if has_types(instance) or any(instance.jobs[i].pipeline is not None for i in admitted):
        return False
    return not (moving_is_charged(instance) and any(instance.jobs[i].placement is not None for i in admitted))


@dataclass
class _Chain:
    """The cells (node, level) of one profile on one node partition, sorted by node then level:
    ``node``, ``level``, free count ``a`` and cumulative count ``cum`` (level ≤ the cell's,
    same node); ``row`` the first row of the chain's rows (one per cell)."""

    node: np.ndarray
    level: np.ndarray
    a: np.ndarray
    cum: np.ndarray
    nlev: int
    row: int = 0

    @classmethod
    def of(cls, node_of: np.ndarray, level: np.ndarray, nlev: int) -> _Chain:
        key, a = np.unique(node_of * nlev + level, return_counts=True)
        node, lv = key // nlev, key % nlev
        cum = np.cumsum(a)
        first = np.r_[True, node[1:] != node[:-1]]
        base = np.maximum.accumulate(np.where(first, cum - a, 0))
        return cls(node, lv, a, cum - base, nlev)

    def find(self, node: np.ndarray, level: np.ndarray) -> np.ndarray:
        """The cell index of each (node, level) (which must exist)."""
        return np.searchsorted(self.node * self.nlev + self.level, node * self.nlev + level)

    @property
    def carries(self) -> np.ndarray:
        """Cells with a next cell in the same node (those get a carry column ``w``)."""
        return np.flatnonzero(np.r_[self.node[1:] == self.node[:-1], False])


class _Columns:
    """Columns and matrix entries as they are added (COO)."""

    def __init__(self) -> None:
        self.cost: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.slots: list[np.ndarray] = []
        self.caps: list[np.ndarray] = []
        self.n = 0

    def add(self, cost: np.ndarray, hi: np.ndarray) -> np.ndarray:
        idx = np.arange(self.n, self.n + cost.size)
        self.cost.append(np.asarray(cost, dtype=np.float64))
        self.hi.append(np.asarray(hi, dtype=np.float64))
        self.n += cost.size
        return idx

    def entries(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray | float) -> None:
        self.rows.append(np.asarray(rows, dtype=np.int64))
        self.cols.append(np.asarray(cols, dtype=np.int64))
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=np.float64), np.shape(cols)).copy())


def _profiles(factors: Mapping[str, np.ndarray], classes: Sequence[str], free: np.ndarray,
              ) -> list[tuple[tuple[str, ...], np.ndarray, dict[str, np.ndarray]]]:
    """Classes grouped by their level order over the free GPUs: (classes, level of each free
    GPU, {class: factor of each level})."""
    groups: dict[bytes, tuple[list[str], np.ndarray, dict[str, np.ndarray]]] = {}
    for c in sorted(classes):
        vals, inv = np.unique(np.asarray(factors[c], dtype=np.float64)[free], return_inverse=True)
        key = inv.astype(np.int64).tobytes()
        if key not in groups:
            groups[key] = ([], inv.astype(np.int64), {})
        groups[key][0].append(c)
        groups[key][2][c] = vals
    return [(tuple(cs), lv, vals) for cs, lv, vals in groups.values()]


def _job_type(job: Job) -> tuple[str, int, tuple[float, float, float]]:
    """A job's type in the relaxation: its class, demand and locality penalties."""
    loc = job.locality
    return job.perfclass, job.demand, (float(loc[0]), float(loc[1]), float(loc[2]))


def build_relaxation(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                     *, couple: bool = True, also: Sequence[tuple[str, int, tuple[float, float, float]]] = (),
                     ) -> Relaxation | None:
    """The flow-free relaxation of the round program on ``admitted`` (module docstring); None
    when it does not apply (:func:`applies`) or nothing is admitted.  ``couple``: with several
    profiles, couple them on every rack and on the cluster by GPU class (tighter, and a harder
    LP: 1.2 s at 8,192 GPUs, a minute at 32,768); else by each node's free GPU count only.
    ``also``: job types ``(class, demand, penalties)`` to give rows and columns even when no
    admitted job has them (their row is ``Σ slots = 0``, so the optimum is the same); a warm
    re-solve (:mod:`pal_opt.ilp.warm`) passes the last round's types so that the program keeps
    its structure when a type comes and goes."""
    if not admitted or not applies(instance, admitted):
        return None
    cl = instance.cluster
    free = cl.state == GpuState.FREE
    types: dict[tuple[str, int, tuple[float, float, float]], int] = {
        t: 0 for t in also if t[0] in factors and 0 < t[1] <= int(free.sum())}
    for i in admitted:
        key = _job_type(instance.jobs[i])
        types[key] = types.get(key, 0) + 1
    profiles = _profiles(factors, [k[0] for k in types], free)
    parts = _partitions(cl, cl.server_of[free])
    cols, rows = _Columns(), _Rows()
    type_row = rows.add(np.asarray([types[k] for k in sorted(types)], dtype=np.float64), equal=True)
    type_rows = {key: type_row + n for n, key in enumerate(sorted(types))}
    supply: dict[Level, _Supply] = {}
    totals: dict[Level, int] = {}
    if len(profiles) > 1:
        levels = np.column_stack([lv for _, lv, _ in profiles])
        for where, node in parts.items():
            if couple and where != Level.SERVER:
                supply[where] = _Supply.of(node, levels, rows)
            elif where != Level.CLUSTER:  # the cluster's total is implied by the type rows
                totals[where] = rows.add(np.bincount(node).astype(np.float64))
    for p, (classes, level, values) in enumerate(profiles):
        chains = {where: _Chain.of(node, level, len(values[classes[0]])) for where, node in parts.items()}
        for where, ch in chains.items():
            ch.row = rows.add(np.zeros(ch.a.size) if where in supply else ch.a.astype(np.float64))
            _add_carries(cols, ch)
            if where in supply:
                supply[where].draw(cols, ch, p)
        for key, n in sorted(types.items()):
            if key[0] in classes:
                _add_type_slots(cols, instance, chains, key, n, values[key[0]], type_rows[key], totals)
    return _assemble(instance, admitted, cols, rows, tuple(p[0] for p in profiles),
                     tuple(len(p[2][p[0][0]]) for p in profiles), tuple(sorted(types)))


class _Rows:
    """Row bounds as rows are added."""

    def __init__(self) -> None:
        self.hi: list[np.ndarray] = []
        self.equal: list[np.ndarray] = []
        self.n = 0

    def add(self, hi: np.ndarray, equal: bool = False) -> int:
        """Rows ``≤ hi`` (``= hi`` with ``equal``); the first one's index."""
        first = self.n
        self.hi.append(np.asarray(hi, dtype=np.float64))
        self.equal.append(np.full(self.hi[-1].size, equal))
        self.n += self.hi[-1].size
        return first


def _partitions(cl: Cluster, server: np.ndarray) -> dict[Level, np.ndarray]:
    """The node of every free GPU (``server``: its server) at each topology level."""
    out = {Level.SERVER: server}
    if cl.racked:
        out[Level.RACK] = cl.rack_of_server[server]
    out[Level.CLUSTER] = np.zeros_like(server)
    return out


@dataclass
class _Supply:
    """The free GPUs of one topology level by (node, GPU class), a GPU class being the tuple of
    the profiles' levels: ``node``, ``gclass`` and ``size`` (the node's free GPUs) per cell, the
    first of the cells' rows, and ``levels`` (GPU classes × profiles)."""

    node: np.ndarray
    gclass: np.ndarray
    size: np.ndarray
    row: int
    levels: np.ndarray

    @classmethod
    def of(cls, node: np.ndarray, levels: np.ndarray, rows: _Rows) -> _Supply:
        """One row per (node, GPU class) bounding what the profiles draw from it by its free
        GPUs (``node``, ``levels``: per free GPU)."""
        uniq, gclass = np.unique(levels, axis=0, return_inverse=True)
        n = uniq.shape[0]
        key, a = np.unique(node * n + gclass.reshape(-1), return_counts=True)
        return cls(key // n, key % n, np.bincount(node)[key // n], rows.add(a.astype(np.float64)), uniq)

    def draw(self, cols: _Columns, ch: _Chain, p: int) -> None:
        """Profile ``p``'s draw on each cell: a column in the cell's row and, with −1, in the
        chain row (``ch``) of the class's level of ``p`` on that node."""
        f = cols.add(np.zeros(self.node.size), self.size.astype(np.float64))
        cols.entries(self.row + np.arange(self.node.size), f, 1.0)
        cols.entries(ch.row + ch.find(self.node, self.levels[self.gclass, p]), f, -1.0)


def _add_carries(cols: _Columns, ch: _Chain) -> None:
    """A chain's carry columns: ``w[k]`` (at most the node's GPUs of level ≤ the cell's) leaves
    cell *k*'s row (+1) and enters the next (−1)."""
    k = ch.carries
    w = cols.add(np.zeros(k.size), ch.cum[k].astype(np.float64))
    cols.entries(ch.row + k, w, 1.0)
    cols.entries(ch.row + k + 1, w, -1.0)


def _add_type_slots(cols: _Columns, instance: RoundInstance, chains: dict[Level, _Chain],
                    key: tuple[str, int, tuple[float, float, float]], n: int, values: np.ndarray, type_row: int,
                    totals: Mapping[Level, int]) -> None:
    """The slot columns of one job type at every topology level, with their entries in the type
    row, the chains at and above their node and the node totals (``totals``: the first row per
    topology level) at and above it."""
    perfclass, d, locality = key
    terms = cost_terms()
    for where, ch in chains.items():
        if where != Level.SERVER and d < 2:
            continue
        k = np.flatnonzero(ch.cum >= d)
        if k.size == 0:
            continue
        lv = ch.level[k]
        vals = values[lv]
        span = np.full(k.size, int(where), dtype=np.int64)
        cost = sum((np.broadcast_to(np.asarray(t.slots(instance, perfclass, d, locality, vals, span), dtype=np.float64),
                                    (k.size,)) for t in terms), np.zeros(k.size))
        cap = ch.cum[k] // d
        col = cols.add(cost, np.minimum(n, cap))
        cols.caps.append(cap)
        cols.slots.append(np.column_stack([col, np.full(k.size, type_row), np.full(k.size, int(where)), ch.node[k], lv]))
        cols.entries(np.full(k.size, type_row), col, 1.0)
        cols.entries(ch.row + k, col, float(d))
        node = ch.node[k]
        if where == Level.SERVER and Level.RACK in chains:
            up = chains[Level.RACK]
            cols.entries(up.row + up.find(instance.cluster.rack_of_server[node], lv), col, float(d))
        if where != Level.CLUSTER:
            up = chains[Level.CLUSTER]
            cols.entries(up.row + up.find(np.zeros_like(node), lv), col, float(d))
        if where in totals:
            cols.entries(totals[where] + node, col, float(d))
        if where == Level.SERVER and Level.RACK in totals:
            cols.entries(totals[Level.RACK] + instance.cluster.rack_of_server[node], col, float(d))


def _assemble(instance: RoundInstance, admitted: Sequence[int], cols: _Columns, rows: _Rows,
              profiles: tuple[tuple[str, ...], ...], levels: tuple[int, ...],
              types: tuple[tuple[str, int, tuple[float, float, float]], ...]) -> Relaxation:
    """The :class:`Relaxation`: the type rows are equalities, every other row an upper bound."""
    import scipy.sparse as sp

    hi = np.concatenate(rows.hi)
    lo = np.where(np.concatenate(rows.equal), hi, -np.inf)
    A = sp.csr_matrix((np.concatenate(cols.vals), (np.concatenate(cols.rows), np.concatenate(cols.cols))),
                      shape=(rows.n, cols.n))
    offset = left_out_charge(instance, {instance.jobs[i].id for i in admitted})
    program = Program.from_arrays(c=np.concatenate(cols.cost), A=A, row_lo=lo, row_hi=hi,
                                  col_lo=np.zeros(cols.n), col_hi=np.concatenate(cols.hi),
                                  integrality=np.zeros(cols.n, dtype=bool), obj_offset=offset)
    slots = np.concatenate(cols.slots) if cols.slots else np.zeros((0, 5), dtype=np.int64)
    caps = np.concatenate(cols.caps).astype(np.float64) if cols.caps else np.zeros(0)
    return Relaxation(program, profiles, levels, types, slots, caps)
