"""The placement in force, read against its round, and the *repair round* it makes with failed GPUs.

A repair (:mod:`pal_opt.repair`) starts from three things: the round (an instance), the placement
in force (``{job id: GPU ids}``, what ``pal-opt solve --out`` wrote) and the GPUs that failed or
are drained.  This module checks the placement against the round and builds the **repair
round**, the :class:`~pal_opt.model.RoundInstance` every later step prices and checks:

* the cluster of the round with the failed GPUs marked :attr:`~pal_opt.model.GpuState.FAILED`;
* the jobs of the placement in force, in queue order, each *running* on its GPUs in force
  (``Job.placement``); queued jobs that were not placed are left out: a repair starts no new
  job, the next round's ``solve`` does;
* the round's parameters; with a migration price, ``params.costs["migration"]["per_gpu"]`` set
  to it (:mod:`pal_opt.cost.migration`).

A job of the placement is **displaced** when one of its GPUs is out of service in the repair
round (failed now, or already failed in the round), else **unaffected**.

A repair result declares its inputs (:func:`repair_info`: the failed GPUs, the migration price,
the placement in force), and the checker (:mod:`pal_opt.check`) rebuilds the repair round from
them (:func:`round_of_result`), so ``pal-opt check INSTANCE REPAIRED.json`` needs no other file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .errors import InstanceError, OptionError
from .model import GpuState, Job, JobId, RoundInstance, checked_gpu_ids, require_gpu_ids
from .options import is_finite_number, shown_number

__all__ = [
    "RepairRound",
    "in_force_placement",
    "failed_gpus",
    "repair_round",
    "repair_counts",
    "repair_info",
    "round_of_result",
]


@dataclass(frozen=True)
class RepairRound:
    """A repair round and how its jobs stand.

    Attributes
    ----------
    instance
        The repair round (module docstring).
    failed
        The GPU ids given as failed, ascending, each once.
    kept
        Indices into ``instance.jobs`` of the unaffected jobs (every GPU in service).
    displaced
        Indices into ``instance.jobs`` of the displaced jobs (a GPU out of service).
    migration_per_gpu
        The migration price set in the round's parameters, or None when the round's own
        parameters are used.
    """

    instance: RoundInstance
    failed: tuple[int, ...]
    kept: tuple[int, ...]
    displaced: tuple[int, ...]
    migration_per_gpu: float | None = None

    def in_force(self, indices: Iterable[int]) -> dict[JobId, tuple[int, ...]]:
        """``{job id: GPUs in force}`` of the jobs at ``indices``."""
        jobs = self.instance.jobs
        return {jobs[i].id: tuple(jobs[i].placement or ()) for i in indices}


def _placements_of(placement: Any) -> Mapping[Any, Any]:
    """The ``{job id: GPU ids}`` mapping of a :class:`~pal_opt.result.PlacementResult`, a
    placement file's dict (``{"placements": {...}, ...}``) or a bare mapping."""
    raw = getattr(placement, "placements", placement)
    if isinstance(raw, Mapping) and isinstance(raw.get("placements"), Mapping):
        raw = raw["placements"]
    if not isinstance(raw, Mapping):
        raise InstanceError(f"must be an object {{job id: [GPU ids]}}, got {type(raw).__name__}", path="placements")
    return raw


def _stages_of(placement: Any) -> Mapping[Any, Any]:
    """The ``{job id: [[GPU ids], ...]}`` stage maps a result or a placement file gives (empty
    for a bare mapping)."""
    raw = getattr(placement, "stages", None)
    if raw is None and isinstance(placement, Mapping) and isinstance(placement.get("placements"), Mapping):
        raw = placement.get("stages")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InstanceError("must be an object {job id: [[GPU ids], ...]}", path="stages")
    return raw


def _staged(instance: RoundInstance, jid: JobId, key: Any, gpus: tuple[int, ...], stages: Any) -> tuple[int, ...]:
    """A pipeline's GPUs in stage order from its ``stages`` entry, checked against its GPU list
    and its stages' replica counts."""
    job = instance.job_by_id[jid]
    if not isinstance(stages, (list, tuple)) or not all(isinstance(st, (list, tuple)) for st in stages):
        raise InstanceError("must be a list of GPU id lists", path=f"stages.{key}")
    for k, st in enumerate(stages):  # numpy integers too, as in placements
        require_gpu_ids(st, f"stages.{key}[{k}]")
    if job.pipeline is None:
        raise InstanceError(f"job {jid!r} is not a pipeline", path=f"stages.{key}")
    sizes = [len(st) for st in stages]
    if sizes != list(job.pipeline.replicas):
        raise InstanceError(f"stages of {sizes} GPUs, but the pipeline's replicas are {list(job.pipeline.replicas)}",
                            path=f"stages.{key}")
    flat = tuple(int(g) for st in stages for g in st)
    if sorted(flat) != sorted(gpus):
        raise InstanceError(f"the stages hold GPUs {sorted(flat)}, but placements lists {sorted(gpus)}",
                            path=f"stages.{key}")
    return flat


def in_force_placement(
    instance: RoundInstance, placement: Any, *, source: str | None = None
) -> dict[JobId, tuple[int, ...]]:
    """The placement in force, checked against ``instance``, keyed by the round's job ids and in
    queue order.

    Parameters
    ----------
    instance
        The round.
    placement
        ``{job id: [GPU ids]}``, a placement file's dict or a
        :class:`~pal_opt.result.PlacementResult`; job ids may be given as strings.  A pipeline's
        ``stages`` (a result's or file's) give its GPUs in stage order.
    source
        The placement file, named in errors.

    Raises
    ------
    InstanceError
        One line naming the job: a job not in the round, a gang of a size that is not among the
        job's GPU counts (its demand, or one of its ``allowed_counts``: a repair may have shrunk
        it) or with a GPU twice, an unknown GPU, a GPU held by a job outside the queue (busy), a
        GPU used by two jobs.  A GPU already failed in the round is accepted: its job is
        displaced.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    >>> inst = RoundInstance(c, (Job(1, 2, "classA"), Job(2, 1, "classA", 1)))
    >>> in_force_placement(inst, {"2": [3], "1": [0, 1]})
    {1: (0, 1), 2: (3,)}
    >>> in_force_placement(inst, {"1": [0, 1], "2": [1]})
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: placements.2: GPU 1 is also used by job 1
    """
    try:
        raw = _placements_of(placement)
        by_str = {str(j.id): j.id for j in instance.jobs}
        out: dict[JobId, tuple[int, ...]] = {}
        for key, gpus in raw.items():
            jid = key if key in instance.job_by_id else by_str.get(str(key))
            if jid is None:
                raise InstanceError(f"job {key!r} is not in the round", path=f"placements.{key}")
            out[jid] = _gang(instance, jid, gpus)
        # a pipeline's stage map, where the file gives one (check and the exports read it so): its
        # GPU list in stage order, or a repair would re-map the stages of a job it keeps
        by_id = {str(k): k for k in out}
        for key, stages in _stages_of(placement).items():
            jid = key if key in out else by_id.get(str(key))
            if jid is None:
                raise InstanceError(f"job {key!r} has stages but is not placed", path=f"stages.{key}")
            out[jid] = _staged(instance, jid, key, out[jid], stages)
        _check_gpus(instance, out)
        rank = {j.id: i for i, j in enumerate(instance.jobs)}
        return dict(sorted(out.items(), key=lambda kv: rank[kv[0]]))
    except InstanceError as exc:
        raise exc.with_source(source) if source else exc from None


def _gang(instance: RoundInstance, jid: JobId, gpus: Any) -> tuple[int, ...]:
    """Job ``jid``'s GPU ids in force: integers, as many as its demand or another of its allowed
    counts (a repair may have shrunk it, :func:`repair_counts`), each once."""
    if not isinstance(gpus, (list, tuple)):
        raise InstanceError(f"must be a list of integer GPU ids, got {type(gpus).__name__}", path=f"placements.{jid}")
    require_gpu_ids(gpus, f"placements.{jid}")  # 1.5, True, "0": named, never read as GPUs 1, 1, 0
    gids = tuple(int(g) for g in gpus)
    counts = instance.job_by_id[jid].counts
    if len(gids) not in counts or len(set(gids)) != len(gids):
        want = str(counts[0]) if len(counts) == 1 else f"one of {list(counts)}"
        raise InstanceError(f"job {jid!r} needs {want} distinct GPUs, got {list(gids)}", path=f"placements.{jid}")
    return gids


def _check_gpus(instance: RoundInstance, gangs: Mapping[JobId, tuple[int, ...]]) -> None:
    """Every GPU of ``gangs`` exists, is not busy and is used by one job (vectorised)."""
    if not gangs:
        return
    cl = instance.cluster
    owners = list(gangs)
    ids = np.fromiter((g for gs in gangs.values() for g in gs), dtype=np.int64)
    owner = np.repeat(np.arange(len(owners)), [len(gs) for gs in gangs.values()])
    order = np.argsort(cl.gpu_ids, kind="stable")
    at = np.searchsorted(cl.gpu_ids, ids, sorter=order).clip(max=cl.num_gpus - 1)
    pos = order[at]
    bad = np.flatnonzero(cl.gpu_ids[pos] != ids)
    if bad.size:
        k = int(bad[0])
        raise InstanceError(f"GPU {ids[k]} is not a GPU of the round", path=f"placements.{owners[owner[k]]}")
    busy = np.flatnonzero(cl.state[pos] == GpuState.BUSY)
    if busy.size:
        k = int(busy[0])
        raise InstanceError(f"GPU {ids[k]} is busy (held by a job outside the queue)",
                            path=f"placements.{owners[owner[k]]}")
    first = np.full(cl.num_gpus, len(owners), dtype=np.int64)
    np.minimum.at(first, pos, owner)  # the first job (in the given order) using each GPU
    twice = np.flatnonzero(first[pos] != owner)
    if twice.size:
        k = int(twice[0])
        raise InstanceError(f"GPU {ids[k]} is also used by job {owners[first[pos[k]]]!r}",
                            path=f"placements.{owners[owner[k]]}")


def failed_gpus(instance: RoundInstance, failed: Iterable[Any]) -> tuple[int, ...]:
    """The failed GPU ids, checked against the round: ascending, each once.

    Raises
    ------
    OptionError
        For an id that is not an integer or not a GPU of the round, or for no id at all.

    Examples
    --------
    >>> from pal_opt.model import Cluster, RoundInstance
    >>> inst = RoundInstance(Cluster.from_arrays([5, 6, 7], [0, 0, 1], {"classA": [1.0] * 3}), ())
    >>> failed_gpus(inst, [7, 5, 7])
    (5, 7)
    >>> failed_gpus(inst, [8])
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: failed GPU 8 is not a GPU of the round
    """
    ids = checked_gpu_ids(failed, instance.cluster.position, "failed", "the round",  # e.g. failed=3, not [3]
                          not_ids=lambda v: f"failed must be a sequence of GPU ids such as [3], got {type(v).__name__}",
                          not_integer=lambda g: f"failed GPU id must be an integer, got {g!r}",
                          not_known=lambda g: f"failed GPU {int(g)} is not a GPU of the round")
    if not ids:
        raise OptionError("no failed GPU given")
    return tuple(sorted(set(ids)))


def _migration_price(value: Any) -> float:
    if not is_finite_number(value) or value <= 0:  # (math.isfinite raised OverflowError on 10**400)
        raise OptionError(f"allow_migration must be a positive number (round-cost units per GPU moved), "
                          f"got {shown_number(value)}")
    return float(value)


def repair_round(
    instance: RoundInstance,
    in_force: Mapping[JobId, Sequence[int]],
    failed: Iterable[Any],
    *,
    migration_per_gpu: float | None = None,
) -> RepairRound:
    """The repair round of ``instance`` (module docstring).

    Parameters
    ----------
    instance
        The round.
    in_force
        The placement in force, as :func:`in_force_placement` returns it (checked again here).
    failed
        GPU ids that failed or are drained (:func:`failed_gpus`).
    migration_per_gpu
        A positive migration price per GPU moved, or None to keep the round's own parameters.

    Returns
    -------
    RepairRound
    """
    in_force = in_force_placement(instance, in_force)
    ids = failed_gpus(instance, failed)
    cl = instance.cluster
    state = cl.state.copy()
    state[cl.positions(ids)] = GpuState.FAILED
    params = instance.params
    price = None
    if migration_per_gpu is not None:
        price = _migration_price(migration_per_gpu)
        costs = {k: dict(v) for k, v in params.costs.items()}
        costs.setdefault("migration", {})["per_gpu"] = price
        params = replace(params, costs=costs)
    jobs = tuple(replace(j, placement=in_force[j.id]) for j in instance.jobs if j.id in in_force)
    name = f"{instance.name} (repair)" if instance.name else "repair"
    rnd = RoundInstance(cl.with_state(state), jobs, params, name)
    out_of_service = rnd.cluster.state != GpuState.FREE
    hit = [bool(out_of_service[rnd.cluster.positions(j.placement or ())].any()) for j in jobs]
    kept = tuple(i for i, h in enumerate(hit) if not h)
    displaced = tuple(i for i, h in enumerate(hit) if h)
    return RepairRound(rnd, ids, kept, displaced, price)


def repair_counts(job: Job) -> tuple[int, ...]:
    """The GPU counts a displaced job is tried at, in order: its demand (or, for a running job
    that an earlier repair shrank, the count it runs on), then its allowed counts below it,
    largest first.  A repair never grows a job; a pipeline keeps its demand.  The checker's
    repair rule (:mod:`pal_opt.check`) asks the same question.

    >>> repair_counts(Job(1, 4, "classA", kind="strong-scaling", allowed_counts=(1, 2, 4, 8)))
    (4, 2, 1)
    >>> repair_counts(Job(1, 4, "classA", kind="strong-scaling", allowed_counts=(1, 2, 4), placement=(5, 6)))
    (2, 1)
    """
    if job.pipeline is not None:
        return (job.demand,)
    top = min(job.demand, len(job.placement)) if job.placement is not None else job.demand
    return (top, *sorted((c for c in job.counts if c < top), reverse=True))


def repair_info(rr: RepairRound) -> dict[str, Any]:
    """What a repair result declares about its inputs (``info["repair"]``): the failed GPUs, the
    migration price and the placement in force, enough for :func:`round_of_result` to rebuild
    the repair round."""
    return {
        "failed": list(rr.failed),
        "migration_per_gpu": rr.migration_per_gpu,
        "in_force": {str(j.id): list(j.placement or ()) for j in rr.instance.jobs},
    }


def round_of_result(instance: RoundInstance, result: Any) -> RoundInstance:
    """The repair round a repair result was computed on, rebuilt from ``instance`` and what the
    result declares (``info["repair"]``, :func:`repair_info`).

    ``result`` is a :class:`~pal_opt.result.PlacementResult` or a placement file's dict.  Given
    the repair round itself, it returns an equal round.

    Raises
    ------
    InstanceError
        When the declaration is missing or does not fit ``instance`` (path ``info.repair``).
    """
    info = getattr(result, "info", None)
    if info is None and isinstance(result, Mapping):
        info = result.get("info")
    decl = info.get("repair") if isinstance(info, Mapping) else None
    if not isinstance(decl, Mapping) or not isinstance(decl.get("in_force"), Mapping):
        raise InstanceError("a repair result must declare its failed GPUs and the placement in force",
                            path="info.repair")
    try:
        in_force = in_force_placement(instance, decl["in_force"])
        price = decl.get("migration_per_gpu")
        return repair_round(instance, in_force, decl.get("failed") or [], migration_per_gpu=price).instance
    except (InstanceError, OptionError) as exc:
        raise InstanceError(str(exc), path="info.repair") from None
