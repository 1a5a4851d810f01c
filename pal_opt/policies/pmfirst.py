"""PM-First: the fastest GPUs first, packing ties by the best-matching group size.

For a job of demand *d* and a candidate set of free GPUs, PM-First sorts the candidates by
(factor, |n − d|), where *n* is the number of candidates in the GPU's group, keeping GPU
position order on ties, and takes the first *d*.  Revisions of the PAL artifact define the group
in two ways:

* ``"factor-server"`` -- candidates on the same server *with the same factor*
  (``placement/pal.py``, and the revision of ``placement/pmfirst.py`` that produced the
  authors' reference rounds);
* ``"server"`` -- candidates on the same server (another revision of ``placement/pmfirst.py``).

Both PAL and the PM-First policy use ``"factor-server"``: with it both reproduce every
reference round GPU for GPU, while ``"server"`` matches almost none of the PM-First rounds
(``tests/test_policies_fidelity.py``).  ``"server"`` stays available as an option.

Implementation: candidates are always "every free GPU of the job's class with level ≤ some
level", so the first *d* come from the lowest levels.  The free GPUs of the levels below the
boundary level (where the running count reaches *d*) are taken whole, ordered by one stable
sort; at the boundary level, when servers are blocks of consecutive positions, whole servers
are taken in (score, server) order, so usually only one server's GPUs are looked at.  Group
sizes come from the per-(level, server) free counts kept by
:class:`~pal_opt.policies.base.FreeGpus`.

Queue: the PAL order (:func:`pal_opt.admission.pal_order`): running jobs are freed, the prefix
of the queue that fits the cluster's total GPU count is stable-sorted by class, the rest follow
in queue order, and placement stops at the first job that cannot be placed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from itertools import accumulate

import numpy as np

from ..model import JobId, RoundInstance
from ..seeds import SeedLike
from .base import ClassIndex, FreeGpus, GreedyPlacement, in_pal_order, place_in_order

__all__ = ["GROUPINGS", "pmfirst_select", "place_sequence", "place"]

#: Group definitions for PM-First's tie-break (see the module docstring).
GROUPINGS: tuple[str, ...] = ("factor-server", "server")

_NEVER = np.iinfo(np.int64).max

#: The grouping of the PM-First policy (the one that reproduces the reference rounds).
POLICY_GROUPING = "factor-server"


def pmfirst_select(
    state: FreeGpus,
    perfclass: str,
    demand: int,
    top_level: int | None = None,
    grouping: str = "factor-server",
) -> np.ndarray | None:
    """PM-First's choice among the free GPUs of ``perfclass`` with level ≤ ``top_level``.

    Parameters
    ----------
    state
        The free GPUs; must track ``perfclass``.
    perfclass
        The job's class.
    demand
        GPUs wanted.
    top_level
        Highest factor level (index into the class's sorted levels) allowed; all when None.
    grouping
        ``"factor-server"`` or ``"server"`` (see the module docstring).

    Returns
    -------
    ndarray of int64 or None
        ``demand`` GPU positions in PM-First order, or None if too few candidates are free.
    """
    ci = state.index[perfclass]
    cnt = state.cnt[perfclass]
    top = ci.num_levels - 1 if top_level is None else int(top_level)
    tot = state.tot[perfclass][: top + 1].tolist()
    if demand <= 0 or sum(tot) < demand:
        return None
    if grouping == "server":
        group = np.abs(cnt[: top + 1].sum(axis=0) - demand)
    elif grouping == "factor-server":
        group = None
    else:
        raise ValueError(f"unknown PM-First grouping {grouping!r}")
    # levels below the boundary level are taken whole, the boundary level in part
    running = list(accumulate(tot))
    boundary = bisect_left(running, demand)
    cum = running[boundary - 1] if boundary else 0
    rest = demand - cum
    score = np.abs(cnt[boundary] - demand) if group is None else group
    if state.blocks:
        last = _level_by_server(state, ci, boundary, cnt[boundary], score, rest)
    else:
        last = _level_by_gpu(state, ci, boundary, score, rest)
    if cum == 0:
        return last
    # all free GPUs of levels < boundary (fewer than d), by (level, score, position)
    if state.blocks:
        # (level, server) groups with free GPUs, in (level, score, server) order
        levs, srvs = np.nonzero(cnt[:boundary])
        sc = np.abs(cnt[levs, srvs] - demand) if group is None else group[srvs]
        order = np.lexsort((srvs, sc, levs)).tolist()
        lv, sv = levs.tolist(), srvs.tolist()
        below: list[int] = []
        for k in order:
            below.extend(state.server_gpus_at(sv[k], ci, lv[k]))
        return np.concatenate((np.asarray(below, dtype=np.int64), last))
    cand = ci.by_level[: ci.level_ptr[boundary]]
    cand = cand[state.free[cand]]
    lev = ci.level_of[cand]
    srv = state.server_of[cand]
    sc = np.abs(cnt[lev, srv] - demand) if group is None else group[srv]
    order = np.argsort(lev * (int(sc.max()) + 1) + sc, kind="stable")
    return np.concatenate((cand[order], last))


def _level_by_gpu(state: FreeGpus, ci: ClassIndex, lev: int, score: np.ndarray, take: int) -> np.ndarray:
    """The first ``take`` free GPUs of level ``lev`` by (server score, position)."""
    cand = ci.by_level[ci.level_ptr[lev] : ci.level_ptr[lev + 1]]
    cand = cand[state.free[cand]]
    order = np.argsort(score[state.server_of[cand]], kind="stable")
    return cand[order[:take]]


def _level_by_server(
    state: FreeGpus, ci: ClassIndex, lev: int, row: np.ndarray, score: np.ndarray, take: int
) -> np.ndarray:
    """As :func:`_level_by_gpu` when servers are position blocks: order servers, not GPUs.

    With servers as consecutive position blocks in server order, (score, position) order is
    (score, server, position) order, so whole servers are taken in (score, server) order.
    """
    first = int(np.argmin(np.where(row > 0, score, _NEVER)))
    if row[first] >= take:  # the best server alone suffices (the usual case)
        srv = [first]
    else:
        has = np.flatnonzero(row)
        order = has[np.argsort(score[has], kind="stable")]
        k = int(np.searchsorted(np.cumsum(row[order]), take)) + 1
        if k > 8:
            return _level_by_gpu(state, ci, lev, score, take)
        srv = order[:k].tolist()
    out: list[int] = []
    for s in srv:
        out.extend(state.server_gpus_at(s, ci, lev))
    return np.asarray(out[:take], dtype=np.int64)


def place_sequence(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    free_mask: np.ndarray | None = None,
    *,
    grouping: str = POLICY_GROUPING,
    backfill: bool = False,
    respect_types: bool = True,
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order`` with PM-First, stopping at the
    first job that cannot be placed (skipping it with ``backfill``; see
    :func:`~pal_opt.policies.base.place_in_order`);
    ``grouping`` is PM-First's group definition (see the module docstring)."""
    jobs = instance.jobs

    def select(state: FreeGpus, i: int) -> np.ndarray | None:
        return pmfirst_select(state, jobs[i].perfclass, jobs[i].demand, None, grouping)

    return place_in_order(instance, factors, order, select, free_mask, backfill=backfill, respect_types=respect_types)


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None, backfill: bool = False,
    respect_types: bool = True,
) -> GreedyPlacement:
    """The PM-First policy on one round (``seed`` is unused; ``respect_types=False`` ignores GPU types).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0, 1.2, 1.0, 1.0]})
    >>> place(RoundInstance(c, (Job("a", 2, "classA"),)), c.factors).placements
    {'a': (2, 3)}
    """
    return in_pal_order(instance, factors, place_sequence, backfill=backfill, respect_types=respect_types)
