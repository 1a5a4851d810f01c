"""``solve_ilp``: admit, build, warm-start, solve, decode, price, report.

Admission
---------
``"prefix"``
    The longest queue prefix whose total demand fits the free GPUs; all must be placed.
``"backfill"``
    The lexicographically first maximal set in queue order.  Any set of jobs whose total
    demand fits the free GPUs can be placed (a gang may span the cluster), so the lexicographic
    maximisation "place job 1 if possible, then job 2 if still possible, ..." needs no solver:
    a job can be added exactly when its demand fits the GPUs left, which is the greedy walk of
    :func:`pal_opt.admission.admit`.  The program then minimises cost over that fixed set.
``jobs=[ids]``
    An explicit set (admission ``"given"``); INFEASIBLE when it needs more GPUs than are free.

Prefix and backfill are therefore always feasible.

Start placements
----------------
PAL's greedy placement of the admitted jobs (its class-sorted order) and pal-opt's packing
greedy (:mod:`pal_opt.ilp.heuristic`) are priced with :mod:`pal_opt.cost`; the cheaper one is
the warm start (``info["start_source"]``) and the fallback.  With a gap target and a backend
that solves LP relaxations (HiGHS), the LP bound is computed first and the MIP is skipped when
the start placement is already within the target (``info["solver_status"]`` says so).

Ctrl-C
------
A ``KeyboardInterrupt`` while a backend translates or solves the program stops the solver
cleanly (see each backend) and is re-raised as :class:`~pal_opt.errors.SolveInterrupted`, whose
``result`` is the best placement found so far, never worse than the start placement, with
``info["interrupted"]`` set: the solver's incumbent or the start placement when cheaper
(``FEASIBLE``, with the gap when the solver had a bound; ``OPTIMAL`` if the solve ended as the
interrupt arrived), or the start placement when the solver had none (``FALLBACK``).  An interrupt before that (building the program, pricing the
starts), or a second one while a stopped solver winds down, is a plain ``KeyboardInterrupt``.

Statuses
--------
OPTIMAL when the solver proved optimality and the relative geometric-mean gap between the
repriced objective and the bound is at most :data:`OPTIMALITY_TOL`; FEASIBLE with the gap
otherwise; INFEASIBLE for an explicit set that does not fit; FALLBACK when the solver stopped
without a solution, with the start placement.  When the solver's incumbent costs more than the
start placement (CP-SAT may ignore a hint), the start placement is returned (FEASIBLE,
``info["incumbent"]`` names it), so the result is never worse than PAL on the admitted set.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..admission import ADMISSION_MODES, admit
from ..binning import BINNING_MODES, binned_factors
from ..cost import evaluate, relative_gap
from ..errors import OptionError, SolveInterrupted
from ..model import GpuState, JobId, RoundInstance
from ..policies.base import jobs_to_terminate
from ..result import PlacementResult, Status
from .backends import BackendAbandoned, BackendInterrupted, SolveOptions, SolverStatus, get_backend
from .decode import decode, encode
from .formulation import build_formulation
from .heuristic import start_placements

__all__ = ["solve_ilp", "resolve_admission", "OPTIMALITY_TOL"]

log = logging.getLogger(__name__)

#: Relative geometric-mean gap under which a proven solve is reported OPTIMAL.
OPTIMALITY_TOL = 1e-6


def resolve_admission(
    instance: RoundInstance, admission: str | None, jobs: Sequence[JobId] | None
) -> tuple[list[int], str]:
    """Job indices (queue order) to place and the admission label.

    Raises
    ------
    OptionError
        For an unknown mode, both ``admission`` and ``jobs``, or bad job ids.
    """
    if jobs is not None:
        if admission is not None:
            raise OptionError("give either admission= or jobs=, not both")
        if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
            raise OptionError(f"jobs must be a sequence of job ids, got {type(jobs).__name__}")
        index = {j.id: i for i, j in enumerate(instance.jobs)}
        by_str = {str(j.id): i for i, j in enumerate(instance.jobs)}
        out: list[int] = []
        seen: set[int] = set()
        for jid in jobs:
            if isinstance(jid, np.integer):
                jid = int(jid)
            if not isinstance(jid, (int, str)) or isinstance(jid, bool):
                raise OptionError(f"job id {jid!r} is not an int or str")
            i = index.get(jid)
            if i is None:
                i = by_str.get(str(jid))
            if i is None:
                raise OptionError(f"job {jid!r} is not in the queue")
            if i in seen:
                raise OptionError(f"job {jid!r} is listed twice in jobs=")
            seen.add(i)
            out.append(i)
        return sorted(out), "given"
    mode = "prefix" if admission is None else admission
    if mode not in ADMISSION_MODES:
        raise OptionError(f"unknown admission {mode!r}; choose one of {', '.join(ADMISSION_MODES)} (or pass jobs=)")
    return admit(instance, mode), mode


def _check_options(time_limit: Any, gap: Any, threads: Any, warm_start: Any, deterministic: Any) -> None:
    if time_limit is not None and (
        isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not (time_limit > 0)
        or not math.isfinite(time_limit)
    ):
        raise OptionError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if gap is not None and (
        isinstance(gap, bool) or not isinstance(gap, (int, float)) or not math.isfinite(gap) or gap < 0
    ):
        raise OptionError(f"gap must be a finite number >= 0, got {gap!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1):
        raise OptionError(f"threads must be a positive integer, got {threads!r}")
    for label, v in (("warm_start", warm_start), ("deterministic", deterministic)):
        if not isinstance(v, bool):
            raise OptionError(f"{label} must be True or False, got {v!r}")


def _result(
    instance: RoundInstance,
    placements: dict[JobId, tuple[int, ...]],
    factors: Mapping[str, np.ndarray],
    **kw: Any,
) -> PlacementResult:
    summary = evaluate(instance, placements, factors)
    return PlacementResult(
        placements=placements,
        method="ilp",
        objective=summary.cost,
        geomean_slowdown=summary.geomean,
        gpus_used=summary.gpus,
        jobs_to_terminate=jobs_to_terminate(instance, placements),
        spanning=summary.spanning,
        **kw,
    )


def solve_ilp(
    instance: RoundInstance,
    *,
    binning: str | None = None,
    backend: str | None = None,
    admission: str | None = None,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    jobs: Sequence[JobId] | None = None,
    warm_start: bool = True,
    deterministic: bool = True,
) -> PlacementResult:
    """Place one round with the exact integer program.

    Parameters
    ----------
    instance
        The round.
    binning
        Variability binning mode; default ``instance.params.binning``.  The program uses the
        same binned factors as the greedy policies.
    backend
        ``"highs"``, ``"cpsat"`` or ``"cbc"``; default: the first installed in that order.
    admission
        ``"prefix"`` (default) or ``"backfill"`` (see the module docstring).
    time_limit
        Seconds for the solver (None: until proven optimal).
    gap
        Target relative gap of the geometric-mean slowdown; the solver stops at the absolute
        gap ``D · ln(1 + gap)`` with ``D`` the admitted GPU demand.  None: prove optimality.
    threads
        Solver threads (None: the backend's default).
    jobs
        Explicit job ids to place instead of an admission rule.
    warm_start
        Start the solver from the cheaper of PAL's greedy placement of the admitted jobs and
        the packing greedy (:mod:`pal_opt.ilp.heuristic`).
    deterministic
        Same instance and options give the same placement (see the backends).

    Returns
    -------
    PlacementResult
        ``objective`` is always the round cost recomputed by :func:`pal_opt.cost.evaluate`;
        ``bound`` comes from the solver.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
    >>> c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0, 1.3, 1.0, 1.0]})
    >>> inst = RoundInstance(c, (Job(1, 2, "classA"), Job(2, 1, "classA")), RoundParams(binning="none"))
    >>> r = solve_ilp(inst)
    >>> r.status.value, r.placements[1], round(r.geomean_slowdown, 6)
    ('optimal', (2, 3), 1.0)
    """
    _check_options(time_limit, gap, threads, warm_start, deterministic)
    mode = binning or instance.params.binning
    if mode not in BINNING_MODES:
        raise OptionError(f"unknown binning mode {mode!r}; choose one of {', '.join(BINNING_MODES)}")
    cls = get_backend(backend)
    admitted, label = resolve_admission(instance, admission, jobs)
    factors = binned_factors(instance.cluster, mode)
    info: dict[str, Any] = {"binning": mode, "time_limit": time_limit, "gap_target": gap, "threads": threads,
                            "deterministic": deterministic, "warm_start": warm_start}
    common = dict(admission=label, backend=cls.name, backend_version=cls.version(), info=info)
    demand = sum(instance.jobs[i].demand for i in admitted)
    free = instance.free_gpus
    if demand > free:
        st = instance.cluster.state
        names = ", ".join(str(instance.jobs[i].id) for i in admitted[:20])
        more = f" and {len(admitted) - 20} more" if len(admitted) > 20 else ""
        msg = (f"jobs {names}{more} need {demand} GPUs but only {free} are free "
               f"({int((st == GpuState.BUSY).sum())} busy, {int((st == GpuState.FAILED).sum())} failed)")
        return PlacementResult(placements={}, method="ilp", status=Status.INFEASIBLE, objective=math.inf,
                               geomean_slowdown=math.inf, gpus_used=0, solve_seconds=0.0, message=msg,
                               **common)  # type: ignore[arg-type]
    if not admitted:
        return _result(instance, {}, factors, status=Status.OPTIMAL, solve_seconds=0.0, bound=0.0, gap=0.0,
                       **common)  # type: ignore[arg-type]

    t0 = time.perf_counter()
    form = build_formulation(instance, admitted, factors=factors)
    build_seconds = time.perf_counter() - t0
    info.update(form.summary())

    # start placements: PAL's greedy and the packing greedy; the cheapest is the warm start and
    # the fallback
    starts = start_placements(form)
    greedy: dict[JobId, tuple[int, ...]] | None = None
    gcost = math.inf
    source = None
    for name, placement in starts.items():
        c = evaluate(instance, placement, factors).cost
        info[f"start_{name}_objective"] = c
        if c < gcost - 1e-12:
            greedy, gcost, source = placement, c, name
    info["start_source"] = source
    start = None
    if warm_start and greedy is not None and cls.supports_warm_start:
        try:
            start = encode(form, greedy)
        except ValueError as exc:  # pragma: no cover - start placements are valid
            log.warning("warm start not encodable: %s", exc)

    abs_gap = demand * math.log1p(gap) if gap else 0.0
    opts = SolveOptions(time_limit=time_limit, abs_gap=abs_gap, threads=threads, deterministic=deterministic)
    solver = cls()
    lp_bound, lp_seconds = None, 0.0

    def interrupted_with_start(stage: str, seconds: float) -> SolveInterrupted:
        """A Ctrl-C before the solver had anything: the start placement, flagged."""
        if greedy is None:  # pragma: no cover - start placements always exist for admitted jobs
            return SolveInterrupted(None)
        info["interrupted"] = True
        res = _result(instance, dict(greedy), factors, status=Status.FALLBACK, solve_seconds=seconds,
                      build_seconds=build_seconds, bound=lp_bound,
                      message=f"interrupted while {cls.name} {stage}; the start placement ({source}) is returned",
                      **common)  # type: ignore[arg-type]
        res.gap = relative_gap(res.objective, lp_bound, demand)
        return SolveInterrupted(res)

    if greedy is not None and cls.supports_relaxation and abs_gap > 0:
        # with a gap target: the LP relaxation alone is cheap and tight, so stop here when the
        # start placement is already close enough (proving optimality needs the MIP anyway)
        t1 = time.perf_counter()
        try:
            lp_bound = solver.relaxation_bound(form, opts)
        except BackendAbandoned:
            raise KeyboardInterrupt from None
        except KeyboardInterrupt:  # BackendInterrupted, or a Ctrl-C while the LP was translated
            raise interrupted_with_start("solved the LP relaxation", time.perf_counter() - t1) from None
        lp_seconds = time.perf_counter() - t1
        info["relaxation_bound"] = lp_bound
        info["relaxation_seconds"] = lp_seconds
        if lp_bound is not None and gcost - lp_bound <= max(abs_gap, demand * math.log1p(OPTIMALITY_TOL)):
            lp_only = min(lp_bound, gcost)
            rgap = relative_gap(gcost, lp_only, demand)
            proven = rgap is not None and rgap <= OPTIMALITY_TOL
            info["solver_status"] = "start placement within the gap of the LP relaxation"
            info["incumbent"] = f"start ({source})"
            return _result(instance, dict(greedy), factors, status=Status.OPTIMAL if proven else Status.FEASIBLE,
                           solve_seconds=lp_seconds, build_seconds=build_seconds, bound=lp_only, gap=rgap,
                           message="" if proven else f"{cls.name}: start placement within the gap of the LP bound",
                           **common)  # type: ignore[arg-type]
        if time_limit is not None:
            opts = replace(opts, time_limit=max(time_limit - lp_seconds, 1e-3))
    interrupted = False
    try:
        sol = solver.solve(form, opts, start)
    except BackendAbandoned:
        raise KeyboardInterrupt from None
    except KeyboardInterrupt as exc:  # BackendInterrupted, or a Ctrl-C while the model was translated
        solution = exc.solution if isinstance(exc, BackendInterrupted) else None
        if solution is None:
            raise interrupted_with_start("solved", lp_seconds) from None
        sol, interrupted = solution, True
        info["interrupted"] = True
    res = _finish(instance, form, factors, sol, greedy, gcost, source, lp_bound, lp_seconds, build_seconds, demand,
                  cls.name, common)
    if interrupted:
        res.message = f"interrupted: {res.message}" if res.message else "interrupted"
        raise SolveInterrupted(res)
    return res


def _finish(
    instance: RoundInstance,
    form: Any,
    factors: Mapping[str, np.ndarray],
    sol: Any,
    greedy: dict[JobId, tuple[int, ...]] | None,
    gcost: float,
    source: str | None,
    lp_bound: float | None,
    lp_seconds: float,
    build_seconds: float,
    demand: int,
    cls_name: str,
    common: dict[str, Any],
) -> PlacementResult:
    """The result of a finished (or interrupted) backend solve: decode, price, compare with the
    start placement, report the gap."""
    info = common["info"]
    info.update(sol.info)
    info["solver_status"] = sol.message
    info["translate_seconds"] = sol.translate_seconds
    info["program_objective"] = sol.objective
    solve_seconds = lp_seconds + sol.seconds
    bound = sol.bound
    if lp_bound is not None:
        bound = lp_bound if bound is None else max(bound, lp_bound)

    if sol.values is None:
        if sol.status == SolverStatus.INFEASIBLE:
            from ..errors import BackendError

            raise BackendError(f"{cls_name} reported an always-feasible round program infeasible")
        res = _result(instance, dict(greedy or {}), factors, status=Status.FALLBACK, solve_seconds=solve_seconds,
                      build_seconds=build_seconds, bound=bound,
                      message=f"{cls_name} found no solution ({sol.message}); the greedy placement "
                              f"({source}) of the admitted jobs is returned", **common)  # type: ignore[arg-type]
        res.gap = relative_gap(res.objective, bound, demand) if greedy else None
        return res

    placements = decode(form, sol.values)
    cost = evaluate(instance, placements, factors).cost
    info["incumbent"] = "solver"
    if greedy is not None and gcost < cost - 1e-12:
        placements, cost = dict(greedy), gcost
        info["incumbent"] = f"start ({source})"
    if bound is not None:
        bound = min(bound, cost)
    rgap = relative_gap(cost, bound, demand)
    proven = sol.status == SolverStatus.OPTIMAL and rgap is not None and rgap <= OPTIMALITY_TOL
    return _result(instance, placements, factors, status=Status.OPTIMAL if proven else Status.FEASIBLE,
                   solve_seconds=solve_seconds, build_seconds=build_seconds, bound=bound, gap=rgap,
                   message="" if proven else f"{cls_name}: {sol.message}", **common)  # type: ignore[arg-type]
