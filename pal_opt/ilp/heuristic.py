"""Start placements for the round program: PAL's greedy and a packing-aware greedy.

The program's LP bound is tight (a few hundredths of a percent of the geometric-mean slowdown
on generated rounds), so at scale the time to a small proven gap is the time to a good
incumbent.  PAL's own walk places jobs class by class; its across-server placements for large
gangs scatter over many servers, and smaller gangs placed later find no room inside a server
and pay the locality penalty.  On 2,048-GPU rounds that leaves PAL 7–8 % above the bound.

:func:`packing_greedy` places, in this order,

1. the jobs that fit in one server, largest demand first (first-fit-decreasing thinking),
2. then the larger gangs, largest first, on what is left;

each job takes the cheapest of three options under :mod:`pal_opt.cost` (in one server, in one
rack, anywhere), where an option's factor is the least level that still offers ``d`` free GPUs
and ties go to the lower topology level; within a server it takes the fullest server that
reaches that level (best fit), across servers the servers with the most eligible GPUs first.
Work per job is numpy over (servers × levels) count arrays.

With a restart cost, variant ``"packing-keep"`` first lets every running job keep its GPUs when
moving could save it at most the restart cost per GPU (its current slowdown against the best
factor level of its class inside one server).  :func:`start_placements` returns every candidate; the solver gets the cheapest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..admission import class_rank
from ..cost import job_slowdown_pos
from ..model import GpuState, Job, JobId, Level, RoundInstance
from .formulation import Formulation
from .running import keep_positions, moving_is_charged

__all__ = ["packing_greedy", "pal_greedy", "start_placements"]


def pal_greedy(instance: RoundInstance, factors: Mapping[str, np.ndarray], admitted: Sequence[int]) -> dict[JobId, tuple[int, ...]] | None:
    """PAL's placement of the admitted jobs in its class-sorted order (None if unavailable)."""
    try:
        from ..policies.pal import place_sequence
    except ImportError:  # pragma: no cover - the policies ship with the package
        return None
    order = sorted(admitted, key=lambda i: class_rank(instance.jobs[i].perfclass))
    return place_sequence(instance, factors, order)


@dataclass
class _FreeGpus:
    """The free GPUs as the packing greedy takes them: per class the level of every GPU (its
    profile's levels, ``-1`` off the free set), the log factor of each level and the free count per
    (server, level); free GPUs per server."""

    instance: RoundInstance
    free: np.ndarray
    level: dict[str, np.ndarray]
    lnval: dict[str, np.ndarray]
    cnt: dict[str, np.ndarray]
    server_free: np.ndarray

    @classmethod
    def of(cls, form: Formulation) -> _FreeGpus:
        cl = form.instance.cluster
        free = (cl.state == GpuState.FREE).copy()
        level: dict[str, np.ndarray] = {}
        lnval: dict[str, np.ndarray] = {}
        cnt: dict[str, np.ndarray] = {}
        for p, prof in enumerate(form.profiles):
            lv = np.full(cl.num_gpus, -1, dtype=np.int64)
            on = form.gpu_type >= 0
            lv[on] = form.type_levels[form.gpu_type[on], p]
            for c in prof.classes:
                level[c] = lv
                lnval[c] = np.log(prof.values[c])
                k = np.zeros((cl.num_servers, prof.values[c].size), dtype=np.int64)
                np.add.at(k, (cl.server_of[free], lv[free]), 1)
                cnt[c] = k
        return cls(form.instance, free, level, lnval, cnt, np.bincount(cl.server_of[free], minlength=cl.num_servers))

    def take(self, pos: np.ndarray) -> tuple[int, ...]:
        """Mark the GPUs at ``pos`` used; their ids."""
        cl = self.instance.cluster
        self.free[pos] = False
        np.subtract.at(self.server_free, cl.server_of[pos], 1)
        for c, k in self.cnt.items():
            np.subtract.at(k, (cl.server_of[pos], self.level[c][pos]), 1)
        return tuple(int(g) for g in cl.gpu_ids[pos])


def packing_greedy(form: Formulation, keep_running: bool = False) -> dict[JobId, tuple[int, ...]] | None:
    """The packing-aware greedy placement of the admitted jobs (see the module docstring).

    Returns None if some job finds no GPUs (it cannot happen when the admitted demand fits the
    free GPUs, since the "anywhere" option always exists).
    """
    inst = form.instance
    gpus = _FreeGpus.of(form)
    out = _keep_running_jobs(form, gpus) if keep_running else {}
    todo = [i for i in form.admitted if inst.jobs[i].id not in out]
    per_server = int(inst.cluster.server_sizes.max())
    small = sorted((i for i in todo if inst.jobs[i].demand <= per_server), key=lambda i: (-inst.jobs[i].demand, i))
    large = sorted((i for i in todo if inst.jobs[i].demand > per_server), key=lambda i: (-inst.jobs[i].demand, i))
    for i in small + large:
        job = inst.jobs[i]
        best = _cheapest_option(gpus, job)
        if best is None:
            return None
        out[job.id] = gpus.take(_gpus_for(gpus, job, best))
    rank = {inst.jobs[i].id: n for n, i in enumerate(form.admitted)}
    return dict(sorted(out.items(), key=lambda kv: rank[kv[0]]))


def _keep_running_jobs(form: Formulation, gpus: _FreeGpus) -> dict[JobId, tuple[int, ...]]:
    """Let every running job keep its GPUs when moving could save it at most the restart cost per
    GPU: its current slowdown against the best factor of its class inside one server."""
    inst = form.instance
    cl = inst.cluster
    rc = float(inst.params.restart_cost)
    out: dict[JobId, tuple[int, ...]] = {}
    for i in form.admitted:
        job = inst.jobs[i]
        pos = keep_positions(inst, i)
        if pos is None or job.placement is None or not gpus.free[pos].all():
            continue
        now = math.log(job_slowdown_pos(cl, np.asarray(form.factors[job.perfclass]), job, pos))
        floor = float(gpus.lnval[job.perfclass][0]) + math.log(job.locality[Level.SERVER])
        if now - floor <= rc + 1e-12:
            out[job.id] = gpus.take(pos)
    return out


def _least_level(counts: np.ndarray, d: int, free: np.ndarray) -> tuple[int, int] | None:
    """Among nodes (rows of ``counts``: free GPUs per level) offering ``d`` GPUs, the least level
    that reaches ``d`` and, at that level, the node with the fewest free GPUs (best fit):
    ``(level, node)``, or None when no node offers ``d``."""
    cum = np.cumsum(counts, axis=1)
    ok = cum[:, -1] >= d
    if not ok.any():
        return None
    lvl = np.where(ok, (cum < d).sum(axis=1), counts.shape[1])
    top = int(lvl.min())
    cands = np.flatnonzero(lvl == top)
    return top, int(cands[np.argmin(free[cands])])


def _cheapest_option(gpus: _FreeGpus, job: Job) -> tuple[float, int, int, int] | None:
    """The cheapest of placing ``job`` in one server, one rack or anywhere, as
    ``(log slowdown, Level, node, factor level)``; ties go to the lower topology level."""
    cl = gpus.instance.cluster
    c, d = job.perfclass, job.demand
    k = gpus.cnt[c]
    lnl = [math.log(x) for x in job.locality]
    best: tuple[float, int, int, int] | None = None
    options = [(Level.SERVER, k, gpus.server_free)]
    if cl.racked and d >= 2:
        kr = np.zeros((len(cl.rack_ids), k.shape[1]), dtype=np.int64)
        np.add.at(kr, cl.rack_of_server, k)
        options.append((Level.RACK, kr, np.bincount(cl.rack_of_server, weights=gpus.server_free,
                                                    minlength=len(cl.rack_ids))))
    options.append((Level.CLUSTER, k.sum(axis=0)[None, :], np.zeros(1)))
    for where, counts, free in options:
        found = _least_level(counts, d, free)
        if found is None:
            continue
        top, node = found
        cost = float(gpus.lnval[c][top]) + lnl[where]
        if best is None or cost < best[0] - 1e-12:
            best = (cost, int(where), node if where != Level.CLUSTER else -1, top)
    return best


def _gpus_for(gpus: _FreeGpus, job: Job, best: tuple[float, int, int, int]) -> np.ndarray:
    """The ``job.demand`` GPUs of the chosen option: eligible GPUs (free, of level ≤ the option's,
    inside its node) on the servers with the most eligible GPUs first, lower levels first."""
    cl = gpus.instance.cluster
    _, where, node, top = best
    lv = gpus.level[job.perfclass]
    el = gpus.free & (lv >= 0) & (lv <= top)
    if where == Level.SERVER:
        el &= cl.server_of == node
    elif where == Level.RACK:
        el &= cl.rack_of == node
    cand = np.flatnonzero(el)
    srv = cl.server_of[cand]
    per = np.bincount(srv, minlength=cl.num_servers)
    order = np.lexsort((cand, lv[cand], -per[srv]))
    return cand[order][: job.demand]


def start_placements(
    form: Formulation, *, pal: dict[JobId, tuple[int, ...]] | None = None
) -> dict[str, dict[JobId, tuple[int, ...]]]:
    """Every complete start placement of the admitted jobs: ``{source: placement}``.

    Sources: ``"pal"`` (PAL's greedy; ``pal`` if given, computed already), ``"packing"`` and,
    with a restart cost and running jobs, ``"packing-keep"``.  Incomplete placements are left out.
    """
    inst = form.instance
    n = len(form.admitted)
    out: dict[str, dict[JobId, tuple[int, ...]]] = {}
    if pal is None:
        pal = pal_greedy(inst, form.factors, form.admitted)
    if pal is not None and len(pal) == n:
        out["pal"] = pal
    pk = packing_greedy(form)
    if pk is not None and len(pk) == n:
        out["packing"] = pk
    if moving_is_charged(inst) and any(inst.jobs[i].placement is not None for i in form.admitted):
        pk = packing_greedy(form, keep_running=True)
        if pk is not None and len(pk) == n:
            out["packing-keep"] = pk
    return out
