"""Warm re-solving: what one round's ``ilp`` solve leaves for the next, in the same process.

A scheduler that places its queue every minute solves rounds that differ little: a few jobs
finished, a few arrived, the cluster is the same.  Pass one :class:`WarmStart` to every call
(``pal_opt.solve(instance, "ilp", warm=ws)`` or ``solve_ilp(..., warm=ws)``); each call reads
what the last one left and records its own round.  What is reused, on large rounds
(:mod:`pal_opt.ilp.scale`, where nearly all of a cold solve is the flow-free relaxation's LP):

* **the LP**: HiGHS's solved relaxation stays alive in :attr:`WarmStart.lp`.  The next round's
  relaxation is built as usual, with the job types of the last round kept (a type no admitted
  job has gets the row ``Σ slots = 0``, which changes nothing), so that when the free GPUs are
  the same only row and column bounds differ; HiGHS then goes on from the last optimal basis
  (dual simplex).  The bound is the new round's LP optimum, as a cold solve computes it, reached
  in a few hundred iterations instead of several thousand;
* **the relaxation itself**: on the same free GPUs only the type rows' counts, the slot
  columns' bounds and the constant change, so the last round's relaxation is kept and given
  the new counts (:meth:`~pal_opt.ilp.relaxation.Relaxation.with_counts`, the program a fresh
  build gives, a test checks) instead of being built again (0.03-0.05 s at 8,192 GPUs, a
  quarter of a warm round); ``info["relaxation_reused"]`` says whether it was;
* **which start won**: when the last round's answer was not PAL's greedy placement, PAL's
  greedy is computed only if the packing greedy is not within the gap of the bound (and with at
  least 2 s left under a time limit).  The answer then meets the same gap target but may cost
  more than the cold one, by less than the gap, in a round where PAL's placement would have
  been cheaper; ``info["pal_deferred"]`` says when it was deferred;
* **the last placement**: the placements of jobs admitted again, kept when still valid (the job
  needs as many GPUs, its GPUs exist and are all free, none shared), the other admitted jobs
  placed on the rest by the packing greedy (:func:`~pal_opt.ilp.packing.fast_packing` with
  ``kept``).  The cold starts (PAL's greedy and the packing greedy) are still computed first;
  only when neither is within the gap of the bound is the last placement priced as one more
  start (``info["start_warm_objective"]``; it costs about a third of a warm round at 8,192
  GPUs and is rarely the cheapest).

Everything else is the cold solve's: the same admission, the same gap test against the new
round's bound, the same result.  Binned factors need no carrying: they are memoised per
measurements already (:mod:`pal_opt.binning`).

The warm state belongs to one cluster: a round of another cluster (other GPU ids, servers,
racks, types or measurements), another binning mode or backend is solved cold and the state
starts again from it; ``info["warm"]`` says what was reused or why nothing was.  A
:class:`WarmStart` is not thread-safe and holds a live solver model (it cannot be pickled).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import OptionError
from ..model import Cluster, GpuState, JobId, RoundInstance
from ..result import PlacementResult, Status
from .backends.base import RelaxationState
from .relaxation import Relaxation

__all__ = ["WarmStart"]


def cluster_key(cluster: Cluster, binning: str, backend: str) -> str:
    """A digest of what a warm state is valid for: the cluster's GPUs, servers, racks, types and
    measurements (not which GPUs are free), the binning mode and the backend."""
    def compute() -> str:
        h = hashlib.blake2b(digest_size=16)
        for arr in (cluster.gpu_ids, cluster.server_of, cluster.rack_of_server, cluster.type_of):
            a = np.ascontiguousarray(arr)
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())
        for c in sorted(cluster.factors):
            h.update(c.encode())
            h.update(np.ascontiguousarray(cluster.factors[c], dtype=np.float64).tobytes())
        h.update(repr((cluster.racked, cluster.type_names, sorted((cluster.throughput or {}).items()))).encode())
        return h.hexdigest()

    return f"{cluster.memo(('warm-key',), compute)}/{binning}/{backend}"


def check_warm(warm: Any) -> None:
    """Refuse a ``warm=`` that is neither None nor a :class:`WarmStart` (``solve_ilp`` and
    :class:`~pal_opt.scheduler.RoundPolicy`, which refuses it when built, not in its first round).

    >>> check_warm(5)
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: warm must be a pal_opt.WarmStart, got int
    """
    if warm is not None and not isinstance(warm, WarmStart):
        raise OptionError(f"warm must be a pal_opt.WarmStart, got {type(warm).__name__}")


class WarmStart:
    """The state one round's ``ilp`` solve leaves for the next (module docstring).

    Create one per scheduler and pass it to every round's solve; it changes in place.

    Attributes
    ----------
    key
        The cluster, binning mode and backend it belongs to (:func:`cluster_key`), or None.
    placements
        The last round's answer (``{job id: GPU ids}``).
    types
        The job types the last round's relaxation had rows for.
    lp
        HiGHS's solved relaxation (:class:`~pal_opt.ilp.backends.base.RelaxationState`).
    rounds
        Rounds recorded since it was created or last started again.
    last_start
        The start placement the last round's answer came from (``info["start_source"]``).

    Examples
    --------
    >>> from pal_opt import WarmStart, solve
    >>> from pal_opt.generate import generate_instance
    >>> ws = WarmStart()
    >>> r1 = solve(generate_instance(8, 4, 12, seed=1), "ilp", backend="highs", warm=ws)
    >>> ws.rounds, r1.info["warm"]
    (1, 'cold: first round')
    """

    def __init__(self) -> None:
        self.key: str | None = None
        self.placements: dict[JobId, tuple[int, ...]] = {}
        self.types: tuple[tuple[str, int, tuple[float, float, float]], ...] = ()
        self.lp = RelaxationState()
        self.rounds = 0
        self._relaxation: tuple[str, Relaxation] | None = None
        self.last_start: str | None = None

    def __repr__(self) -> str:
        return f"WarmStart(rounds={self.rounds}, placements={len(self.placements)}, lp={self.lp.model is not None})"

    def reset(self) -> None:
        """Forget everything (the next round is solved cold)."""
        self.__init__()  # type: ignore[misc]

    def match(self, instance: RoundInstance, binning: str, backend: str) -> str | None:
        """Why the state cannot serve this round (and is reset), or None when it can."""
        key = cluster_key(instance.cluster, binning, backend)
        if self.key is None:
            why = "first round"
        elif key.split("/")[0] != self.key.split("/")[0]:
            why = "another cluster (GPUs, servers, racks, types or measurements differ)"
        elif key != self.key:
            why = "another binning mode or backend"
        else:
            return None
        self.reset()
        self.key = key
        return why

    @staticmethod
    def _free_key(instance: RoundInstance, couple: bool) -> str:
        free = np.ascontiguousarray(instance.cluster.state == GpuState.FREE)
        return hashlib.blake2b(free.tobytes() + bytes([couple]), digest_size=16).hexdigest()

    def relaxation(self, instance: RoundInstance, admitted: Sequence[int], couple: bool) -> Relaxation | None:
        """The last round's flow-free relaxation with this round's counts
        (:meth:`~pal_opt.ilp.relaxation.Relaxation.with_counts`) when the free GPUs are the same
        and every admitted job's type has a row in it; None otherwise (build it anew)."""
        if self._relaxation is None or self._relaxation[0] != self._free_key(instance, couple):
            return None
        return self._relaxation[1].with_counts(instance, admitted)

    def keep_relaxation(self, instance: RoundInstance, relax: Relaxation, couple: bool) -> None:
        """Keep a freshly built relaxation for the next rounds."""
        self._relaxation = (self._free_key(instance, couple), relax)

    def kept(self, instance: RoundInstance, admitted: Sequence[int]) -> dict[JobId, tuple[int, ...]]:
        """The last placements of the admitted jobs that are still valid on this round: the job
        needs as many GPUs, its GPUs exist and are all free, and no GPU is kept twice."""
        cl = instance.cluster
        position = cl.position
        free = cl.state == GpuState.FREE
        taken = np.zeros(cl.num_gpus, dtype=bool)
        out: dict[JobId, tuple[int, ...]] = {}
        for i in admitted:
            job = instance.jobs[i]
            gids = self.placements.get(job.id)
            if gids is None or len(gids) != job.demand:
                continue
            pos = [position.get(int(g), -1) for g in gids]
            if -1 in pos or len(set(pos)) != len(pos) or not all(free[p] and not taken[p] for p in pos):
                continue
            taken[pos] = True
            out[job.id] = tuple(int(g) for g in gids)
        return out

    def record(self, result: PlacementResult) -> None:
        """Keep ``result``'s placement for the next round (the relaxation's job types and LP are
        kept as they are solved, :func:`pal_opt.ilp.scale.flow_free_bound`)."""
        self.rounds += 1
        self.placements = {} if result.status == Status.INFEASIBLE else dict(result.placements)
        self.last_start = result.info.get("start_source")


def warm_info(kept: Mapping[JobId, Any] | None, admitted: int, lp: str) -> str:
    """``info["warm"]`` on a large round: what the warm state gave it (``kept`` None: the last
    placement was not tried, a cold start being within the gap already)."""
    if kept is None:
        return f"warm: LP {lp}; the last placement not needed (a cold start is within the gap)"
    return f"warm: {len(kept)} of {admitted} admitted jobs kept their last GPUs; LP {lp}"
