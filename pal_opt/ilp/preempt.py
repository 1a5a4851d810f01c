"""``ilp-preempt``: the round program that chooses the jobs to preempt and the placement together.

1. :func:`pal_opt.priority.preempt_plan` admits waiting jobs by priority and splits the running
   jobs into those that stay placed and the *optional* ones, of the priorities whose GPUs the
   admitted jobs need;
2. the round program (:func:`~pal_opt.ilp.formulation.build_formulation` with ``optional=``)
   places every admitted waiting job and every kept running job, and gives each optional job a
   drop variable priced by the cost terms' ``preempted`` charge (:mod:`pal_opt.cost.preemption`:
   ``(1 + priority)`` × the GPU-hours of the round, weighted by ``per_gpu_hour``): it minimises
   the preemption cost, the restart and migration costs of moved jobs and the variability and
   locality cost at once (``formulations/preemption.md``).  It starts from the greedy
   comparator's choice of victims (:func:`greedy_start`), so it never preempts more than that
   start costs;
3. the GPUs left over once whole jobs are preempted (the plan counts GPUs, victims free whole
   jobs) go to the waiting jobs that now fit, in admission order, placed by PAL's rules
   (``info["backfilled"]``; the bound is then not reported).

The result's queue rule is ``"preempt"``; preempted and moved jobs are in ``jobs_to_terminate``.

When the plan admits a pipeline job (:attr:`pal_opt.model.Job.pipeline`; it counts as its
demand in the plan, as a gang does) the program is the stage program
(:mod:`pal_opt.ilp.stageround`, ``formulations/pipeline_round.md``) over the same jobs with the
same drop variables (:func:`preempt_stage_program`, ``formulations/preemption.md`` §6): the
victims, every job's GPUs and every pipeline's stage map are chosen together.  Its start is the
same greedy start, each pipeline placed by PAL has its stages mapped best on its GPUs
(:func:`pal_opt.cost.best_stage_order`), and so do the pipelines backfilled.  A restart or
migration cost for running jobs gives the stage program keep variables, as for ``ilp``: a running
job kept runs on exactly its GPUs in its stage map, any other placement of it pays the move
(:mod:`pal_opt.ilp.stageround`; until 2026-11-27 such a round was an
:class:`~pal_opt.errors.OptionError`).  With GPU types the stage program draws each job's GPUs
from one of its type groups, as the round program does.  Beside its solver's bound the answer
reports the stage program's jobs-alone bound (:func:`~pal_opt.ilp.stageround.alone_bound` with the
optional jobs: each job alone on the free GPUs, an optional one at the least of that and its
preemption charge; ``info["alone_bound"]``), the larger of the two, which makes it OPTIMAL when it
closes the gap (``formulations/preemption.md`` §6).

With GPU types the plan counts per type (:func:`pal_opt.priority.preempt_plan`: each admitted job
claims GPUs within one of its type groups, a witness that the program is feasible), the program is
the typed round program (lanes, :mod:`pal_opt.ilp.typelanes`) with the drop variables, the greedy
start evicts until the rest can claim their GPUs per type (:func:`pal_opt.gputypes.claim_all`;
with every optional job evicted, the plan's own claims) and places each job on the cheapest of its
type groups that leaves the later jobs room (:func:`pal_opt.policies.preempt.place_claimed`), and
the backfill takes one job at a time, each when one of its type groups still holds it.  A
running job on another of its allowed counts than its demand is pinned where it runs: the program
and its start see its GPUs as busy (:func:`_program_round`), and the result keeps it there, unless the plan claimed its GPUs and so preempted it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..binning import binned_factors
from ..cost import evaluate, relative_gap, stages_mapped_best, unseen_terms
from ..deadline import Deadline
from ..errors import OptionError, TimeLimitReached
from ..gputypes import claim_all, free_per_type, has_types, type_groups
from ..model import GpuState, JobId, RoundInstance
from ..priority import PreemptPlan, admission_order, evict_for, held_types, preempt_plan, victim_order
from ..result import OPTIMALITY_TOL, PlacementResult, Status, priced_result
from .backends import BackendSolution, SolverStatus, get_backend
from .backends.base import SolveOptions as BackendOptions
from .canonical import canonicalise
from .decode import decode, encode
from .formulation import Formulation, build_formulation
from .program import Program
from .running import keep_positions
from .solve import DECODE_PER_BUILD, FINISH_SECONDS
from .stageround import (
    StageRound,
    alone_bound_in_time,
    build_stage_round,
    decode_stage_round,
    encode_stage_round,
    has_pipelines,
)

__all__ = ["solve_preempt", "greedy_start", "preempt_program", "preempt_stage_program"]


def greedy_start(instance: RoundInstance, factors: Mapping[str, np.ndarray], plan: PreemptPlan) -> dict[JobId, tuple[int, ...]]:
    """A placement of the plan: the optional jobs evicted in :func:`~pal_opt.priority.victim_order`
    until the rest fit (then, as Kueue does, each victim but the last given back when the rest
    still fit), running jobs kept on their GPUs where they can, the others placed by PAL."""
    jobs = instance.jobs
    order = victim_order(instance, plan.optional)
    claims: dict[int, np.ndarray] | None = None
    if has_types(instance):
        victims, claims = _typed_victims(instance, plan, order)
    else:
        demand = sum(jobs[i].demand for i in (*plan.waiting, *plan.kept, *plan.optional))
        found = evict_for(instance, demand, instance.free_gpus, order)
        victims = order if found is None else found  # not enough even so: every candidate goes
    running = [i for i in (*plan.kept, *plan.optional) if i not in victims]
    mask = instance.cluster.state == GpuState.FREE
    out: dict[JobId, tuple[int, ...]] = {}
    homeless: list[int] = []
    for i in running:
        pos = keep_positions(instance, i)
        if pos is None:
            homeless.append(i)
        else:
            mask[pos] = False
            out[jobs[i].id] = tuple(jobs[i].placement or ())
    if claims is None:
        rest = pal_greedy_on(instance, factors, [*homeless, *plan.waiting], mask)
    else:
        from ..policies.preempt import place_claimed

        rest = place_claimed(instance, factors, [*homeless, *plan.waiting], mask, claims)
    out.update(rest)
    return {j.id: out[j.id] for j in jobs if j.id in out}


def _typed_victims(instance: RoundInstance, plan: PreemptPlan,
                   order: Sequence[int]) -> tuple[list[int], dict[int, np.ndarray]]:
    """The greedy start's victims with GPU types, and the GPUs per type the jobs it places claim:
    the optional jobs (in ``order``) evicted until the jobs that must be placed (the running jobs
    not evicted on their GPUs where they can keep them, the rest claiming GPUs per type,
    :func:`~pal_opt.gputypes.claim_all`) fit, then each but the last given back, in reverse, if
    they still do.  Should the greedy claim fail even with every optional job evicted, the plan's
    own claims are the witness (they fit the GPUs the kept jobs leave)."""
    cl = instance.cluster
    jobs = instance.jobs
    cap = free_per_type(cl, cl.state == GpuState.FREE).astype(np.int64)
    running = [*plan.kept, *plan.optional]
    stay = {i: held_types(instance, i) for i in running if keep_positions(instance, i) is not None}

    def witness(victims: Sequence[int]) -> dict[int, np.ndarray] | None:
        rest = cap - sum((stay[i] for i in stay if i not in victims), np.zeros_like(cap))
        todo = [*plan.waiting, *(i for i in running if i not in victims and i not in stay)]
        return claim_all({i: type_groups(cl, jobs[i]) for i in todo}, {i: jobs[i].demand for i in todo}, rest)

    victims: list[int] = []
    for i in order:
        if witness(victims) is not None:
            break
        victims.append(i)
    for i in reversed(victims[:-1]):
        if witness([k for k in victims if k != i]) is not None:
            victims.remove(i)
    found = witness(victims)
    if found is None:  # the greedy claim failed: evict every optional job, the plan's claims fit
        return list(order), {i: np.asarray(v) for i, v in plan.claims.items()}
    return victims, found


def preempt_program(instance: RoundInstance, factors: Mapping[str, np.ndarray] | None = None,
                    plan: PreemptPlan | None = None) -> Formulation:
    """The program :func:`solve_preempt` solves (``formulations/preemption.md`` §2): the round
    program over the plan's admitted jobs with a drop variable per optional running job.

    ``factors`` default to the round's binned factors (``instance.params.binning``), ``plan`` to
    :func:`~pal_opt.priority.preempt_plan`.  Public so that the program can be exported
    (:func:`pal_opt.ilp.lpwriter.lp_text`; the golden file ``formulations/golden/preempt_contended.lp``).
    """
    if factors is None:
        factors = binned_factors(instance.cluster, instance.params.binning)
    if plan is None:
        plan = preempt_plan(instance)
    if has_pipelines(instance, plan.admitted):
        raise OptionError("the plan admits pipeline jobs: their program is preempt_stage_program's")
    return build_formulation(instance, plan.admitted, factors=factors, optional=plan.optional)


def preempt_stage_program(instance: RoundInstance, factors: Mapping[str, np.ndarray] | None = None,
                          plan: PreemptPlan | None = None) -> StageRound:
    """The program :func:`solve_preempt` solves when the plan admits a pipeline job
    (``formulations/preemption.md`` §6): the stage program
    (:func:`~pal_opt.ilp.stageround.build_stage_round`) over the plan's admitted jobs with a drop
    variable per optional running job.  Defaults as :func:`preempt_program`'s; public so that the
    program can be exported (the golden file ``formulations/golden/preempt_pipeline.lp``).  With a
    restart or migration cost it has the stage program's keep variables too.
    """
    if factors is None:
        factors = binned_factors(instance.cluster, instance.params.binning)
    if plan is None:
        plan = preempt_plan(instance)
    return build_stage_round(instance, plan.admitted, factors, optional=plan.optional)


def pal_greedy_on(instance: RoundInstance, factors: Mapping[str, np.ndarray], order: Sequence[int],
                  free_mask: np.ndarray) -> dict[JobId, tuple[int, ...]]:
    """PAL's placement of ``order`` on the GPUs of ``free_mask`` (skipping a job that does not fit),
    every pipeline's stages mapped best on its GPUs (:func:`pal_opt.cost.stages_mapped_best`)."""
    from ..policies.pal import place_sequence

    return stages_mapped_best(instance, factors, place_sequence(instance, factors, order, free_mask=free_mask,
                                                                backfill=True))


def solve_preempt(
    instance: RoundInstance,
    *,
    binning: str | None = None,
    backend: str | None = None,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    warm_start: bool = True,
    deterministic: bool = True,
    backend_params: Mapping[str, Any] | None = None,
    deadline: float | None = None,
    canonical: bool = False,
) -> PlacementResult:
    """Place one round with preemption by priority (module docstring).

    ``time_limit`` (and ``deadline``, a ``time.monotonic()`` value) bound the whole call, as for
    ``ilp`` (:mod:`pal_opt.deadline`): the solver gets what is left after the plan, the greedy
    start and the build, less an estimate of decoding, backfilling and pricing
    (:func:`_solver_deadline`); when nothing is left the answer is the greedy start (status
    ``fallback``, ``info["note"]`` says why).  ``canonical``: the program's proven optimum
    replaced by its canonical representative before the backfill (:func:`_canonical`).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    >>> jobs = (Job("a", 2, "classA", placement=(0, 1)), Job("b", 1, "classA", placement=(2,)),
    ...         Job("hi", 1, "classA", priority=1))
    >>> res = solve_preempt(RoundInstance(c, jobs))
    >>> sorted(res.placements), res.jobs_to_terminate, res.admission
    (['a', 'b', 'hi'], (), 'preempt')
    """
    t0 = time.perf_counter()
    clock = Deadline.after(time_limit).earliest(Deadline(math.inf if deadline is None else float(deadline)))
    factors = binned_factors(instance.cluster, mode := binning or instance.params.binning)
    plan = preempt_plan(instance)
    work, pins = _program_round(instance, plan)
    staged = has_pipelines(work, plan.admitted)
    start = greedy_start(work, factors, plan)
    cls = get_backend(backend)
    t_price = time.perf_counter()
    start_cost = evaluate(instance, _merged(instance, start, pins), factors).cost
    price = time.perf_counter() - t_price
    info: dict[str, Any] = {"binning": mode, "optional": [instance.jobs[i].id for i in plan.optional],
                            "start_objective": start_cost}
    if not plan.admitted or work.free_gpus == 0:  # (no GPU in service: nothing can be placed)
        return _finish(instance, pins, factors, info, Status.OPTIMAL, None, 0.0, time.perf_counter() - t0, cls)
    info.update(_alone_bound(work, factors, plan, clock, start, start_cost, pins) if staged else {})
    if clock.passed():
        info["note"] = "time limit: the greedy start (no time left to build the program)"
        info["time_limit_reached"] = "building the program"
        return _finish(instance, _merged(instance, start, pins), factors, info, Status.FALLBACK, None, 0.0,
                       time.perf_counter() - t0, cls)
    t_build = time.perf_counter()
    built = _Built.of(work, factors, plan, staged)
    build_seconds = time.perf_counter() - t0
    vector = built.encode(start) if warm_start and cls.supports_warm_start else None
    demand = sum(instance.jobs[i].demand for i in plan.admitted)
    params = {**cls.preempt_params, **(cls.stage_params if staged else {}), **(backend_params or {})}
    info.update({"backend_params": params} if params else {})  # what the solver is given, pal-opt's own included
    opts = BackendOptions(time_limit=None if clock.limited else time_limit,
                          deadline=_solver_deadline(clock, time.perf_counter() - t_build, price),
                          abs_gap=demand * math.log1p(gap) if gap else 0.0, threads=threads,
                          deterministic=deterministic, backend_params=dict(params))
    try:
        sol = cls().solve(built.program, opts, start=vector)
    except TimeLimitReached as exc:  # no time left to translate or run the solver
        sol = BackendSolution(SolverStatus.NO_SOLUTION, None, None, None, 0.0, message=str(exc))
        info["note"] = f"time limit: the greedy start ({exc})"
        info["time_limit_reached"] = exc.stage
    _note_solver(sol, clock, info, cls.name)
    info.update(solver_status=str(sol.status), num_vars=built.program.num_vars, num_rows=built.program.num_rows,
                warm_start=vector is not None, program_objective=sol.objective, **built.info)
    placements, status = _program_answer(instance, built, sol, _merged(instance, start, pins), start_cost, factors,
                                         pins)
    if canonical and status == Status.OPTIMAL:  # leaving what the backfill and pricing take, as the solver did
        placements = _canonical(instance, placements, factors, pins, info["optional"], info,
                                clock.sooner(PRICE_TIMES * price + FINISH_SECONDS))
    return _finish(instance, placements, factors, info, status, sol.bound, sol.seconds, build_seconds, cls)


def _program_answer(instance: RoundInstance, built: _Built, sol: BackendSolution,
                    start: dict[JobId, tuple[int, ...]], start_cost: float, factors: Mapping[str, np.ndarray],
                    pins: Mapping[JobId, tuple[int, ...]]) -> tuple[dict[JobId, tuple[int, ...]], Status]:
    """The solver's placement with the pinned jobs, unless it costs more than ``start`` (the
    greedy start with them, priced ``start_cost``), and the status (FALLBACK: no solution)."""
    if sol.values is None:
        return start, Status.FALLBACK
    found = _merged(instance, built.decode(sol.values), pins)
    placements = found if evaluate(instance, found, factors).cost <= start_cost + 1e-9 else start
    return placements, Status.OPTIMAL if sol.status == SolverStatus.OPTIMAL else Status.FEASIBLE


def _canonical(instance: RoundInstance, placements: dict[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
               pins: Mapping[JobId, tuple[int, ...]], optional: Sequence[JobId], info: dict[str, Any],
               clock: Deadline) -> dict[JobId, tuple[int, ...]]:
    """The program's proven optimum replaced by its canonical representative
    (:func:`~pal_opt.ilp.canonical.canonicalise`, the pinned jobs where they run, which of the
    ``optional`` jobs are preempted chosen canonically among equal ones, given up at ``clock``'s
    deadline) before the backfill, so that every backend backfills the same GPUs;
    ``info["canonical"]`` says what was done."""
    found, info["canonical"] = canonicalise(instance, placements, factors, pinned=pins, optional=optional,
                                            deadline=clock.at if clock.limited else None)
    return found


def _note_solver(sol: BackendSolution, clock: Deadline, info: dict[str, Any], name: str) -> None:
    """Why the answer is not proven (``info["note"]``, the result's message): the solver stopped
    short (a limit, pal-opt's stop), or returned no solution and the answer is the greedy start
    (``info["time_limit_reached"]`` under a limit)."""
    if sol.values is not None:
        if sol.status != SolverStatus.OPTIMAL and sol.message:
            info.setdefault("note", f"{name}: {sol.message}")
        return
    if clock.limited:  # (the solver's own deadline is before the clock's, so it may not have passed)
        info.setdefault("note", "time limit: the greedy start (the solver found nothing in time)")
        info.setdefault("time_limit_reached", "solving the program")
    else:
        info.setdefault("note", f"the greedy start ({sol.status}: {sol.message or 'no solution'})")


@dataclass(frozen=True)
class _Built:
    """The program :func:`solve_preempt` solves, and how a placement maps to and from it: the
    round program with drop variables (:func:`preempt_program`), or, when the plan admits a
    pipeline job, the stage program with drop variables (:func:`preempt_stage_program`)."""

    program: Program
    form: Formulation | None
    stage: StageRound | None

    @classmethod
    def of(cls, work: RoundInstance, factors: Mapping[str, np.ndarray], plan: PreemptPlan, staged: bool) -> _Built:
        if staged:
            sr = preempt_stage_program(work, factors, plan)
            return cls(sr.program, None, sr)
        form = preempt_program(work, factors, plan)
        return cls(form, form, None)

    @property
    def info(self) -> dict[str, Any]:
        """What the result's ``info`` says of the program (``"program": "stage"`` for the stage program)."""
        return {"program": "stage"} if self.stage is not None else {}

    def encode(self, placements: Mapping[JobId, tuple[int, ...]]) -> np.ndarray | None:
        """``placements`` (the greedy start) as the program's vector; None if it is not one."""
        if self.stage is not None:
            return encode_stage_round(self.stage, placements)
        assert self.form is not None
        try:
            return encode(self.form, placements)
        except ValueError:  # pragma: no cover - the start is a placement of the plan
            return None

    def decode(self, values: np.ndarray) -> dict[JobId, tuple[int, ...]]:
        """The placement of a solution (pipelines' GPU lists in stage order)."""
        if self.stage is not None:
            return decode_stage_round(self.stage, values)
        assert self.form is not None
        return decode(self.form, values)


#: Under a deadline: backfilling and pricing the answer take at most this many times pricing the
#: greedy start (decoding and the time kept for writing are ``ilp``'s,
#: :data:`~pal_opt.ilp.solve.DECODE_PER_BUILD` and :data:`~pal_opt.deadline.FINISH_SECONDS`).
PRICE_TIMES = 3.0


def _solver_deadline(clock: Deadline, build_seconds: float, price_seconds: float) -> float | None:
    """The solver's deadline (a ``time.monotonic()`` value; None without one): ``clock`` less
    the estimated decoding, backfilling and pricing that follow the solve."""
    if not clock.limited:
        return None
    after = DECODE_PER_BUILD * build_seconds + PRICE_TIMES * price_seconds + FINISH_SECONDS
    return clock.sooner(after).at


def _program_round(instance: RoundInstance, plan: PreemptPlan) -> tuple[RoundInstance, dict[JobId, tuple[int, ...]]]:
    """The round the program and its start see, and the pinned jobs' placements
    (:attr:`~pal_opt.priority.PreemptPlan.pinned`, with GPU types): their GPUs taken (busy) and
    the jobs waiting, outside the plan; the round itself when nothing is pinned.  (The jobs the
    plan evicted stay running and outside the plan: their GPUs are free, their preemption
    priced.)"""
    if not plan.pinned:
        return instance, {}
    jobs = instance.jobs
    pins = {jobs[i].id: tuple(jobs[i].placement or ()) for i in plan.pinned}
    state = instance.cluster.state.copy()
    for i in plan.pinned:
        state[instance.cluster.positions(pins[jobs[i].id])] = GpuState.BUSY
    work = tuple(replace(j, placement=None, started=None) if j.id in pins else j for j in jobs)
    return replace(instance, cluster=instance.cluster.with_state(state), jobs=work), pins


def _merged(instance: RoundInstance, placements: Mapping[JobId, tuple[int, ...]],
            pins: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, tuple[int, ...]]:
    """``placements`` and the pinned jobs' in queue order (``placements`` itself without pins)."""
    if not pins:
        return dict(placements)
    both = {**placements, **pins}
    return {j.id: both[j.id] for j in instance.jobs if j.id in both}


def _alone_bound(work: RoundInstance, factors: Mapping[str, np.ndarray], plan: PreemptPlan, clock: Deadline,
                 start: Mapping[JobId, tuple[int, ...]], start_cost: float,
                 pins: Mapping[JobId, tuple[int, ...]]) -> dict[str, float]:
    """``info["alone_bound"]`` (none when it does not fit the deadline): the stage program's
    jobs-alone bound (:func:`~pal_opt.ilp.stageround.alone_bound_in_time` over the program's round
    ``work`` with the plan's optional jobs, each at the least of placed alone and preempted;
    ``formulations/preemption.md`` §6), in the round's cost: with pinned jobs, plus what they cost
    where they run, the same in every answer (each job is priced on its own GPUs: ``start_cost``,
    the greedy ``start`` with them, less its price in ``work``)."""
    bound = alone_bound_in_time(work, plan.admitted, factors, clock.at if clock.limited else None, plan.optional)
    if bound is None:
        return {}
    return {"alone_bound": bound + (start_cost - evaluate(work, start, factors).cost if pins else 0.0)}


def _finish(instance: RoundInstance, placements: dict[JobId, tuple[int, ...]], factors: Mapping[str, np.ndarray],
            info: dict[str, Any], status: Status, bound: float | None, seconds: float, built: float,
            cls: Any) -> PlacementResult:
    """The result: the leftover GPUs backfilled (:func:`_backfill`), priced, with the bound when
    nothing was backfilled: ``bound`` or the jobs-alone bound (``info["alone_bound"]``), the
    larger, which proves the answer optimal when it closes the gap (:func:`_alone_proves`).  The
    bound goes through :func:`~pal_opt.result.priced_result`, which keeps it aside when a
    registered cost term gives no ``slots`` (the program could not bound it)."""
    extra = _backfill(instance, factors, placements)
    info["backfilled"] = list(extra)
    placed = {**placements, **extra}
    summary = evaluate(instance, placed, factors)
    message = str(info.get("note", "")) if status != Status.OPTIMAL else ""
    if status == Status.OPTIMAL and bound is None and not extra:  # nothing to choose: its own bound, as ilp says
        bound = summary.cost
    alone: float | None = info.get("alone_bound")
    by_alone = None
    if alone is not None and not extra and not unseen_terms() and (bound is None or alone > bound):
        bound = by_alone = min(alone, summary.cost)
    fields: dict[str, Any] = {}
    if extra:
        if status == Status.OPTIMAL:
            status = Status.FEASIBLE
            message = (f"the program's optimum, then {len(extra)} more waiting job(s) backfilled on the GPUs it "
                       "left free: its bound was for the program's job set")
    elif bound is not None:
        fields = dict(bound=bound, gap=relative_gap(summary.cost, bound, max(summary.gpus, 1)))
    res = priced_result(instance, placed, factors, method="ilp-preempt", status=status, admission="preempt",
                        solve_seconds=seconds, build_seconds=built, backend=cls.name, backend_version=cls.version(),
                        info=info, message=message, summary=summary, **fields)
    if by_alone is not None:
        _alone_proves(res, by_alone)
    return res


def _alone_proves(res: PlacementResult, bound: float) -> None:
    """``res`` given the jobs-alone bound ``bound`` (above its solver's): its message says so, and
    it is OPTIMAL when its gap is closed (:data:`~pal_opt.result.OPTIMALITY_TOL`)."""
    note = "bound: each job alone on the free GPUs, or preempted"
    gap = relative_gap(res.objective, bound, max(res.gpus_used, 1))
    if gap is not None and gap <= OPTIMALITY_TOL:
        res.status = Status.OPTIMAL
        res.message = f"the jobs-alone bound proves it optimal ({note})"
    else:
        res.message = f"{res.message}; {note}" if res.message else note


def _backfill(instance: RoundInstance, factors: Mapping[str, np.ndarray],
              placements: Mapping[JobId, tuple[int, ...]]) -> dict[JobId, tuple[int, ...]]:
    """The waiting jobs (and running jobs that must move) not placed that fit the GPUs left, in
    admission order, placed by PAL (with GPU types one at a time,
    :func:`pal_opt.policies.preempt.backfill_types`)."""
    cl = instance.cluster
    mask = cl.state == GpuState.FREE
    for gids in placements.values():
        mask[cl.positions(gids)] = False
    if has_types(instance):
        from ..policies.preempt import backfill_types

        rest = [i for i in admission_order(instance, moving=True) if instance.jobs[i].id not in placements]
        return backfill_types(instance, factors, rest, mask)
    left = int(mask.sum())
    todo: list[int] = []
    for i in admission_order(instance, moving=True):
        job = instance.jobs[i]
        if job.id not in placements and job.demand <= left:
            todo.append(i)
            left -= job.demand
    return pal_greedy_on(instance, factors, todo, mask) if todo else {}
