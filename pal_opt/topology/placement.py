"""A placement seen per host: which GPUs of which host each placed job gets.

The exporters (:mod:`~pal_opt.topology.slurm`, :mod:`~pal_opt.topology.kubernetes`,
:mod:`~pal_opt.topology.graphml`) start here.  A GPU's **local index** on its host is its
device number where the cluster has them (:attr:`pal_opt.model.Cluster.devices`: from
Blox's ``Local_GPU_ID``, ``gres.conf`` device files or the instance file), else its rank among the
host's GPUs ordered by GPU id (0, 1, ...).

A pipeline job (:attr:`pal_opt.model.Job.pipeline`) also has a **stage** per GPU, counted from 0:
the placement's ``stages`` where it gives them (a placement file of ``pal-opt solve``, a
:class:`~pal_opt.result.PlacementResult`), else its GPU list cut by the pipeline's replica counts
in order (:meth:`pal_opt.model.Pipeline.slices`), as :func:`pal_opt.check.violations` reads it.
A placement whose stages do not fit the job's pipeline cannot be applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..check import RESULT_FIELDS, Kind, violations
from ..errors import InstanceError
from ..model import Cluster, JobId, RoundInstance, require_instance
from ..result import PlacementResult

__all__ = ["HostShare", "JobHosts", "local_indices", "placement_by_host", "gpu_jobs", "gpu_stages"]

#: Violations that make a placement impossible to apply: what it is given (jobs, GPUs, stages that do
#: not fit a pipeline) and what each job may run on (its GPU types, one type unless it mixes, its
#: allowed GPU counts).  The queue rule, stickiness, preemption and the objective are ``pal-opt
#: check``'s business, not the exporter's: every job of such a placement can still run as written.
_UNAPPLIABLE = {Kind.FORM, Kind.UNKNOWN_JOB, Kind.GANG_SIZE, Kind.UNKNOWN_GPU, Kind.GPU_NOT_FREE, Kind.GPU_SHARED,
                Kind.COUNT, Kind.GPU_TYPE, Kind.MIXED_TYPES, Kind.STAGE_COUNT, Kind.STAGE_REPLICAS, Kind.STAGE_GPUS}


@dataclass(frozen=True)
class HostShare:
    """The GPUs a job gets on one host: the host id and their local indices, ascending, on a
    cluster with GPU types the type of each of those GPUs (else None), and for a pipeline job the
    stage each of them runs (else None)."""

    host: Any
    gpus: tuple[int, ...]
    types: tuple[str, ...] | None = None
    stages: tuple[int, ...] | None = None


@dataclass(frozen=True)
class JobHosts:
    """A placed job and its hosts, in the cluster's host order."""

    job: JobId
    hosts: tuple[HostShare, ...]

    @property
    def num_gpus(self) -> int:
        return sum(len(s.gpus) for s in self.hosts)

    def stage_map(self) -> list[dict[Any, list[int]]] | None:
        """For a pipeline job, per stage ``{host: [local GPU indices]}`` (hosts in the job's
        host order, indices ascending); None for a gang."""
        if any(s.stages is None for s in self.hosts):
            return None
        out: list[dict[Any, list[int]]] = [{} for _ in range(1 + max(k for s in self.hosts for k in s.stages or ()))]
        for share in self.hosts:
            for gpu, k in zip(share.gpus, share.stages or (), strict=True):
                out[k].setdefault(share.host, []).append(gpu)
        return out


def local_indices(cluster: Cluster) -> np.ndarray:
    """Each GPU's local index on its host: its device number where the cluster has them
    (:attr:`~pal_opt.model.Cluster.devices`), else its rank among its server's GPUs by id."""
    if cluster.devices is not None:
        return cluster.devices
    order = np.lexsort((cluster.gpu_ids, cluster.server_of))
    starts = np.cumsum(cluster.server_sizes) - cluster.server_sizes
    local = np.empty(cluster.num_gpus, dtype=np.int64)
    local[order] = np.arange(cluster.num_gpus) - starts[cluster.server_of[order]]
    return local


def _checked(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], source: str | None
) -> dict[str, list[int]]:
    """``{job id as text: GPU ids}`` of a placement that can be applied to ``instance``."""
    bad = [v for v in violations(instance, placement) if v.kind in _UNAPPLIABLE]
    if bad:
        more = f" (and {len(bad) - 1} more problems)" if len(bad) > 1 else ""
        field, sep, what = bad[0].message.partition(": ")
        if bad[0].kind == Kind.FORM and sep and field.split(".")[0] in RESULT_FIELDS - {"placements", "stages"}:
            # a declared field the file got wrong (status, objective, ...): named as such, not as placements
            raise InstanceError(f"{what}{more}", source=source, path=field)
        raise InstanceError(f"does not fit the instance: {bad[0].message}{more}", source=source, path="placements")
    raw = placement.placements if isinstance(placement, PlacementResult) else placement.get("placements", {})
    return {str(k): [int(g) for g in v] for k, v in raw.items()}


def gpu_jobs(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None
) -> dict[int, JobId]:
    """``{GPU id: job id}`` of a placement, checked as :func:`placement_by_host` checks it."""
    by_text = _checked(instance, placement, source)
    return {g: j.id for j in instance.jobs for g in by_text.get(str(j.id), ())}


def gpu_stages(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None
) -> dict[int, int]:
    """``{GPU id: stage}`` of the placed pipeline jobs' GPUs (module docstring), checked as
    :func:`placement_by_host` checks the placement."""
    by_text = _checked(instance, placement, source)
    return {g: k for numbers in _stage_numbers(instance, placement, by_text).values() for g, k in numbers.items()}


def _stage_numbers(instance: RoundInstance, placement: PlacementResult | Mapping[str, Any],
                   by_text: Mapping[str, list[int]]) -> dict[str, dict[int, int]]:
    """``{job id as text: {GPU id: stage}}`` of the placed pipeline jobs of a checked placement."""
    given = placement.stages if isinstance(placement, PlacementResult) else placement.get("stages") or {}
    given = {str(k): v for k, v in given.items()}
    out: dict[str, dict[int, int]] = {}
    for job in instance.jobs:
        key = str(job.id)
        if job.pipeline is None or key not in by_text:
            continue
        stages = given.get(key)
        if stages is None:
            stages = [by_text[key][a:b] for a, b in job.pipeline.slices()]
        out[key] = {int(g): k for k, stage in enumerate(stages) for g in stage}
    return out


def placement_by_host(
    instance: RoundInstance, placement: PlacementResult | Mapping[str, Any], *, source: str | None = None
) -> list[JobHosts]:
    """The placed jobs of ``placement`` (queue order) with their hosts and local GPU indices.

    Parameters
    ----------
    instance
        The round the placement is for.
    placement
        A :class:`~pal_opt.result.PlacementResult` or the dict of a placement file
        (``{"placements": {job id: [GPU ids]}, ...}``).
    source
        The placement file, for messages.

    Raises
    ------
    InstanceError
        The placement cannot be applied to ``instance``: an unknown job or GPU, a wrong gang
        size or a GPU count the job may not run on, a busy or failed GPU, a GPU given twice, a
        job on a GPU type it may not use or on several types when it does not mix, stages that
        do not fit a job's pipeline (the first such problem is named, with its job).
    """
    require_instance(instance)
    by_text = _checked(instance, placement, source)
    stage_of = _stage_numbers(instance, placement, by_text)
    cl = instance.cluster
    local = local_indices(cl)
    out: list[JobHosts] = []
    for job in instance.jobs:
        gpus = by_text.get(str(job.id))
        if gpus is None:
            continue
        numbers = stage_of.get(str(job.id))
        pos = np.sort(cl.positions(gpus))
        pos = pos[np.argsort(cl.server_of[pos], kind="stable")]
        shares: list[HostShare] = []
        for srv in dict.fromkeys(cl.server_of[pos].tolist()):
            mine = pos[cl.server_of[pos] == srv]
            mine = mine[np.argsort(local[mine], kind="stable")]
            host = cl.server_ids[srv]
            host = host.item() if isinstance(host, np.generic) else host
            types = tuple(cl.type_names[t] for t in cl.type_of[mine].tolist()) if cl.type_names else None
            stages = None if numbers is None else tuple(numbers[g] for g in cl.gpu_ids[mine].tolist())
            shares.append(HostShare(host, tuple(local[mine].tolist()), types, stages))
        out.append(JobHosts(job.id, tuple(shares)))
    return out
