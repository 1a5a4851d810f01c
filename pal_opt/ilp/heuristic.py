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

import numpy as np

from ..admission import class_rank
from ..cost import job_slowdown_pos
from ..model import GpuState, JobId, Level, RoundInstance
from .formulation import Formulation
from .running import keep_positions

__all__ = ["packing_greedy", "pal_greedy", "start_placements"]


def pal_greedy(instance: RoundInstance, factors: Mapping[str, np.ndarray], admitted: Sequence[int]) -> dict[JobId, tuple[int, ...]] | None:
    """PAL's placement of the admitted jobs in its class-sorted order (None if unavailable)."""
    try:
        from ..policies.pal import place_sequence
    except ImportError:  # pragma: no cover - the policies ship with the package
        return None
    order = sorted(admitted, key=lambda i: class_rank(instance.jobs[i].perfclass))
    return place_sequence(instance, factors, order)


def packing_greedy(form: Formulation, keep_running: bool = False) -> dict[JobId, tuple[int, ...]] | None:
    """The packing-aware greedy placement of the admitted jobs (see the module docstring).

    Returns None if some job finds no GPUs (it cannot happen when the admitted demand fits the
    free GPUs, since the "anywhere" option always exists).
    """
    inst = form.instance
    cl = inst.cluster
    S = cl.num_servers
    racked = cl.racked
    R = len(cl.rack_ids)
    free = cl.state == GpuState.FREE
    free = free.copy()
    server_of, rack_of = cl.server_of, cl.rack_of
    # per class: level of each GPU (its profile's levels; -1 off the free set) and log values
    level: dict[str, np.ndarray] = {}
    lnval: dict[str, np.ndarray] = {}
    cnt: dict[str, np.ndarray] = {}
    ptype = form.type_levels
    for p, prof in enumerate(form.profiles):
        lv = np.full(cl.num_gpus, -1, dtype=np.int64)
        on = form.gpu_type >= 0
        lv[on] = ptype[form.gpu_type[on], p]
        for c in prof.classes:
            level[c] = lv
            lnval[c] = np.log(prof.values[c])
            k = np.zeros((S, prof.values[c].size), dtype=np.int64)
            np.add.at(k, (server_of[free], lv[free]), 1)
            cnt[c] = k
    server_free = np.bincount(server_of[free], minlength=S)

    def take(pos: np.ndarray) -> None:
        free[pos] = False
        np.subtract.at(server_free, server_of[pos], 1)
        for c, k in cnt.items():
            np.subtract.at(k, (server_of[pos], level[c][pos]), 1)

    out: dict[JobId, tuple[int, ...]] = {}
    todo = list(form.admitted)
    if keep_running:
        rc = float(inst.params.restart_cost)
        for i in form.admitted:
            job = inst.jobs[i]
            pos = keep_positions(inst, i)
            if pos is None or job.placement is None or not free[pos].all():
                continue
            # keep when moving could save at most the restart cost per GPU: the job's current
            # slowdown against the best factor of its class inside one server
            now = math.log(job_slowdown_pos(cl, np.asarray(form.factors[job.perfclass]), job, pos))
            floor = float(lnval[job.perfclass][0]) + math.log(job.locality[Level.SERVER])
            if now - floor <= rc + 1e-12:
                take(pos)
                out[job.id] = tuple(int(g) for g in cl.gpu_ids[pos])
                todo.remove(i)
    per_server = int(cl.server_sizes.max())
    small = sorted((i for i in todo if inst.jobs[i].demand <= per_server), key=lambda i: (-inst.jobs[i].demand, i))
    large = sorted((i for i in todo if inst.jobs[i].demand > per_server), key=lambda i: (-inst.jobs[i].demand, i))
    for i in small + large:
        job = inst.jobs[i]
        c, d = job.perfclass, job.demand
        k = cnt[c]
        lnl = [math.log(x) for x in job.locality]
        best: tuple[float, int, int, int] | None = None  # (cost, level kind, node, factor level)
        cum = np.cumsum(k, axis=1)
        ok = cum[:, -1] >= d
        if ok.any():
            lvl = np.where(ok, (cum < d).sum(axis=1), k.shape[1])
            top = int(lvl.min())
            cands = np.flatnonzero(lvl == top)
            s = int(cands[np.argmin(server_free[cands])])
            best = (float(lnval[c][top]) + lnl[Level.SERVER], int(Level.SERVER), s, top)
        if racked and d >= 2:
            kr = np.zeros((R, k.shape[1]), dtype=np.int64)
            np.add.at(kr, cl.rack_of_server, k)
            cr = np.cumsum(kr, axis=1)
            ok = cr[:, -1] >= d
            if ok.any():
                lvl = np.where(ok, (cr < d).sum(axis=1), k.shape[1])
                top = int(lvl.min())
                cands = np.flatnonzero(lvl == top)
                rfree = np.bincount(cl.rack_of_server, weights=server_free, minlength=R)
                r = int(cands[np.argmin(rfree[cands])])
                cost = float(lnval[c][top]) + lnl[Level.RACK]
                if best is None or cost < best[0] - 1e-12:
                    best = (cost, int(Level.RACK), r, top)
        cc = np.cumsum(k.sum(axis=0))
        if cc[-1] >= d:
            top = int((cc < d).sum())
            cost = float(lnval[c][top]) + lnl[Level.CLUSTER]
            if best is None or cost < best[0] - 1e-12:
                best = (cost, int(Level.CLUSTER), -1, top)
        if best is None:
            return None
        _, where, node, top = best
        el = free & (level[c] >= 0) & (level[c] <= top)
        if where == Level.SERVER:
            el &= server_of == node
        elif where == Level.RACK:
            el &= rack_of == node
        cand = np.flatnonzero(el)
        srv = server_of[cand]
        per = np.bincount(srv, minlength=S)
        order = np.lexsort((cand, level[c][cand], -per[srv]))
        pos = cand[order][:d]
        take(pos)
        out[job.id] = tuple(int(g) for g in cl.gpu_ids[pos])
    rank = {inst.jobs[i].id: n for n, i in enumerate(form.admitted)}
    return dict(sorted(out.items(), key=lambda kv: rank[kv[0]]))


def start_placements(form: Formulation) -> dict[str, dict[JobId, tuple[int, ...]]]:
    """Every complete start placement of the admitted jobs: ``{source: placement}``.

    Sources: ``"pal"`` (PAL's greedy), ``"packing"`` and, with a restart cost and running jobs,
    ``"packing-keep"``.  Incomplete placements are left out.
    """
    inst = form.instance
    n = len(form.admitted)
    out: dict[str, dict[JobId, tuple[int, ...]]] = {}
    pal = pal_greedy(inst, form.factors, form.admitted)
    if pal is not None and len(pal) == n:
        out["pal"] = pal
    pk = packing_greedy(form)
    if pk is not None and len(pk) == n:
        out["packing"] = pk
    if inst.params.restart_cost > 0 and any(inst.jobs[i].placement is not None for i in form.admitted):
        pk = packing_greedy(form, keep_running=True)
        if pk is not None and len(pk) == n:
            out["packing-keep"] = pk
    return out
