"""GPU types: which GPUs a job may use, when types make a job unplaceable, and the cluster spec.

A cluster may carry a type per GPU (:attr:`pal_opt.model.Cluster.type_names`); a job may name
the types it accepts (``gpu_type``, ``allowed_types``) and whether one gang may mix types
(``mix_types``, default False).  What a job may use is its **usable types**: the types it names
(any, if it names none) that the cluster has and that its class has a throughput for
(:attr:`pal_opt.model.Cluster.throughput`; a class without a row runs on every type):
:func:`usable_types`, defined in :mod:`pal_opt.model`, which checks running jobs with it.  Its
**type groups** are the GPU sets one gang may be drawn from: each usable type alone, or all of
them together when the job mixes types.

A job whose usable types cannot hold its demand (:func:`type_problem`), or whose types have too
few GPUs in service this round (:func:`service_problem`), is *unplaceable*: the round keeps it
and leaves it out with the reason, as for a job larger than the cluster
(:func:`pal_opt.admission.unplaceable`).  Only a type name the cluster does not have, or a
running job on GPUs off its usable types, is an error, in a
:class:`~pal_opt.model.RoundInstance` and an instance file alike
(:func:`pal_opt.model.check_job_types`).

Everything here is cheap: per job a few type counts, never a loop over GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .errors import OptionError, counted
from .model import Cluster, GpuState, Job, RoundInstance, usable_types
from .options import check_cluster_size

__all__ = [
    "parse_cluster_spec",
    "has_types",
    "usable_types",
    "type_groups",
    "group_mask",
    "type_problem",
    "service_problem",
    "free_per_type",
    "fits_types",
    "claim_types",
    "claim_all",
    "TypeBudget",
]


def parse_cluster_spec(text: str, what: str = "--cluster") -> list[tuple[str, int, int]]:
    """``TYPE:SERVERSxGPUS[,TYPE:SERVERSxGPUS...]`` as (type name, servers, GPUs per server), in order.
    Errors start with ``what``: the option, or the argument of a function that took the text.

    >>> parse_cluster_spec("aws:6x4,rtx:3x8")
    [('aws', 6, 4), ('rtx', 3, 8)]

    Raises
    ------
    OptionError
        A malformed item, a non-positive count, or a repeated name.
    """
    if not isinstance(text, str):
        raise OptionError(f"{what}: expected TYPE:SERVERSxGPUS[,...] (e.g. aws:6x4), got {text!r:.60}")
    out: list[tuple[str, int, int]] = []
    for item in text.split(","):
        name, sep, size = item.strip().partition(":")
        nodes, x, gpus = size.lower().partition("x")
        if not (sep and x and name and nodes.isdigit() and gpus.isdigit()):
            raise OptionError(f"{what}: expected TYPE:SERVERSxGPUS[,...] (e.g. aws:6x4), got {item.strip()!r}")
        if int(nodes) < 1 or int(gpus) < 1:
            raise OptionError(f"{what}: {name} needs at least one node and one GPU per node, got {size}")
        if name in [o[0] for o in out]:
            raise OptionError(f"{what}: GPU type {name!r} is given twice")
        out.append((name, int(nodes), int(gpus)))
    check_cluster_size(sum(n * g for _, n, g in out), f"{what} {text.strip()}")
    return out


def has_types(instance: RoundInstance) -> bool:
    """True if GPU types matter in this round: the cluster is typed or a job names types.

    Untyped rounds take exactly the code paths they took before types existed.
    """
    return instance.cluster.typed or any(j.constrains_types for j in instance.jobs)


def type_groups(cluster: Cluster, job: Job) -> tuple[tuple[int, ...], ...]:
    """The type sets one gang of ``job`` may be drawn from: each usable type alone, or all of them
    together if the job mixes types (empty if it has no usable type)."""
    use = usable_types(cluster, job)
    if not use:
        return ()
    if job.mix_types or len(use) == 1:
        return (use,)
    return tuple((k,) for k in use)


def group_mask(cluster: Cluster, group: Sequence[int]) -> np.ndarray:
    """Boolean mask of the GPUs whose type is in ``group``."""
    if len(group) == cluster.num_types:
        return np.ones(cluster.num_gpus, dtype=bool)
    return np.isin(cluster.type_of, np.asarray(group, dtype=np.int64))


def _names(cluster: Cluster, codes: Sequence[int]) -> str:
    return ", ".join(repr(cluster.type_names[k]) for k in codes)


def type_problem(cluster: Cluster, job: Job) -> tuple[str, str] | None:
    """Why ``job`` can never run on this cluster because of GPU types, as ``(field, reason)``,
    or None.  The field is the job's (``gpu_type``, ``allowed_types``, ``class``, ``demand``).

    >>> from pal_opt.model import Cluster, Job
    >>> c = Cluster.from_arrays(range(6), [0, 0, 0, 0, 1, 1], {"classA": [1.0] * 6}, gpu_types="aaaabb")
    >>> type_problem(c, Job(1, 2, "classA", gpu_type="v100", kind="guaranteed"))
    ('gpu_type', "GPU type 'v100' is not in the cluster (types: 'a', 'b')")
    >>> type_problem(c, Job(2, 3, "classA", gpu_type="b", kind="guaranteed"))
    ('gpu_type', "needs 3 GPUs of type 'b', which has 2")
    >>> type_problem(c, Job(3, 5, "classA")), type_problem(c, Job(3, 5, "classA", mix_types=True))
    (('demand', "needs 5 GPUs of one type; the largest, 'a', has 4"), None)
    """
    names = job.type_choice
    if names is None and not cluster.typed:
        return None
    field = "gpu_type" if job.gpu_type is not None else "allowed_types"
    if names is not None and not any(t in cluster.type_index for t in names):
        have = _names(cluster, range(len(cluster.type_names))) or "none"
        what = f"GPU type {names[0]!r} is not" if len(names) == 1 else f"none of the GPU types {list(names)} is"
        return field, f"{what} in the cluster (types: {have})"
    use = usable_types(cluster, job)
    if not use:
        index = cluster.type_index
        present = [index[t] for t in names if t in index] if names is not None else range(cluster.num_types)
        return "class", f"class {job.perfclass!r} has no throughput on GPU type(s) {_names(cluster, present)}"
    counts = cluster.type_counts
    size = {g: int(counts[list(g)].sum()) for g in type_groups(cluster, job)}
    best = max(size, key=lambda g: size[g])
    if job.demand <= size[best]:
        return None
    if job.gpu_type is not None or len(use) == 1:
        return (field if names is not None else "demand",
                f"needs {counted(job.demand, 'GPU')} of type {_names(cluster, use)}, which has {size[best]}")
    if job.mix_types:
        return "demand", f"needs {counted(job.demand, 'GPU')} of types {_names(cluster, use)}, which have {size[best]}"
    return "demand", f"needs {counted(job.demand, 'GPU')} of one type; the largest, {_names(cluster, best)}, has {size[best]}"


def service_problem(cluster: Cluster, job: Job) -> str | None:
    """Why ``job`` cannot run this round because too few GPUs of its types are in service (not
    failed), or None; None too when its types could never hold it (:func:`type_problem`).

    >>> from pal_opt.model import Cluster, Job
    >>> c = Cluster.from_arrays(range(6), [0, 0, 0, 0, 1, 1], {"classA": [1.0] * 6}, [2, 0, 0, 0, 0, 0],
    ...                         gpu_types="aaaabb")
    >>> service_problem(c, Job(1, 4, "classA", gpu_type="a")), service_problem(c, Job(2, 3, "classA"))
    ("needs 4 GPUs of type 'a'; 3 are in service (1 failed)", None)
    """
    groups = type_groups(cluster, job)
    failed = cluster.state == GpuState.FAILED
    counts = cluster.type_counts
    if not failed.any() or not any(int(counts[list(g)].sum()) >= job.demand for g in groups):
        return None
    up = np.bincount(cluster.type_of[~failed], minlength=cluster.num_types)
    size = {g: int(up[list(g)].sum()) for g in groups}
    best = max(size, key=lambda g: size[g])
    if job.demand <= size[best]:
        return None
    if len(groups) == 1:
        lost = int(counts[list(best)].sum()) - size[best]
        what = "type" if len(best) == 1 else "types"
        return f"needs {counted(job.demand, 'GPU')} of {what} {_names(cluster, best)}; {size[best]} are in service ({lost} failed)"
    use = sorted(k for g in groups for k in g)
    lost = int(counts[use].sum() - up[use].sum())
    return (f"needs {counted(job.demand, 'GPU')} of one type; the most in service, {_names(cluster, best)}, has {size[best]} "
            f"({counted(lost, 'GPU')} of types {_names(cluster, use)} failed)")


def free_per_type(cluster: Cluster, free: np.ndarray) -> np.ndarray:
    """Free GPUs per type, given a free mask by GPU position."""
    return np.bincount(cluster.type_of[np.asarray(free, dtype=bool)], minlength=cluster.num_types)


def fits_types(groups: Sequence[Sequence[int]], demand: int, free: np.ndarray) -> bool:
    """True if some type group of a job holds ``demand`` of the free GPUs per type ``free``."""
    return any(int(free[list(g)].sum()) >= demand for g in groups)


def claim_types(groups: Sequence[Sequence[int]], demand: int, free: np.ndarray) -> bool:
    """Take ``demand`` GPUs for one job from ``free`` (GPUs per type, changed in place): from the
    group that fits with the fewest free GPUs (best fit; the first on ties), a mixed group's
    types with the most free GPUs first.  False (and ``free`` unchanged) if no group fits.

    >>> free = np.array([4, 8])
    >>> claim_types([(0,), (1,)], 3, free), free.tolist()
    (True, [1, 8])
    >>> claim_types([(0, 1)], 6, free), free.tolist()
    (True, [1, 2])
    """
    took = _claim(groups, demand, free.tolist())
    if took is None:
        return False
    free -= np.asarray(took, dtype=free.dtype)
    return True


def _claim(groups: Sequence[Sequence[int]], demand: int, free: list[int]) -> list[int] | None:
    """:func:`claim_types` on a list of Python ints (changed in place), returning the GPUs taken
    per type (None, and ``free`` unchanged, if no group fits)."""
    best: Sequence[int] | None = None
    most = 0
    for g in groups:
        avail = sum(free[k] for k in g)
        if avail >= demand and (best is None or avail < most):
            best, most = g, avail
    if best is None:
        return None
    took = [0] * len(free)
    left = demand
    for k in sorted(best, key=lambda k: (-free[k], k)):
        m = min(left, free[k])
        took[k] = m
        free[k] -= m
        left -= m
        if not left:
            break
    return took


def claim_all(groups: Mapping[int, Sequence[Sequence[int]]], demands: Mapping[int, int],
              free: np.ndarray) -> dict[int, np.ndarray] | None:
    """GPUs per type claimed by each job of ``groups`` (job -> its type groups) from ``free``
    (not changed), the most constrained first (fewest groups, fewest types, largest demand); None
    if one cannot claim its demand.

    >>> claim_all({0: [(0,), (1,)], 1: [(1,)]}, {0: 4, 1: 6}, np.array([4, 8]))
    {1: array([0, 6]), 0: array([4, 0])}
    """
    left = [int(x) for x in free]
    order = sorted(groups, key=lambda i: (len(groups[i]), sum(len(g) for g in groups[i]), -demands[i], i))
    out: dict[int, list[int]] = {}
    for i in order:
        took = _claim(groups[i], demands[i], left)
        if took is None:
            return None
        out[i] = took
    return {i: np.asarray(t, dtype=np.int64) for i, t in out.items()}


class TypeBudget:
    """Whether jobs still to place can all get GPUs of their types once some are taken.

    Greedy placers that pick each job's GPU type by cost ask :meth:`allows` before taking GPUs,
    so that a later job (a guaranteed one, say) keeps room on its type.  A *witness* -- the GPUs
    per type each waiting job would claim (:func:`claim_all`) -- is kept; a take that leaves the
    witness room is allowed at once, any other is allowed if the waiting jobs can claim their GPUs
    afresh from what is left.

    Parameters
    ----------
    groups
        Each waiting job's type groups (:func:`type_groups`).
    demands
        Each waiting job's demand.
    free
        Free GPUs per type.
    witness
        A claim already found (GPUs per type per waiting job, within one of its groups), used
        instead of :func:`claim_all`'s when it covers every waiting job and fits ``free``
        (the preemptive methods pass the claims of their admission walk, which
        :func:`claim_all`'s greedy order may not find again).
    """

    def __init__(self, groups: Mapping[int, Sequence[Sequence[int]]], demands: Mapping[int, int],
                 free: np.ndarray, witness: Mapping[int, np.ndarray] | None = None) -> None:
        self.groups = dict(groups)
        self.demands = dict(demands)
        self.free = np.array(free, dtype=np.int64)
        given = {i: np.asarray(witness[i], dtype=np.int64) for i in self.groups if witness and i in witness}
        if len(given) == len(self.groups) and (self.free >= sum(given.values(), np.zeros_like(self.free))).all():
            self.witness = given
        else:
            self.witness = claim_all(self.groups, self.demands, self.free) or {}
        self.need = np.sum(list(self.witness.values()), axis=0) if self.witness else np.zeros_like(self.free)
        self._pending: tuple[int, np.ndarray, dict[int, np.ndarray]] | None = None

    @property
    def feasible(self) -> bool:
        """Whether the waiting jobs could all be placed when the budget was made."""
        return len(self.witness) == len(self.groups)

    def allows(self, job: int, took: np.ndarray) -> bool:
        """Whether ``job`` (waiting) may take ``took`` GPUs per type."""
        left = self.free - took
        if (left < 0).any():
            return False
        mine = self.witness.get(job)
        need = self.need - mine if mine is not None else self.need
        if (left >= need).all():
            return True
        rest = {i: g for i, g in self.groups.items() if i != job}
        again = claim_all(rest, self.demands, left)
        if again is None:
            return False
        self._pending = (job, took.copy(), again)
        return True

    def take(self, job: int, took: np.ndarray) -> None:
        """``job`` has taken ``took`` GPUs per type (after :meth:`allows` said yes)."""
        pending = self._pending
        self._pending = None
        self.free = self.free - took
        self.groups.pop(job, None)
        if pending is not None and pending[0] == job and np.array_equal(pending[1], took):
            self.witness = pending[2]
            self.need = np.sum(list(self.witness.values()), axis=0) if self.witness else np.zeros_like(self.free)
            return
        mine = self.witness.pop(job, None)
        if mine is not None:
            self.need = self.need - mine
