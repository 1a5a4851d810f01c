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
Round program (:mod:`pal_opt.hetero.round`) and placer (:mod:`pal_opt.hetero.placer`)
    :class:`RoundInput`, :func:`build_round_program` (sparse MILP), :func:`solve_round` (any
    backend), :func:`solve_round_dp` (exact oracle); :func:`place_type`, :func:`placement_shape`.
Policy and simulator (:mod:`pal_opt.hetero.policy`, :mod:`pal_opt.hetero.simjob`, :mod:`pal_opt.hetero.simulate`)
    :class:`SiaPolicy` (rows, program, placer per round), :class:`SimJob` (progress, batch,
    learned model, restarts), :func:`simulate_sia` -> :class:`SiaResult`; ``pal-opt simulate-sia``
    (:mod:`pal_opt.hetero.cli`; ``pal-opt simulate --trace-format sia``); the round step both
    loops run, :func:`round_step` (:mod:`pal_opt.hetero.roundstep`).
In the caller's round loop (:mod:`pal_opt.hetero.scheduler`)
    :class:`TypedScheduler` (submit, report, finish; ``schedule(now)`` -> :class:`RoundPlan` of
    :class:`JobAllocation`, with :class:`Change`; observations :class:`StepTime`): any policy of
    :data:`HETERO_POLICIES` on the caller's jobs, as the simulator runs it.
GPUs, variability and comparators (:mod:`pal_opt.hetero.gpus`, :mod:`pal_opt.hetero.levelprogram`, :mod:`pal_opt.hetero.jointprogram`, :mod:`pal_opt.hetero.ilptypes`, :mod:`pal_opt.hetero.typeblind`)
    :class:`Layout` (GPU positions), :class:`Variability`, :func:`draw_variability`,
    :func:`parse_variability`, :func:`placement_floor` (the best slowest factor a gang's per-node
    counts allow); :class:`IlpTypesPolicy` (pal-opt's ``ilp`` with types: the level
    program :func:`build_level_program`, then the core round program; or, ``joint=True``, one
    program of configuration, level and GPUs, :func:`build_joint_program`); :class:`TypeBlindPolicy`
    (PAL and Packed ignoring types); :class:`GavelPolicy` (Gavel-like max-min fair type shares,
    :func:`gavel_allocation`); :data:`HETERO_POLICIES` (the policies by name), :data:`HETERO_METHODS`.

Names are loaded on first use, so ``import pal_opt.hetero.cli`` does not load pandas or scipy.

Examples
--------
>>> from pal_opt.hetero import enumerate_configs, gain, efficiency
>>> len(enumerate_configs())
19
>>> float(gain(8, 8, 1.0, 3.0)), float(efficiency(32, 8, 0.0, 3.0))
(1.0, 1.0)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_attributes

if TYPE_CHECKING:  # loaded on first use (PEP 562), so that importing one submodule stays light
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
        throughput_table,
        valid_configs,
    )
    from .gavel import GavelAllocation, GavelPolicy, gavel_allocation
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
    from .gpus import APP_CLASS, Layout, Variability, draw_variability, parse_variability, placement_floor
    from .ilptypes import IlpTypesPolicy
    from .jointprogram import JointProgram, JointRound, build_joint_program, solve_joint
    from .levelprogram import LevelProgram, LevelRound, build_level_program
    from .methods import HETERO_POLICIES, HeteroPolicy, hetero_policy_names
    from .perfmodel import (
        PerfParams,
        ProfileObservations,
        fit_perf_params,
    )
    from .placer import (
        fit_shape,
        place_type,
        placement_shape,
    )
    from .policy import (
        RowRequest,
        SiaParams,
        SiaPolicy,
        goodput_rows,
    )
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
    from .round import (
        RoundDecision,
        RoundInput,
        RoundProgram,
        build_round_program,
        solve_round,
        solve_round_dp,
    )
    from .roundstep import round_step
    from .scheduler import Change, JobAllocation, RoundPlan, StepTime, TypedScheduler
    from .simjob import (
        SimJob,
    )
    from .simulate import (
        HETERO_METHODS,
        JobRecord,
        SiaResult,
        SimConfig,
        build_cluster,
        make_policy,
        parse_cluster,
        simulate_sia,
        summarise,
        summarize,
    )
    from .typeblind import TypeBlindPolicy, effective_type, gang_state
    from .workload import (
        PhillyTrace,
        Workload,
        WorkloadJob,
        check_workload,
        read_philly,
        read_workload,
        workload_from_frame,
    )

# Names load on first use (PEP 562, :mod:`pal_opt.lazy`): ``pal-opt --help`` and the parser of
# ``simulate-sia`` import this package without pandas or scipy.
_MODULES: dict[str, tuple[str, ...]] = {
    ".configs": (
        "FLOOR", "PAPER_CLUSTER", "Config", "ConfigSet", "GpuType", "apply_reallocation", "config_menu",
        "enumerate_configs", "fairness_costs", "max_replicas", "normalise_row", "raw_goodput_row",
        "reallocation_factor", "scheduler_goodput_fn", "throughput_ratio", "throughput_table", "valid_configs",
    ),
    ".goodput": (
        "BatchChoice", "JobKind", "ProfileStepModel", "StepModel", "TrainingTarget", "choose_batch",
        "clamp_batch", "efficiency", "epoch_of", "epoch_progress", "even_placement", "gain",
        "grad_stats", "initial_batch", "optimize_goodput", "progress_rate", "training_target",
    ),
    ".perfmodel": (
        "PerfParams", "ProfileObservations", "fit_perf_params",
    ),
    ".placer": (
        "fit_shape", "place_type", "placement_shape",
    ),
    ".policy": (
        "RowRequest", "SiaParams", "SiaPolicy", "goodput_rows",
    ),
    ".profiles": (
        "APP_SETTINGS", "Application", "AppSettings", "StepTable", "TypeProfile", "ValidationCurves",
        "application_names", "canonical_placement", "load_application", "load_applications",
        "placement_id",
    ),
    ".round": (
        "RoundDecision", "RoundInput", "RoundProgram", "build_round_program", "solve_round",
        "solve_round_dp",
    ),
    ".simjob": (
        "SimJob",
    ),
    ".roundstep": ("round_step",),
    ".scheduler": ("TypedScheduler", "RoundPlan", "JobAllocation", "StepTime", "Change"),
    ".simulate": (
        "JobRecord", "SiaResult", "SimConfig", "build_cluster", "parse_cluster", "simulate_sia",
        "summarize", "summarise", "HETERO_METHODS", "make_policy",
    ),
    ".gpus": ("APP_CLASS", "Layout", "Variability", "draw_variability", "parse_variability", "placement_floor"),
    ".ilptypes": ("IlpTypesPolicy",),
    ".jointprogram": ("JointProgram", "JointRound", "build_joint_program", "solve_joint"),
    ".levelprogram": ("LevelProgram", "LevelRound", "build_level_program"),
    ".typeblind": ("TypeBlindPolicy", "effective_type", "gang_state"),
    ".gavel": ("GavelPolicy", "GavelAllocation", "gavel_allocation"),
    ".methods": ("HETERO_POLICIES", "HeteroPolicy", "hetero_policy_names"),
    ".workload": (
        "PhillyTrace", "Workload", "WorkloadJob", "check_workload", "read_philly", "read_workload",
        "workload_from_frame",
    ),
}
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    # configs
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
    "throughput_table",
    "valid_configs",
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
    # perfmodel
    "PerfParams",
    "ProfileObservations",
    "fit_perf_params",
    # profiles
    "APP_SETTINGS",
    "Application",
    "AppSettings",
    "StepTable",
    "TypeProfile",
    "ValidationCurves",
    "application_names",
    "canonical_placement",
    "load_application",
    "load_applications",
    "placement_id",
    # workload
    "PhillyTrace",
    "Workload",
    "WorkloadJob",
    "check_workload",
    "read_philly",
    "read_workload",
    "workload_from_frame",
    # round
    "RoundInput",
    "RoundProgram",
    "RoundDecision",
    "build_round_program",
    "solve_round",
    "solve_round_dp",
    # placer
    "place_type",
    "placement_shape",
    "fit_shape",
    # simjob
    "SimJob",
    # policy
    "SiaParams",
    "SiaPolicy",
    "RowRequest",
    "goodput_rows",
    # simulate
    "SimConfig",
    "SiaResult",
    "JobRecord",
    "simulate_sia",
    "summarize",
    "summarise",
    "parse_cluster",
    "build_cluster",
    "HETERO_METHODS",
    "make_policy",
    # the caller's round loop
    "round_step",
    "TypedScheduler",
    "RoundPlan",
    "JobAllocation",
    "StepTime",
    "Change",
    # gpus, comparators
    "APP_CLASS",
    "Layout",
    "Variability",
    "draw_variability",
    "parse_variability",
    "placement_floor",
    "IlpTypesPolicy",
    "LevelProgram",
    "LevelRound",
    "build_level_program",
    "JointProgram",
    "JointRound",
    "build_joint_program",
    "solve_joint",
    "TypeBlindPolicy",
    "effective_type",
    "gang_state",
    "GavelPolicy",
    "GavelAllocation",
    "gavel_allocation",
    "HETERO_POLICIES",
    "HeteroPolicy",
    "hetero_policy_names",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
