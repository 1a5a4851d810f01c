"""Running jobs in the round program: whether moving one costs anything, and which may stay put.

Both programs (:mod:`pal_opt.ilp.formulation` and the stage program
:mod:`pal_opt.ilp.stageround`, their keep variables) and the start placements
(:mod:`pal_opt.ilp.heuristic`, variant ``"packing-keep"``) and the partitioner
(:mod:`pal_opt.ilp.partition`) ask the same two questions; they are answered here once.
"""

from __future__ import annotations

import numpy as np

from ..cost import cost_terms
from ..gputypes import has_types, type_groups
from ..model import GpuState, RoundInstance

__all__ = ["moving_is_charged", "keep_positions"]


def moving_is_charged(instance: RoundInstance) -> bool:
    """Whether some registered cost term charges for moving one of the round's running jobs
    (``CostTerm.moved``: the restart cost, the migration cost, ...).

    Only then does the program get keep variables (a running job keeping exactly its GPUs) and
    the constant that the running admitted jobs pay for moving.
    """
    terms = cost_terms()
    return any(t.moved(instance, j) > 0 for j in instance.jobs if j.placement is not None for t in terms)


def keep_positions(instance: RoundInstance, idx: int) -> np.ndarray | None:
    """Sorted positions of the GPUs job ``instance.jobs[idx]`` runs on, if it could keep them.

    A running job can keep its GPUs when its placement names ``demand`` distinct GPUs of the
    cluster that are all free this round (the GPUs of running queued jobs are free) and, with GPU
    types, all in one of its type groups (:func:`pal_opt.gputypes.type_groups`).

    Returns
    -------
    numpy.ndarray or None
        The positions (ascending), or None for a job that is not running or whose placement is
        unusable (wrong size, repeated or unknown GPUs, a GPU busy or failed).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> cl = Cluster.from_arrays([10, 11, 12], [0, 0, 1], {"classA": [1.0, 1.0, 1.0]})
    >>> inst = RoundInstance(cl, (Job(0, 2, "classA", placement=(12, 10)), Job(1, 1, "classA")))
    >>> keep_positions(inst, 0).tolist(), keep_positions(inst, 1)
    ([0, 2], None)
    """
    job = instance.jobs[idx]
    if job.placement is None or len(job.placement) != job.demand or len(set(job.placement)) != job.demand:
        return None
    cl = instance.cluster
    try:
        pos = cl.positions(job.placement)
    except KeyError:
        return None
    if not np.all(cl.state[pos] == GpuState.FREE):
        return None
    if has_types(instance):
        kinds = set(cl.type_of[pos].tolist())
        if not any(kinds <= set(g) for g in type_groups(cl, job)):
            return None
    return np.sort(pos)
