"""PAL: walk the variability × locality matrix, fastest acceptable cell first.

For each application class the distinct (binned) factor levels *v* give two candidate cells:
*(v, within a server)* priced ``v × p_server`` and *(v, across servers)* priced
``v × p_across``, with the job's own locality penalties.  The cells are listed level by level in
order of the level's first appearance over GPU positions, (v, within) before (v, across), and
stably sorted by price -- exactly the artifact's traversal order (``placement/pal.py``,
``get_slowdown_factors``).

A job of demand *d* is placed as follows.

* ``d == 1`` or ``d`` larger than the largest server (GPUs in any state, as the artifact's
  ``value_counts().iloc[0]``): PM-First (grouping ``"factor-server"``) on every free GPU of the
  job's class.
* Otherwise walk the cells:

  - *(v, within)*: among servers with ≥ *d* free GPUs of factor ≤ *v*, take the *d*-subset with
    the least maximum factor.  On a server that is its *d*-th smallest eligible factor *m*, and the
    artifact's first such combination (``itertools.combinations`` in GPU order) is simply the first
    *d* eligible GPUs with factor ≤ *m*.  Across servers the artifact takes the first server in
    pandas ``value_counts()`` order -- most eligible free GPUs first, ties in order of first
    appearance of an eligible free GPU (server order when servers are blocks of consecutive
    positions) -- among those reaching the least *m*;
  - *(v, across)*: if ≥ *d* free GPUs have factor ≤ *v*, PM-First on them.

Locality penalties: ``p_server = job.locality[Level.SERVER]`` (1 in PAL) and
``p_across = job.locality[Level.CLUSTER]`` (PAL's λ).  On a racked cluster the across cell is
still priced at the cluster-level penalty: PM-First's across placement ignores racks, so the
cluster level is the penalty it may pay.

Placement stops at the first job that cannot be placed; since the cell (slowest level, across)
admits every free GPU, that is the first job needing more GPUs than are free.

Speed: no per-job work has a (levels × servers) size -- binned clusters of 65,536 GPUs have
hundreds of levels.  "Some server has *d* free GPUs of factor ≤ *v*" holds from the level
``min_s ranked[d - 1, s]`` on, where ``ranked`` (:meth:`~pal_opt.policies.base.FreeGpus.ranked`)
holds each server's free GPU levels in increasing order; "*d* free GPUs of factor ≤ *v* in all"
holds from the level where the running count of free GPUs per level reaches *d*.  Both tests are
monotone in *v*, so the first feasible cell of the walk is the earlier of the first feasible
within cell (the least rank of a within cell at or above the first level) and the first feasible
across cell, read from suffix minima of the cells' ranks per level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Unpack

import numpy as np

from ..model import JobId, Level, RoundInstance
from ..seeds import SeedLike
from .base import ClassIndex, FreeGpus, GreedyPlacement, OrderRules, in_pal_order, place_in_order
from .pmfirst import pmfirst_select

__all__ = ["traversal_order", "within_select", "place_sequence", "place"]

#: PM-First grouping used by PAL's fallback and across cells (the artifact's ``pal.py``).
PAL_GROUPING = "factor-server"


def traversal_order(ci: ClassIndex, within_penalty: float, across_penalty: float) -> tuple[tuple[int, bool], ...]:
    """PAL's cells for one class: ``(level index, within?)`` in traversal order.

    >>> from pal_opt.model import Cluster
    >>> from pal_opt.policies.base import class_index
    >>> f = np.array([1.2, 1.0, 1.2, 1.5])
    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": f})
    >>> traversal_order(class_index(c, f), 1.0, 1.3)
    ((0, True), (1, True), (0, False), (2, True), (1, False), (2, False))
    """
    cells = []
    for lev in ci.first_seen:
        v = float(ci.levels[lev])
        cells.append((within_penalty * v, lev, True))
        cells.append((across_penalty * v, lev, False))
    cells.sort(key=lambda t: t[0])
    return tuple((lev, within) for _, lev, within in cells)


@dataclass(frozen=True)
class _Walk:
    """A traversal order, and per level the first cell of the walk at that level or above."""

    cells: tuple[tuple[int, bool], ...]
    #: ``first_within[l]``: least rank of a within cell of level ≥ l (len(cells) if none); the
    #: last entry (level = number of levels) is len(cells).
    first_within: list[int]
    first_across: list[int]

    @classmethod
    def build(cls, cells: tuple[tuple[int, bool], ...], levels: int) -> _Walk:
        none = len(cells)
        rw, ra = [none] * (levels + 1), [none] * (levels + 1)
        for r, (lev, within) in enumerate(cells):
            (rw if within else ra)[lev] = r
        for lev in range(levels - 1, -1, -1):
            rw[lev] = min(rw[lev], rw[lev + 1])
            ra[lev] = min(ra[lev], ra[lev + 1])
        return cls(cells, rw, ra)

    def first(self, within_from: int, across_from: int) -> tuple[int, bool] | None:
        """The first cell of the walk that is a within cell of level ≥ ``within_from`` or an
        across cell of level ≥ ``across_from`` (each may be the number of levels: none)."""
        r = min(self.first_within[within_from], self.first_across[across_from])
        return self.cells[r] if r < len(self.cells) else None


def within_select(state: FreeGpus, perfclass: str, demand: int, top_level: int) -> np.ndarray | None:
    """PAL's within-server choice at level ≤ ``top_level`` (see the module docstring).

    Returns ``demand`` GPU positions on one server, or None if no server has enough eligible
    free GPUs.
    """
    ranked = state.ranked(perfclass)
    if not 0 < demand <= ranked.shape[0]:
        return None
    best = ranked[demand - 1]
    least = int(best.min())
    return _within(state, perfclass, demand, top_level, ranked, best, least) if least <= top_level else None


def _within(
    state: FreeGpus, c: str, d: int, top_level: int, ranked: np.ndarray, best: np.ndarray, least: int
) -> np.ndarray:
    """:func:`within_select` given ``best = ranked[d - 1]`` (per server, the least max level of
    ``d`` of its free GPUs) and its minimum ``least`` ≤ ``top_level``."""
    cand = (best == least).nonzero()[0]
    ci = state.index[c]
    s = int(cand[0])
    if cand.size > 1:
        # most eligible GPUs first (pandas value_counts order): a server has at least k + 1
        # free GPUs of level ≤ top_level when ranked[k] ≤ top_level; try k from the largest
        for k in range(ranked.shape[0] - 1, d - 2, -1):
            top = cand[ranked[k, cand] <= top_level]
            if top.size:
                break
        s = int(top[0])  # ... ties in order of first appearance: server order if servers are blocks
        if top.size > 1 and not state.blocks:
            first = [state.server_gpus_at(t, ci, top_level, at_most=True)[0] for t in top.tolist()]
            s = int(top[int(np.argmin(first))])
    return np.array(state.server_gpus_at(s, ci, least, at_most=True)[:d], dtype=np.int64)


def place_sequence(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    free_mask: np.ndarray | None = None,
    **rules: Unpack[OrderRules],
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order`` with PAL, stopping at the first
    job that cannot be placed (skipping it with ``backfill``) (:func:`~pal_opt.policies.base.place_in_order`).  The integer
    programs use this on their admitted set as warm start and fallback; ``free_mask`` defaults
    to the GPUs in state FREE.  With GPU types each job walks its cells on the GPUs of each of its
    type groups (:func:`~pal_opt.policies.base.typed_select`) unless ``respect_types`` is False."""
    return place_in_order(instance, factors, order, _Selector(instance), free_mask, **rules)


class _Selector:
    """PAL's choice for one job on the free GPUs left (the cell walk is built once per class
    and pair of penalties)."""

    def __init__(self, instance: RoundInstance):
        self.jobs = instance.jobs
        self.per_node = int(instance.cluster.server_sizes.max())
        self.walks: dict[tuple[str, float, float], _Walk] = {}

    def walk(self, state: FreeGpus, c: str, pw: float, pa: float) -> _Walk:
        w = self.walks.get((c, pw, pa))
        if w is None:
            ci = state.index[c]
            w = self.walks[(c, pw, pa)] = _Walk.build(traversal_order(ci, pw, pa), ci.num_levels)
        return w

    def __call__(self, state: FreeGpus, i: int) -> np.ndarray | None:
        job = self.jobs[i]
        c, d = job.perfclass, job.demand
        if d > state.num_free:
            return None
        if d == 1 or d > self.per_node:
            return pmfirst_select(state, c, d, None, PAL_GROUPING)
        walk = self.walk(state, c, float(job.locality[Level.SERVER]), float(job.locality[Level.CLUSTER]))
        # first level with a server of d free GPUs at or below it; first level with d in all
        ranked = state.ranked(c)
        best = ranked[d - 1]
        lw = int(best.min())
        la = int(state.tot[c].cumsum().searchsorted(d))
        cell = walk.first(lw, la)
        if cell is None:
            return None
        lev, within = cell
        if within:
            return _within(state, c, d, lev, ranked, best, lw)
        return pmfirst_select(state, c, d, lev, PAL_GROUPING)


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None,
    **rules: Unpack[OrderRules],
) -> GreedyPlacement:
    """The PAL policy on one round (``seed`` is unused; ``respect_types=False`` ignores GPU types).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance, pal_locality
    >>> f = {"classA": [1.0, 1.3, 1.0, 1.0, 1.3, 1.3]}
    >>> c = Cluster.uniform(2, 3, f)
    >>> place(RoundInstance(c, (Job("a", 3, "classA", locality=pal_locality(1.7)),)), c.factors).placements
    {'a': (0, 1, 2)}
    """
    return in_pal_order(instance, factors, place_sequence, **rules)
