"""The exact search behind :func:`pal_opt.ilp.canonical.canonical_optimum`.

When the canonical greedy misses a placement pattern (the jobs' GPU counts, caps and levels), the
pattern is placed again by a search that depends on the pattern alone: the jobs that must lie on
one server (one rack) are given their server (rack) one after the other, the candidates in a
fixed order (fewest GPUs the job may use there first, then the first), each choice kept only
while a maximum flow still routes every job's GPUs (jobs not yet given a node counted as free to
use any GPU they may use), backtracking at most :data:`SEARCH_STEPS` flows.  The GPUs are then
those of the last flow, shared out in position order.

The GPUs fall into *cells*: one server's GPUs that exactly the same jobs may use.  The flow
network is source → (job kind, node) → cell → sink; a pipeline job's stages are parts of their own
kinds (each stage's cap) on the pipeline's node, so each stage is routed to GPUs it may use, and
its GPUs are listed stage by stage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model import Cluster, Level

__all__ = ["Need", "FlowBudget", "realise_by_flow", "SEARCH_STEPS"]

#: The most flows one search solves before it gives up (the given placement is kept).
SEARCH_STEPS = 500


@dataclass(frozen=True)
class Need:
    """What one placed job's cost depends on (:mod:`pal_opt.ilp.canonical`): the job (its index
    in the round), its GPU count, the GPU types it is drawn from, the slowest binned factor of
    its class it may get and the widest level it may span.  A pipeline job's GPUs are further
    split by stage: ``stages`` holds, per stage in stage order, its replicas and the slowest
    factor that stage may get (``cap`` is then the largest of them); empty for a gang."""

    index: int
    count: int
    group: tuple[int, ...]
    cap: float
    level: int
    stages: tuple[tuple[int, float], ...] = ()

    @property
    def parts(self) -> tuple[tuple[int, float], ...]:
        """``(GPUs, cap)`` per part the job's GPUs are listed in: its stages, or the whole gang."""
        return self.stages or ((self.count, self.cap),)


@dataclass(frozen=True)
class _Cells:
    """GPUs grouped by (server, the kinds that may use them)."""

    server: np.ndarray
    rack: np.ndarray
    size: np.ndarray
    usable: np.ndarray
    members: list[np.ndarray]

    @classmethod
    def of(cls, cl: Cluster, masks: np.ndarray) -> _Cells:
        pos = np.flatnonzero(masks.any(axis=0))
        key = np.column_stack([cl.server_of[pos], masks[:, pos].T.astype(np.int64)])
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        inv = np.asarray(inv).ravel()
        server = uniq[:, 0]
        rack = cl.rack_of_server[server] if cl.racked else np.full(server.size, -1)
        members = [pos[inv == c] for c in range(uniq.shape[0])]
        return cls(server, rack, np.asarray([m.size for m in members], dtype=np.int64), uniq[:, 1:].astype(bool),
                   members)

    def inside(self, level: int, node: int) -> np.ndarray:
        """Cells inside ``node`` (a server or rack position, by ``level``; every cell for the cluster)."""
        if level == Level.SERVER:
            return self.server == node
        if level == Level.RACK:
            return self.rack == node
        return np.ones(self.server.size, dtype=bool)


def _flow(cells: _Cells, groups: dict[tuple[int, int, int], int]) -> tuple[bool, Any, list[tuple[int, int, int]],
                                                                               np.ndarray, np.ndarray]:
    """Whether every group's GPUs ((kind, level, node) -> count) route to the cells; the flow."""
    from scipy.sparse.csgraph import maximum_flow  # here: importing it takes 0.1-0.25 s

    keys = sorted(groups)
    ncell = int(cells.size.size)
    base = 2 + len(keys)
    src: list[np.ndarray] = [np.zeros(len(keys), dtype=np.int64), base + np.arange(ncell)]
    dst: list[np.ndarray] = [2 + np.arange(len(keys)), np.ones(ncell, dtype=np.int64)]
    cap: list[np.ndarray] = [np.asarray([groups[k] for k in keys], dtype=np.int64), cells.size]
    for a, (kind, level, node) in enumerate(keys):
        c = np.flatnonzero(cells.usable[:, kind] & cells.inside(level, node))
        src.append(np.full(c.size, 2 + a))
        dst.append(base + c)
        cap.append(np.minimum(cells.size[c], groups[keys[a]]))
    u, w, k = (np.concatenate(x) for x in (src, dst, cap))
    n = base + ncell
    graph = sp.csr_array((k.astype(np.int32), (u, w)), shape=(n, n))
    res = maximum_flow(graph, 0, 1)
    return int(res.flow_value) == sum(groups.values()), res, keys, u, w


def _key(kind: int, need: Need, node: int | None) -> tuple[int, int, int]:
    """The flow group of a part of ``need`` of ``kind``: under its node, or the cluster's while it has none."""
    return (kind, int(Level.CLUSTER), -1) if node is None else (kind, need.level, node)


def _groups(kinds: Sequence[tuple[int, ...]], needs: Sequence[Need], where: Sequence[int | None]
            ) -> dict[tuple[int, int, int], int]:
    """The flow's groups: each part of each need (a pipeline's stages, a gang whole) under its
    need's node, or the cluster's while it has none."""
    out: dict[tuple[int, int, int], int] = {}
    for n, ks, node in zip(needs, kinds, where, strict=True):
        for k, (count, _) in zip(ks, n.parts, strict=True):
            key = _key(k, n, node)
            out[key] = out.get(key, 0) + count
    return out


def _candidates(cells: _Cells, kinds: tuple[int, ...], need: Need, contention: np.ndarray) -> list[int]:
    """The nodes of ``need.level`` that have ``need.count`` GPUs its kinds may use: fewest first,
    then those the other jobs need least (``contention``, per cell), then the first."""
    nodes = cells.server if need.level == Level.SERVER else cells.rack
    size = int(nodes.max()) + 1
    usable = cells.usable[:, list(kinds)].any(axis=1)
    have = np.bincount(nodes, weights=cells.size * usable, minlength=size)
    want = np.bincount(nodes, weights=contention, minlength=size)
    ok = np.flatnonzero(have >= need.count)
    return [int(x) for x in ok[np.lexsort((ok, want[ok], have[ok]))]]


def _contention(cells: _Cells, kinds: Sequence[tuple[int, ...]], needs: Sequence[Need]) -> np.ndarray:
    """Per cell: how much the jobs need its GPUs (each kind's GPUs wanted over its GPUs, summed
    over the kinds that may use the cell, times its size)."""
    want = np.zeros(cells.usable.shape[1])
    for n, ks in zip(needs, kinds, strict=True):
        for k, (count, _) in zip(ks, n.parts, strict=True):
            want[k] += count
    have = cells.size @ cells.usable
    share = np.divide(want, have, out=np.zeros_like(want), where=have > 0)
    return np.asarray(cells.usable @ share * cells.size, dtype=np.float64)


def _shape(cells: _Cells, level: int, node: int) -> tuple[object, ...]:
    """What tells a node from another of its level when nothing is placed there: its cells (the
    kinds that may use them and their sizes) and, for a server, its rack."""
    inside = np.flatnonzero(cells.inside(level, node))
    own = sorted((cells.usable[c].tobytes(), int(cells.size[c])) for c in inside.tolist())
    return (int(cells.rack[inside[0]]) if level == Level.SERVER and inside.size else -1, tuple(own))


def _demand(kinds: tuple[int, ...], need: Need) -> tuple[tuple[int, int], ...]:
    """What a need asks of a node: its GPUs of each kind, part by part.  Two needs alike in this
    (and level) are interchangeable; two pipelines of the same kinds and GPU count whose stages
    split the GPUs differently are not."""
    return tuple((k, count) for k, (count, _) in zip(kinds, need.parts, strict=True))


def _options(cells: _Cells, kinds: Sequence[tuple[int, ...]], needs: Sequence[Need], where: Sequence[int | None],
             todo: Sequence[int], depth: int, contention: np.ndarray) -> list[int]:
    """The nodes to try for ``needs[todo[depth]]``: one of each set of nodes alike (same shape,
    same needs given), and, after a twin (the same GPUs of each kind, part by part, and level),
    none before its node."""
    i = todo[depth]
    n = needs[i]
    cand = _candidates(cells, kinds[i], n, contention)
    if depth:
        p = todo[depth - 1]
        prev = where[p]
        if (_demand(kinds[p], needs[p]), needs[p].level) == (_demand(kinds[i], n), n.level) and prev in cand:
            cand = cand[cand.index(int(prev)):]  # (prev is in cand: not None)
    given: dict[int, list[tuple[tuple[int, int], ...]]] = {}
    for j in todo[:depth]:
        node = where[j]
        if needs[j].level == n.level and node is not None:
            given.setdefault(node, []).append(_demand(kinds[j], needs[j]))
    seen: set[tuple[object, ...]] = set()
    out: list[int] = []
    for at in cand:
        key = (_shape(cells, n.level, at), tuple(sorted(given.get(at, []))))
        if key not in seen:
            seen.add(key)
            out.append(at)
    return out


@dataclass
class FlowBudget:
    """The flows searches may still solve, shared by the searches given it."""

    left: int = SEARCH_STEPS


def _search(cells: _Cells, kinds: Sequence[tuple[int, ...]], needs: Sequence[Need], deadline: float | None,
            budget: FlowBudget) -> list[int | None] | None:
    """A node for every need on one server or rack (module docstring); None if none is found
    within ``budget`` flows or by ``deadline`` (a ``time.monotonic()`` value)."""
    where: list[int | None] = [None] * len(needs)
    contention = _contention(cells, kinds, needs)
    todo = [i for i, n in enumerate(needs) if n.level != Level.CLUSTER and n.count > 1]  # (one GPU: any server)
    todo.sort(key=lambda i: len(_candidates(cells, kinds[i], needs[i], contention)))  # fewest choices first (stable)
    options: list[list[int]] = []
    depth = 0
    while depth < len(todo):
        i = todo[depth]
        if depth == len(options):
            options.append(_options(cells, kinds, needs, where, todo, depth, contention))
        placed = False
        while options[depth]:
            where[i] = options[depth].pop(0)
            budget.left -= 1
            if budget.left < 0 or (deadline is not None and time.monotonic() >= deadline):
                return None
            if _flow(cells, _groups(kinds, needs, where))[0]:
                placed = True
                break
        if placed:
            depth += 1
            continue
        where[i] = None
        options.pop()
        depth -= 1
        if depth < 0:
            return None
    return where


def realise_by_flow(cl: Cluster, needs: Sequence[Need], kinds_masks: tuple[list[tuple[int, ...]], np.ndarray], *,
                    deadline: float | None = None, budget: FlowBudget | None = None) -> dict[int, tuple[int, ...]] | None:
    """GPU ids for each need (by job index; a pipeline's stage by stage), found by the search
    (module docstring); None if the search gives up or finds none.  ``kinds_masks``: each need's
    kind per part (:attr:`Need.parts`) and each kind's GPUs; ``budget``: the flows it may solve
    (default :data:`SEARCH_STEPS`), what it leaves of them left in it."""
    kinds, masks = kinds_masks
    if not needs or not masks.any():
        return None
    cells = _Cells.of(cl, masks)
    where = _search(cells, kinds, needs, deadline, budget or FlowBudget())
    if where is None:
        return None
    ok, res, keys, u, w = _flow(cells, _groups(kinds, needs, where))
    if not ok:
        return None
    base = 2 + len(keys)
    flows = np.asarray(res.flow.tocsr()[u, w]).ravel()
    taken: dict[int, list[int]] = {}
    cursor = [0] * int(cells.size.size)
    for a, c, f in zip(u.tolist(), w.tolist(), flows.tolist(), strict=True):
        if 2 <= a < base and f > 0:
            cell = c - base
            taken.setdefault(a - 2, []).extend(cells.members[cell][cursor[cell]:cursor[cell] + f].tolist())
            cursor[cell] += f
    pools = {key: sorted(taken.get(a, [])) for a, key in enumerate(keys)}
    out: dict[int, tuple[int, ...]] = {}
    for n, ks, node in zip(needs, kinds, where, strict=True):  # each group's GPUs dealt in need order
        gpus: list[int] = []
        for k, (count, _) in zip(ks, n.parts, strict=True):
            pool = pools[_key(k, n, node)]
            gpus.extend(sorted(int(g) for g in cl.gpu_ids[pool[:count]]))
            del pool[:count]
        out[n.index] = tuple(gpus)
    return out
