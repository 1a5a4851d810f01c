"""A round restricted to some of its servers and jobs, priced as the whole round prices them.

Used by the partitioned method (:mod:`pal_opt.ilp.partition`, one part per group of servers) and
by the search on pairs of servers of large rounds with pipeline jobs
(:mod:`pal_opt.ilp.stagesearch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ..model import Cluster, RoundInstance

__all__ = ["part_instance"]


def part_instance(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    servers: np.ndarray,
    jobs: Sequence[int],
    name: str,
) -> RoundInstance:
    """The round restricted to ``servers`` (positions) and ``jobs`` (indices), with the whole
    round's binned ``factors`` as the part's factors and binning ``"none"``.

    Server and rack ids are kept, so a GPU set spans the same level in the part and in the round.
    GPU types are kept, with each throughput row as 1.0 on the types it names (the factors are
    already divided by the throughput; a class keeps the types it may use).
    """
    cl = instance.cluster
    pos = np.flatnonzero(np.isin(cl.server_of, servers))
    sid = cl.server_ids
    srv = [sid[s] for s in cl.server_of[pos].tolist()]
    rmap = None
    if cl.racked:
        rmap = {sid[s]: cl.rack_ids[int(cl.rack_of_server[s])] for s in np.unique(cl.server_of[pos]).tolist()}
    types = [cl.type_names[k] for k in cl.type_of[pos].tolist()] if cl.typed else None
    present = set(types or ())
    rows = {c: {t: 1.0 for t in row if t in present} for c, row in cl.throughput.items()}
    sub = Cluster.from_arrays(
        cl.gpu_ids[pos], srv, {c: np.asarray(factors[c])[pos] for c in cl.classes}, cl.state[pos], rmap,
        gpu_types=types, throughput=rows,
    )
    inside = set(sub.gpu_ids.tolist())
    part_jobs = tuple(
        j if j.placement is None or inside.issuperset(j.placement) else replace(j, placement=None)
        for j in (instance.jobs[i] for i in jobs)
    )  # a running job holding GPUs of another part cannot keep them here
    return RoundInstance(sub, part_jobs, replace(instance.params, binning="none"), name)
