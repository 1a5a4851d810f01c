"""Heterogeneous GPU clusters: the measurement-driven performance model of the Sia scheduler (SOSP'23).

The data are the Sia authors' profiles (``sia-artifact/profiles/<app>/``) and workloads; the
semantics are those of the authors' simulator (``SIA_MODEL.md`` in the shared data folder).

Profiles (:mod:`pal_opt.hetero.profiles`)
    :func:`load_application`, :func:`load_applications` -> :class:`Application` (validation
    curves, one :class:`TypeProfile` per GPU type, :class:`AppSettings`);
    :meth:`TypeProfile.step_time` is the artifact's throughput interpolation.
Goodput (:mod:`pal_opt.hetero.goodput`)
    :func:`grad_stats`, :func:`gain`, :func:`efficiency`, :func:`epoch_progress`,
    :func:`training_target`, :func:`optimize_goodput` (best batch per configuration),
    :func:`choose_batch` (the job's own rule), :func:`progress_rate` (simulated progress),
    :class:`JobKind`, :class:`ProfileStepModel`.
Configurations (:mod:`pal_opt.hetero.configs`)
    :func:`enumerate_configs` (the 19 of the paper's cluster), :func:`max_replicas`,
    :func:`valid_configs`, :func:`scheduler_goodput_fn`, :func:`raw_goodput_row`,
    :func:`normalise_row`, :func:`reallocation_factor`, :func:`fairness_costs`.
Learned step-time model (:mod:`pal_opt.hetero.perfmodel`)
    :class:`PerfParams` (a step model), :func:`fit_perf_params`, :class:`ProfileObservations`
    (one job's observations on one type, refitted on every new shape).
Workloads (:mod:`pal_opt.hetero.workload`)
    :func:`read_workload` (newTrace), :func:`check_workload`, :func:`read_philly`.

Examples
--------
>>> from pal_opt.hetero import enumerate_configs, gain, efficiency
>>> len(enumerate_configs())
19
>>> float(gain(8, 8, 1.0, 3.0)), float(efficiency(32, 8, 0.0, 3.0))
(1.0, 1.0)
"""

from __future__ import annotations

from .configs import (
    FLOOR,
    PAPER_CLUSTER,
    Config,
    ConfigSet,
    GpuType,
    apply_reallocation,
    config_menu,
    enumerate_configs,
    fairness_costs,
    max_replicas,
    normalise_row,
    raw_goodput_row,
    reallocation_factor,
    scheduler_goodput_fn,
    throughput_ratio,
    valid_configs,
)
from .goodput import (
    BatchChoice,
    JobKind,
    ProfileStepModel,
    StepModel,
    TrainingTarget,
    choose_batch,
    clamp_batch,
    efficiency,
    epoch_of,
    epoch_progress,
    even_placement,
    gain,
    grad_stats,
    initial_batch,
    optimize_goodput,
    progress_rate,
    training_target,
)
from .perfmodel import PerfParams, ProfileObservations, fit_perf_params
from .profiles import (
    APP_SETTINGS,
    Application,
    AppSettings,
    StepTable,
    TypeProfile,
    ValidationCurves,
    application_names,
    canonical_placement,
    load_application,
    load_applications,
    placement_id,
)
from .workload import (
    PhillyTrace,
    Workload,
    WorkloadJob,
    check_workload,
    read_philly,
    read_workload,
    workload_from_frame,
)

__all__ = [
    # profiles
    "APP_SETTINGS",
    "AppSettings",
    "Application",
    "StepTable",
    "TypeProfile",
    "ValidationCurves",
    "application_names",
    "canonical_placement",
    "load_application",
    "load_applications",
    "placement_id",
    # goodput
    "BatchChoice",
    "JobKind",
    "ProfileStepModel",
    "StepModel",
    "TrainingTarget",
    "choose_batch",
    "clamp_batch",
    "efficiency",
    "epoch_of",
    "epoch_progress",
    "even_placement",
    "gain",
    "grad_stats",
    "initial_batch",
    "optimize_goodput",
    "progress_rate",
    "training_target",
    # configurations
    "FLOOR",
    "PAPER_CLUSTER",
    "Config",
    "ConfigSet",
    "GpuType",
    "apply_reallocation",
    "config_menu",
    "enumerate_configs",
    "fairness_costs",
    "max_replicas",
    "normalise_row",
    "raw_goodput_row",
    "reallocation_factor",
    "scheduler_goodput_fn",
    "throughput_ratio",
    "valid_configs",
    # learned step-time model
    "PerfParams",
    "ProfileObservations",
    "fit_perf_params",
    # workloads
    "PhillyTrace",
    "Workload",
    "WorkloadJob",
    "check_workload",
    "read_philly",
    "read_workload",
    "workload_from_frame",
]
