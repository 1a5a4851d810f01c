"""Greedy PAL and PM-First written the plain way, as a test reference (not part of the package).

Everything is recomputed from scratch for every job, by brute force, straight from the rules in
the docstrings of ``pal_opt/policies/pal.py`` and ``pmfirst.py`` (the PAL artifact's
``placement/pal.py`` and ``placement/pmfirst.py``): Python lists, ``sorted`` and
``itertools.combinations``, no counts kept between jobs, no numpy.  It is slow (exponential in
the within-server search) and only meant for rounds of a few dozen GPUs;
``tests/test_pal_reference.py`` checks the package's policies against it decision by decision.

Only the queue order is taken from the package (:func:`pal_opt.admission.pal_order`); GPU types
are not modelled (the rounds have none).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pal_opt.admission import pal_order
from pal_opt.model import GpuState, JobId, Level, RoundInstance


class Round:
    """The round as plain lists: per GPU position its id, server, state and class factors."""

    def __init__(self, instance: RoundInstance, factors: dict[str, Sequence[float]]):
        cl = instance.cluster
        self.ids = [int(x) for x in cl.gpu_ids]
        self.server = [int(s) for s in cl.server_of]
        self.factors = {c: [float(x) for x in f] for c, f in factors.items()}
        self.free = [int(s) == GpuState.FREE for s in cl.state]
        #: the largest server, counting GPUs in every state (the artifact's value_counts().iloc[0])
        self.per_node = max(self.server.count(s) for s in set(self.server))


def pmfirst(r: Round, cands: list[int], c: str, d: int, grouping: str) -> list[int] | None:
    """PM-First on the candidate positions ``cands``: sort by (factor, |group size - d|), stably
    in position order, and take the first ``d``.  A group is the candidates on one server with
    the same factor (``"factor-server"``) or on one server (``"server"``)."""
    if len(cands) < d:
        return None
    f = r.factors[c]

    def group(p: int) -> int:
        return sum(1 for q in cands if r.server[q] == r.server[p] and (grouping == "server" or f[q] == f[p]))

    return sorted(sorted(cands), key=lambda p: (f[p], abs(group(p) - d)))[:d]


def within(r: Round, c: str, d: int, v: float) -> list[int] | None:
    """PAL's within-server cell at factor ``v``: per server, the first ``d``-combination (in GPU
    order) of its free GPUs of factor ≤ ``v`` with the least largest factor; of the servers, the
    least such factor, then pandas ``value_counts`` order (most eligible GPUs first, then first
    appearance of an eligible GPU)."""
    f = r.factors[c]
    eligible = [p for p in range(len(f)) if r.free[p] and f[p] <= v]
    by_server: dict[int, list[int]] = {}
    for p in eligible:
        by_server.setdefault(r.server[p], []).append(p)
    counts = sorted(by_server.values(), key=lambda gpus: (-len(gpus), gpus[0]))  # value_counts order
    best: tuple[float, list[int]] | None = None
    for gpus in counts:
        if len(gpus) < d:
            continue
        combo = min(itertools.combinations(gpus, d), key=lambda cmb: max(f[p] for p in cmb))
        worst = max(f[p] for p in combo)
        if best is None or worst < best[0]:
            best = (worst, list(combo))
    return None if best is None else best[1]


def cells(r: Round, c: str, pw: float, pa: float) -> list[tuple[float, bool]]:
    """PAL's walk: per factor value in order of first appearance over GPU positions, (v, within)
    priced ``pw v`` then (v, across) priced ``pa v``, stably sorted by price."""
    seen: list[float] = []
    for x in r.factors[c]:
        if x not in seen:
            seen.append(x)
    walk = [(price, v, w) for v in seen for price, w in ((pw * v, True), (pa * v, False))]
    return [(v, w) for _, v, w in sorted(walk, key=lambda t: t[0])]


def pal_select(r: Round, c: str, d: int, pw: float, pa: float) -> list[int] | None:
    """PAL's choice for one job of class ``c`` and demand ``d`` on the free GPUs left."""
    f = r.factors[c]
    free = [p for p in range(len(f)) if r.free[p]]
    if d > len(free):
        return None
    if d == 1 or d > r.per_node:
        return pmfirst(r, free, c, d, "factor-server")
    for v, is_within in cells(r, c, pw, pa):
        if is_within:
            pick = within(r, c, d, v)
        else:
            pick = pmfirst(r, [p for p in free if f[p] <= v], c, d, "factor-server")
        if pick is not None:
            return pick
    return None


def place(instance: RoundInstance, factors: dict[str, Sequence[float]], policy: str = "pal",
          grouping: str = "factor-server", backfill: bool = False) -> dict[JobId, tuple[int, ...]]:
    """A whole round in PAL's queue order: ``{job id: GPU ids}`` in placement order."""
    r = Round(instance, factors)
    out: dict[JobId, tuple[int, ...]] = {}
    for i in pal_order(instance):
        job = instance.jobs[i]
        c, d = job.perfclass, job.demand
        if policy == "pal":
            pick = pal_select(r, c, d, float(job.locality[Level.SERVER]), float(job.locality[Level.CLUSTER]))
        else:
            pick = pmfirst(r, [p for p in range(len(r.free)) if r.free[p]], c, d, grouping)
        if pick is None:
            if backfill:
                continue
            break
        for p in pick:
            r.free[p] = False
        out[job.id] = tuple(r.ids[p] for p in pick)
    return out
