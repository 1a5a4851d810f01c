"""Failure repair: re-place the jobs that lost a GPU, keeping every other job where it is.

:func:`repair` takes a round, the placement in force and the GPUs that failed or are drained,
builds the repair round (:mod:`pal_opt.inforce`: failed GPUs out of service, the placed jobs
running on their GPUs in force, queued jobs left out: a repair starts no new job) and

1. admits the **displaced** jobs (those holding a GPU out of service) in queue order, each that
   still fits the GPUs left free once the unaffected jobs keep theirs (with GPU types: GPUs of
   its types, all admitted jobs claiming theirs together); a job that allows several GPU counts
   (``allowed_counts``) is re-placed at its demand (or at the count it runs on, when an earlier
   repair shrank it) if that fits, else at the largest allowed count below it that fits
   (:func:`~pal_opt.inforce.repair_counts`: a repair never grows a job).  A displaced
   job that fits at none is left out with its reason (``PlacementResult.unplaceable``);
2. solves the **reduced round program** (:func:`pal_opt.ilp.solve_ilp`): the unaffected jobs'
   GPUs are taken out of the cluster (marked busy) and their costs are a constant, and the
   admitted displaced jobs are placed on the GPUs left, at least cost.  Its bound plus that
   constant is a bound on the round's cost over every placement that keeps the unaffected jobs,
   so an optimal reduced solve is a repair proven optimal among them (status, bound and gap as
   ``solve`` reports them, on the whole round);
3. with ``allow_migration=COST``, solves the **whole round program** once more, the unaffected
   jobs now free to move at the migration price ``COST`` per GPU (the migration cost term,
   :mod:`pal_opt.cost.migration`, round-cost units; on top of the round's restart cost, if any),
   starting from the answer of step 2.  The solver returns its start when it finds nothing
   cheaper, so the total cost is never above the answer that keeps the unaffected jobs; a move
   it makes lowers the round's cost by more than what moving costs.  Then every moved job whose
   GPUs in force are still unused goes back to them if its move saved no more than it cost.

Both answers are priced on the same repair round (with the migration price, when given), and
the checker (:mod:`pal_opt.check`, admission rule ``"repair"``) verifies them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .admission import unplaceable
from .binning import binned_factors
from .cost import evaluate, relative_gap
from .errors import OptionError, SolveInterrupted, counted
from .gputypes import claim_all, free_per_type, has_types, type_groups
from .inforce import RepairRound, in_force_placement, repair_counts, repair_info, repair_round
from .model import GpuState, Job, JobId, RoundInstance, keeps_placement, require_instance
from .options import SolveOptions, options_from
from .result import PlacementResult, Status, priced_result

__all__ = [
    "REPAIR_OPTIONS", "repair", "repair_with_round", "repair_round_result", "reduced_round", "repair_counts", "sized_round"]

log = logging.getLogger(__name__)

#: The :class:`~pal_opt.options.SolveOptions` a repair accepts (those of the exact methods that
#: do not choose the jobs).
REPAIR_OPTIONS: frozenset[str] = frozenset(
    {"binning", "backend", "time_limit", "gap", "threads", "warm_start", "deterministic", "backend_params"})


def repair(
    instance: RoundInstance,
    placement: Any,
    failed: Iterable[int],
    *,
    allow_migration: float | None = None,
    options: SolveOptions | None = None,
    **kwargs: Any,
) -> PlacementResult:
    """Repair the placement in force after GPUs failed (module docstring).

    Parameters
    ----------
    instance
        The round the placement was made for.
    placement
        The placement in force: ``{job id: [GPU ids]}``, a placement file's dict or a
        :class:`~pal_opt.result.PlacementResult` (:func:`pal_opt.inforce.in_force_placement`).
    failed
        GPU ids (the round's) that failed or are drained.
    allow_migration
        None (default): every unaffected job keeps its GPUs.  A positive number: unaffected jobs
        may move, each at this price per GPU (round-cost units, as ``params.restart_cost``).
    options
        A :class:`~pal_opt.options.SolveOptions` with any of :data:`REPAIR_OPTIONS`, or give
        them as keyword arguments (``backend``, ``time_limit`` (s, for the whole repair),
        ``gap`` (relative gap target on the geometric-mean slowdown), ``threads``, ...).

    Returns
    -------
    PlacementResult
        Method ``"repair"``, admission ``"repair"``: the placements of every job kept or
        re-placed, priced on the repair round; ``jobs_to_terminate`` lists the jobs moved or
        left out, ``unplaceable`` the displaced jobs left out with the reason, and
        ``info["repair"]`` the failed GPUs, the migration price and the placement in force
        (:func:`pal_opt.inforce.repair_info`), the jobs displaced, re-placed and migrated, and
        how many kept their GPUs.

    Raises
    ------
    InstanceError
        A placement that does not match the round.
    OptionError
        An unknown failed GPU, a bad migration price or an option a repair does not take.
    SolveInterrupted
        On Ctrl-C while a solver runs, with the best complete repair found so far.

    Examples
    --------
    >>> from pal_opt.generate import generate_instance
    >>> from pal_opt.solve import solve
    >>> inst = generate_instance(8, 4, 12, seed=2)
    >>> placed = solve(inst, "pal")
    >>> r = repair(inst, placed, [0, 1], backend="highs")
    >>> r.status.value, any(g in (0, 1) for gs in r.placements.values() for g in gs)
    ('optimal', False)
    """
    return repair_with_round(instance, placement, failed, allow_migration=allow_migration, options=options,
                             **kwargs)[0]


def repair_with_round(
    instance: RoundInstance,
    placement: Any,
    failed: Iterable[int],
    *,
    allow_migration: float | None = None,
    options: SolveOptions | None = None,
    **kwargs: Any,
) -> tuple[PlacementResult, RoundInstance]:
    """:func:`repair`, and the repair round it was priced on (the round with the placement in
    force marked running and the failed GPUs out of service): ``check(round, result)`` holds.
    :meth:`pal_opt.RoundPolicy.repair` keeps both for the next round."""
    require_instance(instance)
    opts = _repair_options(options, kwargs)
    rr = repair_round(instance, in_force_placement(instance, placement), failed,
                      migration_per_gpu=allow_migration)
    return repair_round_result(rr, opts), rr.instance


def _repair_options(options: SolveOptions | None, kwargs: Mapping[str, Any]) -> SolveOptions:
    options = options_from(options, dict(kwargs))
    bad = options.given() - REPAIR_OPTIONS
    if bad:
        raise OptionError(f"option(s) {', '.join(sorted(bad))} do not apply to a repair")
    if options.backend_params:  # now, not only if a displaced job is re-placed by a program
        from .ilp.backends import check_backend_params

        check_backend_params(options.backend, options.backend_params)
    return options


def repair_round_result(rr: RepairRound, options: SolveOptions | None = None) -> PlacementResult:
    """The repair of a built :class:`~pal_opt.inforce.RepairRound` (see :func:`repair`)."""
    opts = options or SolveOptions()
    t0 = time.perf_counter()
    mode = opts.binning or rr.instance.params.binning
    factors = binned_factors(rr.instance.cluster, mode)
    counts, left_out = _admit_displaced(rr)
    sized = sized_round(rr, counts)
    admitted = list(counts)
    kept = _keep_repair(rr, sized, admitted, left_out, factors, opts)
    if rr.migration_per_gpu is None:
        return kept
    limit = None if opts.time_limit is None else max(opts.time_limit - (time.perf_counter() - t0), 1e-3)
    return _migration_repair(rr, sized, kept, admitted, left_out, factors, replace(opts, time_limit=limit))


# ---- step 1: which displaced jobs fit, and on how many GPUs
class _Room:
    """The GPUs left free for displaced jobs: a count, or with GPU types the free GPUs per type
    and the type groups and counts of the jobs admitted so far (admitted only if all of them can
    claim their GPUs together, :func:`pal_opt.gputypes.claim_all`)."""

    def __init__(self, rr: RepairRound) -> None:
        inst = rr.instance
        cl = inst.cluster
        free = cl.state == GpuState.FREE
        self.in_service = int(free.sum())
        held = [g for i in rr.kept for g in inst.jobs[i].placement or ()]
        self.held = len(held)
        if held:
            free[cl.positions(held)] = False
        self.cluster = cl
        self.typed = has_types(inst)
        self.free = free_per_type(cl, free) if self.typed else np.zeros(0, dtype=np.int64)
        self.left = self.in_service - self.held
        self.groups: dict[int, tuple[tuple[int, ...], ...]] = {}
        self.counts: dict[int, int] = {}

    def admit(self, i: int, job: Job, count: int) -> bool:
        """Take ``count`` GPUs for job ``i`` if they fit with the jobs admitted before."""
        if count > self.left:
            return False
        if self.typed:
            groups = {**self.groups, i: type_groups(self.cluster, job)}
            counts = {**self.counts, i: count}
            if claim_all(groups, counts, self.free) is None:
                return False
            self.groups, self.counts = groups, counts
        self.left -= count
        return True

    def reason(self, job: Job) -> str:
        """Why ``job`` fits at none of its counts."""
        given = self.in_service - self.held - self.left
        counts = repair_counts(job)
        need = counted(counts[0], "GPU") + (f" (or {', '.join(map(str, counts[1:]))})" if len(counts) > 1 else "")
        tail = (f"({self.in_service} in service, {self.held} kept by unaffected jobs, {given} given to displaced "
                "jobs before it in the queue)")
        if not self.typed:
            return f"needs {need}; {self.left} are left free {tail}"
        claimed = claim_all(self.groups, self.counts, self.free) or {}
        left = self.free - sum(claimed.values(), np.zeros_like(self.free))
        groups = type_groups(self.cluster, job)
        names = self.cluster.type_names
        most = max((int(left[list(g)].sum()) for g in groups), default=0)
        if len(groups) == 1:
            what = "types " if len(groups[0]) > 1 else "type "
            return f"needs {need} of {what}{', '.join(repr(names[k]) for k in groups[0])}; {most} are left free {tail}"
        kinds = " or ".join(repr(names[g[0]]) for g in groups)
        return f"needs {need} of type {kinds}; at most {most} of one type are left free {tail}"


def _admit_displaced(rr: RepairRound) -> tuple[dict[int, int], dict[JobId, str]]:
    """The displaced jobs to re-place (index -> GPU count, queue order) and the reason for each
    left out: the queue walked in order, a job admitted at the first of its
    :func:`repair_counts` that fits the GPUs still free (of its types, with GPU types)."""
    jobs = rr.instance.jobs
    never = unplaceable(rr.instance)
    room = _Room(rr)
    admitted: dict[int, int] = {}
    reasons: dict[JobId, str] = {}
    for i in rr.displaced:
        job = jobs[i]
        count = next((c for c in repair_counts(job) if room.admit(i, job, c)), None)
        if count is not None:
            admitted[i] = count
        else:
            reasons[job.id] = never.get(job.id) or room.reason(job)
    return admitted, reasons


def sized_round(rr: RepairRound, admitted: Mapping[int, int]) -> RepairRound:
    """``rr`` with each admitted displaced job's demand set to the count it is re-placed at, and
    each unaffected job's to the count it runs on (below its demand after an earlier repair shrank
    it): the round the solves see, in which no job grows; results are priced on ``rr`` itself."""
    inst = rr.instance
    sizes = {**{i: len(inst.jobs[i].placement or ()) for i in rr.kept}, **admitted}
    if all(inst.jobs[i].demand == c for i, c in sizes.items()):
        return rr
    jobs = tuple(replace(j, demand=sizes[i]) if sizes.get(i, j.demand) != j.demand else j
                 for i, j in enumerate(inst.jobs))
    return replace(rr, instance=RoundInstance(inst.cluster, jobs, inst.params, inst.name))


# ---- step 2: the repair that keeps every unaffected job
def reduced_round(rr: RepairRound) -> RoundInstance:
    """The round of the reduced program: the displaced jobs alone, on the repair round's cluster
    less the unaffected jobs' GPUs (marked busy).  They are not running there: each must leave
    its GPUs in force, so what moving costs it is a constant, which pricing the answer on the
    repair round adds back (:func:`_lift`); a round with pipeline jobs is then solved like any
    other (its stage program, ``formulations/pipeline_round.md``, has nothing to keep)."""
    inst = rr.instance
    cl = inst.cluster
    state = cl.state.copy()
    held = [g for i in rr.kept for g in inst.jobs[i].placement or ()]
    if held:
        state[cl.positions(held)] = GpuState.BUSY
    jobs = tuple(replace(inst.jobs[i], placement=None) for i in rr.displaced)
    return RoundInstance(cl.with_state(state), jobs, inst.params, inst.name)


def _keep_repair(rr: RepairRound, sized: RepairRound, admitted: list[int], left_out: dict[JobId, str],
                 factors: Mapping[str, np.ndarray], opts: SolveOptions) -> PlacementResult:
    """Solve the reduced round program of ``sized`` (:func:`sized_round`) and lift its answer to
    the whole round ``rr``."""
    from .ilp import solve_ilp

    ids = [rr.instance.jobs[i].id for i in admitted]
    t0 = time.perf_counter()
    reduced = reduced_round(sized)
    prep = time.perf_counter() - t0
    try:
        sub = solve_ilp(reduced, jobs=ids, **_solver_kwargs(opts))
    except SolveInterrupted as exc:
        partial = exc.result
        raise SolveInterrupted(None if not isinstance(partial, PlacementResult)
                               else _lift(rr, partial, left_out, factors, prep)) from None
    return _lift(rr, sub, left_out, factors, prep)


def _solver_kwargs(opts: SolveOptions) -> dict[str, Any]:
    kw = {k: getattr(opts, k) for k in ("binning", "backend", "time_limit", "gap", "threads", "warm_start",
                                        "deterministic")}
    kw["backend_params"] = dict(opts.backend_params)
    return kw


def _lift(rr: RepairRound, sub: PlacementResult, left_out: dict[JobId, str], factors: Mapping[str, np.ndarray],
          prep_seconds: float) -> PlacementResult:
    """The reduced program's answer as a repair of the whole round: the unaffected jobs added on
    their GPUs, the cost repriced, and the bound raised by the unaffected jobs' cost (a constant)."""
    kept = rr.in_force(rr.kept)
    placements = _queue_ordered(rr, {**kept, **sub.placements})
    res = _priced(rr, placements, factors, sub, left_out, build_seconds=sub.build_seconds + prep_seconds)
    if sub.bound is not None and math.isfinite(sub.objective):
        res.bound = sub.bound + (res.objective - sub.objective)
        res.gap = relative_gap(res.objective, res.bound, res.gpus_used)
    res.info["repair"]["mode"] = "keep"
    return res


def _queue_ordered(rr: RepairRound, placements: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, tuple[int, ...]]:
    return {j.id: placements[j.id] for j in rr.instance.jobs if j.id in placements}


def _priced(rr: RepairRound, placements: dict[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
            solved: PlacementResult, left_out: dict[JobId, str], **fields: Any) -> PlacementResult:
    """The repair result of ``placements`` on the repair round, with what ``solved`` (the solve
    behind it) reports; ``info["repair"]`` declares the inputs and counts."""
    # the solve's own cost terms price its sub-round; these placements are priced anew below
    info = {k: v for k, v in solved.info.items() if k not in ("repair", "cost_terms")}
    res = priced_result(rr.instance, placements, factors, method="repair", status=solved.status,
                        admission="repair", solve_seconds=solved.solve_seconds, backend=solved.backend,
                        backend_version=solved.backend_version, unplaceable=dict(left_out),
                        message=solved.message, info=info, **fields)
    jobs = rr.instance.jobs
    moved = set(res.jobs_to_terminate)
    res.info["repair"] = {
        **repair_info(rr),
        "kept": sum(1 for i in rr.kept if jobs[i].id not in moved),
        "displaced": [jobs[i].id for i in rr.displaced],
        "replaced": [jobs[i].id for i in rr.displaced if jobs[i].id in placements],
        "migrated": [jobs[i].id for i in rr.kept if jobs[i].id in moved],
    }
    return res


# ---- step 3: letting unaffected jobs move at a price
def _migration_repair(rr: RepairRound, sized: RepairRound, kept: PlacementResult, admitted: list[int],
                      left_out: dict[JobId, str], factors: Mapping[str, np.ndarray],
                      opts: SolveOptions) -> PlacementResult:
    """Solve the whole round program (of ``sized``, :func:`sized_round`) from the answer that
    keeps the unaffected jobs.  Without a
    gap target the target is half :data:`~pal_opt.ilp.solve.OPTIMALITY_TOL`, inside the gap under
    which a solve is reported optimal anyway: a backend that solves LP relaxations (HiGHS) then computes the LP
    bound first, so an answer stopped by the time limit has that bound at least."""
    from .ilp import solve_ilp
    from .ilp.solve import OPTIMALITY_TOL

    jobs = rr.instance.jobs
    ids = [jobs[i].id for i in sorted([*rr.kept, *admitted])]
    kw = _solver_kwargs(opts)
    if kw["gap"] is None:  # proving optimality (to the tolerance of OPTIMAL) after the LP bound is known
        kw["gap"] = OPTIMALITY_TOL / 2
    try:
        full = solve_ilp(sized.instance, jobs=ids, start=kept.placements, **kw)
    except SolveInterrupted as exc:
        partial = exc.result
        lifted = kept if not isinstance(partial, PlacementResult) else _after_migration(
            rr, kept, partial, left_out, factors)
        raise SolveInterrupted(lifted) from None
    return _after_migration(rr, kept, full, left_out, factors)


def _after_migration(rr: RepairRound, kept: PlacementResult, full: PlacementResult, left_out: dict[JobId, str],
                     factors: Mapping[str, np.ndarray]) -> PlacementResult:
    """The whole-round answer, settled (:func:`_settle`), priced, with the bound of the whole
    round program and the keeping answer's figures in ``info["repair"]``."""
    placements = _settle(rr, full.placements, factors)
    res = _priced(rr, placements, factors, full, left_out, build_seconds=kept.build_seconds + full.build_seconds)
    res.solve_seconds += kept.solve_seconds
    if res.status == Status.FALLBACK:  # the solver had nothing: its cheapest start, at worst the answer that keeps them
        res.status = Status.FEASIBLE
        moved = len(res.info["repair"]["migrated"])
        res.message = (f"{full.backend}: no placement found in time; " + (
            "the answer that keeps every unaffected job is returned" if not moved else
            f"the cheapest start placement ({full.info.get('start_source', 'greedy')}) is returned, "
            f"which moves {moved} unaffected job{'s' * (moved != 1)}"))
    if full.bound is not None:
        res.bound = min(full.bound, res.objective)
        res.gap = relative_gap(res.objective, res.bound, res.gpus_used)
    res.info["repair"].update(mode="migrate", keep_objective=kept.objective, keep_bound=kept.bound,
                              keep_status=kept.status.value)
    return res


def _settle(rr: RepairRound, placements: Mapping[JobId, tuple[int, ...]],
            factors: Mapping[str, np.ndarray]) -> dict[JobId, tuple[int, ...]]:
    """Send back to its GPUs in force every moved unaffected job whose GPUs are unused and whose
    move saved no more than it cost (repeated until none is left); never raises the cost.  A job
    on its GPUs (a pipeline: each stage on its GPUs, :func:`~pal_opt.model.keeps_placement`) gets
    them in the order it had them; a pipeline re-mapped on its GPUs was moved, and may be sent back."""
    out = dict(placements)
    jobs = rr.instance.jobs
    for i in rr.kept:  # a job on its GPUs keeps them in the order it had them
        if keeps_placement(jobs[i], out.get(jobs[i].id)):
            out[jobs[i].id] = tuple(jobs[i].placement or ())
    owner = {g: jid for jid, gs in out.items() for g in gs}
    changed = True
    while changed:
        changed = False
        for i in rr.kept:
            job = jobs[i]
            home = tuple(job.placement or ())
            now = out.get(job.id)
            if now is None or keeps_placement(job, now) or any(owner.get(g, job.id) != job.id for g in home):
                continue
            back = evaluate(rr.instance, {job.id: home}, factors).cost
            there = evaluate(rr.instance, {job.id: now}, factors).cost
            if back <= there + 1e-12:
                for g in now:
                    owner.pop(g, None)
                owner.update(dict.fromkeys(home, job.id))
                out[job.id] = home
                changed = True
                log.debug("repair: job %r moved back to its GPUs (its move saved %.3g)", job.id, back - there)
    return _queue_ordered(rr, out)

