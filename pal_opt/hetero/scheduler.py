"""Sia and the other policies of GPU types in a scheduler author's own round loop.

:func:`~pal_opt.hetero.simulate.simulate_sia` runs the policies of
:data:`~pal_opt.hetero.methods.HETERO_POLICIES` inside pal-opt's simulator, whose jobs train by
the profiles.  :class:`TypedScheduler` gives the same policies to a loop that is not pal-opt's
(real jobs, or another simulator such as Blox): the caller submits jobs, reports what they
measured, finishes them, and asks for each round's allocations.  It keeps one simulator job
(:class:`~pal_opt.hetero.simjob.SimJob`) per submitted job, fed from the reports instead of the
profiles, and runs the simulator's own round step on them
(:func:`~pal_opt.hetero.roundstep.round_step`): the same calls give the same allocations as
:func:`~pal_opt.hetero.simulate.simulate_sia` when the reports are what its jobs measure
(``tests/test_hetero_scheduler.py`` checks it, round by round and GPU by GPU).

A job's life, in the caller's words:

``submit(name, application, num_replicas, batch_size, submit_time, kind=...)``
    A row of a newTrace workload (:mod:`pal_opt.hetero.workload`): ``kind`` is its
    ``category`` (``adaptive``, ``scale-gpus``/``strong-scaling`` or ``rigid``; ``guaranteed``
    has no model here).  Under ``gavel`` every job runs as rigid, as in the simulator.  A job
    that no configuration its kind allows can ever hold is kept and reported *unplaceable*,
    with the policy's reason.
``schedule(now)``
    Decides the allocations for the round starting at ``now`` (:class:`RoundPlan`): every job
    submitted by ``now`` and neither finished nor removed, *allocated* (GPU type, GPU ids, their
    servers, per-node shape, batch size, what changed), *waiting* or *unplaceable*.  GPU ids
    are positions on the cluster (types in cluster order, then servers, then slots;
    :class:`~pal_opt.hetero.gpus.Layout`), servers are numbered type by type.
``report(name, epoch=..., progress=..., step_times=..., grad_sqr=..., grad_var=...)``
    What the job measured while it ran, as Sia's and Pollux's agents report it: its epochs done
    and progress, step times at its per-GPU batch (:class:`StepTime`; each new (nodes, GPUs,
    batch) refits the job's throughput model on its current type) and its gradient statistics.
    What the caller leaves out comes from the profiles, exactly as the simulator's jobs measure
    it (:meth:`~pal_opt.hetero.simjob.SimJob.measurement`): ``step_times`` omitted (None) is one
    observation at the job's current per-GPU batch, its (T_step, T_sync) the profile's
    interpolated step time of the job's current per-node shape on its type (SIA_MODEL.md A.2);
    ``grad_sqr``/``grad_var`` omitted are the validation curves' gradient statistics of the
    epoch in progress (row ``epoch`` of ``validation-<B>.csv``, 0-based, after this report's
    ``epoch``) interpolated at the job's current global batch (A.3).  Both are derived only
    while the job holds GPUs; ``step_times=()`` reports no observation.  The job then
    re-chooses its batch on its GPUs (A.5), as the simulator's jobs do after training.
``finish(name, time)``, ``remove(name)``
    The job completed at ``time`` (its record keeps it: :meth:`TypedScheduler.records`), or is
    forgotten (cancelled, or finished and its record read; its name may be submitted again).
    A finished job costs a round nothing; its record is kept until ``remove``.

GPUs that fail or are drained, in the caller's words:

``fail(gpus)``, ``restore(gpus)``
    GPU ids (as :class:`JobAllocation` gives them) go out of service, or come back.  A job
    holding one loses all its GPUs at once (``fail`` returns their names): it is suspended with
    its progress (checkpoints are free here, as in Sia's simulator), leaves any restart delay it
    was in, and the next rounds re-place it, which costs it a restart.  Until restored, no
    policy places a job on those GPUs: the round program counts only the GPUs in service, Sia's
    placer skips them (a server with one out of service is never taken whole), and the
    comparators leave them out.

Time is the caller's, in seconds: ``schedule`` times never decrease and a job is submitted no
earlier than the last round.  Between two rounds, a job holding GPUs counts the time as held:
its restart delay (the application's, A.1, charged at every start and restart) runs down, and
Sia keeps a job still in it on its configuration.  No clock is read and nothing is random: the
same calls give the same plans.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

import numpy as np

from ..errors import InstanceError, OptionError, UnknownJobError
from ..ilp.backends import get_backend
from ..model import checked_gpu_ids
from ..options import check_cluster_size, check_count, check_finite, is_finite_number, shown_number
from ..simulate.fields import SIA_PARAMS_NAME, renamed_argument
from .configs import GpuType
from .goodput import JobKind
from .gpus import Layout, Variability
from .methods import HETERO_POLICIES
from .policy import RoundStats, SiaParams
from .profiles import Application, application_names, load_applications
from .roundstep import forget_allocation, one_blas_thread, round_step_unchecked
from .simjob import SimJob
from .simulate import JobRecord, SimConfig, build_cluster, check_cluster, make_policy, parse_cluster
from .workload import UNMODELLED, WorkloadJob

__all__ = ["TypedScheduler", "RoundPlan", "JobAllocation", "StepTime", "Change", "POLICY_OPTIONS"]

#: The :class:`~pal_opt.hetero.simulate.SimConfig` fields a :class:`TypedScheduler` takes as
#: keyword options (the policies' own settings; the round length and the stop time are the caller's).
POLICY_OPTIONS: tuple[str, ...] = ("ilp_move_cost", "ilp_levels", "ilp_anchor", "ilp_joint", "gavel_round")


class Change(StrEnum):
    """What a round did to a job's GPUs (SIA_MODEL.md D).

    ``START``, ``RESUME``, ``MIGRATE`` and ``RESHAPE`` restart the job from its checkpoint (it
    pays its application's restart delay); ``MOVE`` gives it other GPUs of the same type and
    per-node shape, which the model charges nothing for.
    """

    #: first GPUs of a job that never ran
    START = "start"
    #: GPUs again after a round without any (the job was suspended)
    RESUME = "resume"
    #: another GPU type
    MIGRATE = "migrate"
    #: the same type, another per-node shape (GPU count or spread over servers)
    RESHAPE = "reshape"
    #: the same type and shape on other GPUs
    MOVE = "move"
    #: the same GPUs as last round
    KEEP = "keep"
    #: GPUs last round, none now
    SUSPEND = "suspend"
    #: no GPUs last round nor now
    NONE = "none"

    @property
    def restarts(self) -> bool:
        """Whether the job restarts from its checkpoint."""
        return self in (Change.START, Change.RESUME, Change.MIGRATE, Change.RESHAPE)


@dataclass(frozen=True)
class StepTime:
    """One step-time observation on the job's current GPUs.

    Attributes
    ----------
    atomic_bsz
        The per-GPU batch of one micro-step.
    step_time
        Seconds of one optimiser step (gradient synchronisation included).
    sync_time
        Seconds of it spent synchronising gradients (0 ≤ ``sync_time`` < ``step_time``).
    """

    atomic_bsz: int
    step_time: float
    sync_time: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "atomic_bsz", check_count(self.atomic_bsz, "a step time's atomic_bsz"))
        # is_finite_number: 10**400 refused as NaN is (math.isfinite raised OverflowError on it)
        if not (_is_real(self.step_time) and is_finite_number(self.step_time) and self.step_time > 0):
            raise OptionError(f"a step time must be a positive number of seconds, got {shown_number(self.step_time)}")
        if not (_is_real(self.sync_time) and is_finite_number(self.sync_time) and 0 <= self.sync_time < self.step_time):
            raise OptionError(f"a sync time must be >= 0 and below the step time {self.step_time}, "
                              f"got {shown_number(self.sync_time)}")
        object.__setattr__(self, "step_time", float(self.step_time))
        object.__setattr__(self, "sync_time", float(self.sync_time))


@dataclass(frozen=True)
class JobAllocation:
    """One job's state for the round of a :class:`RoundPlan`.

    Attributes
    ----------
    name
        The job.
    state
        ``"allocated"`` (it holds GPUs this round, restoring its checkpoint or training),
        ``"waiting"`` (no GPUs this round) or ``"unplaceable"`` (never any: ``reason`` says why).
    gpu_type
        The type its speed is reckoned on (None without GPUs): the type of its GPUs, and under a
        type-blind policy (``pal``, ``packed``) whose gang spans types, the slowest of them.
    gpus
        GPU ids (positions on the cluster, module docstring), in the order the placer took them:
        node by node, each node's GPUs its lowest free slots.
    servers
        The server of each GPU (numbered type by type).
    shape
        GPUs per server, in the order taken (the shape its speed is measured for).  Under a
        type-blind policy (``pal``, ``packed``) whose gang spans types, the shape modelled on its
        slowest type (:mod:`pal_opt.hetero.typeblind`), which need not match ``servers``.
    batch_size, atomic_bsz, accum_steps
        The global batch it trains with, its per-GPU micro-batch and gradient-accumulation steps
        (``batch_size = GPUs × atomic_bsz × (accum_steps + 1)``); None without GPUs.
    change
        What this round did to its GPUs (:class:`Change`).
    restarts
        Its restarts so far (the first start is not one).
    reason
        Why it can never run (``state == "unplaceable"``), else None.
    """

    name: str
    state: str
    gpu_type: str | None = None
    gpus: tuple[int, ...] = ()
    servers: tuple[int, ...] = ()
    shape: tuple[int, ...] = ()
    batch_size: int | None = None
    atomic_bsz: int | None = None
    accum_steps: int | None = None
    change: Change = Change.NONE
    restarts: int = 0
    reason: str | None = None

    @property
    def restart(self) -> bool:
        """Whether the job restarts from its checkpoint this round (:attr:`Change.restarts`)."""
        return self.change.restarts

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (tuples as lists, ``change`` as its string)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(gpus=list(self.gpus), servers=list(self.servers), shape=list(self.shape), change=self.change.value,
                   restart=self.restart)
        return out


@dataclass(frozen=True)
class RoundPlan:
    """The allocations of one round (:meth:`TypedScheduler.schedule`).

    Attributes
    ----------
    now
        The round's start (the caller's seconds).
    jobs
        Every job submitted by ``now`` and neither finished nor removed, in submission order.
    """

    now: float
    jobs: tuple[JobAllocation, ...]

    def __getitem__(self, name: str) -> JobAllocation:
        """The job ``name``'s allocation; an :class:`~pal_opt.errors.UnknownJobError` (a
        ``KeyError`` too) for a job the plan does not hold."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise UnknownJobError(f"job {name!r} is not in the plan of round {self.now:g}: it was not submitted by then, "
                              "or has finished or been removed")

    def _where(self, state: str) -> tuple[JobAllocation, ...]:
        return tuple(j for j in self.jobs if j.state == state)

    @property
    def allocated(self) -> tuple[JobAllocation, ...]:
        """The jobs holding GPUs this round."""
        return self._where("allocated")

    @property
    def waiting(self) -> tuple[JobAllocation, ...]:
        """The jobs without GPUs this round."""
        return self._where("waiting")

    @property
    def unplaceable(self) -> tuple[JobAllocation, ...]:
        """The jobs that can never run, with their reasons."""
        return self._where("unplaceable")

    def to_dict(self) -> dict[str, Any]:
        """``{"now": ..., "jobs": [JobAllocation.to_dict(), ...]}``."""
        return {"now": self.now, "jobs": [j.to_dict() for j in self.jobs]}


@dataclass
class _Entry:
    """A submitted job: the simulator's job, and why it can never run (None: it may)."""

    job: SimJob
    reason: str | None = None
    before: tuple[Any, ...] = field(default=())


def _usable_applications(
    spec: Sequence[tuple[str, int, int]], profiles: str | os.PathLike[str], names: Sequence[str] | None
) -> tuple[dict[str, Application], dict[str, str]]:
    """The applications of a profiles folder (``names``, or every one the simulator models and
    that is profiled on every type of the cluster) and {left-out application: why}."""
    if names is not None:
        apps = dict(load_applications(profiles, names))
        check_cluster([GpuType(n, s, g) for n, s, g in spec], apps, os.fspath(profiles))
        return apps, {}
    skipped = {a: f"it is not simulated: {UNMODELLED[a]}" for a in application_names(profiles) if a in UNMODELLED}
    apps = dict(load_applications(profiles, [a for a in application_names(profiles) if a not in skipped]))
    for name, app in list(apps.items()):
        missing = [t for t, _, _ in spec if t not in app.types]
        if missing:
            skipped[name] = f"it has no profile for GPU type {missing[0]!r} (placements-{missing[0]}.csv)"
            del apps[name]
    if not apps:  # every submit would fail: say so now, with why
        reasons = sorted(skipped.items())
        why = f"{reasons[0][0]}: {reasons[0][1]}" if reasons else "the folder holds none"
        more = f"; {len(reasons) - 1} more left out" if len(reasons) > 1 else ""
        raise InstanceError(f"no application can run on this cluster ({why}{more})", source=os.fspath(profiles))
    return apps, skipped


def _cluster_types(cluster: str | Sequence[GpuType] | Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """(name, servers, GPUs per server) of each type of a cluster given as the CLI's text,
    :class:`GpuType` objects or such tuples."""
    if isinstance(cluster, str):
        return parse_cluster(cluster, "the cluster")
    if not isinstance(cluster, Sequence):
        raise OptionError("the cluster must be a text such as 'aws:6x4,rtx:3x8' or a sequence of GpuType objects or "
                          f"(name, servers, GPUs per server) tuples, got {cluster!r}")
    out: list[tuple[str, int, int]] = []
    for t in cluster:
        if isinstance(t, GpuType):
            name, nodes, gpus = t.name, t.nodes, t.gpus_per_node
        elif isinstance(t, tuple | list) and len(t) == 3:
            name, nodes, gpus = t
        else:
            raise OptionError(f"a GPU type of the cluster must be a GpuType or a (name, servers, GPUs per server) "
                              f"tuple, got {t!r}")
        if not isinstance(name, str) or not name or name in [o[0] for o in out]:
            raise OptionError(f"GPU type names must be distinct non-empty strings, got {name!r}")
        out.append((name, check_count(nodes, f"GPU type {name!r}: servers"), check_count(gpus, f"GPU type {name!r}: GPUs per server")))
    if not out:
        raise OptionError("the cluster has no GPU types")
    check_cluster_size(sum(n * g for _, n, g in out), "the cluster")  # as the text form is
    return out


def _applications(
    spec: Sequence[tuple[str, int, int]], profiles: str | os.PathLike[str] | Mapping[str, Application],
    names: Sequence[str] | None,
) -> tuple[dict[str, Application], dict[str, str]]:
    """The scheduler's applications and {left-out application: why} (:func:`_usable_applications`)."""
    if names is not None and (isinstance(names, str) or not isinstance(names, Sequence)):
        raise OptionError(f"applications must be a sequence of application names, got {names!r}")
    bad = [a for a in names or () if not isinstance(a, str)]
    if bad:  # a raw TypeError from a path joined with it otherwise
        raise OptionError(f"applications must be application names (strings), got {bad[0]!r}")
    if not isinstance(profiles, Mapping):
        if not isinstance(profiles, str | os.PathLike):
            raise OptionError(f"profiles must be a folder or a mapping of loaded applications, got {profiles!r}")
        return _usable_applications(spec, profiles, names)
    unknown = [a for a in names or () if a not in profiles]
    if unknown:
        raise InstanceError(f"unknown application {unknown[0]!r} (given: {', '.join(sorted(profiles))})")
    return {a: profiles[a] for a in (profiles if names is None else names)}, {}


def _step_times(value: Any, name: str) -> tuple[StepTime, ...]:
    """A report's step times, each a :class:`StepTime`."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise OptionError(f"job {name!r}: step_times must be a sequence of StepTime, got {value!r}")
    steps = tuple(value)
    bad = [s for s in steps if not isinstance(s, StepTime)]
    if bad:
        raise OptionError(f"job {name!r}: step_times must hold StepTime(atomic_bsz, step_time, sync_time) "
                          f"objects, got {bad[0]!r}")
    return steps


def _kind(kind: str, name: str) -> JobKind:
    """A submitted job's ``kind`` by name (:meth:`JobKind.parse`), or an error naming the job
    and the argument."""
    try:
        return JobKind.parse(kind)
    except OptionError:
        raise OptionError(f"job {name!r}: unknown kind {kind!r} (choose from adaptive, strong-scaling or "
                          "scale-gpus, rigid)") from None


def _is_real(value: Any) -> bool:
    """A real number, numpy's included, and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


class TypedScheduler:
    """A policy of GPU types driven by the caller's round loop (module docstring).

    Parameters
    ----------
    cluster
        GPU types in cluster order: ``"aws:6x4,rtx:3x8,dgx-ext:2x8"``, or
        :class:`~pal_opt.hetero.configs.GpuType` objects or (name, servers, GPUs per server)
        tuples; each type's node limit comes from the profiles
        (:func:`~pal_opt.hetero.simulate.build_cluster`) unless a ``GpuType`` sets
        ``max_physical_nodes``.
    profiles
        The Sia artifact's profiles folder, or loaded applications
        (:func:`~pal_opt.hetero.profiles.load_applications`).
    policy
        A name of :data:`~pal_opt.hetero.methods.HETERO_POLICIES` (default ``"sia"``).
    applications
        The applications to use (default: with a folder, every one the simulator models and that
        is profiled on every type of the cluster; with loaded ones, all).
    sia_params
        Sia's parameters (:class:`~pal_opt.hetero.policy.SiaParams`; ``sia`` and ``ilp``), as
        ``SimConfig.sia_params``.
    backend
        The round program's solver backend (overrides ``sia_params.backend``).
    variability
        Per-GPU factors of the cluster (:func:`~pal_opt.hetero.gpus.draw_variability`); nominal
        by default.
    **options
        The policies' settings of :class:`~pal_opt.hetero.simulate.SimConfig`
        (:data:`POLICY_OPTIONS`: ``ilp_move_cost``, ``ilp_levels``, ``ilp_anchor``,
        ``ilp_joint``, ``gavel_round``).

    Raises
    ------
    OptionError
        An unknown policy, option or backend, ``sia_params`` not a ``SiaParams``, a malformed
        cluster, profiles that are neither a folder nor a mapping, variability of another cluster.
    InstanceError
        A profiles folder that does not exist, an application not profiled on a type.

    Deprecated (still working, with a :class:`DeprecationWarning` naming the new name, for this
    release): ``params=`` (give ``sia_params=``).
    """

    def __init__(
        self,
        cluster: str | Sequence[GpuType] | Sequence[tuple[str, int, int]],
        profiles: str | os.PathLike[str] | Mapping[str, Application],
        policy: str = "sia",
        *,
        applications: Sequence[str] | None = None,
        sia_params: SiaParams | None = None,
        backend: str | None = None,
        variability: Variability | None = None,
        params: SiaParams | None = None,
        **options: Any,
    ) -> None:
        unknown = sorted(set(options) - set(POLICY_OPTIONS))
        if unknown:
            if unknown[0] in {f.name for f in fields(SiaParams)}:  # time_limit=, as RoundPolicy takes it
                raise OptionError(f"{unknown[0]} is one of Sia's parameters: give sia_params=SiaParams("
                                  f"{unknown[0]}=...) to TypedScheduler")
            raise OptionError(f"unknown option {unknown[0]!r} for TypedScheduler (choose from {', '.join(POLICY_OPTIONS)})")
        params, name = renamed_argument(params, sia_params, "params", "sia_params", "pal_opt.hetero.TypedScheduler",
                                        stacklevel=4, why=SIA_PARAMS_NAME)
        params = SiaParams() if params is None else params
        if not isinstance(params, SiaParams):
            raise OptionError(f"{name} must be a SiaParams, got {params!r}")
        if backend is not None:
            params = replace(params, backend=backend)
        if params.backend is not None:
            get_backend(params.backend, probe=False)  # an unknown name now, not in a later round that needs it
        if variability is not None and not isinstance(variability, Variability):
            raise OptionError("variability must be a pal_opt.hetero.gpus.Variability (draw_variability gives one), "
                              f"got {type(variability).__name__}")
        self.config = SimConfig(policy=policy, sia_params=params, variability=variability or Variability(), **options)
        spec = _cluster_types(cluster)
        self.applications, self._skipped = _applications(spec, profiles, applications)
        built = build_cluster(spec, self.applications)
        given = {t.name: t.max_physical_nodes for t in cluster if isinstance(t, GpuType)}
        #: the GPU types, in cluster order, with their node limits
        self.cluster: tuple[GpuType, ...] = tuple(
            replace(t, max_physical_nodes=given[t.name]) if given.get(t.name) is not None else t for t in built
        )
        self.layout = Layout(self.cluster)
        for key, raw in self.config.variability.raw.items():
            if len(raw) != self.layout.num_gpus:
                raise OptionError(f"variability of {key} has {len(raw)} GPUs; the cluster has {self.layout.num_gpus}")
        self._server = self.layout.server_of()
        self._policy = make_policy(self.cluster, self.config)
        self._rigid = HETERO_POLICIES.get_item(policy).rigid
        self._entries: dict[str, _Entry] = {}
        #: the entries of jobs not finished, in submission order: what a round looks at (a
        #: scheduler that keeps thousands of finished jobs' records must not scan them each round)
        self._live: dict[str, _Entry] = {}
        self._next_index = 0
        self._now: float | None = None
        self._out_of_service = np.zeros(self.layout.num_gpus, dtype=bool)

    # -- read-only views -------------------------------------------------------------------------
    @property
    def policy(self) -> str:
        """The policy's name."""
        return self.config.policy

    @property
    def stats(self) -> RoundStats:
        """The policy's totals over the rounds it solved (solver seconds, rounds not optimal)."""
        return self._policy.stats  # type: ignore[no-any-return]

    @property
    def now(self) -> float | None:
        """The last round's time (None before the first)."""
        return self._now

    @property
    def unplaceable(self) -> dict[str, str]:
        """{job name: why it can never run} of the jobs known now."""
        return {n: e.reason for n, e in self._entries.items() if e.reason is not None}

    def records(self) -> tuple[JobRecord, ...]:
        """Every job known now (finished ones too), in submission order, as the simulator
        records them (:class:`~pal_opt.hetero.simulate.JobRecord`: start, completion, JCT,
        restarts, epochs)."""
        return tuple(JobRecord.of(e.job) for e in self._entries.values())

    # -- the job's life ---------------------------------------------------------------------------
    def _entry(self, name: str) -> _Entry:
        if not isinstance(name, str):  # a list of names: unhashable-list TypeError otherwise
            raise OptionError(f"a job name must be a string (one job per call), got {name!r}")
        entry = self._entries.get(name)
        if entry is None:
            raise UnknownJobError(f"unknown job {name!r}: it was never submitted, or was removed")
        return entry

    def _application(self, name: str, application: str) -> Application:
        app = self.applications.get(application)
        if app is None:
            why = self._skipped.get(application)
            known = ", ".join(sorted(self.applications))
            raise InstanceError(f"unknown application {application!r}" + (f": {why}" if why else f" (known: {known})"),
                                path=f"job {name!r}")
        if application in UNMODELLED:
            raise InstanceError(f"application {application!r} is not simulated: {UNMODELLED[application]}",
                                path=f"job {name!r}")
        return app

    def submit(
        self,
        name: str,
        application: str,
        num_replicas: int,
        batch_size: int,
        submit_time: float,
        *,
        kind: str | JobKind = JobKind.ADAPTIVE,
    ) -> str | None:
        """Add a job (a newTrace workload row; module docstring); returns why it can never run,
        or None.

        Raises
        ------
        OptionError
            A duplicate name, a bad count or time, an unknown ``kind``, or a submission time
            before the last round.
        InstanceError
            An unknown application, a batch outside its validated range, or a guaranteed job.
        """
        if not isinstance(name, str) or not name:
            raise OptionError(f"a job name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise OptionError(f"duplicate job name {name!r}: it was submitted already (remove it first to reuse it)")
        app = self._application(name, application)
        replicas = check_count(num_replicas, f"job {name!r}: num_replicas")
        batch = check_count(batch_size, f"job {name!r}: batch_size")
        when = check_finite(submit_time, f"job {name!r}: submit_time")
        if self._now is not None and when < self._now:
            raise OptionError(f"job {name!r}: submitted at {when:g} s, before the last round at {self._now:g} s "
                              "(time cannot go backwards)")
        if not isinstance(kind, JobKind | str):
            raise OptionError(f"job {name!r}: kind must be a JobKind or its name, got {kind!r}")
        job_kind = kind if isinstance(kind, JobKind) else _kind(kind, name)
        if job_kind is JobKind.GUARANTEED:
            raise InstanceError("the Sia simulator has no model of guaranteed jobs (fixed type and count)",
                                path=f"job {name!r}")
        if not app.init_batch_size <= batch <= app.max_batch_size:
            raise InstanceError(f"batch size {batch} outside {application}'s validated range "
                                f"{app.init_batch_size}..{app.max_batch_size}", path=f"job {name!r}")
        if self._rigid:
            job_kind = JobKind.RIGID
        spec = WorkloadJob(name, when, application, replicas, batch, job_kind)
        job = SimJob(self._next_index, spec, app, [t.name for t in self.cluster])
        self._next_index += 1
        entry = _Entry(job, self._policy.unplaceable_reason(job))
        self._entries[name] = self._live[name] = entry
        return entry.reason

    def report(
        self,
        name: str,
        *,
        epoch: int | None = None,
        progress: float | None = None,
        step_times: Sequence[StepTime] | None = None,
        grad_sqr: float | None = None,
        grad_var: float | None = None,
    ) -> None:
        """Record what a job measured (module docstring: what is derived when left out).

        Parameters
        ----------
        epoch
            Epochs completed (never fewer than reported before).
        progress
            Its progress (the simulator's unit: steps at the application's initial batch,
            weighted by their statistical gain), recorded only.
        step_times
            Observations on its current GPUs (None: one from the profiles; ``()``: none).
        grad_sqr, grad_var
            Its gradient statistics, both or neither (neither: from the validation curves).

        Raises
        ------
        OptionError
            An unknown or finished job, fewer epochs than before, a bad value (step times not
            :class:`StepTime` objects), step times of a job without GPUs, or only one of the
            gradient statistics.  A report that raises records nothing.
        """
        job = self._entry(name).job
        if job.done:
            raise OptionError(f"job {name!r} has finished; there is nothing more to report")
        epoch = None if epoch is None else check_count(epoch, f"job {name!r}: epoch", 0)
        if epoch is not None and epoch < job.epoch:
            raise OptionError(f"job {name!r}: epoch {epoch} is before the {job.epoch} reported already")
        if (grad_sqr is None) != (grad_var is None):
            raise OptionError(f"job {name!r}: report grad_sqr and grad_var together, or neither")
        steps = None if step_times is None else _step_times(step_times, name)
        if steps and not job.shape:
            raise OptionError(f"job {name!r} holds no GPUs; step times are measured on the GPUs of its allocation")
        done = None if progress is None else check_finite(progress, f"job {name!r}: progress")
        grad = None if grad_sqr is None or grad_var is None else (
            check_finite(grad_sqr, f"job {name!r}: grad_sqr"), check_finite(grad_var, f"job {name!r}: grad_var"))
        # every value checked: the report is recorded whole or not at all
        if done is not None:
            job.progress = done
        if epoch is not None:
            job.epoch = epoch
        with one_blas_thread():
            self._observe(job, steps, grad)

    def _observe(self, job: SimJob, steps: tuple[StepTime, ...] | None, grad: tuple[float, float] | None) -> None:
        """The observations of a report (module docstring), then the job's batch re-chosen."""
        if job.type_index is None or not job.shape:
            job.grad = job.grad if grad is None else grad
            return
        observed = [((len(job.shape), job.gpus, s.atomic_bsz), (s.step_time, s.sync_time)) for s in steps or ()]
        if steps is None or (steps and grad is None):
            # what the simulator's job measures here; past the validation curves, their last epoch
            key, times, measured = job.measurement(min(job.epoch, job.app.validation.epochs - 1))
            grad = measured if grad is None else grad
            observed = [(key, times)] if steps is None else observed
        for key, times in observed:
            assert grad is not None
            job.observe(job.type_index, key, times, grad)
        job.grad = job.grad if grad is None else grad
        job.update_batch()

    def finish(self, name: str, time: float) -> None:
        """The job completed at ``time`` (seconds, not before its submission nor its start); it
        gets no GPUs from now on and its record keeps its completion time.

        Raises
        ------
        OptionError
            An unknown or already finished job, or a time before its submission or start, or
            before the last round if that round gave it GPUs.
        """
        job = self._entry(name).job
        if job.done:
            raise OptionError(f"job {name!r} has finished already, at {job.completion_time:g} s")
        when = check_finite(time, f"job {name!r}: finish time")
        first = job.submit_time if job.start_time is None else job.start_time
        if when < first:
            raise OptionError(f"job {name!r}: finished at {when:g} s, before it "
                              f"{'was submitted' if job.start_time is None else 'started'} at {first:g} s")
        if job.allocation and self._now is not None and when < self._now:  # it was given GPUs then
            raise OptionError(f"job {name!r}: finished at {when:g} s, before the last round at {self._now:g} s, "
                              "which gave it GPUs")
        job.completion_time = when
        del self._live[name]

    def remove(self, name: str) -> None:
        """Forget a job (cancelled, unplaceable, or finished and its record read): no GPUs, no
        record; its name may be reused.  A finished job costs a round nothing, but its record
        stays until it is removed: a scheduler that runs for weeks removes its finished jobs.

        Raises
        ------
        OptionError
            An unknown job.
        """
        self._entry(name)
        del self._entries[name]
        self._live.pop(name, None)

    # -- GPUs out of service ---------------------------------------------------------------------
    @property
    def out_of_service(self) -> tuple[int, ...]:
        """The GPU ids out of service now (:meth:`fail`), ascending."""
        return tuple(int(g) for g in np.flatnonzero(self._out_of_service))

    def _gpu_ids(self, gpus: Iterable[Any], what: str) -> list[int]:
        n = self.layout.num_gpus
        return checked_gpu_ids(gpus, range(n), what, f"this cluster (0..{n - 1})")

    def fail(self, gpus: Iterable[int]) -> tuple[str, ...]:
        """Take GPUs out of service (failed or drained; module docstring): no round places a
        job on them until :meth:`restore`.  Returns the names of the jobs that held one, now
        suspended (they lost all their GPUs; their progress is kept).

        Raises
        ------
        OptionError
            An id that is not a GPU of the cluster.
        """
        ids = self._gpu_ids(gpus, "fail")
        self._out_of_service[ids] = True
        hit = []
        for name, entry in self._live.items():
            job = entry.job
            if job.allocation and self._out_of_service[list(job.allocation)].any():
                job.lose_gpus(self._now or 0.0)
                forget_allocation(self._policy, job.index)
                hit.append(name)
        return tuple(hit)

    def restore(self, gpus: Iterable[int]) -> None:
        """Put GPUs back in service (:meth:`fail`); the next round may place jobs on them.

        Raises
        ------
        OptionError
            An id that is not a GPU of the cluster.
        """
        self._out_of_service[self._gpu_ids(gpus, "restore")] = False

    # -- rounds -------------------------------------------------------------------------------------
    def schedule(self, now: float) -> RoundPlan:
        """The allocations of the round starting at ``now`` (module docstring).

        Raises
        ------
        OptionError
            ``now`` before the last round's time.
        """
        now = check_finite(now, "the round's time")
        if self._now is not None and now < self._now:
            raise OptionError(f"schedule({now:g}) after schedule({self._now:g}): time cannot go backwards")
        elapsed = 0.0 if self._now is None else now - self._now
        self._now = now
        shown = [e for e in self._live.values() if e.job.submit_time <= now]
        active = [e for e in shown if e.reason is None]
        for e in active:
            e.job.hold(elapsed)
            e.before = (e.job.allocation or (), e.job.type_index, e.job.shape, e.job.num_restarts)
        with one_blas_thread():
            found = round_step_unchecked(self._policy, self.layout, self.config.variability, [e.job for e in active], now,
                               self._out_of_service)
        for e in active:
            if e.job.index in found:
                e.reason = found[e.job.index]
        return RoundPlan(now, tuple(self._allocation(e) for e in shown))

    def _allocation(self, entry: _Entry) -> JobAllocation:
        job = entry.job
        if entry.reason is not None:
            return JobAllocation(job.name, "unplaceable", restarts=job.num_restarts or 0, reason=entry.reason)
        held, type_index, shape, restarts = entry.before
        gpus = job.allocation or ()
        change = _change(bool(held), bool(gpus), held == gpus, type_index != job.type_index, shape != job.shape,
                         restarts != job.num_restarts, restarts is None)
        if not gpus:
            return JobAllocation(job.name, "waiting", change=change, restarts=job.num_restarts or 0)
        assert job.type_index is not None and job.choice is not None
        return JobAllocation(
            job.name, "allocated", gpu_type=self.cluster[job.type_index].name, gpus=tuple(gpus),
            servers=tuple(int(self._server[g]) for g in gpus), shape=job.shape,
            batch_size=job.choice.global_batch(job.gpus), atomic_bsz=job.choice.atomic_bsz,
            accum_steps=job.choice.accum_steps, change=change, restarts=job.num_restarts or 0,
        )


def _change(held: bool, holds: bool, same: bool, new_type: bool, new_shape: bool, restarted: bool, never_ran: bool) -> Change:
    """What a round did to a job's GPUs, from before and after (:class:`Change`)."""
    if same:
        return Change.KEEP if holds else Change.NONE
    if not holds:
        return Change.SUSPEND if held else Change.NONE
    if restarted:
        if never_ran:
            return Change.START
        if not held:
            return Change.RESUME
        return Change.MIGRATE if new_type else Change.RESHAPE
    return Change.MOVE
