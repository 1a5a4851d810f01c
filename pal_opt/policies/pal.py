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

Speed: all per-job work is numpy over (levels × servers) count arrays kept by
:class:`~pal_opt.policies.base.FreeGpus` and over the free GPUs of one level, never a Python loop
over GPUs or GPU combinations.  "Some server has *d* free GPUs of factor ≤ *v*" and "*d* free GPUs
of factor ≤ *v* in all" are both monotone in *v*, so the first feasible cell of the walk is found
by two binary searches instead of trying the cells one by one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..model import JobId, Level, RoundInstance
from ..seeds import SeedLike
from .base import ClassIndex, FreeGpus, GreedyPlacement, in_pal_order, place_in_order
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
    """A traversal order with each level's rank of its within and across cell."""

    cells: tuple[tuple[int, bool], ...]
    within_rank: list[int]
    across_rank: list[int]
    #: True if within cells, and across cells, come in increasing level order (always, unless
    #: two prices round to the same float): then the first feasible cell is found by bisection.
    monotone: bool

    @classmethod
    def build(cls, cells: tuple[tuple[int, bool], ...], levels: int) -> _Walk:
        rw, ra = [0] * levels, [0] * levels
        for r, (lev, within) in enumerate(cells):
            (rw if within else ra)[lev] = r
        mono = all(a < b for a, b in zip(rw[:-1], rw[1:], strict=True)) and all(
            a < b for a, b in zip(ra[:-1], ra[1:], strict=True)
        )
        return cls(cells, rw, ra, mono)


def within_select(
    state: FreeGpus,
    perfclass: str,
    demand: int,
    top_level: int,
    cum: np.ndarray | None = None,
    most: list[int] | None = None,
) -> np.ndarray | None:
    """PAL's within-server choice at level ≤ ``top_level`` (see the module docstring).

    ``cum`` may pass ``state.cum(perfclass)`` and ``most`` its column maxima per level, if the
    caller has them.  Returns ``demand`` GPU positions on one server, or None if no server has
    enough eligible free GPUs.
    """
    if cum is None:
        cum = state.cum(perfclass)
    eligible = cum[top_level]
    valid = np.flatnonzero(eligible >= demand)
    if valid.size == 0:
        return None
    if top_level == 0 or (most is not None and most[top_level - 1] < demand):
        # no server reaches d GPUs below top_level: every valid server's best max is top_level
        least, cand = top_level, valid
    else:
        # d-th smallest eligible level per server = first level where the running count reaches d
        best = (cum[: top_level + 1, valid] < demand).sum(axis=0)
        least = int(best.min())
        cand = valid[best == least]
    e = eligible[cand]
    top = cand[e == e.max()]  # most eligible GPUs first (pandas value_counts order) ...
    ci = state.index[perfclass]
    s = int(top[0])  # ... ties in order of first appearance: server order if servers are blocks
    if top.size > 1 and not state.blocks:
        first = [state.server_gpus_at(t, ci, top_level, at_most=True)[0] for t in top.tolist()]
        s = int(top[int(np.argmin(first))])
    return np.asarray(state.server_gpus_at(s, ci, least, at_most=True)[:demand], dtype=np.int64)


def place_sequence(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    free_mask: np.ndarray | None = None,
    *,
    backfill: bool = False,
    respect_types: bool = True,
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order`` with PAL, stopping at the first
    job that cannot be placed (skipping it with ``backfill``) (:func:`~pal_opt.policies.base.place_in_order`).  The integer
    programs use this on their admitted set as warm start and fallback; ``free_mask`` defaults
    to the GPUs in state FREE.  With GPU types each job walks its cells on the GPUs of each of its
    type groups (:func:`~pal_opt.policies.base.typed_select`) unless ``respect_types`` is False."""
    return place_in_order(instance, factors, order, _Selector(instance), free_mask, backfill=backfill,
                          respect_types=respect_types)


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
        cum = state.cum(c)
        most = cum.max(axis=1).tolist()  # most eligible free GPUs on one server, per level
        avail = np.cumsum(state.tot[c]).tolist()  # eligible free GPUs in all, per level
        if walk.monotone:
            # both tests are monotone in the level: the first feasible within cell and the
            # first feasible across cell are bisections; the walk takes the earlier one
            lw, la = bisect_left(most, d), bisect_left(avail, d)
            n = len(most)
            if lw < n and (la == n or walk.within_rank[lw] < walk.across_rank[la]):
                return within_select(state, c, d, lw, cum, most)
            return pmfirst_select(state, c, d, la, PAL_GROUPING) if la < n else None
        for lev, within in walk.cells:
            if within and most[lev] >= d:
                return within_select(state, c, d, lev, cum, most)
            if not within and avail[lev] >= d:
                return pmfirst_select(state, c, d, lev, PAL_GROUPING)
        return None


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, backfill: bool = False,
    respect_types: bool = True,
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
    return in_pal_order(instance, factors, place_sequence, backfill=backfill, respect_types=respect_types)
