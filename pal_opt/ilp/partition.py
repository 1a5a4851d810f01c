"""Partitioned solving of very large rounds (POP-style), with a valid bound for the whole round.

POP (Narayanan et al., SOSP'21) observes that granular allocation problems split into ``k``
smaller problems of the same make-up lose little: each part gets ``1/k`` of the resources and
``1/k`` of the jobs.  :func:`solve_partitioned` does this for one scheduling round:

1. **Admission of the whole round first.**  The job set is decided on the whole round
   (``"prefix"`` or ``"backfill"`` via :func:`pal_opt.admission.admit`, or ``jobs=``), so the
   partitioned answer places exactly the set a direct solve would.
2. **Servers** are dealt into ``k`` parts of the same make-up (:func:`partition_round`).  On a
   racked cluster with at least ``k`` racks, whole racks are dealt (largest first, each to the
   part with the fewest free GPUs so far), so no rack is cut; with fewer racks than parts each
   rack's servers are dealt over the parts.  Otherwise servers are sorted by (free GPUs, sum of
   the log binned factors of their free GPUs over the classes) and dealt in snake order
   (0, 1, …, k−1, k−1, …, 0), which balances both size and speed.
3. **Jobs** of each type (class, demand, penalties) are dealt over the parts, largest demand
   first, each to a part holding the fewest jobs of its type so far, among those the one with
   the most free GPUs left, so every part receives ``⌊n_t/k⌋`` or ``⌈n_t/k⌉`` jobs of each type
   and never more demand than its free GPUs.  On a nearly full cluster the smallest jobs, dealt
   last, go where room is left, so their counts may differ more.  Running jobs (with a restart cost) go to the part
   holding their GPUs.  If dealing fails (a nearly full cluster), largest-first into the part with
   the most room is tried, then fewer parts (ultimately one).
4. Each part is a :class:`~pal_opt.model.RoundInstance` on its servers, with the **whole
   round's binned factors** (binning ``"none"`` inside the part, so every GPU keeps exactly the
   factor the whole round gives it) and its job set passed as ``jobs=``; the parts are solved
   by :func:`pal_opt.ilp.solve_ilp` in parallel on an executor (:mod:`pal_opt.parallel`).
5. The placements are merged and priced on the whole round by :func:`pal_opt.cost.evaluate`.
   A part keeps the rack ids of its servers, so every job spans the same topology level in its
   part and in the whole round and the part's cost is exactly its jobs' share of the round cost.

The bound
---------
The sum of the parts' optimal costs is **not** a lower bound of the whole round: partitioning
restricts every job to its part, so the best partitioned placement can cost more than the best
placement of the whole round (that difference is the price of partitioning).  The bound
reported is instead the optimum of the **LP relaxation of the whole round's program**
(:func:`pal_opt.ilp.build_formulation` on the whole round and the admitted set, solved by
HiGHS's dual simplex, :meth:`HighsBackend.relaxation_bound
<pal_opt.ilp.backends.highs.HighsBackend.relaxation_bound>`); when an admitted job has pipeline
stages, of the whole round's **stage program** (:func:`pal_opt.ilp.stageround.build_stage_round`,
the program each part solves then): the round program prices a pipeline at its slowest GPU, above
its pace, so its relaxation is no bound of a round of pipelines.  It is valid because

* every placement of the admitted jobs is a feasible integral solution of the round program
  with the same cost (``formulations/round_ilp.md`` §4, :func:`pal_opt.ilp.encode`), and the
  merged placement is such a placement;
* the LP relaxation drops only integrality, so its optimum is at most the program's optimum,
  hence at most the cost of every placement, the merged one included;
* HiGHS's optimum is lowered by a relative safety margin (``RELAXATION_SAFETY``) against
  floating-point tolerances.

It is computed as one more task on the same executor, concurrently with the parts.  With
``k = 1`` the single part *is* the whole round and its own solver bound is used.  With
``bound="none"`` no bound is computed (gap None).  ``info["parts_bound_sum"]`` (the sum of the
parts' own bounds) is reported for diagnosis only: it bounds the best *partitioned* placement,
and its excess over the whole-round bound estimates what partitioning costs.

Progress
--------
Inside :func:`pal_opt.progress.reporting` (the live line of ``pal-opt solve --method
ilp-partitioned`` on a terminal), the parts solved are reported as they end:
``stage="2 of 4 parts solved, whole-round bound computing"``, ``parts_done=2``, ``parts=4`` (the
parts actually made, which may be fewer than ``k``), last with ``parts_done == parts``.  Parts
solved on a process pool or Dask report nothing else; with ``executor="serial"`` each part's own
stages are reported too, named after it (``"part 1 of 4: solving"``), without its incumbent and
bound, which are that part's, not the round's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import progress
from ..binning import binned_factors
from ..cost import evaluate, relative_gap
from ..deadline import Deadline
from ..errors import BackendError, OptionError, SolveInterrupted, TimeLimitReached
from ..gputypes import has_types
from ..model import GpuState, JobId, RoundInstance
from ..options import check_time_limit
from ..parallel import CONNECT_SECONDS, ExecutorHandle, PeakMemory, make_executor, measure_peak
from ..result import PlacementResult, Status, priced_result
from .backends import SolveOptions
from .relaxation import applies as relaxation_applies
from .running import moving_is_charged
from .scale import LARGE_ROUND_GPUS, flow_free_bound
from .solve import OPTIMALITY_TOL, RoundSetup, check_ilp_options, prepare_round, run_info, solve_ilp
from .stageround import build_stage_round, has_pipelines
from .subround import part_instance

__all__ = ["Partition", "partition_round", "part_instance", "solve_partitioned", "BOUND_MODES"]

#: Bound options of :func:`solve_partitioned`.
BOUND_MODES: tuple[str, ...] = ("lp", "none")
#: Seconds a deadline keeps for merging the parts and pricing the round.
MERGE_SECONDS = 0.5


@dataclass(frozen=True)
class Partition:
    """How a round is split.

    Attributes
    ----------
    servers
        Per part: server positions (ascending).
    jobs
        Per part: job indices into ``instance.jobs`` (queue order).
    k_requested
        The ``k`` asked for; ``len(servers)`` may be smaller (too few servers, or dealing the
        jobs failed with ``k`` parts).
    scheme
        ``"racks"`` (whole racks dealt), ``"rack-slices"`` (each rack's servers dealt) or
        ``"servers"`` (flat cluster).
    job_dealing
        ``"balanced"`` (per type, most room first) or ``"largest-first"`` (fallback).
    """

    servers: tuple[np.ndarray, ...]
    jobs: tuple[tuple[int, ...], ...]
    k_requested: int
    scheme: str
    job_dealing: str
    free: tuple[int, ...] = field(default=())

    @property
    def k(self) -> int:
        return len(self.servers)


def _server_keys(instance: RoundInstance, factors: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Free GPUs per server and the sum of log factors of its free GPUs over the classes."""
    cl = instance.cluster
    S = cl.num_servers
    free = cl.state == GpuState.FREE
    nfree = np.bincount(cl.server_of[free], minlength=S)
    lnsum = np.zeros(S)
    for c in cl.classes:
        lnsum += np.bincount(cl.server_of[free], weights=np.log(np.asarray(factors[c])[free]), minlength=S)
    return nfree, lnsum


def _snake(n: int, k: int) -> np.ndarray:
    """Part of the i-th dealt item in snake order 0..k-1, k-1..0, ..."""
    i = np.arange(n)
    r, q = np.divmod(i, k)
    return np.where(r % 2 == 0, q, k - 1 - q)


def _deal_servers(instance: RoundInstance, factors: Mapping[str, np.ndarray], k: int) -> tuple[list[np.ndarray], str]:
    cl = instance.cluster
    nfree, lnsum = _server_keys(instance, factors)
    S = cl.num_servers
    if cl.racked and len(cl.rack_ids) >= k:
        R = len(cl.rack_ids)
        rfree = np.bincount(cl.rack_of_server, weights=nfree, minlength=R)
        rln = np.bincount(cl.rack_of_server, weights=lnsum, minlength=R)
        order = np.lexsort((np.arange(R), rln, -rfree))
        load = np.zeros(k)
        part_of_rack = np.empty(R, dtype=np.int64)
        for r in order.tolist():
            p = int(np.argmin(load))
            part_of_rack[r] = p
            load[p] += rfree[r]
        part = part_of_rack[cl.rack_of_server]
        scheme = "racks"
    else:
        rack = cl.rack_of_server if cl.racked else np.zeros(S, dtype=np.int64)
        # racks one after the other (each dealt over every part), servers by make-up inside
        order = np.lexsort((np.arange(S), lnsum, -nfree, rack))
        part = np.empty(S, dtype=np.int64)
        part[order] = _snake(S, k)
        scheme = "rack-slices" if cl.racked else "servers"
    return [np.flatnonzero(part == p) for p in range(k)], scheme


def _deal_jobs(
    instance: RoundInstance, admitted: Sequence[int], servers: list[np.ndarray], balanced: bool
) -> list[list[int]] | None:
    cl = instance.cluster
    k = len(servers)
    free = cl.state == GpuState.FREE
    part_of_server = np.empty(cl.num_servers, dtype=np.int64)
    for p, s in enumerate(servers):
        part_of_server[s] = p
    slack = np.bincount(part_of_server[cl.server_of[free]], minlength=k).astype(np.int64)
    out: list[list[int]] = [[] for _ in range(k)]
    todo = list(admitted)
    if moving_is_charged(instance):
        rest = []
        for i in todo:
            job = instance.jobs[i]
            p = -1
            if job.placement is not None:
                try:
                    pos = cl.positions(job.placement)
                except KeyError:
                    pos = np.zeros(0, dtype=np.int64)
                parts = np.unique(part_of_server[cl.server_of[pos]]) if pos.size else np.zeros(0)
                if parts.size == 1 and slack[int(parts[0])] >= job.demand:
                    p = int(parts[0])
            if p >= 0:
                out[p].append(i)
                slack[p] -= job.demand
            else:
                rest.append(i)
        todo = rest
    tkey: dict[tuple[Any, ...], int] = {}
    for i in todo:
        j = instance.jobs[i]
        tkey.setdefault((j.perfclass, j.demand, tuple(j.locality)), len(tkey))
    count = np.zeros((max(len(tkey), 1), k), dtype=np.int64)

    def key(i: int) -> tuple[int, int, int]:
        j = instance.jobs[i]
        return (-j.demand, tkey[(j.perfclass, j.demand, tuple(j.locality))], i)

    for i in sorted(todo, key=key):
        j = instance.jobs[i]
        d = j.demand
        t = tkey[(j.perfclass, d, tuple(j.locality))]
        fits = slack >= d
        if not fits.any():
            return None
        cand = fits
        if balanced:
            c = count[t]
            least = fits & (c == c[fits].min())
            cand = least
        p = int(np.flatnonzero(cand)[np.argmax(slack[cand])])
        out[p].append(i)
        slack[p] -= d
        count[t, p] += 1
    return [sorted(x) for x in out]


def partition_round(
    instance: RoundInstance,
    admitted: Sequence[int],
    k: int,
    *,
    factors: Mapping[str, np.ndarray] | None = None,
) -> Partition:
    """Split servers and the ``admitted`` jobs into ``k`` parts of the same make-up.

    See the module docstring for the rules.  Every part's job demand fits its free GPUs; the
    number of parts may end up below ``k`` (``Partition.k``) when there are fewer servers or
    dealing the jobs fails.

    Examples
    --------
    >>> from pal_opt.generate import generate_instance
    >>> from pal_opt.admission import admit
    >>> inst = generate_instance(16, 4, 30, seed=0)
    >>> part = partition_round(inst, admit(inst), 2)
    >>> part.k, [len(s) for s in part.servers]
    (2, [8, 8])
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise OptionError(f"k must be a positive integer, got {k!r}")
    if factors is None:
        factors = binned_factors(instance.cluster, instance.params.binning)
    kk = int(min(k, instance.cluster.num_servers))
    while kk >= 1:
        servers, scheme = _deal_servers(instance, factors, kk)
        for balanced in (True, False):
            jobs = _deal_jobs(instance, admitted, servers, balanced)
            if jobs is not None:
                cl = instance.cluster
                free = cl.state == GpuState.FREE
                nf = tuple(int(free[np.isin(cl.server_of, s)].sum()) for s in servers)
                return Partition(tuple(servers), tuple(tuple(x) for x in jobs), int(k), scheme,
                                 "balanced" if balanced else "largest-first", nf)
        kk -= 1
    raise AssertionError("one part always holds the admitted jobs")  # pragma: no cover


# ------------------------------------------------------------------------ tasks
def _solve_part(sub: RoundInstance, job_ids: list[JobId], opts: dict[str, Any], measure: bool) -> tuple[PlacementResult, PeakMemory | None]:
    """One part (runs on a worker)."""
    if measure:
        return measure_peak(solve_ilp, sub, jobs=job_ids, binning="none", **opts)
    return solve_ilp(sub, jobs=job_ids, binning="none", **opts), None


def _whole_lp_bound(
    instance: RoundInstance, admitted: tuple[int, ...], factors: Mapping[str, np.ndarray],
    limits: tuple[float | None, float | None], measure: bool,
) -> tuple[float | None, float, PeakMemory | None, str]:
    """The whole round's bound (runs on a worker) and where it came from: ``limits`` are its
    time limit and deadline (None: none); no bound when the deadline comes first.

    Above :data:`~pal_opt.ilp.scale.LARGE_ROUND_GPUS` free GPUs, where the flow-free relaxation
    applies (no GPU types, no charged moves; racked clusters included), its LP is solved: it is
    valid (``formulations/round_ilp.md`` §11) and, unlike the program's LP, takes seconds at
    8,192 GPUs (2.2 s on a racked 1,024 × 8 round against about a minute to build and solve the
    program's LP).  Otherwise the LP relaxation of the round program, or of the stage program
    when an admitted job has pipeline stages (the round program prices a pipeline above its
    pace: its relaxation is no bound then)."""
    time_limit, deadline = limits

    def run() -> tuple[float | None, float, str]:
        from .backends.highs import HighsBackend
        from .formulation import build_formulation

        t0 = time.perf_counter()
        if not HighsBackend.is_available():
            return None, 0.0, "none (HiGHS unavailable)"
        clock = Deadline(math.inf if deadline is None else deadline)
        opts = SolveOptions(time_limit=time_limit, deadline=deadline)
        staged = has_pipelines(instance, admitted)
        flow_free = not staged and instance.free_gpus > LARGE_ROUND_GPUS and relaxation_applies(instance, list(admitted))
        try:
            if flow_free:
                b, _ = flow_free_bound(instance, admitted, factors, HighsBackend, opts)
            elif staged:
                b = HighsBackend().relaxation_bound(build_stage_round(instance, admitted, factors).program, opts)
            else:
                form = build_formulation(instance, admitted, factors=factors, deadline=clock if clock.limited else None)
                b = HighsBackend().relaxation_bound(form, opts)
        except TimeLimitReached:
            b = None
        source = ("the flow-free relaxation of the whole round (HiGHS dual simplex)" if flow_free
                  else "LP relaxation of the whole round's stage program (HiGHS dual simplex)" if staged
                  else "LP relaxation of the whole round (HiGHS dual simplex)")
        return b, time.perf_counter() - t0, source if b is not None else f"none ({source} stopped early)"

    if measure:
        (b, s, src), mem = measure_peak(run)
        return b, s, mem, src
    b, s, src = run()
    return b, s, None, src


def solve_partitioned(
    instance: RoundInstance,
    k: int,
    *,
    backend: str | None = None,
    time_limit: float | None = None,
    gap: float | None = None,
    executor: Any = None,
    admission: str | None = None,
    jobs: Sequence[JobId] | None = None,
    binning: str | None = None,
    bound: str = "lp",
    bound_time_limit: float | None = None,
    threads: int | None = None,
    warm_start: bool = True,
    deterministic: bool = True,
    backend_params: Mapping[str, Any] | None = None,
    deadline: float | None = None,
) -> PlacementResult:
    """Solve a round as ``k`` parts of the same make-up, in parallel, with a whole-round bound.

    Parameters
    ----------
    instance, k
        The whole round, and the number of parts (fewer when there are fewer servers or the jobs cannot be dealt).
    backend, threads, warm_start, deterministic, backend_params
        Passed to :func:`pal_opt.ilp.solve_ilp` for every part.
    time_limit, gap
        Per part: the time limit of its solve and the relative gap target (the combined gap
        against the whole-round bound adds what partitioning costs; see the module docstring).
    executor
        Where the parts run: ``None`` (a local process pool of ``min(k + 1, CPUs)`` workers), ``"serial"``, a
        Dask address / ``Client`` / cluster, or an :class:`~concurrent.futures.Executor` (:func:`~pal_opt.parallel.make_executor`).
    admission, jobs, binning
        Admission of the whole round (``"prefix"`` by default, ``"backfill"``, or explicit ids)
        and its binning mode (default ``instance.params.binning``; the parts use its factors).
    bound, bound_time_limit
        ``"lp"`` (the whole round's LP relaxation, valid: module docstring) or ``"none"``; its limit.
    deadline
        A ``time.monotonic()`` value for the parts and the bound (:func:`_run_parts`).

    Returns
    -------
    PlacementResult
        ``method="ilp"``, ``admission`` the whole round's rule, ``objective`` priced on the whole
        round, ``bound`` the whole-round bound and ``gap`` against it; status OPTIMAL only
        when the gap is within :data:`~pal_opt.ilp.solve.OPTIMALITY_TOL`, FEASIBLE otherwise.
        ``info["partition"]`` describes the parts (servers, GPUs, jobs, per-part objective,
        bound, status, seconds and peak memory when measured).

    Progress: the module docstring.

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C, plainly: unlike :func:`~pal_opt.ilp.solve_ilp` nothing is kept (one part's
        best placement is not a placement of the round).
    """
    check_ilp_options(time_limit, gap, threads, warm_start, deterministic, False, backend_params, deadline)
    _check_bound(bound, bound_time_limit)
    t0 = time.perf_counter()
    setup = prepare_round(instance, binning, backend, admission, jobs)
    time_limit, bound_time_limit = _within(deadline, time_limit), _within(deadline, bound_time_limit)
    opts: dict[str, Any] = dict(backend=setup.backend.name, time_limit=time_limit, gap=gap, threads=threads,
                                warm_start=warm_start, deterministic=deterministic,
                                **({"backend_params": dict(backend_params)} if backend_params else {}))
    if setup.demand > instance.free_gpus or not setup.admitted or has_types(instance):
        return _solve_whole(instance, setup, jobs, k, opts)
    part = partition_round(instance, setup.admitted, k, factors=setup.factors)
    subs = [part_instance(instance, setup.factors, s, js, f"{instance.name or 'round'}-part{p}of{part.k}")
            for p, (s, js) in enumerate(zip(part.servers, part.jobs, strict=True))]
    build_seconds = time.perf_counter() - t0
    # None: a pool for this call; an address or cluster: a client for this call (closed in
    # _run_parts); executors, clients and handles passed in stay open
    handle: ExecutorHandle = make_executor(executor, workers=min(part.k + 1, _cpus()) if executor is None else None,
                                           connect_timeout=_connect_seconds(time_limit))
    outs, lp, run = _run_parts(handle, instance, setup, part, subs, opts, bound == "lp", bound_time_limit, deadline)
    info = run_info(setup, time_limit=time_limit, gap=gap, threads=threads, deterministic=deterministic,
                    warm_start=warm_start)
    return _merged_result(instance, setup, part, subs, outs, lp, info, run, build_seconds)


def _connect_seconds(time_limit: float | None) -> float | None:
    """Seconds to wait for a Dask scheduler: what the time limit leaves for the parts (already cut
    to the deadline), at most :data:`~pal_opt.parallel.CONNECT_SECONDS`; None without a limit."""
    return None if time_limit is None else min(CONNECT_SECONDS, max(time_limit, 0.05))


def _check_bound(bound: Any, bound_time_limit: Any) -> None:
    """The bound options, the limit checked also where it is not read (the whole round solved
    as one, ``bound="none"``)."""
    if bound not in BOUND_MODES:
        raise OptionError(f"unknown bound {bound!r}; choose one of {', '.join(BOUND_MODES)}")
    check_time_limit(bound_time_limit, "bound_time_limit")


def _within(deadline: float | None, limit: float | None) -> float | None:
    """``limit`` cut to the time ``deadline`` leaves, less :data:`MERGE_SECONDS` (at least 0.05 s)."""
    if deadline is None:
        return limit
    left = max(Deadline(deadline).left() - MERGE_SECONDS, 0.05)
    return left if limit is None else min(limit, left)


def _solve_whole(
    instance: RoundInstance, setup: RoundSetup, jobs: Sequence[JobId] | None, k: int, opts: dict[str, Any]
) -> PlacementResult:
    """Nothing to split (the direct solve reports it: INFEASIBLE, or an empty OPTIMAL round), or a
    round with GPU types, solved whole."""
    res = solve_ilp(instance, binning=setup.binning, admission=None if jobs is not None else setup.admission,
                    jobs=jobs, **opts)
    res.info["partition"] = {"k": 1, "k_requested": k}
    return res


def _merged_result(
    instance: RoundInstance,
    setup: RoundSetup,
    part: Partition,
    subs: list[RoundInstance],
    outs: list[tuple[PlacementResult, PeakMemory | None]],
    lp: tuple[float | None, float, PeakMemory | None, str] | None,
    info: dict[str, Any],
    run: dict[str, Any],
    build_seconds: float,
) -> PlacementResult:
    """The round's result from its parts' (``run`` describes how they ran): the merged placement
    priced on the whole round, the whole-round bound and the gap against it."""
    placements, parts_info, bound_sum = _merge_parts(instance, setup, part, subs, outs)
    summary = evaluate(instance, placements, setup.factors)
    whole_bound = _whole_bound(part, outs, lp, info)
    if whole_bound is not None:
        whole_bound = min(whole_bound, summary.cost)
    rgap = relative_gap(summary.cost, whole_bound, summary.gpus)
    if part.k == 1:  # the single part is the whole round: same program, same verdict
        status, msg = outs[0][0].status, outs[0][0].message
    else:
        status = Status.OPTIMAL if rgap is not None and rgap <= OPTIMALITY_TOL else Status.FEASIBLE
        msg = "" if status == Status.OPTIMAL else (
            f"{part.k} parts solved by {setup.backend.name}; gap against the whole round's LP relaxation")
    if part.k < part.k_requested:  # parts=1000000 on 16 servers: say it was not what was asked
        msg = (msg + "; " if msg else "") + (f"{part.k} part{'s' * (part.k != 1)}, not the {part.k_requested:,} asked: "
                                             "the round splits into no more")
    wall = run.pop("parts_wall_seconds")
    info["partition"] = {**run, "parts": parts_info, "parts_bound_sum": bound_sum, "parts_wall_seconds": wall}
    for key in ("highs_crashes", "cbc_crashes"):  # survived, in the parts' own processes
        crashes = sum(p[key] for p in parts_info)
        if crashes:
            info[key] = crashes
    info["parts_bound_sum"] = bound_sum
    return priced_result(
        instance, placements, setup.factors, method="ilp", status=status, solve_seconds=wall,
        admission=setup.admission, bound=whole_bound, gap=rgap, build_seconds=build_seconds,
        backend=setup.backend.name, backend_version=setup.backend.version(), message=msg, info=info,
    )


def _run_parts(
    handle: ExecutorHandle,
    instance: RoundInstance,
    setup: RoundSetup,
    part: Partition,
    subs: list[RoundInstance],
    opts: dict[str, Any],
    lp_bound: bool,
    bound_time_limit: float | None,
    deadline: float | None = None,
) -> tuple[list[tuple[PlacementResult, PeakMemory | None]], tuple[float | None, float, PeakMemory | None, str] | None,
           dict[str, Any]]:
    """Solve the parts, and (with ``lp_bound`` and more than one part) the whole round's LP
    relaxation, on ``handle``, which is closed afterwards; also returns how they ran.  A part
    interrupted by Ctrl-C is a placement of that part only, not of the round: the partitioned
    solve keeps nothing.

    With a ``deadline`` and a local executor (serial or a process pool, which share this
    machine's monotonic clock), every part and the LP bound get the deadline less
    :data:`MERGE_SECONDS` as their own, so the pool's start counts (on Dask only their time
    limits were cut, when handed out).  Shutting a pool down (its workers exit) comes after:
    about 1-2 s more on two busy cores."""
    measure = handle.kind != "serial"
    bound_deadline = None
    if deadline is not None and handle.kind in ("serial", "process"):
        opts = {**opts, "deadline": deadline - MERGE_SECONDS}
        bound_deadline = opts["deadline"]
    t1 = time.perf_counter()
    try:
        bfut = None
        if part.k > 1 and lp_bound:
            with progress.adapted(_task_fields("whole-round bound")):  # "serial": it runs here, now
                bfut = handle.submit(_whole_lp_bound, instance, tuple(setup.admitted), dict(setup.factors),
                                     (bound_time_limit, bound_deadline), measure)
        futs = []
        for p, (sub, js) in enumerate(zip(subs, part.jobs, strict=True)):
            with progress.adapted(_task_fields(f"part {p + 1} of {part.k}")):
                futs.append(handle.submit(_solve_part, sub, [instance.jobs[i].id for i in js], opts, measure))
        done = handle.results(futs if bfut is None else [*futs, bfut], on_done=_parts_done(part.k))
        outs, lp = done[:len(futs)], (done[-1] if bfut is not None else None)
    except BaseException as exc:
        # the parts not started are not run, and on a Ctrl-C a local pool's workers are stopped
        # (:meth:`ExecutorHandle.close`); before, every queued part was solved first
        interrupted = isinstance(exc, (KeyboardInterrupt, SolveInterrupted))
        handle.close(cancel=True, stop=interrupted)
        if isinstance(exc, SolveInterrupted):
            raise KeyboardInterrupt from None
        raise
    handle.close()
    run = {"k": part.k, "k_requested": part.k_requested, "scheme": part.scheme, "job_dealing": part.job_dealing,
           "executor": handle.kind, "workers": handle.workers, "parts_wall_seconds": time.perf_counter() - t1}
    return outs, lp, run


def _parts_done(k: int) -> Callable[[list[bool]], None]:
    """What :meth:`ExecutorHandle.results` calls as the tasks end: a progress report
    (:mod:`pal_opt.progress`) of the parts solved, ``parts_done`` of ``parts`` (``k``), and of the
    whole-round bound when it is one of the tasks (the one after the ``k`` parts)."""

    def tell(done: list[bool]) -> None:
        solved = sum(done[:k])
        stage = f"{solved} of {k} parts solved"
        if len(done) > k:
            stage += ", whole-round bound " + ("computed" if done[k] else "computing")
        progress.report(stage=stage, parts_done=solved, parts=k)

    return tell


def _task_fields(task: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A report from a task running in this thread (the ``"serial"`` executor) as the partitioned
    solve shows it: its stage named after the task, without its solver's incumbent, bound and
    gap, which are that part's (or the bound's program's), not the round's."""

    def adapt(fields: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in fields.items() if k not in ("incumbent", "bound", "gap")}
        if fields.get("stage"):
            out["stage"] = f"{task}: {fields['stage']}"
        return out

    return adapt


def _merge_parts(
    instance: RoundInstance,
    setup: RoundSetup,
    part: Partition,
    subs: list[RoundInstance],
    outs: list[tuple[PlacementResult, PeakMemory | None]],
) -> tuple[dict[JobId, tuple[int, ...]], list[dict[str, Any]], float | None]:
    """The merged placement (queue order), a description of each part and the sum of the parts'
    own bounds (None if one has none)."""
    placements: dict[JobId, tuple[int, ...]] = {}
    parts_info: list[dict[str, Any]] = []
    bound_sum: float | None = 0.0
    for p, ((res, mem), sub) in enumerate(zip(outs, subs, strict=True)):
        if res.status == Status.INFEASIBLE:
            raise BackendError(f"part {p} of the partitioned round was reported infeasible: {res.message}")
        placements.update(res.placements)
        bound_sum = None if (bound_sum is None or res.bound is None) else bound_sum + res.bound
        parts_info.append({
            "part": p,
            "servers": int(part.servers[p].size),
            "gpus": int(sub.cluster.num_gpus),
            "free_gpus": int(part.free[p]),
            "jobs": len(part.jobs[p]),
            "demand": int(sum(instance.jobs[i].demand for i in part.jobs[p])),
            "status": res.status.value,
            "objective": res.objective,
            "bound": res.bound,
            "gap": res.gap,
            "solve_seconds": res.solve_seconds,
            "build_seconds": res.build_seconds,
            "start_source": res.info.get("start_source"),
            "solver_status": res.info.get("solver_status"),
            "highs_crashes": int(res.info.get("highs_crashes", 0)),
            "cbc_crashes": int(res.info.get("cbc_crashes", 0)),
            "peak_rss": None if mem is None else mem.peak_rss,
            "seconds": None if mem is None else mem.seconds,
        })
    rank = {instance.jobs[i].id: n for n, i in enumerate(setup.admitted)}
    return dict(sorted(placements.items(), key=lambda kv: rank[kv[0]])), parts_info, bound_sum


def _whole_bound(
    part: Partition,
    outs: list[tuple[PlacementResult, PeakMemory | None]],
    lp: tuple[float | None, float, PeakMemory | None, str] | None,
    info: dict[str, Any],
) -> float | None:
    """The bound for the whole round (see the module docstring); says where it came from in ``info``."""
    if part.k == 1:
        info["bound_source"] = "the single part is the whole round: its solver bound"
        info["bound_seconds"] = 0.0
        return outs[0][0].bound
    if lp is None:
        info["bound_source"] = "none (bound='none')"
        return None
    whole_bound, bsec, bmem, info["bound_source"] = lp
    info["bound_seconds"] = bsec
    info["bound_peak_rss"] = None if bmem is None else bmem.peak_rss
    return whole_bound


def _cpus() -> int:
    return max(1, os.cpu_count() or 1)
