"""Bottleneck exchanges: a local search that lowers a start placement's cost without the program.

A gang's variability cost is set by its slowest GPU (its *bottleneck*).  The greedy starts
(:mod:`pal_opt.ilp.heuristic`, :mod:`pal_opt.ilp.packing`) place jobs one at a time, so a job
often keeps a slow GPU that another gang, already slowed as much by a GPU of its own, could have
taken at no cost.  :func:`exchange_bottlenecks` repeats the move

    for a job *A*, give every GPU of *A* at *A*'s slowest factor to another holder, each
    exchanged for a GPU of the same hardware type that is faster for *A* and lies where *A*
    already spans (its server, its rack, or anywhere when it spans the cluster).  The other
    holder is the free pool, or a job *B* for which the GPU it receives is no slower than *B*'s
    own slowest and lies where *B* already spans (anywhere for a one-GPU job, which spans a
    server wherever it is),

so *A* gets strictly faster, every *B* is no slower and no job spans a higher topology level;
since only GPUs of one hardware type change hands, every job keeps the GPU types it had, so
the exchanges keep GPU-type constraints (usable types, one type per gang) whatever they are.
The move is kept only when the round's cost (every registered term, :mod:`pal_opt.cost`) drops.
Among candidate GPUs the one fastest for *A* is taken, free GPUs before held ones on ties, then
the lowest position, so the search is deterministic.  Jobs are tried costliest first, and a job
an exchange changed is tried again; the search stops when every job has been tried since it
last changed (each move lowers the cost, so it ends) or when ``give_up`` answers True.  A full
search takes 0.1 s at 2,048 GPUs and 1.1 s at 8,192 (a job spanning the cluster looks at every
GPU); under a deadline it stops in time.

On the 2,048-GPU scale rounds (``benchmarks/scale.py``) it takes the packing start of seed 3 from
0.532 % to 0.421 % of the LP bound, which every backend can then prove without its search.

It applies where a job's cost depends only on its GPUs' factors and the level they span: rounds
without pipeline jobs and without running admitted jobs whose move is charged (:func:`applies`).
With GPU types the factors are already divided by each class's throughput on each GPU's type
(:func:`pal_opt.binning.binned_factors`), so the cost model is the same.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..cost import cost_terms
from ..model import GpuState, Job, JobId, RoundInstance
from .running import moving_is_charged

__all__ = ["applies", "exchange_bottlenecks"]

#: A move must lower the round's cost by more than this.
_EPS = 1e-9


def applies(instance: RoundInstance, admitted: Sequence[int]) -> bool:
    """Whether the exchanges keep the cost model: no pipeline jobs, no running admitted job whose
    move is charged."""
    jobs = instance.jobs
    if any(jobs[i].pipeline is not None for i in admitted):
        return False
    return not (moving_is_charged(instance) and any(jobs[i].placement is not None for i in admitted))


class _Search:
    """The placement as arrays: ``owner`` per GPU position (job index, −1 free, −2 not free),
    each job's positions, class row in ``F`` (classes × GPUs), slowest factor and span level."""

    def __init__(self, instance: RoundInstance, placement: Mapping[JobId, Sequence[int]],
                 factors: Mapping[str, np.ndarray]):
        cl = instance.cluster
        self.instance = instance
        self.terms = cost_terms()
        classes = sorted({instance.job_by_id[j].perfclass for j in placement})
        self.F = np.vstack([np.asarray(factors[c], dtype=np.float64) for c in classes])
        row = {c: k for k, c in enumerate(classes)}
        self.ids = list(placement)
        self.jobs: list[Job] = [instance.job_by_id[j] for j in self.ids]
        self.cls = np.array([row[j.perfclass] for j in self.jobs], dtype=np.int64)
        self.owner = np.where(cl.state == GpuState.FREE, -1, -2).astype(np.int64)
        self.pos: list[np.ndarray] = []
        for k, jid in enumerate(self.ids):
            p = cl.positions(placement[jid])
            self.owner[p] = k
            self.pos.append(p)
        self.server = cl.server_of
        self.rack = cl.rack_of_server[cl.server_of] if cl.racked else np.zeros_like(cl.server_of)
        self.by_server = _groups(self.server)
        self.by_rack = _groups(self.rack)
        self.everywhere = np.arange(self.server.size)
        self.hw = np.asarray(cl.type_of)
        self.demand = np.array([j.demand for j in self.jobs], dtype=np.float64)
        self.cost, self.slowest, self.level = (np.array(col) for col in zip(
            *(self._price(k, p) for k, p in enumerate(self.pos)), strict=True))

    def _price(self, k: int, pos: np.ndarray) -> tuple[float, float, int]:
        """Job ``k``'s cost on the GPUs at ``pos`` (every registered term), its slowest factor
        there and the topology level they span."""
        level = int(self.instance.cluster.span_level_pos(pos))
        top = float(self.F[self.cls[k], pos].max())
        return sum(t.placed(self.instance, self.jobs[k], pos, level, top) for t in self.terms), top, level

    def _where(self, k: int, g: int) -> np.ndarray:
        """Positions of the GPUs lying where job ``k`` already spans, as seen from its GPU ``g``
        (a server's or a rack's, so that most jobs look at a few GPUs, not the cluster)."""
        if self.level[k] == 0:
            return self.by_server[int(self.server[g])]
        if self.level[k] == 1:
            return self.by_rack[int(self.rack[g])]
        return self.everywhere

    def _partner(self, a: int, g: int, taken: np.ndarray, strict: bool) -> int | None:
        """The GPU given to job ``a`` for its bottleneck GPU ``g`` (None: none qualifies).
        ``strict``: a holder must not get slower; otherwise the holder whose slowest factor
        rises least (by ``d_B · ln``) is taken, and the move is judged on the round's cost."""
        fa = self.F[self.cls[a]]
        own = self.owner
        near = self._where(a, g)
        o = own[near]
        idx = near[(fa[near] < fa[g]) & (o >= -1) & (o != a) & ~taken[near] & (self.hw[near] == self.hw[g])]
        if idx.size == 0:
            return None
        holders = own[idx]
        held = holders >= 0
        ok = ~held
        rise = np.zeros(idx.size)
        if held.any():
            b = holders[held]
            fbg = self.F[self.cls[b], g]
            lvl = self.level[b]
            same = np.where(lvl == 0, self.server[idx[held]] == self.server[g],
                            np.where(lvl == 1, self.rack[idx[held]] == self.rack[g], True)) | (self.demand[b] == 1)
            if strict:
                ok[held] = (fbg <= self.slowest[b]) & same
            else:
                ok[held] = same
                rise[held] = self.demand[b] * np.log(np.maximum(fbg / self.slowest[b], 1.0))
        idx, held, rise = idx[ok], held[ok], rise[ok]
        if idx.size == 0:
            return None
        best = np.lexsort((idx, held, fa[idx], rise))[0]
        return int(idx[best])

    def try_job(self, a: int, strict: bool) -> list[int]:
        """One exchange for job ``a``: the jobs it changed (none when it was not made)."""
        fa = self.F[self.cls[a]]
        pa = self.pos[a]
        worst = pa[fa[pa] == self.slowest[a]]
        taken = np.zeros(self.server.size, dtype=bool)
        swaps: list[tuple[int, int]] = []
        for g in worst.tolist():
            h = self._partner(a, g, taken, strict)
            if h is None:
                return []
            taken[h] = True
            swaps.append((g, h))
        return self._apply(a, swaps)

    def _apply(self, a: int, swaps: list[tuple[int, int]]) -> list[int]:
        """Make the exchanges when they lower the round's cost: the jobs changed (none if not)."""
        new = {a: self.pos[a].copy()}
        for g, h in swaps:
            b = int(self.owner[h])
            new[a][new[a] == g] = h
            if b >= 0:
                pb = new.setdefault(b, self.pos[b].copy())
                pb[pb == h] = g
        priced = {k: self._price(k, p) for k, p in new.items()}
        if sum(c for c, _, _ in priced.values()) >= sum(self.cost[k] for k in new) - _EPS:
            return []
        for g, h in swaps:
            self.owner[g], self.owner[h] = self.owner[h], a
        for k, p in new.items():
            self.pos[k] = p
            self.cost[k], self.slowest[k], self.level[k] = priced[k]
        return list(new)

    def placement(self) -> dict[JobId, tuple[int, ...]]:
        gid = self.instance.cluster.gpu_ids
        return {jid: tuple(int(x) for x in gid[np.sort(p)]) for jid, p in zip(self.ids, self.pos, strict=True)}


def _groups(key: np.ndarray) -> list[np.ndarray]:
    """Positions grouped by ``key`` (server or rack index), each group ascending."""
    order = np.argsort(key, kind="stable")
    return np.split(order, np.cumsum(np.bincount(key, minlength=int(key.max()) + 1 if key.size else 0))[:-1])


def exchange_bottlenecks(
    instance: RoundInstance,
    placement: Mapping[JobId, Sequence[int]],
    factors: Mapping[str, np.ndarray],
    *,
    give_up: Callable[[], bool] | None = None,
) -> tuple[dict[JobId, tuple[int, ...]], int]:
    """``placement`` improved by bottleneck exchanges (module docstring) and the number made.

    The placement must be valid (distinct free GPUs, each job its demand); the result is valid
    too and costs no more.  ``give_up`` is asked before each job."""
    if not placement:
        return {}, 0
    s = _Search(instance, placement, factors)
    moves = 0
    for strict in (True, False):
        # every job once, costliest first; a job an exchange changed is tried again
        queue = deque(np.argsort(-s.cost, kind="stable").tolist())
        waiting = set(queue)
        while queue:
            if give_up is not None and give_up():
                return s.placement(), moves
            a = queue.popleft()
            waiting.discard(a)
            changed = s.try_job(a, strict)
            moves += bool(changed)
            for k in changed:
                if k not in waiting:
                    queue.append(k)
                    waiting.add(k)
    return s.placement(), moves
