"""The data model: clusters on a networkx graph, jobs, and one scheduling round.

A :class:`Cluster` keeps two views of the same facts:

* a **networkx graph** (``cluster.graph``): a root vertex ``("cluster",)``, optional rack
  vertices ``("rack", r)``, server vertices ``("server", s)`` and GPU vertices ``("gpu", g)``,
  with edges from parent to child.  GPU vertices carry ``factors`` (per class) and ``state``;
* **flat numpy arrays** indexed by GPU position ``0..G-1``, which every policy, the cost model
  and the integer programs use.  Work that grows with the cluster is vectorised over them.

GPU ids, server ids, rack ids and job ids are the input's own; positions are internal.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from .errors import InstanceError

__all__ = [
    "JobId",
    "GpuState",
    "Level",
    "LEVEL_NAMES",
    "PAL_CLASSES",
    "MODEL_CLASS",
    "MODEL_ITER_TIME",
    "Cluster",
    "Job",
    "RoundParams",
    "RoundInstance",
    "pal_locality",
]

JobId = int | str

#: PAL's four application classes, in the order PAL sorts its queue by.
PAL_CLASSES: tuple[str, ...] = ("classA", "classB", "classC", "classD")

#: The PAL artifact's model -> class map (Sia-Philly job mix).
MODEL_CLASS: dict[str, str] = {
    "resnet50": "classA",
    "GPT2": "classB",
    "DCGAN": "classB",
    "BERT": "classB",
    "vgg19": "classC",
    "PointNet": "classD",
}

#: Seconds per training iteration on a median GPU, per the PAL artifact.
MODEL_ITER_TIME: dict[str, float] = {
    "resnet50": 0.1754,
    "GPT2": 3.5714,
    "DCGAN": 0.0469,
    "BERT": 0.179,
    "vgg19": 0.3006,
    "PointNet": 0.28125,
}


class GpuState(enum.IntEnum):
    """State of a GPU at the start of a round."""

    FREE = 0  #: free, or held by a queued (running) job that this round may move
    BUSY = 1  #: held by a job outside the queue
    FAILED = 2  #: out of service


class Level(enum.IntEnum):
    """Topology level spanned by a set of GPUs: the lowest vertex containing all of them."""

    SERVER = 0
    RACK = 1
    CLUSTER = 2


LEVEL_NAMES: tuple[str, ...] = ("server", "rack", "cluster")


def pal_locality(lam: float) -> tuple[float, float, float]:
    """PAL's single crossing penalty λ as per-level penalties ``(server, rack, cluster)``.

    >>> pal_locality(1.7)
    (1.0, 1.7, 1.7)
    """
    return (1.0, float(lam), float(lam))


def _as_1d(a: Any, dtype: Any, name: str) -> np.ndarray:
    arr = np.asarray(a, dtype=dtype)
    if arr.ndim != 1:
        raise InstanceError(f"must be one-dimensional, got shape {arr.shape}", path=name)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Cluster:
    """A GPU cluster: GPUs under servers, servers optionally under racks.

    Build it with :meth:`from_arrays`, :meth:`from_graph` or :meth:`uniform`.

    Attributes
    ----------
    gpu_ids : ndarray of int64, shape (G,)
        The input's GPU ids, unique.
    server_of : ndarray of int64, shape (G,)
        Position of each GPU's server in ``server_ids``.
    server_ids : tuple
        The input's server ids.
    rack_of_server : ndarray of int64, shape (S,)
        Position of each server's rack in ``rack_ids``; all ``-1`` for a flat cluster.
    rack_ids : tuple
        The input's rack ids; empty for a flat cluster.
    factors : mapping str -> ndarray of float64, shape (G,)
        Measured slowdown factor per application class (1.0 = the median GPU, higher is slower).
    state : ndarray of int8, shape (G,)
        :class:`GpuState` per GPU.
    """

    gpu_ids: np.ndarray
    server_of: np.ndarray
    server_ids: tuple[Any, ...]
    rack_of_server: np.ndarray
    rack_ids: tuple[Any, ...]
    factors: Mapping[str, np.ndarray]
    state: np.ndarray
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_arrays(
        cls,
        gpu_ids: Sequence[int] | np.ndarray,
        server: Sequence[Any] | np.ndarray,
        factors: Mapping[str, Sequence[float] | np.ndarray],
        state: Sequence[int] | np.ndarray | None = None,
        rack_of_server: Mapping[Any, Any] | None = None,
        *,
        source: str | None = None,
    ) -> Cluster:
        """Build a cluster from per-GPU columns.

        Parameters
        ----------
        gpu_ids
            GPU ids (integers, unique).
        server
            Each GPU's server id (any hashable); servers keep the order of first appearance.
        factors
            ``{class: per-GPU factors}``; finite and positive.
        state
            Per-GPU :class:`GpuState` values; all free when omitted.
        rack_of_server
            ``{server id: rack id}`` for a racked cluster; ``None`` for a flat one.
        source
            File name used in error messages.

        Examples
        --------
        >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.1, 0.9, 1.0]})
        >>> c.num_gpus, c.num_servers, c.span_level([0, 1]).name, c.span_level([1, 2]).name
        (4, 2, 'SERVER', 'CLUSTER')
        """
        try:
            ids = np.asarray(gpu_ids)
            if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
                raise InstanceError("GPU ids must be integers", source=source, path="gpus[].id")
            ids = _as_1d(ids, np.int64, "gpus[].id")
            g = ids.size
            if g == 0:
                raise InstanceError("the cluster has no GPUs", source=source, path="gpus")
            uniq, counts = np.unique(ids, return_counts=True)
            if uniq.size != g:
                dup = int(uniq[np.argmax(counts > 1)])
                raise InstanceError(f"duplicate GPU id {dup}", source=source, path="gpus[].id")
            servers = list(server)
            if len(servers) != g:
                raise InstanceError("one server per GPU expected", source=source, path="gpus[].server")
            server_pos: dict[Any, int] = {}
            for s in servers:
                if s not in server_pos:
                    server_pos[s] = len(server_pos)
            server_of = _as_1d([server_pos[s] for s in servers], np.int64, "gpus[].server")
            server_ids = tuple(server_pos)
            if rack_of_server is None:
                rack_ids: tuple[Any, ...] = ()
                rack_of = _as_1d(np.full(len(server_ids), -1), np.int64, "servers")
            else:
                rack_pos: dict[Any, int] = {}
                ro = []
                for s in server_ids:
                    if s not in rack_of_server:
                        raise InstanceError(
                            f"server {s!r} has no rack", source=source, path="racks"
                        )
                    r = rack_of_server[s]
                    if r not in rack_pos:
                        rack_pos[r] = len(rack_pos)
                    ro.append(rack_pos[r])
                rack_ids = tuple(rack_pos)
                rack_of = _as_1d(ro, np.int64, "servers")
            fac: dict[str, np.ndarray] = {}
            if not factors:
                raise InstanceError("no application class has factors", source=source, path="factors")
            for cname, vals in factors.items():
                if not isinstance(cname, str) or not cname:
                    raise InstanceError(f"class name must be a non-empty string, got {cname!r}", source=source, path="factors")
                arr = np.asarray(vals, dtype=np.float64)
                if arr.shape != (g,):
                    raise InstanceError(
                        f"expected {g} factors, got shape {arr.shape}", source=source, path=f"factors.{cname}"
                    )
                bad = ~np.isfinite(arr) | (arr <= 0)
                if bad.any():
                    i = int(np.argmax(bad))
                    raise InstanceError(
                        f"factor of GPU {int(ids[i])} must be finite and positive, got {arr[i]!r}",
                        source=source,
                        path=f"factors.{cname}",
                    )
                arr.setflags(write=False)
                fac[cname] = arr
            if state is None:
                st = np.zeros(g, dtype=np.int8)
            else:
                st = np.asarray(state)
                if st.shape != (g,) or (st.size and not np.isin(st, (0, 1, 2)).all()):
                    raise InstanceError("GPU states must be 0 (free), 1 (busy) or 2 (failed)", source=source, path="gpus[].state")
                st = st.astype(np.int8)
            st.setflags(write=False)
        except InstanceError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            raise InstanceError(f"malformed cluster data: {exc}", source=source) from None
        return cls(ids, server_of, server_ids, rack_of, rack_ids, fac, st)

    @classmethod
    def uniform(
        cls,
        nodes: int,
        gpus_per_node: int,
        factors: Mapping[str, Sequence[float] | np.ndarray],
        state: Sequence[int] | np.ndarray | None = None,
        racks: int = 0,
    ) -> Cluster:
        """``nodes`` servers of ``gpus_per_node`` GPUs; GPU g on server g // gpus_per_node.

        With ``racks > 0`` servers are dealt to racks in contiguous blocks.
        """
        g = nodes * gpus_per_node
        server = np.arange(g) // gpus_per_node
        rmap = None
        if racks:
            per = math.ceil(nodes / racks)
            rmap = {s: s // per for s in range(nodes)}
        return cls.from_arrays(np.arange(g), server, factors, state, rmap)

    @classmethod
    def from_graph(cls, graph: nx.DiGraph, *, source: str | None = None) -> Cluster:
        """Build a cluster from a graph of the shape described in the module docstring.

        GPU vertices are ``("gpu", id)`` with attributes ``factors`` (dict) and optional
        ``state`` (:class:`GpuState`, int or name); each has exactly one server parent; servers
        have zero or one rack parent (all or none).
        """
        gpus = sorted((n for n in graph.nodes if isinstance(n, tuple) and n and n[0] == "gpu"), key=lambda n: n[1])
        if not gpus:
            raise InstanceError("graph has no ('gpu', id) vertices", source=source, path="graph")
        gpu_ids, server, facs, states = [], [], {}, []  # type: ignore[var-annotated]
        racks: dict[Any, Any] = {}
        any_rack = False
        for i, n in enumerate(gpus):
            parents = [p for p in graph.predecessors(n) if p[0] == "server"]
            if len(parents) != 1:
                raise InstanceError("GPU must hang under exactly one server", source=source, path=f"graph.{n}")
            srv = parents[0]
            gpu_ids.append(n[1])
            server.append(srv[1])
            attrs = graph.nodes[n]
            for c, v in dict(attrs.get("factors", {})).items():
                facs.setdefault(c, [math.nan] * len(gpus))[i] = v
            st = attrs.get("state", GpuState.FREE)
            states.append(int(GpuState[st.upper()]) if isinstance(st, str) else int(st))
            rparents = [p for p in graph.predecessors(srv) if p[0] == "rack"]
            if rparents:
                any_rack = True
                racks[srv[1]] = rparents[0][1]
        if any_rack and len(racks) != len(set(server)):
            raise InstanceError("either every server hangs under a rack or none does", source=source, path="graph")
        return cls.from_arrays(gpu_ids, server, facs, states, racks if any_rack else None, source=source)

    # ----------------------------------------------------------------- derived views
    @property
    def num_gpus(self) -> int:
        return int(self.gpu_ids.size)

    @property
    def num_servers(self) -> int:
        return len(self.server_ids)

    @property
    def racked(self) -> bool:
        return bool(self.rack_ids)

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(self.factors)

    @cached_property
    def rack_of(self) -> np.ndarray:
        """Rack position per GPU (``-1`` everywhere in a flat cluster)."""
        return self.rack_of_server[self.server_of]

    @cached_property
    def server_sizes(self) -> np.ndarray:
        """Number of GPUs per server (all states)."""
        return np.bincount(self.server_of, minlength=self.num_servers)

    @cached_property
    def position(self) -> dict[int, int]:
        """GPU id -> position."""
        return {int(g): i for i, g in enumerate(self.gpu_ids.tolist())}

    @property
    def free_mask(self) -> np.ndarray:
        return self.state == GpuState.FREE

    def positions(self, gpu_ids: Iterable[int]) -> np.ndarray:
        """Positions of the given GPU ids (``KeyError`` for an unknown id)."""
        pos = self.position
        return np.fromiter((pos[int(g)] for g in gpu_ids), dtype=np.int64)

    def span_level(self, gpu_ids: Iterable[int]) -> Level:
        """Topology level spanned by GPUs given by id."""
        return self.span_level_pos(self.positions(gpu_ids))

    def span_level_pos(self, pos: np.ndarray) -> Level:
        """Topology level spanned by GPUs given by position."""
        srv = self.server_of[pos]
        if srv.size == 0 or (srv == srv[0]).all():
            return Level.SERVER
        if self.racked:
            rk = self.rack_of_server[srv]
            if (rk == rk[0]).all():
                return Level.RACK
        return Level.CLUSTER

    def with_state(self, state: np.ndarray) -> Cluster:
        """A copy with another state vector (factors and topology shared)."""
        st = np.asarray(state, dtype=np.int8).copy()
        st.setflags(write=False)
        return replace(self, state=st, _cache={})

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The cluster as a networkx graph (built on first use)."""
        gr = nx.DiGraph()
        root = ("cluster",)
        gr.add_node(root, kind="cluster")
        for r in self.rack_ids:
            gr.add_node(("rack", r), kind="rack")
            gr.add_edge(root, ("rack", r))
        for s_pos, s in enumerate(self.server_ids):
            gr.add_node(("server", s), kind="server")
            parent = ("rack", self.rack_ids[self.rack_of_server[s_pos]]) if self.racked else root
            gr.add_edge(parent, ("server", s))
        classes = list(self.factors)
        fac = np.column_stack([self.factors[c] for c in classes])
        for i, gid in enumerate(self.gpu_ids.tolist()):
            node = ("gpu", gid)
            gr.add_node(
                node,
                kind="gpu",
                factors=dict(zip(classes, fac[i].tolist(), strict=True)),
                state=GpuState(int(self.state[i])),
            )
            gr.add_edge(("server", self.server_ids[self.server_of[i]]), node)
        return gr


@dataclass(frozen=True)
class Job:
    """A gang-scheduled training job in the queue.

    Attributes
    ----------
    id
        The input's job id (int or str).
    demand
        GPUs needed, all or none.
    perfclass
        Application class; selects the GPU factors that apply.
    position
        0-based position in the queue.
    locality
        Slowdown multiplier per topology level ``(server, rack, cluster)``.
    placement
        GPU ids the job holds now if it is running, else ``None``.
    model
        Model name from the trace, if known.
    """

    id: JobId
    demand: int
    perfclass: str
    position: int = 0
    locality: tuple[float, float, float] = (1.0, 1.7, 1.7)
    placement: tuple[int, ...] | None = None
    model: str | None = None

    @property
    def running(self) -> bool:
        return self.placement is not None


@dataclass(frozen=True)
class RoundParams:
    """Round-level parameters.

    Attributes
    ----------
    locality_penalty
        PAL's λ, the default penalty for a gang crossing servers; jobs carry their own
        per-level penalties.
    binning
        Variability binning mode: ``"pal-artifact"`` (default), ``"silhouette"`` or ``"none"``.
    restart_cost
        Cost added (in round-cost units, per GPU of the job) when a running job is moved;
        0 reproduces PAL's non-sticky rounds.
    """

    locality_penalty: float = 1.7
    binning: str = "pal-artifact"
    restart_cost: float = 0.0


@dataclass(frozen=True)
class RoundInstance:
    """One scheduling round: a cluster, a queue of jobs (in queue order) and parameters."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    params: RoundParams = RoundParams()
    name: str = ""

    def __post_init__(self) -> None:
        seen: set[Any] = set()
        for i, j in enumerate(self.jobs):
            if j.id in seen:
                raise InstanceError(f"duplicate job id {j.id!r}", path=f"jobs[{i}].id")
            seen.add(j.id)
            if j.perfclass not in self.cluster.factors:
                raise InstanceError(
                    f"class {j.perfclass!r} has no GPU factors (known: {', '.join(self.cluster.factors)})",
                    path=f"jobs[{i}].perfclass",
                )

    @property
    def job_by_id(self) -> dict[JobId, Job]:
        return {j.id: j for j in self.jobs}

    @cached_property
    def _free_count(self) -> int:
        return int(self.cluster.free_mask.sum())

    @property
    def free_gpus(self) -> int:
        """GPUs free this round (running queued jobs' GPUs count as free)."""
        return self._free_count
