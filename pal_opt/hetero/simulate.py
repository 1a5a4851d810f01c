"""The Sia simulator: a newTrace workload on a heterogeneous cluster under the Sia policy.

The loop of the authors' simulator (SIA_MODEL.md E), with round length Δ (60 s):

1. every job is advanced by Δ with the allocation decided at the end of the previous round
   (restart delay first, then training; :meth:`pal_opt.hetero.simjob.SimJob.advance`); the
   clock becomes t + Δ;
2. the active jobs (submitted by t + Δ, not completed) get new allocations from the policy
   (:class:`pal_opt.hetero.policy.SiaPolicy`), applied at once (restarts, suspensions);
3. the GPUs held by unfinished jobs are recorded.

Arrivals are noticed at round boundaries only; a job's JCT still counts from its submission
time.  Completions happen mid-round (second resolution) and the freed GPUs idle until the round
ends.  The run ends when every job has completed (or at ``max_time``).

A job that can never run is *unplaceable*, not bad input: before the first round the policy says
which jobs no configuration it may give them can ever hold on the cluster
(``unplaceable_reason``: for ``sia`` and ``ilp`` by the job's kind, for ``gavel`` as a rigid job,
for ``pal`` and ``packed`` by its GPU count), and a type-blind policy may find one unplaceable
where it places it (``unplaceable``, :mod:`pal_opt.hetero.typeblind`).  Such a job is left out
of the simulation with its reason (:attr:`SiaResult.unplaceable`); it counts in ``n_jobs``, never
in ``n_completed``, and the run ends when every other job is done, as in
:mod:`pal_opt.simulate`.

Metrics (the artifact's ``utils/print_run_stats.py``), in seconds: JCT = completion − submission;
average (``avg_jct``), median (``p50_jct``), p99 (``p99_jct``) = the sorted JCTs at index
⌊0.99 n⌋, ``max_jct``; ``makespan`` = last completion − first submission; ``utilisation`` = mean
over rounds of the GPUs held by unfinished jobs (restart delays included) / the cluster's GPUs;
``avg_``, ``p50_`` and ``p99_queueing_delay`` = first start − submission over the jobs that
started (p99 by the same index rule; not a figure of the artifact's scripts);
``restarts`` (summed over the jobs) and ``avg_restarts_per_job``; per-application averages; the
policy's decision time summed over the rounds (``solve_seconds_total``) and its longest round
(``solve_seconds_max``).  The figures the PAL simulator gives too carry the same names
(:mod:`pal_opt.simulate.fields`); ``solve_seconds`` and ``max_solve_seconds``, their former names,
are deprecated aliases with the same values (:data:`~pal_opt.simulate.fields.SIA_ALIASES`), to
be removed after this release.  With variability, also the
mean over job-rounds (a job holding GPUs for a round counts once, whatever its GPUs: what its
JCT feels) of the slowdown the jobs ran at and of its placement floor
(:func:`pal_opt.hetero.gpus.placement_floor`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import InputTypeError, InstanceError, OptionError
from ..gputypes import parse_cluster_spec
from ..options import check_callbacks, check_flag, check_seconds, require_items, require_mapping, require_type
from ..simulate.failures import FailureConfig
from ..simulate.fields import SIA_ALIASES, SIA_PARAMS_NAME, warn_renamed, with_aliases
from .configs import GpuType, require_gpu_types
from .failures import TypedFailures
from .gavel import GAVEL_ROUND
from .goodput import JobKind
from .gpus import Layout, Variability, placement_floor
from .ilptypes import IlpTypesPolicy, check_move_cost
from .methods import HETERO_POLICIES, hetero_policy_names
from .policy import SiaParams, SiaPolicy
from .profiles import Application
from .round import RoundDecision, RoundInput
from .roundstep import forget_allocation, one_blas_thread, round_step_unchecked
from .simjob import SimJob
from .typeblind import TypeBlindPolicy
from .workload import Workload, check_workload

__all__ = [
    "HETERO_METHODS",
    "make_policy",
    "sia_policy",
    "ilp_policy",
    "typeblind_policy",
    "SimConfig",
    "JobRecord",
    "SiaResult",
    "simulate_sia",
    "summarize",
    "summarise",
    "check_cluster",
    "parse_cluster",
    "build_cluster",
]

logger = logging.getLogger(__name__)

#: The policies of the simulator of GPU types when this module was loaded
#: (:data:`pal_opt.hetero.methods.HETERO_POLICIES` is the registry).
HETERO_METHODS = hetero_policy_names()

#: on_round(program input, decision) of the policies that solve Sia's round program
OnRound = Callable[[RoundInput, RoundDecision], None]

#: progress(rounds done, jobs completed, jobs in the workload, simulated seconds)
Progress = Callable[[int, int, int, float], None]


@dataclass(frozen=True, init=False)
class SimConfig:
    """Simulation settings.

    The settings the PAL simulator's :class:`pal_opt.simulate.SimConfig` has too carry its names:
    ``policy`` (the policy's name), ``round_length``, ``max_time``, ``failures``.

    Attributes
    ----------
    round_length
        Δ in seconds (the artifact's ``--interval``, 60).
    policy
        A name of :data:`~pal_opt.hetero.methods.HETERO_POLICIES`: ``sia``
        (:class:`~pal_opt.hetero.policy.SiaPolicy`), ``ilp``
        (:class:`~pal_opt.hetero.ilptypes.IlpTypesPolicy`), ``pal`` or ``packed`` ignoring types
        (:class:`~pal_opt.hetero.typeblind.TypeBlindPolicy`), ``gavel``
        (:class:`~pal_opt.hetero.gavel.GavelPolicy`, every job run as rigid).
    max_time
        Simulated seconds after which the run stops even if jobs are unfinished.
    variability
        Per-GPU factors (:func:`pal_opt.hetero.gpus.draw_variability`); default nominal.
    ilp_move_cost
        ``ilp``'s stage 2: None keeps the GPUs of jobs whose type and count are unchanged; S
        seconds (default 5) re-places them with a move priced as S seconds lost
        (``IlpTypesPolicy``).
    ilp_levels
        ``ilp``'s stage 1 with variability levels (True) or Sia's program unchanged (False, the
        default: measured better on newtrace-7's first 250 jobs, ``formulations/sia_ilp_types.md``).
    ilp_anchor
        ``ilp``'s stage 2 from Sia's own placement (True, the default; ``IlpTypesPolicy``) or from
        the jobs' current GPUs with ``ilp_move_cost`` (False).
    ilp_joint
        ``ilp`` as one joint program of configuration, variability level and GPUs
        (:mod:`pal_opt.hetero.jointprogram`; ``ilp_move_cost``, ``ilp_levels`` and ``ilp_anchor``
        then unused).
    gavel_round
        ``gavel``'s own round in seconds (default :data:`pal_opt.hetero.gavel.GAVEL_ROUND`, Gavel's 360): it re-decides only this often.
    failures
        GPU and server failures (:class:`pal_opt.simulate.failures.FailureConfig`, seeded by its
        ``seed``, default 0; :mod:`pal_opt.hetero.failures`), or None (default): none.
    sia_params
        The Sia policy's parameters (:class:`~pal_opt.hetero.policy.SiaParams`; ``sia`` and
        ``ilp``: power, λ_n, backend, time limit); keyword only.

    Deprecated (each still works, with a :class:`DeprecationWarning` naming the new name, for
    this release): ``method=NAME`` (give ``policy=NAME``), ``policy=SiaParams(...)`` (give
    ``sia_params=``), and reading ``config.method`` (read ``config.policy``).  A deprecated
    argument given beside its new name (as :func:`dataclasses.replace` passes every field) is
    the one used.
    """

    round_length: float = 60.0
    policy: str = "sia"
    max_time: float = 30 * 24 * 3600.0
    variability: Variability = field(default_factory=Variability)
    ilp_move_cost: float | None = 5.0
    ilp_levels: bool = False
    ilp_anchor: bool = True
    ilp_joint: bool = False
    gavel_round: float = GAVEL_ROUND
    failures: FailureConfig | None = None
    sia_params: SiaParams = field(default_factory=SiaParams)

    def __init__(  # the positional order is the earlier one's (method= fourth)
        self,
        round_length: float = 60.0,
        policy: str | SiaParams | None = None,
        max_time: float = 30 * 24 * 3600.0,
        method: str | None = None,
        variability: Variability | None = None,
        ilp_move_cost: float | None = 5.0,
        ilp_levels: bool = False,
        ilp_anchor: bool = True,
        ilp_joint: bool = False,
        gavel_round: float = GAVEL_ROUND,
        failures: FailureConfig | None = None,
        *,
        sia_params: SiaParams | None = None,
    ) -> None:
        name, params = _policy_and_params(policy, method, sia_params)
        values = {
            "round_length": round_length, "policy": name, "max_time": max_time,
            "variability": Variability() if variability is None else variability, "ilp_move_cost": ilp_move_cost,
            "ilp_levels": ilp_levels, "ilp_anchor": ilp_anchor, "ilp_joint": ilp_joint, "gavel_round": gavel_round,
            "failures": failures, "sia_params": params,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)
        self._check()

    @property
    def method(self) -> str:
        """Deprecated: the policy's name, :attr:`policy`."""
        warn_renamed("SimConfig.method", "SimConfig.policy", "pal_opt.hetero.SimConfig", stacklevel=3)
        return self.policy

    def _check(self) -> None:
        if not isinstance(self.policy, str) or self.policy not in HETERO_POLICIES:
            raise OptionError(f"unknown policy {self.policy!r} for a cluster of GPU types "
                              f"(choose from {', '.join(hetero_policy_names())})")
        for name in ("round_length", "gavel_round", "max_time"):
            check_seconds(getattr(self, name), name)
        check_move_cost(self.ilp_move_cost)
        for name in ("ilp_levels", "ilp_anchor", "ilp_joint"):
            check_flag(getattr(self, name), name)
        if not isinstance(self.sia_params, SiaParams):
            raise OptionError(f"sia_params must be a SiaParams (the Sia policy's parameters), got {self.sia_params!r}")
        if not isinstance(self.variability, Variability):
            raise OptionError(f"variability must be a Variability, got {type(self.variability).__name__}")
        if self.failures is not None:
            if not isinstance(self.failures, FailureConfig):
                raise OptionError(f"failures must be a FailureConfig or None, got {type(self.failures).__name__}")
            self.failures.validate()


def _policy_and_params(policy: Any, method: Any, sia_params: Any) -> tuple[Any, Any]:
    """(the policy's name, Sia's parameters) of :class:`SimConfig`'s arguments, the deprecated
    ones included (each with its warning, pointing at the caller of ``SimConfig``); a deprecated
    argument wins over its new name given beside it (:func:`dataclasses.replace` passes both)."""
    if isinstance(policy, SiaParams):
        warn_renamed("policy= given Sia's parameters (a SiaParams)", "sia_params=", "pal_opt.hetero.SimConfig",
                     stacklevel=4, why=SIA_PARAMS_NAME)
        policy, sia_params = None, policy
    if method is not None:
        warn_renamed("method=", "policy=", "pal_opt.hetero.SimConfig", stacklevel=4)
        policy = method
    return ("sia" if policy is None else policy), (SiaParams() if sia_params is None else sia_params)


@dataclass(frozen=True)
class JobRecord:
    """One job's outcome."""

    name: str
    application: str
    kind: str
    submit_time: float
    start_time: float | None
    completion_time: float | None
    restarts: int
    epochs: int
    #: times a failure stopped the job, and the GPU-seconds of work those failures cost it
    #: (0 without failures)
    failures: int = 0
    lost_gpu_seconds: float = 0.0

    @property
    def jct(self) -> float | None:
        return None if self.completion_time is None else self.completion_time - self.submit_time

    @classmethod
    def of(cls, job: SimJob, failures: int = 0, lost_gpu_seconds: float = 0.0) -> JobRecord:
        """The record of a simulator job as it stands (``failures``, ``lost_gpu_seconds``: what
        failures did to it)."""
        return cls(
            name=job.name, application=job.app.name, kind=job.kind.value, submit_time=job.submit_time,
            start_time=job.start_time, completion_time=job.completion_time, restarts=job.num_restarts or 0,
            epochs=job.epoch, failures=failures, lost_gpu_seconds=lost_gpu_seconds,
        )


@dataclass(frozen=True)
class SiaResult:
    """A simulation's outcome: per-job records, per-round GPU use and the policy's solve totals."""

    jobs: tuple[JobRecord, ...]
    gpus_in_use: np.ndarray  # (rounds, types)
    cluster: tuple[GpuType, ...]
    round_length: float
    solve_seconds: float
    max_solve_seconds: float
    rounds_not_optimal: int
    wall_seconds: float
    #: With variability: Σ over rounds and jobs holding GPUs of the job's slowdown, of its
    #: placement floor, and the job-rounds counted (all 0 without variability).
    slowdown_sum: float = 0.0
    floor_sum: float = 0.0
    job_rounds: int = 0
    #: {job name: why it can never run}: jobs left out of the simulation (module docstring)
    unplaceable: dict[str, str] = field(default_factory=dict)
    #: the simulated second the run stopped at with jobs unfinished (``max_time``), else None
    stopped_at: float | None = None
    #: with failures: the PAL simulator's figures (failures, jobs hit, GPU-hours lost, restarts;
    #: :meth:`pal_opt.hetero.failures.TypedFailures.summary`), else None
    failures: dict[str, Any] | None = None
    #: with failures: each failure, with the jobs it stopped
    #: (:meth:`pal_opt.hetero.failures.TypedFailures.log`), else None
    failure_log: list[dict[str, Any]] | None = None

    def summary(self) -> dict[str, Any]:
        """The metrics of the module docstring (seconds), see :func:`summarize`."""
        return summarize(self)


def _percentile_index(values: np.ndarray, q: float) -> float:
    """The artifact's percentile: the sorted values at index ⌊q·n⌋ (clamped)."""
    s = np.sort(values)
    return float(s[min(int(q * s.size), s.size - 1)])


def summarise(result: SiaResult) -> dict[str, Any]:
    """Deprecated: :func:`summarize`, the PAL simulator's name (:func:`pal_opt.simulate.summarize`)."""
    warn_renamed("summarise", "summarize", "pal_opt.hetero.simulate")
    return summarize(result)


def summarize(result: SiaResult) -> dict[str, Any]:
    """avg/p50/p99/max JCT, makespan, utilisation, restarts and per-application figures (the
    module docstring), under the shared names of :mod:`pal_opt.simulate.fields`, then the
    deprecated aliases."""
    require_type(result, SiaResult, "result", " (simulate_sia)")
    jcts = np.array([r.jct for r in result.jobs if r.jct is not None], dtype=np.float64)
    done = [r for r in result.jobs if r.jct is not None]
    total_gpus = sum(t.total_gpus for t in result.cluster)
    use = result.gpus_in_use
    out: dict[str, Any] = {"n_jobs": len(result.jobs), "n_completed": len(done)}
    if jcts.size:
        out.update(
            avg_jct=float(jcts.mean()),
            p50_jct=float(np.median(jcts)),
            p99_jct=_percentile_index(jcts, 0.99),
            max_jct=float(jcts.max()),
            makespan=max(r.completion_time or 0.0 for r in done) - min(r.submit_time for r in result.jobs),
        )
    else:
        out.update(avg_jct=None, p50_jct=None, p99_jct=None, max_jct=None, makespan=None)
    waits = np.array([r.start_time - r.submit_time for r in result.jobs if r.start_time is not None], dtype=np.float64)
    out["avg_queueing_delay"] = float(waits.mean()) if waits.size else None
    out["p50_queueing_delay"] = float(np.median(waits)) if waits.size else None
    out["p99_queueing_delay"] = _percentile_index(waits, 0.99) if waits.size else None
    per_round = use.sum(axis=1) if use.size else np.zeros(0)
    out["rounds"] = int(use.shape[0])
    out["stopped_at"] = result.stopped_at  # None: every job that could ran to its end
    if result.failures is not None:
        out["failures"] = result.failures
    out["avg_gpus_in_use"] = float(per_round.mean()) if per_round.size else 0.0
    out["utilisation"] = out["avg_gpus_in_use"] / total_gpus if total_gpus else 0.0
    out["avg_gpus_in_use_by_type"] = {
        t.name: float(use[:, i].mean()) if use.size else 0.0 for i, t in enumerate(result.cluster)
    }
    out["restarts"] = int(sum(r.restarts for r in result.jobs))
    out["avg_restarts_per_job"] = float(np.mean([r.restarts for r in result.jobs])) if result.jobs else 0.0
    apps = sorted({r.application for r in result.jobs})
    out["n_jobs_by_app"] = {a: sum(r.application == a for r in result.jobs) for a in apps}
    out["avg_jct_by_app"] = {
        a: float(np.mean([r.jct for r in done if r.application == a])) if any(r.application == a for r in done) else None
        for a in apps
    }
    out["variability_slowdown"] = (
        {"mean": result.slowdown_sum / result.job_rounds, "placement_floor": result.floor_sum / result.job_rounds}
        if result.job_rounds else None
    )
    out["solve_seconds_total"] = result.solve_seconds
    out["solve_seconds_max"] = result.max_solve_seconds
    out["rounds_not_optimal"] = result.rounds_not_optimal
    out["wall_seconds"] = result.wall_seconds
    return with_aliases(out, SIA_ALIASES)


def check_cluster(cluster: Sequence[GpuType], apps: Mapping[str, Application], source: str = "profiles") -> None:
    """Every application must be profiled on every GPU type of the cluster.

    Raises
    ------
    InstanceError
        Naming the first (application, type) without a profile.
    """
    if not cluster:
        raise OptionError("the cluster has no GPU types")
    for name, app in apps.items():
        for t in cluster:
            if t.name not in app.types:
                raise InstanceError(
                    f"no profile for GPU type {t.name!r} (placements-{t.name}.csv); "
                    f"{name} is profiled on: {', '.join(app.types) or '(none)'}",
                    source=f"{source}/{name}",
                )


#: ``TYPE:SERVERSxGPUS[,...]`` -> [(type name, servers, GPUs per server)]; the core's parser
#: (:func:`pal_opt.gputypes.parse_cluster_spec`), which ``pal-opt generate --cluster`` reads too.
parse_cluster = parse_cluster_spec


def build_cluster(
    spec: Sequence[tuple[str, int, int]], apps: Mapping[str, Application], source: str = "profiles"
) -> tuple[GpuType, ...]:
    """GPU types from (name, nodes, GPUs per node), checked against the profiles.

    A type's profiled node limit (most nodes a configuration may span) is the largest node count
    in its profiles (placements and scalability rows), the smallest such over the applications:
    16 for ``aws``, 2 for ``dgx-ext``, 3 for ``rtx`` on the artifact's data, its constants.

    Raises
    ------
    InstanceError
        A type some application has no profile for (:func:`check_cluster`).
    """
    require_mapping(apps, "apps", "a mapping of application names to Applications (load_applications)")
    spec = require_items(spec, "spec", "a list of (type, nodes, GPUs per node) (parse_cluster)")
    if any(not isinstance(s, tuple | list) or len(s) != 3 for s in spec):
        raise InputTypeError(f"must be a list of (type, nodes, GPUs per node) (parse_cluster), got {spec!r:.60}",
                             path="spec")
    types = [GpuType(name, nodes, gpus) for name, nodes, gpus in spec]
    check_cluster(types, apps, source)
    out = []
    for t in types:
        limits = [
            int(max(p.placements.num_nodes.max(), p.scalability.num_nodes.max(initial=1)))
            for p in (a.profile(t.name) for a in apps.values())
        ]
        out.append(GpuType(t.name, t.nodes, t.gpus_per_node, min(limits) if limits else None))
    return tuple(out)


def _make_jobs(workload: Workload, apps: Mapping[str, Application], names: Sequence[str], rigid: bool = False) -> list[SimJob]:
    """The simulator's jobs; ``rigid``: every job runs as a rigid one (its row's count and batch)."""
    jobs = []
    for i, spec in enumerate(workload):
        if spec.kind is JobKind.GUARANTEED:
            raise InstanceError(
                "the Sia simulator has no model of guaranteed jobs (fixed type and count)",
                source=workload.source,
                path=f"row {spec.row}, column category",
            )
        if rigid and spec.kind is not JobKind.RIGID:
            spec = replace(spec, kind=JobKind.RIGID)
        jobs.append(SimJob(i, spec, apps[spec.application], names))
    return jobs


def sia_policy(cluster: Sequence[GpuType], cfg: SimConfig, on_round: OnRound | None = None) -> SiaPolicy:
    """The ``sia`` entry of :data:`~pal_opt.hetero.methods.HETERO_POLICIES`."""
    return SiaPolicy(cluster, cfg.sia_params, on_round)


def ilp_policy(cluster: Sequence[GpuType], cfg: SimConfig, on_round: OnRound | None = None) -> IlpTypesPolicy:
    """The ``ilp`` entry of :data:`~pal_opt.hetero.methods.HETERO_POLICIES`."""
    return IlpTypesPolicy(cluster, cfg.sia_params, cfg.variability, on_round, move_cost=cfg.ilp_move_cost,
                          levels=cfg.ilp_levels, anchor=cfg.ilp_anchor, joint=cfg.ilp_joint)


def typeblind_policy(cluster: Sequence[GpuType], cfg: SimConfig, on_round: OnRound | None = None) -> TypeBlindPolicy:
    """The ``pal`` and ``packed`` entries of :data:`~pal_opt.hetero.methods.HETERO_POLICIES`."""
    return TypeBlindPolicy(Layout(tuple(cluster)), cfg.policy, cfg.variability)


def make_policy(cluster: Sequence[GpuType], cfg: SimConfig, on_round: OnRound | None = None) -> Any:
    """The policy object of ``cfg.policy`` (its registry entry's factory): ``allocate(active jobs,
    now)`` -> {job index: GPU positions}, ``stats`` (:class:`~pal_opt.hetero.policy.RoundStats`),
    ``unplaceable_reason(job)`` -> why the job can never run on the cluster (None: it may), and
    ``unplaceable`` ({job index: reason}: jobs it found unplaceable while allocating, given no GPUs)."""
    require_type(cfg, SimConfig, "cfg", " (pal_opt.hetero.SimConfig)")
    return HETERO_POLICIES.get_item(cfg.policy).builder()(cluster, cfg, on_round)


def simulate_sia(
    workload: Workload,
    apps: Mapping[str, Application],
    cluster: Sequence[GpuType],
    config: SimConfig | None = None,
    *,
    progress: Progress | None = None,
    on_round: Callable[[RoundInput, RoundDecision], None] | None = None,
) -> SiaResult:
    """Run the Sia simulator (module docstring) and return the per-job outcome.

    Parameters
    ----------
    workload
        The jobs (:func:`pal_opt.hetero.workload.read_workload`).
    apps
        Application profiles (at least those the workload names).
    cluster
        GPU types in cluster order (the order breaks ties: which type projects goodput first,
        and the column order of the round program).
    config
        :class:`SimConfig`.
    progress
        Called after every round with (rounds done, jobs finished, jobs in the workload,
        simulated seconds at the round's end) (:data:`Progress`).
    on_round
        Called with every round program's input and decision (:class:`SiaPolicy`).

    Raises
    ------
    InstanceError
        An application or a type without profiles, a batch outside the validated range, or a
        guaranteed job.
    """
    cfg = require_type(config or SimConfig(), SimConfig, "config", " (pal_opt.hetero.SimConfig)")
    check_callbacks(progress=progress, on_round=on_round)  # called only later, if at all
    cluster = require_gpu_types(cluster)
    check_workload(workload, apps)
    check_cluster(cluster, {a: apps[a] for a in workload.applications()})
    with one_blas_thread():
        return _run(workload, apps, cluster, cfg, progress, on_round)


def _run(
    workload: Workload,
    apps: Mapping[str, Application],
    cluster: Sequence[GpuType],
    cfg: SimConfig,
    progress: Progress | None,
    on_round: Callable[[RoundInput, RoundDecision], None] | None,
) -> SiaResult:
    t0 = time.perf_counter()
    policy = make_policy(cluster, cfg, on_round)
    layout = Layout(tuple(cluster))
    jobs = _make_jobs(workload, apps, [t.name for t in cluster], HETERO_POLICIES.get_item(cfg.policy).rigid)
    unplaceable = {j.index: why for j in jobs if (why := policy.unplaceable_reason(j)) is not None}
    pending = sorted((j for j in jobs if j.index not in unplaceable), key=lambda j: (j.submit_time, j.index))
    live: list[SimJob] = []
    use: list[list[int]] = []
    now = 0.0
    completed = 0
    floor = placement_floor(layout, cfg.variability) if cfg.variability.active else None
    slow = [0.0, 0.0, 0.0]  # Σ slowdown, Σ floor, job-rounds (SiaResult)
    fails = None if cfg.failures is None else TypedFailures(layout, cfg.failures, cfg.failures.seed or 0)
    while completed + len(unplaceable) < len(jobs) and now < cfg.max_time:
        if fails is None:
            for job in live:
                job.advance(cfg.round_length, now)
        else:
            for i in fails.advance(live, now, cfg.round_length):
                forget_allocation(policy, i)
        now += cfg.round_length
        while pending and pending[0].submit_time <= now:
            live.append(pending.pop(0))
        live.sort(key=lambda j: j.index)
        live = [j for j in live if not j.done]
        completed = len(jobs) - len(live) - len(pending) - len(unplaceable)
        if live:
            before = {j.index: (j.num_restarts, bool(j.allocation)) for j in live} if fails is not None else {}
            unplaceable.update(round_step_unchecked(policy, layout, cfg.variability, live, now,
                                          None if fails is None else fails.out_of_service(now)))
            live = [j for j in live if j.index not in unplaceable]
            if fails is not None:
                fails.checkpoint_moved(live, before)
        held = [0] * len(cluster)
        for job in live:
            if job.type_index is not None:
                held[job.type_index] += job.gpus
                if floor is not None:
                    slow[0] += job.slowdown
                    slow[1] += floor(job.app.name, job.allocation or ())
                    slow[2] += 1
        use.append(held)
        if progress is not None:
            progress(len(use), completed, len(jobs), now)
    stopped = completed + len(unplaceable) < len(jobs)
    if stopped:
        logger.info("stopped at %.0f s (max_time) with %d of %d jobs unfinished", now,
                    len(jobs) - completed - len(unplaceable), len(jobs))
    return replace(_result(jobs, use, policy, cluster, cfg, time.perf_counter() - t0, slow, unplaceable, fails),
                   stopped_at=now if stopped else None)


def _result(
    jobs: Sequence[SimJob], use: list[list[int]], policy: Any, cluster: Sequence[GpuType], cfg: SimConfig, wall: float,
    slow: Sequence[float], unplaceable: Mapping[int, str], fails: TypedFailures | None = None,
) -> SiaResult:
    if fails is None:
        records = tuple(JobRecord.of(j) for j in jobs)
    else:
        lost = fails.lost_gpu_seconds()
        records = tuple(JobRecord.of(j, fails.stopped(j.index), lost.get(j.name, 0.0)) for j in jobs)
    return SiaResult(
        jobs=records,
        gpus_in_use=np.array(use, dtype=np.int64).reshape(len(use), len(cluster)),
        cluster=tuple(cluster),
        round_length=cfg.round_length,
        solve_seconds=policy.stats.solve_seconds,
        max_solve_seconds=policy.stats.max_solve_seconds,
        rounds_not_optimal=policy.stats.not_optimal,
        wall_seconds=wall,
        slowdown_sum=slow[0],
        floor_sum=slow[1],
        job_rounds=int(slow[2]),
        unplaceable={jobs[i].name: why for i, why in sorted(unplaceable.items())},
        failures=None if fails is None else fails.summary(jobs),
        failure_log=None if fails is None else fails.log(),
    )
