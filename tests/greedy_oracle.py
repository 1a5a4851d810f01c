"""The greedy PAL and PM-First policies as they were before the scale rewrite (issue 15), kept
as a test oracle: ``tests/test_greedy_oracle.py`` checks that the package's policies make the
very same decisions on random rounds.  Copied from ``pal_opt/policies/{base,pmfirst,pal}.py``
at commit 73b6cc1 (the cluster memo keys renamed so the two never share cached indexes); not
part of the package.
"""
# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from pal_opt.admission import pal_order
from pal_opt.errors import InstanceError
from pal_opt.model import Cluster, GpuState, JobId, Level, RoundInstance
from pal_opt.result import jobs_to_terminate







@dataclass(frozen=True)
class GreedyPlacement:
    """What a greedy policy returns.

    Attributes
    ----------
    placements
        ``{job id: (GPU id, ...)}`` for every job that holds GPUs after the round, in the
        order the policy placed them (GPU ids in the order the policy picked them).
    jobs_to_terminate
        Running jobs (queue order) that lose their GPUs or get a different set.
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
    """

    pos: np.ndarray
    ptr: np.ndarray
    size: np.ndarray
    bounds: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.bounds:
            self.bounds.extend(self.ptr.tolist())  # Python ints: faster slicing per job

    def gpus(self, s: int) -> np.ndarray:
        """Positions of server ``s``'s GPUs, in position order."""
        b = self.bounds
        return self.pos[b[s] : b[s + 1]]


@dataclass(frozen=True)
class ClassIndex:
    """One class's factor levels.

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
    """

    factors: np.ndarray
    levels: np.ndarray
    level_of: np.ndarray
    first_seen: tuple[int, ...]
    by_level: np.ndarray
    level_ptr: np.ndarray
    level_list: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.level_list:
            self.level_list.extend(self.level_of.tolist())  # for per-server loops of a few GPUs

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
        return ServerIndex(order, ptr, size)

    return cluster.memo("oracle-policy-servers", build)


def class_index(cluster: Cluster, factors: np.ndarray) -> ClassIndex:
    """The :class:`ClassIndex` of one class's factor array (cached on the cluster).

    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.1, 0.9, 1.1, 1.0]})
    >>> ci = class_index(c, np.array([1.1, 0.9, 1.1, 1.0]))
    >>> ci.levels.tolist(), ci.level_of.tolist(), ci.first_seen
    ([0.9, 1.0, 1.1], [2, 0, 2, 1], (2, 0, 1))
    """
    return cluster.memo(("oracle-policy-class", id(factors)), lambda: _class_index(cluster, factors),
                        valid=lambda hit: hit.factors is factors)


def _class_index(cluster: Cluster, factors: np.ndarray) -> ClassIndex:
    f = np.asarray(factors, dtype=np.float64)
    if f.shape != (cluster.num_gpus,):
        raise InstanceError(f"expected {cluster.num_gpus} factors, got shape {f.shape}", path="factors")
    levels, first, inv = np.unique(f, return_index=True, return_inverse=True)
    inv = inv.astype(np.int64).reshape(-1)
    by_level = np.argsort(inv, kind="stable")
    ptr = np.zeros(levels.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(inv, minlength=levels.size), out=ptr[1:])
    first_seen = tuple(int(x) for x in np.argsort(first, kind="stable"))
    return ClassIndex(factors, levels, inv, first_seen, by_level, ptr)


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
    cnt : dict class -> ndarray of int64, shape (L, S)
        Free GPUs per (level, server) of that class.
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
        self.blocks = cluster.memo("oracle-policy-blocks", lambda: bool(np.all(np.diff(cluster.server_of) >= 0)))
        self.free = np.array(free, dtype=bool, copy=True)
        #: The free mask as a bytearray, for loops over the few GPUs of one server.
        self.free_list = bytearray(self.free.tobytes())
        self._server_list: list[int] = cluster.memo("oracle-policy-server-list", cluster.server_of.tolist)
        class_factors = dict(class_factors or {})
        self.index: dict[str, ClassIndex] = {c: class_index(cluster, f) for c, f in class_factors.items()}
        self._codes, offsets, size = _codes(cluster, self.index)
        self.counts = np.bincount(self._codes[self.free].ravel(), minlength=size).astype(np.int64)
        s = cluster.num_servers
        self.server_free = self.counts[:s]
        #: Number of free GPUs.
        self.num_free = int(self.free.sum())
        self.cnt: dict[str, np.ndarray] = {}
        self.tot: dict[str, np.ndarray] = {}
        for c, off in zip(self.index, offsets, strict=True):
            lv = self.index[c].num_levels
            self.cnt[c] = self.counts[off : off + lv * s].reshape(lv, s)
            self.tot[c] = self.counts[off + lv * s : off + lv * s + lv]
        # servers changed since a class's cumulative counts were last brought up to date
        self._tick = 0
        self._stamp = np.zeros(s, dtype=np.int64)
        self._cum: dict[str, tuple[np.ndarray, int]] = {}

    def take(self, pos: np.ndarray) -> None:
        """Mark the GPUs at ``pos`` (distinct, currently free) as used."""
        self._tick += 1
        if len(pos) == 1:  # one GPU's slots are distinct: plain fancy indexing is exact
            p = int(pos[0])
            self.free[p] = False
            self.free_list[p] = 0
            self.counts[self._codes[p]] -= 1
            self._stamp[self._server_list[p]] = self._tick
        else:
            self.free[pos] = False
            for p in pos.tolist():
                self.free_list[p] = 0
            np.subtract.at(self.counts, self._codes[pos].ravel(), 1)
            self._stamp[self.server_of[pos]] = self._tick
        self.num_free -= len(pos)

    def release(self, pos: np.ndarray) -> None:
        """Mark the GPUs at ``pos`` (distinct, currently used) as free again."""
        self.free[pos] = True
        for p in pos.tolist():
            self.free_list[p] = 1
        np.add.at(self.counts, self._codes[pos].ravel(), 1)
        self.num_free += len(pos)
        self._tick += 1
        self._stamp[self.server_of[pos]] = self._tick

    def server_gpus_at(self, s: int, ci: ClassIndex, level: int, *, at_most: bool = False) -> list[int]:
        """Free positions of server ``s`` at factor ``level`` (or ≤ it), in position order."""
        free = self.free_list
        lev = ci.level_list
        gpus = self.servers.gpus(s).tolist() if not self.blocks else range(*self.servers.bounds[s : s + 2])
        if at_most:
            return [p for p in gpus if free[p] and lev[p] <= level]
        return [p for p in gpus if free[p] and lev[p] == level]

    def cum(self, perfclass: str) -> np.ndarray:
        """Free GPUs per (level, server) of ``perfclass`` with level ≤ the row's level, shape (L, S).

        Kept between calls and brought up to date only on the servers changed since.
        The result is read-only for callers.
        """
        hit = self._cum.get(perfclass)
        if hit is None:
            m = np.cumsum(self.cnt[perfclass], axis=0)
        else:
            m, seen = hit
            if seen != self._tick:
                dirty = np.flatnonzero(self._stamp > seen)
                m[:, dirty] = np.cumsum(self.cnt[perfclass][:, dirty], axis=0)
        self._cum[perfclass] = (m, self._tick)
        return m

    def free_on_server(self, s: int) -> np.ndarray:
        """Free positions of server ``s``, in position order."""
        p = self.servers.gpus(s)
        return p[self.free[p]]


def _codes(cluster: Cluster, index: Mapping[str, ClassIndex]) -> tuple[np.ndarray, list[int], int]:
    """Per GPU, the slots of the flat count array it contributes to (cached on the cluster).

    Column 0 is the GPU's server; then, per class, its (level, server) cell and its level total.
    Returns the code matrix, each class's offset into the flat array and the array's size.
    """
    key = ("oracle-policy-codes", tuple((c, id(ci)) for c, ci in index.items()))
    hit = cluster.memo(key, lambda: _build_codes(cluster, index),
                       valid=lambda h: all(a is b for a, b in zip(h[3], index.values(), strict=True)))
    return hit[0], hit[1], hit[2]


def _build_codes(
    cluster: Cluster, index: Mapping[str, ClassIndex]
) -> tuple[np.ndarray, list[int], int, tuple[ClassIndex, ...]]:
    s = cluster.num_servers
    cols = [cluster.server_of.astype(np.int64)]
    offsets = []
    off = s
    for ci in index.values():
        lv = ci.num_levels
        offsets.append(off)
        cols.append(off + ci.level_of * s + cluster.server_of)
        cols.append(off + lv * s + ci.level_of)
        off += lv * s + lv
    codes = np.ascontiguousarray(np.column_stack(cols).astype(np.int64))
    codes.setflags(write=False)
    return codes, offsets, off, tuple(index.values())


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


def place_in_order(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    select: Select,
    free_mask: np.ndarray | None = None,
    *,
    backfill: bool = False,
    classes: bool = True,
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

    Returns
    -------
    dict
        ``{job id: GPU ids}`` in placement order.
    """
    jobs = instance.jobs
    per_class = {jobs[i].perfclass: factors[jobs[i].perfclass] for i in order} if classes else None
    state = FreeGpus(instance.cluster, initial_free(instance, free_mask), per_class)
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
) -> GreedyPlacement:
    """A whole round placed by ``place_sequence(instance, factors, order, backfill=...)`` in PAL's
    queue order (running jobs freed)."""
    placements = place_sequence(instance, factors, pal_order(instance), backfill=backfill)
    return GreedyPlacement(placements, jobs_to_terminate(instance, placements), admission_label("pal-order", backfill))


def admission_label(rule: str, backfill: bool) -> str:
    """The admission a greedy result declares: ``rule``, or ``rule + "-backfill"``.

    >>> admission_label("pal-order", True)
    'pal-order-backfill'
    """
    return f"{rule}-backfill" if backfill else rule


def to_ids(cluster: Cluster, pos: Iterable[int] | np.ndarray) -> tuple[int, ...]:
    """GPU ids of the given positions, as a tuple of Python ints."""
    ids: list[int] = cluster.memo("oracle-policy-ids", cluster.gpu_ids.tolist)
    p = pos.tolist() if isinstance(pos, np.ndarray) else list(pos)
    return tuple([ids[i] for i in p])






#: Group definitions for PM-First's tie-break (see the module docstring).
GROUPINGS: tuple[str, ...] = ("factor-server", "server")

_NEVER = np.iinfo(np.int64).max

#: The grouping of the PM-First policy (the one that reproduces the reference rounds).
POLICY_GROUPING = "factor-server"


def pmfirst_select(
    state: FreeGpus,
    perfclass: str,
    demand: int,
    top_level: int | None = None,
    grouping: str = "factor-server",
) -> np.ndarray | None:
    """PM-First's choice among the free GPUs of ``perfclass`` with level ≤ ``top_level``.

    Parameters
    ----------
    state
        The free GPUs; must track ``perfclass``.
    perfclass
        The job's class.
    demand
        GPUs wanted.
    top_level
        Highest factor level (index into the class's sorted levels) allowed; all when None.
    grouping
        ``"factor-server"`` or ``"server"`` (see the module docstring).

    Returns
    -------
    ndarray of int64 or None
        ``demand`` GPU positions in PM-First order, or None if too few candidates are free.
    """
    ci = state.index[perfclass]
    cnt = state.cnt[perfclass]
    top = ci.num_levels - 1 if top_level is None else int(top_level)
    tot = state.tot[perfclass][: top + 1].tolist()
    if demand <= 0 or sum(tot) < demand:
        return None
    if grouping == "server":
        group = np.abs(cnt[: top + 1].sum(axis=0) - demand)
    elif grouping == "factor-server":
        group = None
    else:
        raise ValueError(f"unknown PM-First grouping {grouping!r}")
    # levels below the boundary level are taken whole, the boundary level in part
    running = list(accumulate(tot))
    boundary = bisect_left(running, demand)
    cum = running[boundary - 1] if boundary else 0
    rest = demand - cum
    score = np.abs(cnt[boundary] - demand) if group is None else group
    if state.blocks:
        last = _level_by_server(state, ci, boundary, cnt[boundary], score, rest)
    else:
        last = _level_by_gpu(state, ci, boundary, score, rest)
    if cum == 0:
        return last
    # all free GPUs of levels < boundary (fewer than d), by (level, score, position)
    if state.blocks:
        # (level, server) groups with free GPUs, in (level, score, server) order
        levs, srvs = np.nonzero(cnt[:boundary])
        sc = np.abs(cnt[levs, srvs] - demand) if group is None else group[srvs]
        order = np.lexsort((srvs, sc, levs)).tolist()
        lv, sv = levs.tolist(), srvs.tolist()
        below: list[int] = []
        for k in order:
            below.extend(state.server_gpus_at(sv[k], ci, lv[k]))
        return np.concatenate((np.asarray(below, dtype=np.int64), last))
    cand = ci.by_level[: ci.level_ptr[boundary]]
    cand = cand[state.free[cand]]
    lev = ci.level_of[cand]
    srv = state.server_of[cand]
    sc = np.abs(cnt[lev, srv] - demand) if group is None else group[srv]
    order = np.argsort(lev * (int(sc.max()) + 1) + sc, kind="stable")
    return np.concatenate((cand[order], last))


def _level_by_gpu(state: FreeGpus, ci: ClassIndex, lev: int, score: np.ndarray, take: int) -> np.ndarray:
    """The first ``take`` free GPUs of level ``lev`` by (server score, position)."""
    cand = ci.by_level[ci.level_ptr[lev] : ci.level_ptr[lev + 1]]
    cand = cand[state.free[cand]]
    order = np.argsort(score[state.server_of[cand]], kind="stable")
    return cand[order[:take]]


def _level_by_server(
    state: FreeGpus, ci: ClassIndex, lev: int, row: np.ndarray, score: np.ndarray, take: int
) -> np.ndarray:
    """As :func:`_level_by_gpu` when servers are position blocks: order servers, not GPUs.

    With servers as consecutive position blocks in server order, (score, position) order is
    (score, server, position) order, so whole servers are taken in (score, server) order.
    """
    first = int(np.argmin(np.where(row > 0, score, _NEVER)))
    if row[first] >= take:  # the best server alone suffices (the usual case)
        srv = [first]
    else:
        has = np.flatnonzero(row)
        order = has[np.argsort(score[has], kind="stable")]
        k = int(np.searchsorted(np.cumsum(row[order]), take)) + 1
        if k > 8:
            return _level_by_gpu(state, ci, lev, score, take)
        srv = order[:k].tolist()
    out: list[int] = []
    for s in srv:
        out.extend(state.server_gpus_at(s, ci, lev))
    return np.asarray(out[:take], dtype=np.int64)


def pmfirst_place_sequence(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    free_mask: np.ndarray | None = None,
    *,
    grouping: str = POLICY_GROUPING,
    backfill: bool = False,
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order`` with PM-First, stopping at the
    first job that cannot be placed (skipping it with ``backfill``; see
    :func:`~pal_opt.policies.base.place_in_order`);
    ``grouping`` is PM-First's group definition (see the module docstring)."""
    jobs = instance.jobs

    def select(state: FreeGpus, i: int) -> np.ndarray | None:
        return pmfirst_select(state, jobs[i].perfclass, jobs[i].demand, None, grouping)

    return place_in_order(instance, factors, order, select, free_mask, backfill=backfill)


def pmfirst_place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: object = None, backfill: bool = False
) -> GreedyPlacement:
    """The PM-First policy on one round (``seed`` is unused).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(2, 2, {"classA": [1.0, 1.2, 1.0, 1.0]})
    >>> place(RoundInstance(c, (Job("a", 2, "classA"),)), c.factors).placements
    {'a': (2, 3)}
    """
    return in_pal_order(instance, factors, pmfirst_place_sequence, backfill=backfill)






#: PM-First grouping used by PAL's fallback and across cells (the artifact's ``pal.py``).
PAL_GROUPING = "factor-server"


def traversal_order(ci: ClassIndex, within_penalty: float, across_penalty: float) -> tuple[tuple[int, bool], ...]:
    """PAL's cells for one class: ``(level index, within?)`` in traversal order.

    >>> from pal_opt.model import Cluster
    >>> from pal_opt.policies.base import class_index
    >>> f = np.array([1.2, 1.0, 1.2, 1.5])
    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": f})
    >>> traversal_order(class_index(c, f), 1.0, 1.3)
    ((0, True), (1, True), (0, False), (2, True), (1, False), (2, False))
    """
    cells = []
    for lev in ci.first_seen:
        v = float(ci.levels[lev])
        cells.append((within_penalty * v, lev, True))
        cells.append((across_penalty * v, lev, False))
    cells.sort(key=lambda t: t[0])
    return tuple((lev, within) for _, lev, within in cells)


@dataclass(frozen=True)
class _Walk:
    """A traversal order with each level's rank of its within and across cell."""

    cells: tuple[tuple[int, bool], ...]
    within_rank: list[int]
    across_rank: list[int]
    #: True if within cells, and across cells, come in increasing level order (always, unless
    #: two prices round to the same float): then the first feasible cell is found by bisection.
    monotone: bool

    @classmethod
    def build(cls, cells: tuple[tuple[int, bool], ...], levels: int) -> _Walk:
        rw, ra = [0] * levels, [0] * levels
        for r, (lev, within) in enumerate(cells):
            (rw if within else ra)[lev] = r
        mono = all(a < b for a, b in zip(rw[:-1], rw[1:], strict=True)) and all(
            a < b for a, b in zip(ra[:-1], ra[1:], strict=True)
        )
        return cls(cells, rw, ra, mono)


def within_select(
    state: FreeGpus,
    perfclass: str,
    demand: int,
    top_level: int,
    cum: np.ndarray | None = None,
    most: list[int] | None = None,
) -> np.ndarray | None:
    """PAL's within-server choice at level ≤ ``top_level`` (see the module docstring).

    ``cum`` may pass ``state.cum(perfclass)`` and ``most`` its column maxima per level, if the
    caller has them.  Returns ``demand`` GPU positions on one server, or None if no server has
    enough eligible free GPUs.
    """
    if cum is None:
        cum = state.cum(perfclass)
    eligible = cum[top_level]
    valid = np.flatnonzero(eligible >= demand)
    if valid.size == 0:
        return None
    if top_level == 0 or (most is not None and most[top_level - 1] < demand):
        # no server reaches d GPUs below top_level: every valid server's best max is top_level
        least, cand = top_level, valid
    else:
        # d-th smallest eligible level per server = first level where the running count reaches d
        best = (cum[: top_level + 1, valid] < demand).sum(axis=0)
        least = int(best.min())
        cand = valid[best == least]
    e = eligible[cand]
    top = cand[e == e.max()]  # most eligible GPUs first (pandas value_counts order) ...
    ci = state.index[perfclass]
    s = int(top[0])  # ... ties in order of first appearance: server order if servers are blocks
    if top.size > 1 and not state.blocks:
        first = [state.server_gpus_at(t, ci, top_level, at_most=True)[0] for t in top.tolist()]
        s = int(top[int(np.argmin(first))])
    return np.asarray(state.server_gpus_at(s, ci, least, at_most=True)[:demand], dtype=np.int64)


def pal_place_sequence(
    instance: RoundInstance,
    factors: Mapping[str, np.ndarray],
    order: Sequence[int],
    free_mask: np.ndarray | None = None,
    *,
    backfill: bool = False,
) -> dict[JobId, tuple[int, ...]]:
    """Place jobs (indices into ``instance.jobs``) in ``order`` with PAL, stopping at the first
    job that cannot be placed (skipping it with ``backfill``) (:func:`~pal_opt.policies.base.place_in_order`).  The integer
    programs use this on their admitted set as warm start and fallback; ``free_mask`` defaults
    to the GPUs in state FREE."""
    return place_in_order(instance, factors, order, _Selector(instance), free_mask, backfill=backfill)


class _Selector:
    """PAL's choice for one job on the free GPUs left (the cell walk is built once per class
    and pair of penalties)."""

    def __init__(self, instance: RoundInstance):
        self.jobs = instance.jobs
        self.per_node = int(instance.cluster.server_sizes.max())
        self.walks: dict[tuple[str, float, float], _Walk] = {}

    def walk(self, state: FreeGpus, c: str, pw: float, pa: float) -> _Walk:
        w = self.walks.get((c, pw, pa))
        if w is None:
            ci = state.index[c]
            w = self.walks[(c, pw, pa)] = _Walk.build(traversal_order(ci, pw, pa), ci.num_levels)
        return w

    def __call__(self, state: FreeGpus, i: int) -> np.ndarray | None:
        job = self.jobs[i]
        c, d = job.perfclass, job.demand
        if d > state.num_free:
            return None
        if d == 1 or d > self.per_node:
            return pmfirst_select(state, c, d, None, PAL_GROUPING)
        walk = self.walk(state, c, float(job.locality[Level.SERVER]), float(job.locality[Level.CLUSTER]))
        cum = state.cum(c)
        most = cum.max(axis=1).tolist()  # most eligible free GPUs on one server, per level
        avail = np.cumsum(state.tot[c]).tolist()  # eligible free GPUs in all, per level
        if walk.monotone:
            # both tests are monotone in the level: the first feasible within cell and the
            # first feasible across cell are bisections; the walk takes the earlier one
            lw, la = bisect_left(most, d), bisect_left(avail, d)
            n = len(most)
            if lw < n and (la == n or walk.within_rank[lw] < walk.across_rank[la]):
                return within_select(state, c, d, lw, cum, most)
            return pmfirst_select(state, c, d, la, PAL_GROUPING) if la < n else None
        for lev, within in walk.cells:
            if within and most[lev] >= d:
                return within_select(state, c, d, lev, cum, most)
            if not within and avail[lev] >= d:
                return pmfirst_select(state, c, d, lev, PAL_GROUPING)
        return None


def pal_place(
    instance: RoundInstance, factors: Mapping[str, np.ndarray], *, seed: object = None, backfill: bool = False
) -> GreedyPlacement:
    """The PAL policy on one round (``seed`` is unused).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance, pal_locality
    >>> f = {"classA": [1.0, 1.3, 1.0, 1.0, 1.3, 1.3]}
    >>> c = Cluster.uniform(2, 3, f)
    >>> place(RoundInstance(c, (Job("a", 3, "classA", locality=pal_locality(1.7)),)), c.factors).placements
    {'a': (0, 1, 2)}
    """
    return in_pal_order(instance, factors, pal_place_sequence, backfill=backfill)
