"""The packing greedy of :mod:`pal_opt.ilp.heuristic` without the round program, in time linear
in the cluster per job.

:func:`pal_opt.ilp.heuristic.packing_greedy` reads its levels from a built
:class:`~pal_opt.ilp.formulation.Formulation` and, per job, takes cumulative sums over a
(servers × levels) array: at 65,536 GPUs (8,192 servers, 961 levels of one class) that is 71 s,
and the program itself cannot be built in time.  :func:`fast_packing` makes the same decisions
(the same job order, options, tie-breaks and GPUs; ``tests/test_ilp_scale.py`` compares them)
on flat clusters without GPU types, from the round and its binned factors alone:

* per profile (classes whose factor levels order the free GPUs alike) a (servers × GPUs per
  server) array of the free GPUs' levels, each row sorted, so that the least level at which a
  server offers ``d`` GPUs is column ``d − 1`` (one pass over the servers per job);
* per profile the free count per level, for the "anywhere" option;
* the GPUs of an "anywhere" option by servers with the most eligible GPUs first, then level,
  then position, by partial selection rather than a full sort.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import TimeLimitReached
from ..gputypes import has_types
from ..model import GpuState, JobId, Level, RoundInstance

__all__ = ["fast_packing", "fast_packing_applies"]

#: Level of a GPU that is not free (sorts after every level).
_TAKEN = np.iinfo(np.int64).max


def fast_packing_applies(instance: RoundInstance) -> bool:
    """Flat clusters without GPU types (where :func:`fast_packing` is defined)."""
    return not instance.cluster.racked and not has_types(instance)


@dataclass
class _State:
    """Free GPUs per server slot: ``slots`` (servers × width, GPU positions, −1 padding);
    per profile ``lv`` (the level of each slot's GPU, :data:`_TAKEN` when not free),
    ``srt`` (each row of ``lv`` sorted), ``count`` (free GPUs per level) and ``ln`` (per class,
    the log factor of each level); ``server_free`` free GPUs per server; ``row_of``, ``col_of``
    each GPU's slot."""

    slots: np.ndarray
    lv: list[np.ndarray]
    srt: list[np.ndarray]
    count: list[np.ndarray]
    ln: dict[str, np.ndarray]
    profile: dict[str, int]
    server_free: np.ndarray
    free: np.ndarray
    row_of: np.ndarray
    col_of: np.ndarray

    @classmethod
    def of(cls, instance: RoundInstance, factors: Mapping[str, np.ndarray], classes: Sequence[str]) -> _State:
        cl = instance.cluster
        free = cl.state == GpuState.FREE
        order = np.argsort(cl.server_of, kind="stable")
        sizes = np.bincount(cl.server_of, minlength=cl.num_servers)
        start = np.r_[0, np.cumsum(sizes)[:-1]]
        width = int(sizes.max()) if sizes.size else 0
        slots = np.full((cl.num_servers, width), -1, dtype=np.int64)
        col = np.arange(order.size) - np.repeat(start, sizes)
        slots[cl.server_of[order], col] = order
        col_of = np.empty(cl.num_gpus, dtype=np.int64)
        col_of[order] = col
        lv: list[np.ndarray] = []
        count: list[np.ndarray] = []
        ln: dict[str, np.ndarray] = {}
        profile: dict[str, int] = {}
        seen: dict[bytes, int] = {}
        for c in sorted(set(classes)):
            f = np.asarray(factors[c], dtype=np.float64)
            vals, inv = np.unique(f[free], return_inverse=True)
            level = np.full(cl.num_gpus, _TAKEN, dtype=np.int64)
            level[free] = inv
            key = level.tobytes()
            if key not in seen:
                seen[key] = len(lv)
                lv.append(np.where(slots >= 0, level[np.maximum(slots, 0)], _TAKEN))
                count.append(np.bincount(inv, minlength=vals.size).astype(np.int64))
            profile[c], ln[c] = seen[key], np.log(vals)
        srt = [np.sort(a, axis=1) for a in lv]
        return cls(slots, lv, srt, count, ln, profile, np.bincount(cl.server_of[free], minlength=cl.num_servers),
                   free.copy(), np.asarray(cl.server_of, dtype=np.int64), col_of)

    def take(self, pos: np.ndarray) -> None:
        """Mark the GPUs at ``pos`` used."""
        self.free[pos] = False
        rows, cols = self.row_of[pos], self.col_of[pos]
        # most gangs sit on one server: plain Python on a few ints is faster here than
        # np.unique / ufunc.at, whose fixed costs dominated at 8,192 GPUs (measured)
        touched = np.array(sorted(set(rows.tolist())), dtype=np.int64)
        if touched.size == 1:
            self.server_free[touched[0]] -= rows.size
        else:
            np.subtract.at(self.server_free, rows, 1)
        for p in range(len(self.lv)):
            np.subtract.at(self.count[p], self.lv[p][rows, cols], 1)
            self.lv[p][rows, cols] = _TAKEN
            self.srt[p][touched] = np.sort(self.lv[p][touched], axis=1)


def fast_packing(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                 kept: Mapping[JobId, tuple[int, ...]] | None = None, *,
                 give_up: Callable[[], bool] | None = None) -> dict[JobId, tuple[int, ...]] | None:
    """:func:`pal_opt.ilp.heuristic.packing_greedy`'s placement of ``admitted`` (queue order) on
    a flat cluster without GPU types (:func:`fast_packing_applies`), without building the round
    program; None if some job finds no GPUs.

    ``kept``: placements of some admitted jobs that stay as they are (free GPUs, none shared,
    checked by the caller, e.g. :mod:`pal_opt.ilp.warm`); only the other jobs are placed, by
    the same greedy, on the GPUs these leave free.

    ``give_up`` (e.g. a deadline's ``passed``) is asked before each job; when it answers True
    the placement is abandoned with :class:`~pal_opt.errors.TimeLimitReached`."""
    jobs = instance.jobs
    kept = kept or {}
    st = _State.of(instance, factors, [jobs[i].perfclass for i in admitted])
    out: dict[JobId, tuple[int, ...]] = dict(kept)
    if kept:
        st.take(instance.cluster.positions([g for gids in kept.values() for g in gids]))
    todo = [i for i in admitted if jobs[i].id not in out]
    width = st.slots.shape[1]
    small = sorted((i for i in todo if jobs[i].demand <= width), key=lambda i: (-jobs[i].demand, i))
    large = sorted((i for i in todo if jobs[i].demand > width), key=lambda i: (-jobs[i].demand, i))
    ids = instance.cluster.gpu_ids
    for i in small + large:
        if give_up is not None and give_up():
            raise TimeLimitReached("computing the packing start placement")
        job = jobs[i]
        pos = _place(st, job.perfclass, job.demand, job.locality)
        if pos is None:
            return None
        st.take(pos)
        out[job.id] = tuple(int(g) for g in ids[pos])
    rank = {jobs[i].id: n for n, i in enumerate(admitted)}
    return dict(sorted(out.items(), key=lambda kv: rank[kv[0]]))


def _place(st: _State, perfclass: str, d: int, locality: Sequence[float]) -> np.ndarray | None:
    """The GPUs of the cheapest of "in one server" and "anywhere" (ties to the server)."""
    p, ln = st.profile[perfclass], st.ln[perfclass]
    best: tuple[float, int, int] | None = None  # (cost, level, server or -1)
    if d <= st.slots.shape[1]:
        key = st.srt[p][:, d - 1]
        top = int(key.min())
        if top != _TAKEN:
            cands = np.flatnonzero(key == top)
            best = (float(ln[top]) + math.log(locality[Level.SERVER]), top, int(cands[np.argmin(st.server_free[cands])]))
    cum = np.cumsum(st.count[p])
    if cum.size and cum[-1] >= d:
        top = int(np.searchsorted(cum, d))
        cost = float(ln[top]) + math.log(locality[Level.CLUSTER])
        if best is None or cost < best[0] - 1e-12:
            best = (cost, top, -1)
    if best is None:
        return None
    _, top, server = best
    if server >= 0:
        lv = st.lv[p][server]
        cand = np.flatnonzero(lv <= top)
        order = np.lexsort((st.slots[server, cand], lv[cand]))
        return st.slots[server, cand[order[:d]]]
    return _anywhere(st, p, top, d)


def _anywhere(st: _State, p: int, top: int, d: int) -> np.ndarray:
    """``d`` GPUs of level ≤ ``top`` anywhere: servers with the most such GPUs first, then the
    lower level, then the lower position (the order of the heuristic's ``_gpus_for``)."""
    lv = st.lv[p]
    ok = lv <= top
    per = ok.sum(axis=1)
    rows, cols = np.nonzero(ok)
    pos = st.slots[rows, cols]
    n = st.slots.size
    key = (-per[rows]).astype(np.int64) * (int(top) + 1) * n + lv[rows, cols] * n + pos
    if key.size > d:
        part = np.argpartition(key, d - 1)[:d]
    else:
        part = np.arange(key.size)
    return pos[part[np.argsort(key[part])]]
