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
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .errors import InstanceError

if TYPE_CHECKING:  # networkx is imported where a graph is built (it costs ~0.1 s at start-up)
    import networkx as nx

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
    "Pipeline",
    "RoundParams",
    "RoundInstance",
    "pal_locality",
]

JobId = int | str
T = TypeVar("T")
_MISSING = object()

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


def _first_position(items: Iterable[Any]) -> tuple[dict[Any, int], np.ndarray]:
    """Position of each distinct item in order of first appearance, and each item's position."""
    pos: dict[Any, int] = {}
    codes = [pos.setdefault(x, len(pos)) for x in items]
    return pos, np.asarray(codes, dtype=np.int64)


def _validate_gpu_ids(ids: np.ndarray) -> None:
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise InstanceError("GPU ids must be integers", path="gpus[].id")
    if ids.size == 0:
        raise InstanceError("the cluster has no GPUs", path="gpus")
    uniq, counts = np.unique(ids, return_counts=True)
    if uniq.size != ids.size:
        raise InstanceError(f"duplicate GPU id {int(uniq[np.argmax(counts > 1)])}", path="gpus[].id")


def _validate_factors(factors: Mapping[str, np.ndarray], ids: np.ndarray) -> None:
    if not factors:
        raise InstanceError("no application class has factors", path="factors")
    for cname, arr in factors.items():
        if not isinstance(cname, str) or not cname:
            raise InstanceError(f"class name must be a non-empty string, got {cname!r}", path="factors")
        if arr.shape != ids.shape:
            raise InstanceError(f"expected {ids.size} factors, got shape {arr.shape}", path=f"factors.{cname}")
        bad = ~np.isfinite(arr) | (arr <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise InstanceError(f"factor of GPU {int(ids[i])} must be finite and positive, got {arr[i]!r}",
                                path=f"factors.{cname}")


def _validate_topology(server_of: np.ndarray, n_servers: int, rack_of_server: np.ndarray, n_racks: int) -> None:
    if server_of.size and (server_of.min() < 0 or server_of.max() >= n_servers):
        raise InstanceError("server positions out of range", path="gpus[].server")
    if rack_of_server.shape != (n_servers,):
        raise InstanceError(f"expected one rack per server, got shape {rack_of_server.shape}", path="racks")
    if n_racks == 0 and rack_of_server.size and (rack_of_server != -1).any():
        raise InstanceError("a flat cluster has no racks", path="racks")
    if n_racks and rack_of_server.size and (rack_of_server.min() < 0 or rack_of_server.max() >= n_racks):
        raise InstanceError("every server of a racked cluster needs a rack", path="racks")


@dataclass(frozen=True, eq=False)
class Cluster:
    """A GPU cluster: GPUs under servers, servers optionally under racks.

    Build it with :meth:`from_arrays`, :meth:`from_graph` or :meth:`uniform`; the fields are
    checked once, here, and made read-only.

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


    def __post_init__(self) -> None:
        ids = np.asarray(self.gpu_ids)
        _validate_gpu_ids(ids)
        fac = {c: np.asarray(v, dtype=np.float64) for c, v in self.factors.items()}
        _validate_factors(fac, ids)
        st = np.asarray(self.state)
        if st.shape != ids.shape or (st.size and not np.isin(st, (0, 1, 2)).all()):
            raise InstanceError("GPU states must be 0 (free), 1 (busy) or 2 (failed)", path="gpus[].state")
        server_of = _as_1d(self.server_of, np.int64, "gpus[].server")
        if server_of.shape != ids.shape:
            raise InstanceError("one server per GPU expected", path="gpus[].server")
        rack_of = _as_1d(self.rack_of_server, np.int64, "servers")
        _validate_topology(server_of, len(self.server_ids), rack_of, len(self.rack_ids))
        for a in fac.values():
            a.setflags(write=False)
        set_ = object.__setattr__
        set_(self, "gpu_ids", _as_1d(ids, np.int64, "gpus[].id"))
        set_(self, "server_of", server_of)
        set_(self, "rack_of_server", rack_of)
        set_(self, "factors", fac)
        set_(self, "state", _as_1d(st, np.int8, "gpus[].state"))

    def memo(self, key: Any, compute: Callable[[], T], valid: Callable[[T], bool] | None = None) -> T:
        """``compute()``, computed once per cluster and ``key``, for derived data such as binned
        factors and the policies' indexes (the cluster itself is immutable).  A kept value that
        ``valid`` rejects is computed again."""
        hit = self._cache.get(key, _MISSING)
        if hit is _MISSING or (valid is not None and not valid(hit)):
            hit = self._cache[key] = compute()
        return hit  # type: ignore[no-any-return]

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
            servers = list(server)
            if len(servers) != ids.size:
                raise InstanceError("one server per GPU expected", path="gpus[].server")
            server_pos, server_of = _first_position(servers)
            rack_ids: tuple[Any, ...] = ()
            rack_of = np.full(len(server_pos), -1, dtype=np.int64)
            if rack_of_server is not None:
                missing = [s for s in server_pos if s not in rack_of_server]
                if missing:
                    raise InstanceError(f"server {missing[0]!r} has no rack", path="racks")
                rack_pos, rack_of = _first_position(rack_of_server[s] for s in server_pos)
                rack_ids = tuple(rack_pos)
            fac = {c: np.asarray(v, dtype=np.float64) for c, v in factors.items()}
            st = np.zeros(ids.size, dtype=np.int8) if state is None else np.asarray(state)
            return cls(ids, server_of, tuple(server_pos), rack_of, rack_ids, fac, st)
        except InstanceError as exc:
            raise exc.with_source(source) if source else exc from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise InstanceError(f"malformed cluster data: {exc}", source=source) from None

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
        import networkx as nx

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


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _finite_at_least(v: Any, low: float, path: str, *, strict: bool = False) -> float:
    ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or v < low or (strict and v == low):
        rel = ">" if strict else ">="
        raise InstanceError(f"must be a finite number {rel} {low:g}, got {v!r}", path=path)
    return float(v)


@dataclass(frozen=True)
class Pipeline:
    """The stages of a pipeline-parallel job, each replicated data-parallel on some of its GPUs.

    A job with a pipeline lists its GPUs stage by stage: the first ``replicas[0]`` run stage 0,
    the next ``replicas[1]`` stage 1, and so on.  It runs at the pace of its slowest stage: stage
    ``k`` takes ``stage_times[k]`` times the largest factor among its own GPUs
    (:meth:`effective_factor`), where a gang runs at its slowest GPU overall.

    Attributes
    ----------
    stage_times
        Per stage, its time per sample with all its replicas on GPUs of factor 1 (any unit common
        to the stages: only their ratios matter), e.g. ``pal-opt partition``'s stage times.
    replicas
        Per stage, how many GPUs run it; they add up to the job's demand.

    Examples
    --------
    >>> p = Pipeline((0.010, 0.006), (2, 1))
    >>> p.slices()
    [(0, 2), (2, 3)]
    >>> p.effective_factor([1.0, 1.5])  # stage 1 has slack: 0.006 x 1.5 < 0.010
    1.0
    >>> Pipeline((1.0,), (0,))
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: pipeline.replicas[0]: must be a positive integer, got 0
    """

    stage_times: tuple[float, ...]
    replicas: tuple[int, ...]

    def __post_init__(self) -> None:
        times = tuple(self.stage_times) if isinstance(self.stage_times, (tuple, list)) else ()
        reps = tuple(self.replicas) if isinstance(self.replicas, (tuple, list)) else ()
        if not times:
            raise InstanceError(f"must be a non-empty list of stage times, got {self.stage_times!r}",
                                path="pipeline.stage_times")
        if len(reps) != len(times):
            raise InstanceError(f"must give one count per stage ({len(times)}), got {list(reps) or self.replicas!r}",
                                path="pipeline.replicas")
        times = tuple(_finite_at_least(t, 0.0, f"pipeline.stage_times[{k}]") for k, t in enumerate(times))
        if max(times) <= 0:
            raise InstanceError("at least one stage must take time, got all zeros", path="pipeline.stage_times")
        for k, r in enumerate(reps):
            if not _is_int(r) or r < 1:
                raise InstanceError(f"must be a positive integer, got {r!r}", path=f"pipeline.replicas[{k}]")
        object.__setattr__(self, "stage_times", times)
        object.__setattr__(self, "replicas", tuple(int(r) for r in reps))

    @property
    def gpus(self) -> int:
        """GPUs the pipeline needs: the sum of its replicas."""
        return sum(self.replicas)

    def slices(self) -> list[tuple[int, int]]:
        """Per stage, ``(start, stop)`` of its GPUs in the job's GPU list."""
        stops = list(itertools.accumulate(self.replicas))
        return list(zip([0, *stops[:-1]], stops, strict=True))

    def effective_factor(self, stage_factors: Sequence[float]) -> float:
        """The job's slowdown factor when stage ``k``'s slowest GPU has factor ``stage_factors[k]``:
        ``max_k(stage_times[k] * stage_factors[k]) / max_k(stage_times[k])``.  At most the
        largest factor, and equal to it when the slowest GPU runs a slowest stage."""
        return max(t * f for t, f in zip(self.stage_times, stage_factors, strict=True)) / max(self.stage_times)


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
        Slowdown multiplier per topology level ``(server, rack, cluster)``: finite, positive.
    placement
        GPU ids the job holds now if it is running, else ``None``.
    model
        Model name from the trace, if known.
    pipeline
        The job's pipeline stages (:class:`Pipeline`), or ``None`` for a gang.

    Examples
    --------
    >>> Job(7, 2, "classA").running
    False
    >>> Job(7, 0, "classA")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: jobs[0].demand: must be a positive integer, got 0
    """

    id: JobId
    demand: int
    perfclass: str
    position: int = 0
    locality: tuple[float, float, float] = (1.0, 1.7, 1.7)
    placement: tuple[int, ...] | None = None
    model: str | None = None
    pipeline: Pipeline | None = None

    def __post_init__(self) -> None:
        at = f"jobs[{self.position}]" if _is_int(self.position) else "jobs[?]"
        if not (isinstance(self.id, str) or _is_int(self.id)):
            raise InstanceError(f"job id must be an int or a string, got {self.id!r}", path=f"{at}.id")
        if not _is_int(self.position) or self.position < 0:
            raise InstanceError(f"must be an integer >= 0, got {self.position!r}", path=f"{at}.position")
        if not _is_int(self.demand) or self.demand < 1:
            raise InstanceError(f"must be a positive integer, got {self.demand!r}", path=f"{at}.demand")
        if not isinstance(self.perfclass, str) or not self.perfclass:
            raise InstanceError(f"must be a non-empty string, got {self.perfclass!r}", path=f"{at}.class")
        if self.model is not None and not isinstance(self.model, str):
            raise InstanceError(f"must be a string, got {self.model!r}", path=f"{at}.model")
        loc = tuple(self.locality) if isinstance(self.locality, (tuple, list)) else ()
        if len(loc) != 3:
            raise InstanceError(f"must be [server, rack, cluster] penalties, got {self.locality!r}",
                                path=f"{at}.locality")
        loc = tuple(_finite_at_least(x, 0.0, f"{at}.locality[{k}]", strict=True) for k, x in enumerate(loc))
        set_ = object.__setattr__
        set_(self, "id", int(self.id) if _is_int(self.id) else self.id)
        set_(self, "demand", int(self.demand))
        set_(self, "position", int(self.position))
        set_(self, "locality", loc)
        if self.placement is not None:
            pl = tuple(self.placement)
            if not all(_is_int(g) for g in pl):
                raise InstanceError(f"GPU ids must be integers, got {list(pl)!r}", path=f"{at}.placement")
            if len(pl) != self.demand or len(set(pl)) != len(pl):
                raise InstanceError(f"a running job must hold exactly demand={self.demand} distinct GPUs, "
                                    f"got {list(pl)!r}", path=f"{at}.placement")
            set_(self, "placement", tuple(int(g) for g in pl))
        if self.pipeline is not None:
            if not isinstance(self.pipeline, Pipeline):
                raise InstanceError(f"must be a Pipeline, got {self.pipeline!r}", path=f"{at}.pipeline")
            if self.pipeline.gpus != self.demand:
                raise InstanceError(f"must add up to demand={self.demand}, got {list(self.pipeline.replicas)} "
                                    f"(sum {self.pipeline.gpus})", path=f"{at}.pipeline.replicas")

    @property
    def running(self) -> bool:
        return self.placement is not None


@dataclass(frozen=True)
class RoundParams:
    """Round-level parameters, checked here once.

    Attributes
    ----------
    locality_penalty
        PAL's λ (>= 1), the default penalty for a gang crossing servers; jobs carry their own
        per-level penalties.
    binning
        Variability binning mode: ``"pal-artifact"`` (default), ``"silhouette"`` or ``"none"``.
    restart_cost
        Cost added (in round-cost units, per GPU of the job) when a running job is moved;
        0 reproduces PAL's non-sticky rounds.
    costs
        Parameters of further cost terms, ``{term name: {parameter: value}}``
        (:mod:`pal_opt.cost`); the terms check their own.

    Examples
    --------
    >>> RoundParams(binning="kmeans")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: params.binning: must be one of pal-artifact, silhouette, none, got 'kmeans'
    """

    locality_penalty: float = 1.7
    binning: str = "pal-artifact"
    restart_cost: float = 0.0
    costs: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @classmethod
    def from_arguments(cls, **kwargs: Any) -> RoundParams:
        """Parameters from a function's or a command's arguments: a bad value is an
        :class:`~pal_opt.errors.OptionError` naming the argument, not a file's field.

        >>> RoundParams.from_arguments(locality_penalty=0.5)
        Traceback (most recent call last):
        ...
        pal_opt.errors.OptionError: locality_penalty must be a finite number >= 1, got 0.5
        """
        from .errors import OptionError

        try:
            return cls(**kwargs)
        except InstanceError as exc:
            name = (exc.path or "").removeprefix("params.")
            raise OptionError(f"{name} {exc.message}" if name else exc.message) from None

    def __post_init__(self) -> None:
        from .options import Binning

        set_ = object.__setattr__
        set_(self, "locality_penalty", _finite_at_least(self.locality_penalty, 1.0, "params.locality_penalty"))
        set_(self, "restart_cost", _finite_at_least(self.restart_cost, 0.0, "params.restart_cost"))
        modes = [b.value for b in Binning]
        if not isinstance(self.binning, str) or self.binning not in modes:
            raise InstanceError(f"must be one of {', '.join(modes)}, got {self.binning!r}", path="params.binning")
        set_(self, "binning", str(self.binning))
        if not isinstance(self.costs, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in self.costs.items()
        ):
            raise InstanceError(f"must map cost term names to parameter objects, got {self.costs!r}",
                                path="params.costs")
        set_(self, "costs", {k: dict(v) for k, v in self.costs.items()})


@dataclass(frozen=True)
class RoundInstance:
    """One scheduling round: a cluster, a queue of jobs (in queue order) and parameters.

    The jobs are checked against the cluster here, once: ids are unique, every class has
    factors, and a running job's GPUs exist and are held by no other job.  (They may have failed
    or been taken since: such a job must move.)
    """

    cluster: Cluster
    jobs: tuple[Job, ...]
    params: RoundParams = RoundParams()
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        seen: set[Any] = set()
        held: dict[int, int] = {}
        position = self.cluster.position
        for i, j in enumerate(self.jobs):
            if not isinstance(j, Job):
                raise InstanceError(f"expected a Job, got {type(j).__name__}", path=f"jobs[{i}]")
            if j.id in seen:
                raise InstanceError(f"duplicate job id {j.id!r}", path=f"jobs[{i}].id")
            seen.add(j.id)
            if j.perfclass not in self.cluster.factors:
                raise InstanceError(
                    f"class {j.perfclass!r} has no GPU factors (known: {', '.join(self.cluster.factors)})",
                    path=f"jobs[{i}].perfclass",
                )
            for g in j.placement or ():
                if g not in position:
                    raise InstanceError(f"unknown GPU {g}", path=f"jobs[{i}].placement")
                if held.setdefault(g, i) != i:
                    raise InstanceError(f"GPU {g} is also held by jobs[{held[g]}]", path=f"jobs[{i}].placement")

    @property
    def job_by_id(self) -> dict[JobId, Job]:
        return self._job_index

    @cached_property
    def _job_index(self) -> dict[JobId, Job]:
        return {j.id: j for j in self.jobs}

    @cached_property
    def _free_count(self) -> int:
        return int(self.cluster.free_mask.sum())

    @property
    def free_gpus(self) -> int:
        """GPUs free this round (running queued jobs' GPUs count as free)."""
        return self._free_count
