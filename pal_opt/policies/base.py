"""What every greedy policy shares: its result type and the numpy state it places on.

A policy is a function ``place(instance, factors, *, seed=None) -> GreedyPlacement``.  The
policies walk the queue one job at a time, so the work per job must not grow with a Python loop
over GPUs.  They share:

* :class:`ServerIndex` -- the GPUs of each server as one CSR array (positions sorted by server,
  then by position);
* :class:`ClassIndex` -- for one application class, the distinct (binned) factor levels, each
  GPU's level and the GPUs sorted by (level, position);
* :class:`FreeGpus` -- the mutable state of one placement pass: a free mask plus free-GPU counts
  per server, per (class, level, server) and per (class, level), all kept in one flat integer
  array and updated with a single ``np.subtract.at`` when a job takes its GPUs; per class, each
  server's free GPU levels in increasing order (a ``(P, S)`` array for servers of at most ``P``
  GPUs) are refreshed lazily, only on the servers changed since.  Nothing a policy reads per
  job has a (levels × servers) size: binned clusters of 65,536 GPUs have hundreds of levels.

The static indexes depend only on the cluster and the factor arrays, so they are cached on the
cluster, next to the binned factors they are built from.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from ..admission import pal_order
from ..binning import is_cluster_factor_array
from ..cost import job_slowdown_pos
from ..errors import InstanceError
from ..gputypes import group_mask, has_types, type_groups
from ..model import Cluster, GpuState, JobId, RoundInstance
from ..result import jobs_to_terminate

__all__ = [
    "GreedyPlacement",
    "ServerIndex",
    "ClassIndex",
    "FreeGpus",
    "server_index",
    "class_index",
    "FOREIGN_CLASS_INDEXES_KEPT",
    "initial_free",
    "Select",
    "typed_select",
    "place_in_order",
    "in_pal_order",
    "admission_label",
    "running_positions",
    "jobs_to_terminate",
    "to_ids",
]


@dataclass(frozen=True)
class GreedyPlacement:
    """What a greedy policy returns.

    Attributes
    ----------
    placements
        ``{job id: (GPU id, ...)}`` for every job that holds GPUs after the round, in the
        order the policy placed them (GPU ids in the order the policy picked them).
    jobs_to_terminate
        Running jobs (queue order) that lose their GPUs or get a different set (a pipeline also
        a different stage map, :func:`~pal_opt.model.keeps_placement`).
    admission
        The queue rule the placed set follows: ``"pal-order"``, ``"queue-order"`` or
        ``"sticky"`` (see :mod:`pal_opt.check`).
    """

    placements: dict[JobId, tuple[int, ...]]
    jobs_to_terminate: tuple[JobId, ...]
    admission: str


# --------------------------------------------------------------------------- static indexes
@dataclass(frozen=True)
class ServerIndex:
    """GPU positions grouped by server (CSR).

    Attributes
    ----------
    pos
        Positions sorted by (server, position).
    ptr
        ``pos[ptr[s]:ptr[s + 1]]`` are the GPUs of server ``s``, in position order.
    size
        GPUs per server (all states).
    grid
        Shape ``(P, S)`` for ``P`` the largest server: column ``s`` holds server ``s``'s positions
        in position order, padded with the number of GPUs (one past the last position).
    """

    pos: np.ndarray
    ptr: np.ndarray
    size: np.ndarray
    grid: np.ndarray
    bounds: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.bounds:
            self.bounds.extend(self.ptr.tolist())  # Python ints: faster slicing per job

    def gpus(self, s: int) -> np.ndarray:
        """Positions of server ``s``'s GPUs, in position order."""
        b = self.bounds
        return self.pos[b[s] : b[s + 1]]


@dataclass(frozen=True, eq=False)
class ClassIndex:
    """One class's factor levels.  Equal only to itself, and hashed by identity (it keys the code
    tables of :func:`_code_tables`; its arrays have no value hash).

    Attributes
    ----------
    factors
        The factor array the index was built from (kept to validate the cache).
    levels
        Distinct factor values, ascending.
    level_of
        Per GPU position: index of its factor in ``levels``.
    first_seen
        Level indices in order of first appearance over GPU positions.
    by_level
        Positions sorted by (level, position).
    level_ptr
        ``by_level[level_ptr[l]:level_ptr[l + 1]]`` are the GPUs of level ``l``.
    level_list
        ``level_of`` as a Python list.
    cell_of
        Per GPU position: its cell, the (level, server) pair it belongs to.  Cells are numbered
        in (level, server) order and only pairs that hold a GPU exist (at most one per GPU, where
        levels × servers can be millions).
    cell_server
        Per cell: its server.
    cell_bounds
        The cells of level ``l`` are ``cell_bounds[l]`` to ``cell_bounds[l + 1]`` (Python ints).
    level_pad
        ``level_of`` with one more entry, ``num_levels`` (for :attr:`ServerIndex.grid`'s padding).
    """

    factors: np.ndarray
    levels: np.ndarray
    level_of: np.ndarray
    first_seen: tuple[int, ...]
    by_level: np.ndarray
    level_ptr: np.ndarray
    cell_of: np.ndarray
    cell_server: np.ndarray
    cell_bounds: list[int]
    level_list: list[int] = field(default_factory=list, repr=False)
    level_pad: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.level_list:
            self.level_list.extend(self.level_of.tolist())  # for per-server loops of a few GPUs
        object.__setattr__(self, "level_pad", np.append(self.level_of, self.levels.size))

    @property
    def num_levels(self) -> int:
        return int(self.levels.size)


def server_index(cluster: Cluster) -> ServerIndex:
    """The cluster's :class:`ServerIndex` (cached on the cluster)."""
    def build() -> ServerIndex:
        order = np.argsort(cluster.server_of, kind="stable")
        size = np.bincount(cluster.server_of, minlength=cluster.num_servers)
        ptr = np.zeros(cluster.num_servers + 1, dtype=np.int64)
        np.cumsum(size, out=ptr[1:])
        grid = np.full((int(size.max(initial=0)), cluster.num_servers), cluster.num_gpus, dtype=np.int64)
        srv = cluster.server_of[order]
        grid[np.arange(order.size) - ptr[srv], srv] = order
        return ServerIndex(order, ptr, size, grid)

    return cluster.memo("policy-servers", build)


#: :class:`ClassIndex` objects of caller-supplied factor arrays (not the cluster's own, see
#: :func:`class_index`) kept per cluster, the most recently used.
FOREIGN_CLASS_INDEXES_KEPT = 8


def class_index(cluster: Cluster, factors: np.ndarray) -> ClassIndex:
    """The :class:`ClassIndex` of one class's factor array (cached on the cluster).

    The index is kept by the array's identity.  The cluster's own arrays (its measurements and
    the binned factors :func:`~pal_opt.binning.binned_factors` made for it: a few per class,
    what the library's methods pass) are kept for the cluster's life; other arrays, the last
    :data:`FOREIGN_CLASS_INDEXES_KEPT` used, so that a scheduler that keeps one cluster and
    passes a new array every round does not grow the cache without bound.

    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.1, 0.9, 1.1, 1.0]})
    >>> ci = class_index(c, np.array([1.1, 0.9, 1.1, 1.0]))
    >>> ci.levels.tolist(), ci.level_of.tolist(), ci.first_seen
    ([0.9, 1.0, 1.1], [2, 0, 2, 1], (2, 0, 1))
    """
    key = ("policy-class", id(factors))
    hit = cluster.memoized(key)
    if hit is not None and hit.factors is factors:  # the library's arrays: one dict look-up
        return hit  # type: ignore[no-any-return]
    if is_cluster_factor_array(cluster, factors):
        return cluster.memo(key, lambda: _class_index(cluster.server_of, cluster.num_servers, factors),
                            valid=lambda kept: kept.factors is factors)
    return cluster.memo("policy-class-foreign", lambda: _foreign_indexes(cluster))(_ByIdentity(factors))


@dataclass(frozen=True, eq=False)
class _ByIdentity:
    """An object as a cache key, equal only to itself (a numpy array has no value hash).  The key
    holds the object, so its ``id`` is not reused while the key is kept."""

    obj: object

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.obj is self.obj


def _foreign_indexes(cluster: Cluster) -> Callable[[_ByIdentity], ClassIndex]:
    """The cluster's :class:`ClassIndex` by caller-supplied array: the last
    :data:`FOREIGN_CLASS_INDEXES_KEPT` kept (``lru_cache``: thread-safe).  It holds the server
    array, not the cluster, which holds it (no reference cycle)."""
    server_of, num_servers = cluster.server_of, cluster.num_servers

    @functools.lru_cache(maxsize=FOREIGN_CLASS_INDEXES_KEPT)
    def build(key: _ByIdentity) -> ClassIndex:
        return _class_index(server_of, num_servers, key.obj)  # type: ignore[arg-type]

    return build


def _class_index(server_of: np.ndarray, num_servers: int, factors: np.ndarray) -> ClassIndex:
    try:
        f = np.asarray(factors, dtype=np.float64)
    except (TypeError, ValueError):  # strings, None in the array
        raise InstanceError(f"must be {server_of.size} numbers, one per GPU, got {factors!r}"[:200],
                            path="factors") from None
    if f.shape != server_of.shape:
        raise InstanceError(f"expected {server_of.size} factors, got shape {f.shape}", path="factors")
    levels, first, inv = np.unique(f, return_index=True, return_inverse=True)
    inv = inv.astype(np.int64).reshape(-1)
    by_level = np.argsort(inv, kind="stable")
    ptr = np.zeros(levels.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(inv, minlength=levels.size), out=ptr[1:])
    first_seen = tuple(int(x) for x in np.argsort(first, kind="stable"))
    s = max(num_servers, 1)
    key = inv * s + server_of
    order = np.argsort(key, kind="stable")
    k = key[order]
    new = np.ones(k.size, dtype=bool)
    new[1:] = k[1:] != k[:-1]
    cell_of = np.empty(k.size, dtype=np.int64)
    cell_of[order] = np.cumsum(new) - 1
    cells = k[new]
    bounds = np.searchsorted(cells // s, np.arange(levels.size + 1)).tolist()
    return ClassIndex(factors, levels, inv, first_seen, by_level, ptr, cell_of, cells % s, bounds)


# --------------------------------------------------------------------------- mutable state
class FreeGpus:
    """Free GPUs during one placement pass, with counts kept up to date.

    Parameters
    ----------
    cluster
        The cluster.
    free
        Initial free mask (copied).
    class_factors
        ``{class: factor array}`` of the classes whose level counts are needed (may be empty).

    Attributes
    ----------
    free : ndarray of bool
        Free mask by GPU position.
    server_free : ndarray of int64, shape (S,)
        Free GPUs per server.
    cell_free : dict class -> ndarray of int64
        Free GPUs per cell (:attr:`ClassIndex.cell_of`) of that class; see :meth:`level_cells`.
    tot : dict class -> ndarray of int64, shape (L,)
        Free GPUs per level of that class.
    index : dict class -> ClassIndex
    blocks : bool
        True if every server's GPUs are one run of consecutive positions and servers appear in
        position order, so that ordering GPUs by position is ordering them by (server,
        position).  Lets policies work per server instead of per GPU.
    """

    def __init__(
        self,
        cluster: Cluster,
        free: np.ndarray,
        class_factors: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.cluster = cluster
        self.servers = server_index(cluster)
        self.server_of = cluster.server_of
        self.blocks = cluster.memo("policy-blocks", lambda: bool(np.all(np.diff(cluster.server_of) >= 0)))
        g = cluster.num_gpus
        # the free mask with one more GPU, never free: the padding of ServerIndex.grid
        self.free_pad = np.zeros(g + 1, dtype=bool)
        self.free_pad[:g] = free
        self.free = self.free_pad[:g]
        #: The free mask as a bytearray, for loops over the few GPUs of one server.
        self.free_list = bytearray(self.free.tobytes())
        self._server_list: list[int] = cluster.memo("policy-server-list", cluster.server_of.tolist)
        class_factors = dict(class_factors or {})
        self.index: dict[str, ClassIndex] = {c: class_index(cluster, f) for c, f in class_factors.items()}
        self._codes, offsets, size = _codes(cluster, self.index)
        self.counts = np.bincount(self._codes[self.free].ravel(), minlength=size)
        s = cluster.num_servers
        self.server_free = self.counts[:s]
        #: Number of free GPUs.
        self.num_free = int(self.free.sum())
        self.cell_free: dict[str, np.ndarray] = {}
        self.tot: dict[str, np.ndarray] = {}
        for c, off in zip(self.index, offsets, strict=True):
            lv, nc = self.index[c].num_levels, self.index[c].cell_server.size
            self.cell_free[c] = self.counts[off : off + nc]
            self.tot[c] = self.counts[off + nc : off + nc + lv]
        #: Servers whose free GPUs changed, in the order they changed (with repeats); each
        #: class's ranked levels are up to date with the first ``_ranked[c][1]`` of them.
        self._changed: list[int] = []
        self._ranked: dict[str, tuple[np.ndarray, int]] = {}

    def take(self, pos: np.ndarray) -> None:
        """Mark the GPUs at ``pos`` (distinct, currently free) as used."""
        plist = pos.tolist()
        srv = self._server_list
        free = self.free_list
        for p in plist:
            free[p] = 0
        if len(plist) == 1:  # one GPU's slots are distinct: plain fancy indexing is exact
            p = plist[0]
            self.free[p] = False
            self.counts[self._codes[p]] -= 1
            self._changed.append(srv[p])
        else:
            self.free[pos] = False
            np.subtract.at(self.counts, self._codes[pos].ravel(), 1)
            self._changed.extend([srv[p] for p in plist])
        self.num_free -= len(plist)

    def release(self, pos: np.ndarray) -> None:
        """Mark the GPUs at ``pos`` (distinct, currently used) as free again."""
        plist = pos.tolist()
        self.free[pos] = True
        for p in plist:
            self.free_list[p] = 1
        np.add.at(self.counts, self._codes[pos].ravel(), 1)
        self.num_free += len(plist)
        self._changed.extend([self._server_list[p] for p in plist])

    def level_cells(self, perfclass: str, level: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The servers holding GPUs of ``perfclass`` at ``level`` (ascending), their free GPUs
        there (a view of :attr:`cell_free`), and the number of the first of these cells."""
        ci = self.index[perfclass]
        a, b = ci.cell_bounds[level], ci.cell_bounds[level + 1]
        return ci.cell_server[a:b], self.cell_free[perfclass][a:b], a

    def hide(self, keep: np.ndarray) -> np.ndarray:
        """Take every free GPU outside the mask ``keep`` out of play (as :meth:`take`, in bulk);
        returns their positions for :meth:`unhide`."""
        pos = np.flatnonzero(self.free & ~keep)
        if pos.size:
            self._bulk(pos, -1)
        return pos

    def unhide(self, pos: np.ndarray) -> None:
        """Put back the GPUs :meth:`hide` took out of play."""
        if pos.size:
            self._bulk(pos, 1)

    def _bulk(self, pos: np.ndarray, sign: int) -> None:
        """Free (``sign=1``) or use (``-1``) many GPUs at once: vectorised count updates and one
        copy of the free mask into ``free_list``."""
        self.free[pos] = sign > 0
        self.free_list[:] = self.free.tobytes()
        np.add.at(self.counts, self._codes[pos].ravel(), sign)
        self._changed.extend(np.unique(self.server_of[pos]).tolist())
        self.num_free += sign * int(pos.size)

    def server_gpus_at(self, s: int, ci: ClassIndex, level: int, *, at_most: bool = False) -> list[int]:
        """Free positions of server ``s`` at factor ``level`` (or ≤ it), in position order."""
        free = self.free_list
        lev = ci.level_list
        gpus = self.servers.gpus(s).tolist() if not self.blocks else range(*self.servers.bounds[s : s + 2])
        if at_most:
            return [p for p in gpus if free[p] and lev[p] <= level]
        return [p for p in gpus if free[p] and lev[p] == level]

    def ranked(self, perfclass: str) -> np.ndarray:
        """Each server's free GPU levels of ``perfclass`` in increasing order, shape ``(P, S)``:
        row ``j`` is the ``(j + 1)``-th smallest (the class's number of levels when the server
        has fewer free GPUs).  So ``ranked[d - 1, s]`` is the least level ``v`` such that
        server ``s`` has ``d`` free GPUs of level ≤ ``v``.

        Kept between calls and brought up to date only on the servers changed since.
        The result is read-only for callers.
        """
        hit = self._ranked.get(perfclass)
        now = len(self._changed)
        if hit is None:
            m = self._rank(perfclass, self.servers.grid)
        else:
            m, seen = hit
            if seen == now:
                return m
            dirty = list(set(self._changed[seen:]))
            m[:, dirty] = self._rank(perfclass, self.servers.grid[:, dirty])
        self._ranked[perfclass] = (m, now)
        return m

    def _rank(self, perfclass: str, grid: np.ndarray) -> np.ndarray:
        ci = self.index[perfclass]
        lv = np.where(self.free_pad[grid], ci.level_pad[grid], ci.num_levels)
        lv.sort(axis=0)
        return lv

    def free_on_server(self, s: int) -> np.ndarray:
        """Free positions of server ``s``, in position order."""
        p = self.servers.gpus(s)
        return p[self.free[p]]


#: Code tables (:func:`_codes`) kept per cluster, the most recently used: one per set of classes
#: in play.  A cluster kept across the rounds of a long run sees many sets of classes, and each
#: table is ``num_gpus × (1 + 2 × classes)`` integers (a fraction of a millisecond to build again).
CODE_TABLES_KEPT = 8

#: One code table: the per-GPU codes, each class's offset (classes by name) and the flat array's size.
_CodeTable = tuple[np.ndarray, list[int], int]


def _codes(cluster: Cluster, index: Mapping[str, ClassIndex]) -> tuple[np.ndarray, list[int], int]:
    """Per GPU, the slots of the flat count array it contributes to (cached on the cluster).

    Column 0 is the GPU's server; then, per class, its cell (:attr:`ClassIndex.cell_of`) and its
    level total, the classes by name: the classes of a queue in any order share one table.
    Returns the code matrix, each class's offset into the flat array (in ``index``'s order) and
    the array's size.

    At most :data:`CODE_TABLES_KEPT` tables are kept per cluster (:func:`_code_tables`).  The
    table was keyed by the classes in queue order and never dropped: a scheduler that kept one
    cluster across its rounds kept a table for every order of classes its queues ever showed (305
    tables, 33 MB, after 2,000 rounds of PAL on 1,024 GPUs with 8 classes, and growing).
    """
    names = sorted(index)
    codes, offsets, size = cluster.memo("policy-codes", lambda: _code_tables(cluster))(
        tuple((c, index[c]) for c in names))
    offset = dict(zip(names, offsets, strict=True))
    return codes, [offset[c] for c in index], size


def _code_tables(cluster: Cluster) -> Callable[[tuple[tuple[str, ClassIndex], ...]], _CodeTable]:
    """The cluster's code tables by ``((class, ClassIndex), ...)``, classes by name: the last
    :data:`CODE_TABLES_KEPT` kept.  A :class:`ClassIndex` is a key by identity (a new factor array
    has a new one), and the kept keys hold theirs, so a key is never another's after a reuse of
    ``id``.  Solves in several threads may share a cluster: ``lru_cache`` is thread-safe, and two
    threads missing at once build the same table twice.  It holds the server array, not the
    cluster, which holds it (no reference cycle)."""
    server_of, num_servers = cluster.server_of, cluster.num_servers

    @functools.lru_cache(maxsize=CODE_TABLES_KEPT)
    def build(classes: tuple[tuple[str, ClassIndex], ...]) -> _CodeTable:
        cols = [server_of.astype(np.int64)]
        offsets = []
        off = num_servers
        for _, ci in classes:
            nc = ci.cell_server.size
            offsets.append(off)
            cols.append(off + ci.cell_of)
            cols.append(off + nc + ci.level_of)
            off += nc + ci.num_levels
        codes = np.ascontiguousarray(np.column_stack(cols).astype(np.int64))
        codes.setflags(write=False)
        return codes, offsets, off

    return build


# --------------------------------------------------------------------------- helpers
def initial_free(instance: RoundInstance, free_mask: np.ndarray | None = None) -> np.ndarray:
    """A writable copy of the free mask: ``free_mask`` if given, else GPUs in state FREE."""
    cl = instance.cluster
    if free_mask is None:
        return np.asarray(cl.state == GpuState.FREE).copy()
    m = np.asarray(free_mask, dtype=bool)
    if m.shape != (cl.num_gpus,):
        raise InstanceError(f"free mask must have shape ({cl.num_gpus},), got {m.shape}", path="free_mask")
    return m.copy()


def running_positions(instance: RoundInstance, index: int) -> np.ndarray:
    """Positions of the GPUs the running job ``instance.jobs[index]`` holds now."""
    job = instance.jobs[index]
    if job.placement is None:
        return np.empty(0, dtype=np.int64)
    return instance.cluster.positions(job.placement)


#: ``select(state, index)``: the positions to give job ``instance.jobs[index]``, or None.
Select = Callable[["FreeGpus", int], "np.ndarray | None"]


def typed_select(instance: RoundInstance, factors: Mapping[str, np.ndarray], select: Select) -> Select:
    """``select`` restricted to GPU types: a job is offered, one type group at a time
    (:func:`pal_opt.gputypes.type_groups`), only the free GPUs of that group; of the gangs the
    policy picks, the job gets the one of least slowdown under ``factors`` (the group listed first
    on ties).  A job with no usable type gets nothing.  Without types, ``select`` itself."""
    if not has_types(instance):
        return select
    cl = instance.cluster
    everything = tuple(range(cl.num_types))
    groups: dict[int, tuple[tuple[int, ...], ...]] = {}
    masks: dict[tuple[int, ...], np.ndarray] = {}

    def choose(state: FreeGpus, i: int) -> np.ndarray | None:
        job = instance.jobs[i]
        gs = groups.get(i)
        if gs is None:
            gs = groups[i] = type_groups(cl, job)
        best: np.ndarray | None = None
        best_slow = math.inf
        for g in gs:
            if g == everything:
                pos = select(state, i)
            else:
                mask = masks.get(g)
                if mask is None:
                    mask = masks[g] = group_mask(cl, g)
                hidden = state.hide(mask)
                try:
                    pos = select(state, i)
                finally:
                    state.unhide(hidden)
            if pos is None:
                continue
            slow = job_slowdown_pos(cl, factors[job.perfclass], job, pos) if len(gs) > 1 else 0.0
            if best is None or slow < best_slow - 1e-12:
                best, best_slow = pos, slow
        return best

    return choose


class OrderRules(TypedDict, total=False):
    """The rules of :func:`place_in_order` that the policies' ``place_sequence`` pass through:
    ``backfill`` (skip a job that does not fit instead of stopping; default False) and
    ``respect_types`` (place each job on its usable GPU types; default True)."""

    backfill: bool
    respect_types: bool


def place_in_order(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    select: Select,
    free_mask: np.ndarray | None = None,
    *,
    backfill: bool = False,
    classes: bool = True,
    respect_types: bool = True,
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order``, each on the GPUs ``select``
    picks from the free GPUs left; stop at the first job it cannot place, or with ``backfill``
    skip it and go on.

    Parameters
    ----------
    instance
        The round.
    factors
        Per-class factor arrays by GPU position (normally the binned factors).
    order
        Job indices, in the order to try them.
    select
        The policy's choice for one job, given the free GPUs (:class:`FreeGpus`).
    free_mask
        GPUs available to these jobs; defaults to the GPUs in state FREE.
    backfill
        Skip a job that cannot be placed instead of stopping there.
    classes
        Keep per-class counts of free GPUs by factor level (policies that read factors).
    respect_types
        Offer each job only GPUs of its usable types, one type group at a time
        (:func:`typed_select`); False places as if the cluster had one type (a comparator).

    Returns
    -------
    dict
        ``{job id: GPU ids}`` in placement order.
    """
    jobs = instance.jobs
    per_class = {jobs[i].perfclass: factors[jobs[i].perfclass] for i in order} if classes else None
    state = FreeGpus(instance.cluster, initial_free(instance, free_mask), per_class)
    if respect_types:
        select = typed_select(instance, factors, select)
    out: dict[JobId, tuple[int, ...]] = {}
    for i in order:
        pos = select(state, i)
        if pos is None:
            if backfill:
                continue
            break
        state.take(pos)
        out[jobs[i].id] = to_ids(instance.cluster, pos)
    return out


def in_pal_order(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    place_sequence: Callable[..., dict[JobId, tuple[int, ...]]],
    *,
    backfill: bool = False,
    respect_types: bool = True,
) -> GreedyPlacement:
    """A whole round placed by ``place_sequence(instance, factors, order, backfill=...)`` in PAL's
    queue order (running jobs freed); ``respect_types=False`` is passed on as that keyword."""
    kw = {} if respect_types else {"respect_types": False}
    placements = place_sequence(instance, factors, pal_order(instance), backfill=backfill, **kw)
    return GreedyPlacement(placements, jobs_to_terminate(instance, placements), admission_label("pal-order", backfill))


def admission_label(rule: str, backfill: bool) -> str:
    """The admission a greedy result declares: ``rule``, or ``rule + "-backfill"``.

    >>> admission_label("pal-order", True)
    'pal-order-backfill'
    """
    return f"{rule}-backfill" if backfill else rule


def to_ids(cluster: Cluster, pos: Iterable[int] | np.ndarray) -> tuple[int, ...]:
    """GPU ids of the given positions, as a tuple of Python ints."""
    ids: list[int] = cluster.memo("policy-ids", cluster.gpu_ids.tolist)
    p = pos.tolist() if isinstance(pos, np.ndarray) else list(pos)
    return tuple([ids[i] for i in p])
