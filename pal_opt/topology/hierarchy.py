"""A cluster's topology as read from a file, and its mapping onto pal-opt's three-level model.

Every topology reader returns a :class:`Topology`: the hosts (the servers), the **full**
hierarchy of groups above them as a list of :class:`TopologyLevel` ``(name, {host: group})``,
innermost first, and the GPUs on the hosts.  Only :func:`to_cluster` maps that onto the
three levels of :class:`~pal_opt.model.Cluster`:

* a host is a **server**;
* the innermost level (``levels[0]``) is the **rack** level;
* every level above it collapses into the **cluster** level.  When a collapsed level has more
  than one group (the file says more than the model can), a warning names it on the
  ``pal_opt.topology`` logger; a collapsed level with a single group (one spine switch above
  every leaf) loses nothing and is only noted at INFO level.

A file with no level above the hosts gives a flat cluster.  A later N-level model can take the
readers' :class:`Topology` unchanged.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Unpack

import numpy as np

from ..errors import InputTypeError, InstanceError, OptionError
from ..model import PAL_CLASSES, Cluster, GpuState, RoundArguments, RoundInstance, RoundParams
from ..options import (
    check_cluster_size,
    check_count,
    require_items,
    require_mapping,
    require_text,
    require_type,
)
from ..seeds import SeedLike

__all__ = [
    "TopologyLevel",
    "Hierarchy",
    "Topology",
    "check_levels",
    "uniform_factors",
    "measured_factors",
    "to_cluster",
    "log_collapse",
    "topology_round",
]

logger = logging.getLogger("pal_opt.topology")


class TopologyLevel(NamedTuple):
    """One level of groups above the hosts: its name and each host's group at that level."""

    name: str
    group_of: Mapping[Any, Any]


class Hierarchy(NamedTuple):
    """Hosts in file order, the levels of groups above them, innermost first, and warnings about
    the file (logged when the topology is used, :func:`log_collapse`)."""

    hosts: tuple[Any, ...]
    levels: tuple[TopologyLevel, ...]
    notes: tuple[str, ...] = ()


def check_levels(hosts: Sequence[Any], levels: Sequence[TopologyLevel], source: str | None = None) -> None:
    """Raise :class:`InstanceError` unless every level maps every host and the levels nest
    (hosts that share a group at one level share a group at every level above it)."""
    for k, lv in enumerate(levels):
        missing = [h for h in hosts if h not in lv.group_of]
        if missing:
            raise InstanceError(f"host {missing[0]!r} has no group at level {lv.name!r}", source=source,
                                path=f"levels[{k}]")
        if k == 0:
            continue
        below = levels[k - 1].group_of
        parent: dict[Any, Any] = {}
        for h in hosts:
            if parent.setdefault(below[h], lv.group_of[h]) != lv.group_of[h]:
                raise InstanceError(
                    f"group {below[h]!r} of level {levels[k - 1].name!r} lies in two groups of level {lv.name!r} "
                    f"({parent[below[h]]!r} and {lv.group_of[h]!r})", source=source, path=f"levels[{k}]")


@dataclass(frozen=True)
class Topology:
    """Hosts, the groups above them, and their GPUs, as a topology file describes them.

    Attributes
    ----------
    hosts
        Host (server) ids in file order.
    levels
        The hierarchy above the hosts, innermost first; each maps every host to its group.
    gpu_ids
        GPU ids (unique integers).
    gpu_host
        Position in ``hosts`` of each GPU's host.
    state
        :class:`~pal_opt.model.GpuState` per GPU.
    factors
        ``{class: per-GPU factor}`` when the file carries variability (GraphML can); None
        otherwise.
    source
        The file read.
    gpu_types
        Each GPU's type name when the file gives one (Kubernetes' ``nvidia.com/gpu.product``
        label, GraphML's ``type``); None otherwise.
    throughput
        ``{class: {GPU type: relative throughput}}`` when the file gives one (GraphML can);
        None otherwise.
    devices
        Each GPU's device number on its host when the file gives them (``gres.conf``
        ``File=/dev/nvidiaN``, GraphML's ``device``); None otherwise
        (:attr:`pal_opt.model.Cluster.devices`).
    notes
        Warnings about the file that do not stop the import (a Slurm node under two leaf
        switches), logged by :func:`log_collapse` once the input is known to be good.
    """

    hosts: tuple[Any, ...]
    levels: tuple[TopologyLevel, ...]
    gpu_ids: np.ndarray
    gpu_host: np.ndarray
    state: np.ndarray
    factors: Mapping[str, np.ndarray] | None = None
    source: str = "<memory>"
    gpu_types: tuple[str, ...] | None = None
    throughput: Mapping[str, Mapping[str, float]] | None = None
    notes: tuple[str, ...] = ()
    devices: np.ndarray | None = None

    def __post_init__(self) -> None:
        require_items(self.levels, "levels", "a list of TopologyLevels", of=TopologyLevel)
        for name in ("gpu_ids", "gpu_host", "state"):
            require_type(getattr(self, name), np.ndarray, name, " (one entry per GPU)")
        self._check_optional_fields()
        for a in (self.gpu_ids, self.gpu_host, self.state, *(self.factors or {}).values(),
                  *(() if self.devices is None else (self.devices,))):
            a.setflags(write=False)
        check_levels(self.hosts, self.levels, self.source)
        if len(self.gpu_ids) == 0:
            raise InstanceError("no GPUs: no host has a GPU", source=self.source)

    def _check_optional_fields(self) -> None:
        """The optional fields, each an error naming it (a junk object failed deep inside, on
        ``.values()`` or ``.setflags``)."""
        require_text(self.source, "source")
        if self.factors is not None:
            for c, v in require_mapping(self.factors, "factors", "a mapping of classes to per-GPU factors").items():
                require_type(v, np.ndarray, f"factors[{c!r}]", " (one factor per GPU)")
        if self.devices is not None:
            require_type(self.devices, np.ndarray, "devices", " (one device number per GPU)")
        if self.gpu_types is not None:
            require_items(self.gpu_types, "gpu_types", "a list of GPU type names", of=str)
        if self.throughput is not None:
            require_mapping(self.throughput, "throughput", "a mapping of classes to {GPU type: throughput}")
        require_items(self.notes, "notes", "a list of notes (str)", of=str)

    @classmethod
    def from_counts(
        cls,
        hosts: Sequence[Any],
        levels: Sequence[TopologyLevel],
        gpus: Mapping[Any, int],
        failed: Mapping[Any, int] | None = None,
        *,
        source: str = "<memory>",
        types: Mapping[Any, str | Sequence[str]] | None = None,
        notes: tuple[str, ...] = (),
        devices: Mapping[Any, Sequence[int]] | None = None,
    ) -> Topology:
        """Hosts with ``gpus[host]`` GPUs each, numbered 0, 1, ... in host order.

        ``failed[host]`` of a host's GPUs (its highest local indices) are out of service.
        ``types[host]`` is the GPU type of a host's GPUs, or a sequence of one type per GPU (a host
        with GPUs of several types); all hosts, or None.  ``notes``: the reader's warnings
        (:attr:`notes`).  ``devices[host]``: the device numbers of a host's GPUs, in the order of
        its GPUs (:attr:`devices`); all hosts with GPUs, or None.
        Hosts without GPUs are left out (they cannot take a GPU job).
        """
        failed = failed or {}
        kept = [h for h in hosts if gpus.get(h, 0) > 0]
        if len(kept) < len(hosts):
            logger.info("%s: %d of %d hosts have no GPUs and are left out", source, len(hosts) - len(kept), len(hosts))
        check_cluster_size(sum(int(gpus[h]) for h in kept), source)  # before arrays of that size
        counts = np.asarray([gpus[h] for h in kept], dtype=np.int64)
        gpu_host = np.repeat(np.arange(len(kept), dtype=np.int64), counts)
        local = np.arange(gpu_host.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        n_failed = np.asarray([min(failed.get(h, 0), gpus[h]) for h in kept], dtype=np.int64)
        out = local >= np.repeat(counts - n_failed, counts)
        state = np.where(out, GpuState.FAILED, GpuState.FREE).astype(np.int8)
        lv = tuple(TopologyLevel(x.name, {h: x.group_of[h] for h in kept}) for x in levels)
        per_gpu = _per_gpu_types(kept, gpus, types, source) if types is not None else None
        per_device = None if devices is None else np.asarray([d for h in kept for d in devices[h]], dtype=np.int64)
        if per_device is not None and per_device.size != gpu_host.size:
            raise InstanceError(f"{per_device.size} device numbers for {gpu_host.size} GPUs", source=source)
        return cls(tuple(kept), lv, np.arange(gpu_host.size, dtype=np.int64), gpu_host, state, None, source, per_gpu,
                   notes=notes, devices=per_device)

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)


def _per_gpu_types(hosts: Sequence[Any], gpus: Mapping[Any, int], types: Mapping[Any, str | Sequence[str]],
                   source: str) -> tuple[str, ...]:
    """Each GPU's type, in host order: a host's one type repeated, or its sequence of types."""
    out: list[str] = []
    for h in hosts:
        t = types[h]
        if isinstance(t, str):
            out.extend([t] * int(gpus[h]))
        elif len(t) == gpus[h]:
            out.extend(map(str, t))
        else:
            raise InstanceError(f"host {h!r} has {gpus[h]} GPUs but {len(t)} GPU types", source=source)
    return tuple(out)


def uniform_factors(n_gpus: int, classes: Sequence[str] = PAL_CLASSES) -> dict[str, np.ndarray]:
    """Factor 1.0 for every GPU and class (topology files carry no variability)."""
    check_count(n_gpus, "n_gpus", 0)
    classes = require_items(classes, "classes", "a list of class names", of=str)
    if not classes:
        raise OptionError("at least one application class is needed")
    return {c: np.ones(n_gpus) for c in classes}


def measured_factors(
    n_gpus: int, directory: str | os.PathLike[str], classes: Sequence[str] = PAL_CLASSES, seed: SeedLike = 0
) -> dict[str, np.ndarray]:
    """Factors drawn from PAL's ``*-longhorn-agg.csv`` measurements in ``directory``, as
    ``pal-opt generate --measurements`` draws them (:func:`pal_opt.io.sample_factors`)."""
    from ..io import longhorn_paths, sample_factors
    from ..io.measurements import longhorn_files

    classes = require_items(classes, "classes", "a list of class names", of=str)
    unknown = [c for c in classes if c not in longhorn_paths(directory)]
    if unknown:
        raise OptionError(f"class {unknown[0]!r} has no PAL measurement file "
                          f"(measured classes: {', '.join(longhorn_paths(directory))})")
    return sample_factors(longhorn_files(directory, classes=classes), n_gpus, seed)


def _distinct(level: TopologyLevel, hosts: Sequence[Any]) -> int:
    return len({level.group_of[h] for h in hosts})


def log_collapse(topology: Topology) -> None:
    """Log the reader's :attr:`Topology.notes` as warnings, and what :func:`to_cluster` collapses
    into the cluster level: a warning naming the levels that have more than one group (the model
    loses them), an INFO note for single-group ones."""
    top = topology
    for note in top.notes:
        logger.warning("%s: %s", top.source, note)
    collapsed = top.levels[1:]
    lost = [lv.name for lv in collapsed if _distinct(lv, top.hosts) > 1]
    if lost:
        logger.warning("%s: %s %s above the rack level %r collapsed into the cluster level (pal-opt models "
                       "server, rack and cluster)", top.source, "level" if len(lost) == 1 else "levels",
                       ", ".join(map(repr, lost)), top.levels[0].name)
    elif collapsed:
        logger.info("%s: the single-group levels %s collapse into the cluster level", top.source,
                    ", ".join(lv.name for lv in collapsed))


def _cluster(top: Topology, factors: Mapping[str, Any] | None) -> Cluster:
    if not isinstance(top, Topology):  # (to_cluster's and topology_round's argument) a path, say
        raise InputTypeError(f"must be a Topology (load_slurm, load_nodes, load_graphml), got {type(top).__name__}",
                             path="topology")
    if factors is None:
        factors = top.factors if top.factors is not None else uniform_factors(len(top.gpu_ids))
    racks = dict(top.levels[0].group_of) if top.levels else None
    servers = [top.hosts[i] for i in top.gpu_host.tolist()]
    return Cluster.from_arrays(top.gpu_ids, servers, factors, top.state, racks, source=top.source,
                               gpu_types=top.gpu_types, throughput=top.throughput, devices=top.devices)


def to_cluster(topology: Topology, factors: Mapping[str, Any] | None = None) -> Cluster:
    """The three-level :class:`~pal_opt.model.Cluster` of ``topology`` (module docstring), with
    :func:`log_collapse`'s note.

    Parameters
    ----------
    topology
        What a reader returned.
    factors
        ``{class: per-GPU factors}``; default: the topology's own, else 1.0 for PAL's classes.
    """
    cluster = _cluster(topology, factors)
    log_collapse(topology)
    return cluster


def topology_round(
    topology: Topology,
    jobs: str | os.PathLike[str] | None = None,
    *,
    factors: Mapping[str, Any] | None = None,
    name: str = "",
    **params: Unpack[RoundArguments],
) -> RoundInstance:
    """A round on ``topology``'s cluster (:func:`to_cluster`) with the queue of a job CSV
    (:func:`pal_opt.io.load_jobs`; none: an empty queue).

    Topology files say nothing of who runs where, so a job marked ``is_running`` is an error.
    """
    from ..io import load_jobs

    rp = RoundParams.from_arguments(**params)
    cluster = _cluster(topology, factors)
    queue: tuple[Any, ...] = ()
    table = None
    if jobs is not None:
        table = load_jobs(jobs, classes=cluster.classes, locality_penalty=rp.locality_penalty,
                          max_gpus=cluster.num_gpus)
        for k, running in enumerate(table.running):
            if running:
                raise table.error(k, f"job {table.jobs[k].id!r} is marked running, but a topology file "
                                  "does not say on which GPUs", "is_running")
        queue = table.jobs
    instance = RoundInstance(cluster=cluster, jobs=queue, params=rp, name=name)
    log_collapse(topology)  # once the input is known to be good: a failed import prints one line
    if table is not None:
        table.warn()
    return instance
