"""GPU types in the round program: each admitted job's lanes, and the levels of a lane.

A **lane** of a job is one of its type groups (:func:`pal_opt.gputypes.type_groups`: one usable
type, or all of them if the job mixes types) holding at least its demand of free GPUs; ``None``
is the one lane of a round without types (every GPU).  The program gives a job type one set of
slot columns per lane (:func:`pal_opt.ilp.formulation.build_formulation`), so a job lies on the
GPUs of one lane: one type unless it mixes, never a type it may not use.

A lane's factor levels are the distinct factors of its class over the free GPUs of the lane's
types only; every other free GPU gets level ``L`` (one past the lane's last level), which no slot
column of the lane reaches, so the lane's pools never draw on it.  Classes and lanes whose
levels partition the free GPUs identically share a profile, as classes do without types.

Throughput per type needs nothing here: the factors are already divided by it
(:func:`pal_opt.binning.binned_factors`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InfeasibleRoundError, counted
from ..gputypes import free_per_type, group_mask, has_types, type_groups
from ..model import RoundInstance

__all__ = ["Lane", "round_lanes", "lane_levels", "lane_order"]

#: A type group (positions in ``cluster.type_names``), or None for every GPU.
Lane = tuple[int, ...] | None


def round_lanes(instance: RoundInstance, admitted: Sequence[int], free_pos: np.ndarray) -> dict[int, tuple[Lane, ...]]:
    """Each admitted job's lanes (``(None,)`` for every job of a round without GPU types).

    Raises
    ------
    InfeasibleRoundError
        If an admitted job has no type group with its demand of free GPUs.
    """
    if not has_types(instance):
        return {i: (None,) for i in admitted}
    cl = instance.cluster
    free_mask = np.zeros(cl.num_gpus, dtype=bool)
    free_mask[free_pos] = True
    free = free_per_type(cl, free_mask)
    out: dict[int, tuple[Lane, ...]] = {}
    for i in admitted:
        job = instance.jobs[i]
        lanes = tuple(g for g in type_groups(cl, job) if int(free[list(g)].sum()) >= job.demand)
        if not lanes:
            raise InfeasibleRoundError(
                f"job {job.id!r} needs {counted(job.demand, 'GPU')} of its GPU types but fewer are free", (job.id,))
        out[i] = lanes
    return out


def lane_order(lane: Lane) -> tuple[int, ...]:
    """Sort key of lanes (None, the untyped lane, first)."""
    return () if lane is None else (1, *lane)


def lane_levels(instance: RoundInstance, values: np.ndarray, lane: Lane, free_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lane's distinct factor levels over its free GPUs (ascending) and each free GPU's level
    (``len(levels)`` off the lane); ``values`` are the class's factors of the free GPUs."""
    if lane is None or len(lane) == instance.cluster.num_types:
        levels, inv = np.unique(values, return_inverse=True)
        return levels, inv.reshape(-1).astype(np.int64)
    on = group_mask(instance.cluster, lane)[free_pos]
    levels, inv_on = np.unique(values[on], return_inverse=True)
    inv = np.full(values.size, levels.size, dtype=np.int64)
    inv[on] = inv_on.reshape(-1)
    return levels, inv
