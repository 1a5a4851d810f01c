"""One job in the Sia simulator: training progress, batch size, learned model, restarts.

Semantics of the authors' simulator (SIA_MODEL.md A.4-A.7 and D):

* **Progress** (:meth:`SimJob.advance`).  A job on type c, shape p (GPUs per node), atomic batch
  b and A accumulation steps advances at ``κ · gain(B, epoch) / (T_step + A · T_acc)``
  B0-steps per second (true step times of the profiles); a restart delay comes first and makes
  no progress.  At an epoch boundary the time to reach it is rounded to whole seconds, the
  epoch increments and the rest of the interval continues with a re-chosen batch.  The job is
  done after ``max_epochs`` epochs, at that boundary.
* **Batch** (:meth:`SimJob.update_batch`).  After every allocation change and every stretch of
  training (so at every epoch boundary and every round) the job re-chooses its batch
  (:func:`pal_opt.hetero.goodput.choose_batch`): adaptive jobs maximise their learned goodput on
  the current type up to Bmax once they have a model there, else use the initial rule.
* **Learned model** (:meth:`SimJob.observe`).  The first time a job trains with (nodes, GPUs,
  atomic batch) on a type, that observation is recorded and the type's step-time model refitted
  (:func:`pal_opt.hetero.perfmodel.fit_perf_params`); the gradient statistics seen last are the
  job's (shared across types).
* **Allocation changes** (:meth:`SimJob.reallocate`).  A new type (the first start too)
  migrates the job: it gets its placement, re-chooses its batch and waits the application's
  restart delay; the restart count becomes 0 on the first start and grows by one afterwards.
  No GPUs: the job is suspended (no delay, progress kept).  The same type with a different
  per-node shape restarts it (delay, +1 restart); the same shape on other nodes costs nothing.
* **Variability.**  The rate is divided by the slowest per-GPU factor of the job's class among
  its GPUs (1.0 on a nominal cluster; :mod:`pal_opt.hetero.gpus`), updated at every change of GPUs.

Everything that does not change while a job runs is memoised (:func:`functools.lru_cache`):
true step times per (profile, shape, batch), fits per set of observations, batch choices per
(model, statistics, shape).
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Sequence

import numpy as np

from ..errors import InstanceError
from ..options import check_count, require_items, require_type
from .goodput import (
    BatchChoice,
    JobKind,
    choose_batch_unchecked,
    epoch_progress,
    gain_unchecked,
    grad_stats_unchecked,
)
from .perfmodel import PerfParams, fit_perf_params_unchecked
from .profiles import APP_TYPES, APP_WHAT, Application, TypeProfile
from .workload import WorkloadJob

__all__ = ["SimJob", "true_step_time", "fit_observations", "job_batch", "shape_runs", "epoch_grad_stats"]

#: ((nodes, GPUs, atomic batch), (step time, sync time)) pairs, sorted by key.
Observations = tuple[tuple[tuple[int, int, int], tuple[float, float]], ...]


@functools.lru_cache(maxsize=1 << 16)
def true_step_time(profile: TypeProfile, shape: tuple[int, ...], atomic_bsz: int) -> tuple[float, float]:
    """(T_step, T_sync) of a shape at an atomic batch from the measured profile (memoised)."""
    step, sync = profile.step_time(shape, atomic_bsz)
    return float(step), float(sync)


@functools.lru_cache(maxsize=1 << 16)
def fit_observations(obs: Observations) -> PerfParams:
    """The step-time model fitted to a set of observations (memoised: jobs of one application
    that saw the same shapes share the fit)."""
    keys = np.array([k for k, _ in obs], dtype=np.float64)
    vals = np.array([v for _, v in obs], dtype=np.float64)
    return fit_perf_params_unchecked(keys[:, 0], keys[:, 1], keys[:, 2], vals[:, 0] - vals[:, 1], vals[:, 0])


@functools.lru_cache(maxsize=1 << 16)
def job_batch(
    app: Application,
    gpu_type: str,
    shape: tuple[int, ...],
    kind: JobKind,
    requested_batch: int,
    params: PerfParams | None,
    grad: tuple[float, float] | None,
) -> BatchChoice:
    """The job's batch on a shape (A.5), memoised on everything it depends on."""
    return choose_batch_unchecked(
        app, gpu_type, shape, kind, requested_batch=requested_batch, step_model=params, grad=grad
    )


def shape_runs(
    app: Application,
    gpu_type: str,
    shape: tuple[int, ...],
    kind: JobKind,
    requested_batch: int,
    params: PerfParams | None = None,
    grad: tuple[float, float] | None = None,
) -> bool:
    """Whether a job can train on a per-node shape of a type: the profile has a batch limit for
    the shape and a step time at the batch the job would choose there (:func:`job_batch`)."""
    profile = app.profile(gpu_type)
    if not shape or profile.placement_limit(shape) is None:
        return False
    choice = job_batch(app, gpu_type, shape, kind, requested_batch, params, grad)
    step, _ = true_step_time(profile, shape, choice.atomic_bsz)
    return math.isfinite(step) and step > 0


@functools.lru_cache(maxsize=1 << 16)
def epoch_grad_stats(app: Application, batch_size: int, epoch: int) -> tuple[float, float]:
    """(grad_sqr, grad_var) of the validation curves at a global batch during an epoch (0-based;
    A.3), memoised."""
    sqr, var = grad_stats_unchecked(app.validation, batch_size, epoch)
    return float(sqr), float(var)


@functools.lru_cache(maxsize=256)
def _epoch_targets(app: Application) -> tuple[float, ...]:
    """P(0..E): progress at the end of each epoch."""
    return tuple(epoch_progress(app.validation, e) for e in range(app.max_epochs + 1))


class SimJob:
    """The simulator's state of one workload job (see the module docstring).

    Parameters
    ----------
    index
        Position in the workload (ties in the placer follow it).
    spec
        The workload row.
    app
        Its application's profiles.
    type_names
        The cluster's GPU types, in cluster order.
    """

    def __init__(self, index: int, spec: WorkloadJob, app: Application, type_names: Sequence[str]) -> None:
        # checked once per job, where it enters (the simulators build one per workload job, not per round)
        self.index = check_count(index, "index", 0)
        self.spec = require_type(spec, WorkloadJob, "spec", " (a workload row: read_workload(...).jobs[i])")
        self.app = require_type(app, APP_TYPES, "app", what=APP_WHAT)
        self.type_names = require_items(type_names, "type_names", "a list of GPU type names", of=str)
        self.progress = 0.0
        self.epoch = 0
        self.type_index: int | None = None
        self.shape: tuple[int, ...] = ()
        self.allocation: tuple[int, ...] | None = None  # GPU positions (pal_opt.hetero.gpus.Layout)
        self.choice: BatchChoice | None = None
        self.rescale_time = 0.0
        self.num_restarts: int | None = None
        self.start_time: float | None = None
        self.completion_time: float | None = None
        self.attained_service = 0.0
        self.observations: list[dict[tuple[int, int, int], tuple[float, float]]] = [{} for _ in self.type_names]
        self.params: list[PerfParams | None] = [None] * len(self.type_names)
        self.grad: tuple[float, float] | None = None
        self.slowdown = 1.0  # slowest raw variability factor among the job's GPUs (pal_opt.hetero.gpus)

    # -- read-only views -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> JobKind:
        return self.spec.kind

    @property
    def submit_time(self) -> float:
        return self.spec.submit_time

    @property
    def done(self) -> bool:
        return self.completion_time is not None

    @property
    def gpus(self) -> int:
        """GPUs held now (during a restart delay too)."""
        return sum(self.shape)

    def max_profiled(self, type_index: int) -> int:
        """r_c(j): the largest GPU count the job has trained with on a type (0 if never)."""
        return max((k[1] for k in self.observations[type_index]), default=0)

    # -- training ------------------------------------------------------------------------------
    def observe(self, type_index: int, key: tuple[int, int, int], times: tuple[float, float], grad: tuple[float, float]) -> None:
        """Record the gradient statistics and, if the shape is new on this type, the step times
        (and refit that type's model)."""
        self.grad = grad
        seen = self.observations[type_index]
        if key in seen:
            return
        seen[key] = times
        self.params[type_index] = fit_observations(tuple(sorted(seen.items())))

    def update_batch(self) -> None:
        """Re-choose the batch for the current shape (A.5)."""
        assert self.type_index is not None and self.shape
        t = self.type_index
        self.choice = job_batch(
            self.app, self.type_names[t], self.shape, self.kind, self.spec.batch_size, self.params[t], self.grad
        )

    def measurement(
        self, epoch: int | None = None
    ) -> tuple[tuple[int, int, int], tuple[float, float], tuple[float, float]]:
        """What the job measures training now, from the profiles: the shape key (nodes, GPUs,
        atomic batch), the true (T_step, T_sync) of its shape at its atomic batch (A.2) and the
        gradient statistics of the epoch in progress (``epoch``, default the job's) at its global
        batch (A.3)."""
        assert self.type_index is not None and self.choice is not None
        t = self.type_index
        b, accum = self.choice.atomic_bsz, self.choice.accum_steps
        n = sum(self.shape)
        grad = epoch_grad_stats(self.app, n * b * (accum + 1), self.epoch if epoch is None else epoch)
        step, sync = true_step_time(profile := self.app.profile(self.type_names[t]), self.shape, b)
        if not (math.isfinite(step) and step > 0):
            raise InstanceError(
                f"{self.name}: {self.app.name} on {self.type_names[t]} has no step time for "
                f"placement {self.shape} at atomic batch {b}", source=profile.source,
            )
        if not sync < step:  # the compute part, step - sync, is what the step-time model is fitted to
            raise InstanceError(
                f"{self.name}: {self.app.name} on {self.type_names[t]}, placement {self.shape} at atomic batch {b}: "
                f"sync_time {sync:g} is not below step_time {step:g} (the compute part step_time - sync_time must "
                "be positive)", source=profile.source,
            )
        return (len(self.shape), n, b), (step, sync), grad

    def _rate(self) -> float:
        """Progress per second now (A.4); records the observation of this step."""
        key, (step, sync), grad = self.measurement()
        assert self.type_index is not None and self.choice is not None
        self.observe(self.type_index, key, (step, sync), grad)
        batch = key[1] * key[2] * (self.choice.accum_steps + 1)
        total = step + self.choice.accum_steps * (step - sync)
        return self.app.settings.calibration * gain_unchecked(batch, self.app.init_batch_size, *grad) / (total * self.slowdown)

    def hold(self, seconds: float) -> None:
        """Account ``seconds`` of holding the current GPUs whose training is not simulated here
        (its progress is reported from outside, :class:`pal_opt.hetero.scheduler.TypedScheduler`):
        the restart delay counts down first and the GPU-seconds add to the attained service, as
        in :meth:`advance`."""
        if self.done or not self.shape:
            return
        self.rescale_time -= min(self.rescale_time, seconds)
        self.attained_service += seconds * self.gpus

    def advance(self, seconds: float, now: float) -> None:
        """Run ``seconds`` from cluster time ``now`` with the current allocation (A.4-A.6)."""
        if self.done or not self.shape:
            return
        delay = min(self.rescale_time, seconds)
        self.rescale_time -= delay
        self.attained_service += delay * self.gpus
        seconds -= delay
        clock = now + delay
        targets = _epoch_targets(self.app)
        last = self.app.max_epochs - 1
        while seconds > 0 and not self.done:
            rate = self._rate()
            goal = targets[self.epoch + 1]
            if self.progress + rate * seconds < goal:
                self.progress += rate * seconds
                self.attained_service += seconds * self.gpus
                clock += seconds
                seconds = 0
            else:
                delta = round(float((goal - self.progress) / rate))
                self.epoch += 1
                if self.epoch > last:
                    self.completion_time = clock + delta
                self.progress = goal
                self.attained_service += delta * self.gpus
                clock += delta
                seconds -= delta
            self.update_batch()

    def state_after(self, seconds: float, now: float) -> tuple[float, int]:
        """(progress, epoch) the job will have after ``seconds`` of :meth:`advance` from ``now``,
        the job itself unchanged (a checkpoint taken inside a round)."""
        twin = copy.copy(self)
        twin.observations = [dict(seen) for seen in self.observations]
        twin.params = list(self.params)
        twin.advance(seconds, now)
        return twin.progress, twin.epoch

    # -- allocation changes (D) -----------------------------------------------------------------
    def _start(self, shape: tuple[int, ...], now: float) -> None:
        self.shape = shape
        self.update_batch()
        self.rescale_time = self.app.settings.restart_delay
        self.num_restarts = 0 if self.num_restarts is None else self.num_restarts + 1
        if self.start_time is None:
            self.start_time = now

    def _suspend(self) -> None:
        self.shape = ()
        self.choice = None

    def lose_gpus(self, now: float) -> None:
        """The job's GPUs left service under it (a failure): it holds none, and a restart delay it
        was in is moot, since it restarts, with the full delay, when placed again."""
        self.reallocate(None, (), now)
        self.allocation = ()
        self.rescale_time = 0.0

    def reallocate(self, type_index: int | None, shape: tuple[int, ...], now: float, slowdown: float = 1.0) -> None:
        """Apply a new (type, shape) the policy decided (a changed node-id list; see the module
        docstring for what costs a restart); ``slowdown`` is the slowest variability factor of
        the job's class among its new GPUs (it divides the progress rate)."""
        self.slowdown = slowdown if shape else 1.0
        if type_index != self.type_index:
            self.type_index = type_index
            if shape:
                self._start(shape, now)
            else:
                self._suspend()
        elif shape:
            if shape != self.shape:
                self._start(shape, now)
        else:
            self._suspend()
