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

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Unpack

import numpy as np

from ..model import JobId, RoundInstance
from ..seeds import SeedLike
from .base import ClassIndex, FreeGpus, GreedyPlacement, OrderRules, in_pal_order, place_in_order

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
    tot = state.tot[perfclass]
    top = ci.num_levels - 1 if top_level is None else int(top_level)
    running = tot[: top + 1].cumsum()
    if demand <= 0 or running.size == 0 or running[-1] < demand:
        return None
    if grouping == "server":  # per server: |free GPUs of level ≤ top - demand|
        group = np.abs(np.count_nonzero(state.ranked(perfclass) <= top, axis=0) - demand)
    elif grouping == "factor-server":
        group = None
    else:
        raise ValueError(f"unknown PM-First grouping {grouping!r}")
    # levels below the boundary level are taken whole, the boundary level in part
    boundary = int(running.searchsorted(demand))
    cum = int(running[boundary - 1]) if boundary else 0
    servers, row, first_cell = state.level_cells(perfclass, boundary)
    # each server's score at the boundary level; _NEVER for servers with no free GPU there
    score = _score_of_count(state.servers.grid.shape[0], demand)[row] if group is None else (
        np.where(row > 0, group[servers], _NEVER))
    if state.blocks:
        last = _level_by_server(state, ci, boundary, servers, row, score, demand - cum)
    else:
        last = _level_by_gpu(state, ci, boundary, score, first_cell, demand - cum)
    if cum == 0:
        return last
    # all free GPUs of levels < boundary (fewer than d, so on fewer than d levels), by
    # (level, score, position)
    below_levels = tot[:boundary].nonzero()[0].tolist()
    cells = state.cell_free[perfclass]
    if state.blocks:
        # (level, server) cells with free GPUs, in (level, score, server) order
        levs, srvs, free = [], [], []
        for v in below_levels:
            srv_v, free_v, _ = state.level_cells(perfclass, v)
            nz = free_v.nonzero()[0]
            levs.append(np.full(nz.size, v))
            srvs.append(srv_v[nz])
            free.append(free_v[nz])
        lv, sv = np.concatenate(levs), np.concatenate(srvs)
        sc = np.abs(np.concatenate(free) - demand) if group is None else group[sv]
        below: list[int] = []
        lvl, svl = lv.tolist(), sv.tolist()
        for k in np.lexsort((sv, sc, lv)).tolist():
            below.extend(state.server_gpus_at(svl[k], ci, lvl[k]))
        return np.concatenate((np.asarray(below, dtype=np.int64), last))
    ptr = ci.level_ptr
    cand = np.concatenate([ci.by_level[ptr[v] : ptr[v + 1]] for v in below_levels])
    cand = cand[state.free[cand]]
    lev = ci.level_of[cand]
    sc = np.abs(cells[ci.cell_of[cand]] - demand) if group is None else group[state.server_of[cand]]
    order = np.argsort(lev * (int(sc.max()) + 1) + sc, kind="stable")
    return np.concatenate((cand[order], last))


@lru_cache(maxsize=1024)
def _score_of_count(most: int, demand: int) -> np.ndarray:
    """``|n - demand|`` for ``n`` = 0..most free GPUs of a group, and _NEVER for ``n = 0``."""
    out = np.abs(np.arange(most + 1, dtype=np.int64) - demand)
    out[0] = _NEVER
    out.setflags(write=False)
    return out


def _level_by_gpu(
    state: FreeGpus, ci: ClassIndex, lev: int, score: np.ndarray, first_cell: int, take: int
) -> np.ndarray:
    """The first ``take`` free GPUs of level ``lev`` by (server score, position); ``score`` is
    per cell of the level, the first being cell ``first_cell``."""
    cand = ci.by_level[ci.level_ptr[lev] : ci.level_ptr[lev + 1]]
    cand = cand[state.free[cand]]
    order = np.argsort(score[ci.cell_of[cand] - first_cell], kind="stable")
    return cand[order[:take]]


def _level_by_server(
    state: FreeGpus, ci: ClassIndex, lev: int, servers: np.ndarray, row: np.ndarray, score: np.ndarray, take: int
) -> np.ndarray:
    """As :func:`_level_by_gpu` when servers are position blocks: order servers, not GPUs.

    ``servers`` are the servers with GPUs at ``lev`` (ascending), ``row`` their free GPUs there
    and ``score`` their scores (_NEVER where ``row`` is 0).  With servers as consecutive position
    blocks in server order, (score, position) order is (score, server, position) order, so whole
    servers are taken in (score, server) order: the servers of the least score first, in server
    order, then those of the next score, until ``take`` GPUs are reached (scores are few distinct
    small integers, so nothing is sorted).
    """
    first = int(score.argmin())
    if row[first] >= take:  # the best server alone suffices (the usual case)
        return np.array(state.server_gpus_at(int(servers[first]), ci, lev)[:take], dtype=np.int64)
    masked = score.copy()
    chosen = []
    need = take
    while True:
        picks = (masked == masked[first]).nonzero()[0]
        run = row[picks].cumsum()
        if run[-1] >= need:
            chosen.append(picks[: int(run.searchsorted(need)) + 1])
            break
        chosen.append(picks)
        need -= int(run[-1])
        masked[picks] = _NEVER
        first = int(masked.argmin())
        if masked[first] == _NEVER:  # pragma: no cover - the caller checked the level's count
            raise AssertionError("PM-First: fewer free GPUs at the level than counted")
    grid = state.servers.grid[:, servers[np.concatenate(chosen)]].T  # a row per server, positions in order
    grid = grid[state.free_pad[grid] & (ci.level_pad[grid] == lev)]
    return grid[:take]


def place_sequence(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    free_mask: np.ndarray | None = None,
    *,
    grouping: str = POLICY_GROUPING,
    **rules: Unpack[OrderRules],
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order`` with PM-First, stopping at the
    first job that cannot be placed (skipping it with ``backfill``; see
    :func:`~pal_opt.policies.base.place_in_order`);
    ``grouping`` is PM-First's group definition (see the module docstring)."""
    jobs = instance.jobs

    def select(state: FreeGpus, i: int) -> np.ndarray | None:
        return pmfirst_select(state, jobs[i].perfclass, jobs[i].demand, None, grouping)

    return place_in_order(instance, factors, order, select, free_mask, **rules)


def place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: SeedLike = None,
    **rules: Unpack[OrderRules],
) -> GreedyPlacement:
    """The PM-First policy on one round (``seed`` is unused; ``respect_types=False`` ignores GPU types).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0, 1.2, 1.0, 1.0]})
    >>> place(RoundInstance(c, (Job("a", 2, "classA"),)), c.factors).placements
    {'a': (2, 3)}
    """
    return in_pal_order(instance, factors, place_sequence, **rules)
