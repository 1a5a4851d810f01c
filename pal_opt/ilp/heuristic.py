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

On a racked cluster, variant ``"packing-large"`` places the gangs larger than a server first:
jobs that fit in a server, placed first, spread over the racks and leave the large gangs no rack
with room, so they pay the cross-rack penalty.  Neither order wins everywhere (on the suite's
racked rounds, with a cross-rack penalty of 2.5 against λ = 1.7 within a rack, large-first is
2.5–3.1 % cheaper at 1,024 and 2,048 GPUs, and 7–17 % dearer at 512 and 7 % at 4,096 and
8,192), so both are starts and the solver gets the cheaper.

With a restart cost, variant ``"packing-keep"`` first lets every running job keep its GPUs when
moving could save it at most the restart cost per GPU in round-cost units (its current slowdown
against the best factor level of its class inside one server).  Variant ``"packing-stay"`` lets
every running job that can keep its GPUs keep them: the keep variant's estimate is optimistic
(the best level inside a server, whether or not one is free there), and when the time limit
leaves no time for the program it moved 5.5 running jobs a round in a 256-GPU loop where keeping
them all was 0-30 % cheaper.  :func:`start_placements` returns every candidate; the solver gets
the cheapest.

With GPU types a job takes the cheapest option over its lanes (type groups) that leaves every
later job room on its types (:class:`~pal_opt.gputypes.TypeBudget`).  Size order alone lets
large gangs take the fast type whatever their class gains there, so variant
``"packing-regret"`` first gives every job one lane, by counts of GPUs per type only, in order
of *regret* -- the jobs that lose the most per GPU on their second-best lane (the type their
class runs fastest on, against the next) first, jobs of one lane before all, largest first on
ties -- each taking its cheapest lane the budget allows; then places the jobs as above, in size
order, each on its lane (jobs that mix types last, on what their types have left).

With GPU types the profiles order the GPUs differently (a class may run alike on every GPU of a
type while another's speeds spread widely), so many servers tie for a job; among servers equally
good for it (the same least level, the same fit) a job takes the one *worth* least to the
profiles: the sum over the free GPUs and the profiles whose lane holds them of
``(L − level) / L``.  On ``benchmarks/types_scale.py`` this tie-break alone takes the starts of
every seed 0.1–0.3 % closer to the bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..admission import claim_placement, class_rank
from ..cost import job_slowdown_pos
from ..cost.restart import restart_units
from ..gputypes import TypeBudget, free_per_type, has_types, type_groups
from ..model import GpuState, Job, JobId, Level, RoundInstance
from .formulation import Formulation
from .running import keep_positions, moving_is_charged

__all__ = ["packing_greedy", "pal_greedy", "start_placements"]


def pal_greedy(instance: RoundInstance, factors: Mapping[str, np.ndarray], admitted: Sequence[int],
               free_mask: np.ndarray | None = None) -> dict[JobId, tuple[int, ...]] | None:
    """PAL's placement of the admitted jobs in its class-sorted order, on the GPUs of
    ``free_mask`` (default: the free GPUs); None if unavailable."""
    try:
        from ..policies.pal import place_sequence
    except ImportError:  # pragma: no cover - the policies ship with the package
        return None
    order = sorted(admitted, key=lambda i: class_rank(instance.jobs[i].perfclass))
    return place_sequence(instance, factors, order, free_mask=free_mask)


@dataclass
class _FreeGpus:
    """The free GPUs as the packing greedy takes them: per profile (a class's levels on one lane
    of GPU types) the level of every GPU (``-1`` off the free set and off the lane) and the free
    count per (server, level); per (profile, class) the log factor of each level; free GPUs per
    server; each job's profiles (its lanes); with GPU types, each GPU's *worth* (how fast it is
    for the profiles: Σ over the profiles whose lane holds it of ``(L − level) / L``) and the
    worth of each server's free GPUs (None without types)."""

    instance: RoundInstance
    free: np.ndarray
    level: dict[int, np.ndarray]
    lnval: dict[tuple[int, str], np.ndarray]
    cnt: dict[int, np.ndarray]
    server_free: np.ndarray
    lanes: dict[int, tuple[int, ...]]
    gpu_worth: np.ndarray | None = None
    server_worth: np.ndarray | None = None

    @classmethod
    def of(cls, form: Formulation) -> _FreeGpus:
        cl = form.instance.cluster
        free = (cl.state == GpuState.FREE).copy()
        level: dict[int, np.ndarray] = {}
        lnval: dict[tuple[int, str], np.ndarray] = {}
        cnt: dict[int, np.ndarray] = {}
        for p, prof in enumerate(form.profiles):
            lv = np.full(cl.num_gpus, -1, dtype=np.int64)
            on = form.gpu_type >= 0
            lv[on] = form.type_levels[form.gpu_type[on], p]
            lv[lv >= prof.num_levels] = -1  # off the profile's lane
            level[p] = lv
            for c in prof.classes:
                lnval[(p, c)] = np.log(prof.values[c])
            k = np.zeros((cl.num_servers, prof.num_levels), dtype=np.int64)
            use = free & (lv >= 0)
            np.add.at(k, (cl.server_of[use], lv[use]), 1)
            cnt[p] = k
        lanes = {j: jt.profiles for jt in form.types for j in jt.jobs}
        out = cls(form.instance, free, level, lnval, cnt, np.bincount(cl.server_of[free], minlength=cl.num_servers),
                  lanes)
        if has_types(form.instance):
            worth = np.zeros(cl.num_gpus)
            for p, lv in level.items():
                n = cnt[p].shape[1]
                worth[lv >= 0] += (n - lv[lv >= 0]) / n
            out.gpu_worth = worth
            out.server_worth = np.bincount(cl.server_of[free], weights=worth[free], minlength=cl.num_servers)
        return out

    def take(self, pos: np.ndarray) -> tuple[int, ...]:
        """Mark the GPUs at ``pos`` used; their ids."""
        cl = self.instance.cluster
        self.free[pos] = False
        np.subtract.at(self.server_free, cl.server_of[pos], 1)
        if self.server_worth is not None and self.gpu_worth is not None:
            np.subtract.at(self.server_worth, cl.server_of[pos], self.gpu_worth[pos])
        for p, k in self.cnt.items():
            lv = self.level[p][pos]
            on = lv >= 0
            np.subtract.at(k, (cl.server_of[pos[on]], lv[on]), 1)
        return tuple(int(g) for g in cl.gpu_ids[pos])


def packing_greedy(form: Formulation, keep_running: bool = False, *, regret: bool = False,
                   lanes: Mapping[int, int] | None = None, large_first: bool = False, stay: bool = False
                   ) -> dict[JobId, tuple[int, ...]] | None:
    """The packing-aware greedy placement of the admitted jobs (see the module docstring);
    ``large_first`` places the gangs larger than a server before the others (variant
    ``"packing-large"``); ``regret`` first gives each job one GPU-type lane by regret; ``lanes`` gives them instead
    (``{job index: profile}``, one of the job's lanes, for every job with several lanes;
    :mod:`pal_opt.ilp.lanelp`): then each job is placed on its lane without a type budget.
    ``stay`` (with ``keep_running``) lets every running job that can keep its GPUs keep them,
    whatever moving might save (variant ``"packing-stay"``).

    Returns None if some job finds no GPUs (it cannot happen without GPU types when the
    admitted demand fits the free GPUs, since the "anywhere" option always exists).
    """
    inst = form.instance
    gpus = _FreeGpus.of(form)
    out = _keep_running_jobs(form, gpus, stay=stay) if keep_running else {}
    todo = [i for i in form.admitted if inst.jobs[i].id not in out]
    per_server = int(inst.cluster.server_sizes.max())
    small = sorted((i for i in todo if inst.jobs[i].demand <= per_server), key=lambda i: (-inst.jobs[i].demand, i))
    large = sorted((i for i in todo if inst.jobs[i].demand > per_server), key=lambda i: (-inst.jobs[i].demand, i))
    budget = _type_budget(inst, todo, gpus.free)
    order = large + small if large_first else small + large
    if budget is not None and (regret or lanes is not None):
        if lanes is not None:
            gpus.lanes.update({i: (lanes[i],) for i in todo if lanes.get(i, -1) in gpus.lanes[i]})
        elif not _assign_lanes(gpus, todo, budget):
            return None
        budget = None
        order = [i for i in order if not inst.jobs[i].mix_types] + [i for i in order if inst.jobs[i].mix_types]
    for i in order:
        job = inst.jobs[i]
        if budget is None:
            best = _cheapest_option(gpus, job, gpus.lanes[i])
            pos = None if best is None else _gpus_for(gpus, job, best)
        else:
            pos = _cheapest_within_budget(gpus, job, i, budget)
        if pos is None:
            return None
        out[job.id] = gpus.take(pos)
    rank = {inst.jobs[i].id: n for n, i in enumerate(form.admitted)}
    return dict(sorted(out.items(), key=lambda kv: rank[kv[0]]))


def _assign_lanes(gpus: _FreeGpus, todo: Sequence[int], budget: TypeBudget) -> bool:
    """Give each job of ``todo`` one lane (``gpus.lanes``) by GPU counts per type, in regret order
    (:func:`_regret_order`), each its cheapest lane the budget allows; False if one finds none."""
    inst = gpus.instance
    cl = inst.cluster
    group = {p: np.unique(cl.type_of[lv >= 0]) for p, lv in gpus.level.items()}
    for i in _regret_order(gpus, todo):
        job = inst.jobs[i]
        for p in sorted(gpus.lanes[i], key=lambda p: _lane_price(gpus, p, job.perfclass)):
            took = np.zeros(cl.num_types, dtype=np.int64)
            left = job.demand
            for k in sorted(group[p].tolist(), key=lambda k: (-int(budget.free[k]), k)):
                took[k] = min(left, int(budget.free[k]))
                left -= int(took[k])
            if left == 0 and budget.allows(i, took):
                budget.take(i, took)
                gpus.lanes[i] = (p,)
                break
        else:
            return False
    return True


def _lane_price(gpus: _FreeGpus, p: int, perfclass: str) -> float:
    """A lane's price for a class: the class's mean log factor over the lane's free GPUs."""
    n = gpus.cnt[p].sum(axis=0)
    return float(n @ gpus.lnval[(p, perfclass)] / max(int(n.sum()), 1))


def _regret_order(gpus: _FreeGpus, todo: Sequence[int]) -> list[int]:
    """``todo`` by regret (module docstring), with lane prices of :func:`_lane_price`."""
    inst = gpus.instance
    price: dict[tuple[int, str], float] = {}

    def lane_price(p: int, c: str) -> float:
        if (p, c) not in price:
            price[(p, c)] = _lane_price(gpus, p, c)
        return price[(p, c)]

    def key(i: int) -> tuple[float, int, int]:
        job = inst.jobs[i]
        prices = sorted(lane_price(p, job.perfclass) for p in gpus.lanes[i])
        return (-(prices[1] - prices[0]) if len(prices) > 1 else -math.inf, -job.demand, i)

    return sorted(todo, key=key)


def _type_budget(inst: RoundInstance, todo: Sequence[int], free: np.ndarray) -> TypeBudget | None:
    """With GPU types, the budget that keeps room for every job still to place (None without)."""
    if not has_types(inst):
        return None
    cl = inst.cluster
    return TypeBudget({i: type_groups(cl, inst.jobs[i]) for i in todo}, {i: inst.jobs[i].demand for i in todo},
                      free_per_type(cl, free))


def _cheapest_within_budget(gpus: _FreeGpus, job: Job, i: int, budget: TypeBudget) -> np.ndarray | None:
    """The GPUs of the cheapest option over the job's lanes (:func:`_cheapest_on_lane`) that leaves
    every later job room on its GPU types (:class:`~pal_opt.gputypes.TypeBudget`); it is taken
    from the budget.  None if no lane's option does."""
    cl = gpus.instance.cluster
    options = [opt for p in gpus.lanes[i] if (opt := _cheapest_on_lane(gpus, job, p)) is not None]
    for opt in sorted(options, key=lambda o: o[0]):
        pos = _gpus_for(gpus, job, opt)
        took = np.bincount(cl.type_of[pos], minlength=cl.num_types)
        if budget.allows(i, took):
            budget.take(i, took)
            return pos
    return None


def _keep_running_jobs(form: Formulation, gpus: _FreeGpus, *, stay: bool = False) -> dict[JobId, tuple[int, ...]]:
    """Let every running job keep its GPUs when moving could save it at most the restart cost per
    GPU (round-cost units): its current slowdown against the best factor of its class inside one
    server; with ``stay``, every running job that can keep them."""
    inst = form.instance
    cl = inst.cluster
    rc = restart_units(inst.params)
    out: dict[JobId, tuple[int, ...]] = {}
    for i in form.admitted:
        job = inst.jobs[i]
        pos = keep_positions(inst, i)
        if pos is None or job.placement is None or not gpus.free[pos].all():
            continue
        now = math.log(job_slowdown_pos(cl, np.asarray(form.factors[job.perfclass]), job, pos))
        floor = min(float(gpus.lnval[(p, job.perfclass)][0]) for p in gpus.lanes[i]) + math.log(
            job.locality[Level.SERVER])
        if stay or now - floor <= rc + 1e-12:
            out[job.id] = gpus.take(pos)
    return out


def _least_level(counts: np.ndarray, d: int, free: np.ndarray, worth: np.ndarray | None = None,
                 ) -> tuple[int, int] | None:
    """Among nodes (rows of ``counts``: free GPUs per level) offering ``d`` GPUs, the least level
    that reaches ``d`` and, at that level, the node with the fewest free GPUs (best fit), then
    (with ``worth``) the least worth to the other jobs, then the first: ``(level, node)``, or
    None when no node offers ``d``."""
    cum = np.cumsum(counts, axis=1)
    ok = cum[:, -1] >= d
    if not ok.any():
        return None
    lvl = np.where(ok, (cum < d).sum(axis=1), counts.shape[1])
    top = int(lvl.min())
    cands = np.flatnonzero(lvl == top)
    if worth is not None:
        return top, int(cands[np.lexsort((cands, worth[cands], free[cands]))[0]])
    return top, int(cands[np.argmin(free[cands])])


def _cheapest_option(gpus: _FreeGpus, job: Job, lanes: tuple[int, ...]) -> tuple[float, int, int, int, int] | None:
    """The cheapest of placing ``job`` in one server, one rack or anywhere, on one of its lanes
    (profiles), as ``(log slowdown, Level, node, factor level, profile)``; ties go to the lower
    topology level, then to the first lane."""
    best: tuple[float, int, int, int, int] | None = None
    for p in lanes:
        opt = _cheapest_on_lane(gpus, job, p)
        if opt is not None and (best is None or opt[0] < best[0] - 1e-12):
            best = opt
    return best


def _cheapest_on_lane(gpus: _FreeGpus, job: Job, p: int) -> tuple[float, int, int, int, int] | None:
    """:func:`_cheapest_option` on the lane of profile ``p``."""
    cl = gpus.instance.cluster
    c, d = job.perfclass, job.demand
    k = gpus.cnt[p]
    lnl = [math.log(x) for x in job.locality]
    best: tuple[float, int, int, int, int] | None = None
    options = [(Level.SERVER, k, gpus.server_free)]
    if cl.racked and d >= 2:
        kr = np.zeros((len(cl.rack_ids), k.shape[1]), dtype=np.int64)
        np.add.at(kr, cl.rack_of_server, k)
        options.append((Level.RACK, kr, np.bincount(cl.rack_of_server, weights=gpus.server_free,
                                                    minlength=len(cl.rack_ids))))
    options.append((Level.CLUSTER, k.sum(axis=0)[None, :], np.zeros(1)))
    for where, counts, free in options:
        found = _least_level(counts, d, free, gpus.server_worth if where == Level.SERVER else None)
        if found is None:
            continue
        top, node = found
        cost = float(gpus.lnval[(p, c)][top]) + lnl[where]
        if best is None or cost < best[0] - 1e-12:
            best = (cost, int(where), node if where != Level.CLUSTER else -1, top, p)
    return best


def _gpus_for(gpus: _FreeGpus, job: Job, best: tuple[float, int, int, int, int]) -> np.ndarray:
    """The ``job.demand`` GPUs of the chosen option: eligible GPUs (free, of level ≤ the option's,
    inside its node) on the servers with the most eligible GPUs first, lower levels first."""
    cl = gpus.instance.cluster
    _, where, node, top, p = best
    lv = gpus.level[p]
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

    Sources: ``"pal"`` (PAL's greedy; ``pal`` if given, computed already), ``"packing"``, on a
    racked cluster without GPU types ``"packing-large"``, with GPU
    types and jobs of several lanes ``"packing-regret"`` and, with a restart cost and running jobs,
    ``"packing-keep"`` and ``"packing-stay"`` (when it differs); with GPU types and none of those complete, ``"claim"``
    (:func:`pal_opt.admission.claim_placement`).  Incomplete placements are left out.
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
    per_server = int(inst.cluster.server_sizes.max())
    if inst.cluster.racked and not has_types(inst) and any(inst.jobs[i].demand > per_server for i in form.admitted):
        pk = packing_greedy(form, large_first=True)
        if pk is not None and len(pk) == n:
            out["packing-large"] = pk
    if has_types(inst) and any(len(jt.profiles) > 1 for jt in form.types):
        pk = packing_greedy(form, regret=True)
        if pk is not None and len(pk) == n:
            out["packing-regret"] = pk
    if moving_is_charged(inst) and any(inst.jobs[i].placement is not None for i in form.admitted):
        pk = packing_greedy(form, keep_running=True)
        if pk is not None and len(pk) == n:
            out["packing-keep"] = pk
        pk = packing_greedy(form, keep_running=True, stay=True)
        if pk is not None and len(pk) == n and pk != out.get("packing-keep"):
            out["packing-stay"] = pk
    if not out and has_types(inst):  # the greedy placers do not count per type: the admission's claims
        claim = claim_placement(inst, form.admitted)
        if claim is not None:
            out["claim"] = claim
    return out
