"""One vocabulary for the results of pal-opt's two simulators.

The PAL simulator (:func:`pal_opt.simulate.summary.summarize`, ``pal-opt simulate`` on a PAL
trace) and the simulator of GPU types (:func:`pal_opt.hetero.simulate.summarize`, ``pal-opt
simulate`` on a Sia newTrace) give the figures they share under the same names,
:data:`SHARED_FIELDS`, in seconds where they are times:

``n_jobs``
    Jobs in the trace (unplaceable ones included).

``n_completed``
    Jobs that finished.

``avg_jct``
    Mean JCT (completion − submission) of the finished jobs.

``p50_jct``
    Median JCT.

``p99_jct``
    99th percentile of the JCTs.

``max_jct``
    Largest JCT.

``makespan``
    Last completion − first submission.

``utilisation``
    Busy GPUs / all GPUs over the run.

``avg_queueing_delay``, ``p50_queueing_delay``, ``p99_queueing_delay``
    First start − submission, over the jobs that started (mean, median, 99th percentile).

``rounds``
    Rounds run.

``restarts``
    Restarts, summed over the jobs.

``avg_restarts_per_job``
    ``restarts`` / ``n_jobs``.

``solve_seconds_total``
    Seconds the policy took to decide, summed over the rounds.

``solve_seconds_max``
    The longest round's decision.

``wall_seconds``
    The whole simulation's wall-clock seconds.

Each simulator defines its figures exactly as before (its module docstring says how; e.g. the
PAL simulator's ``p99_jct`` interpolates linearly, the Sia simulator's takes the sorted JCTs at
index ⌊0.99 n⌋ as the authors' scripts do, and so for ``p99_queueing_delay``); only the names are
shared.  A median is ``p50_`` wherever it appears.

The names the results used before are kept for one release as deprecated aliases holding the
same values (:data:`PAL_ALIASES`, :data:`SIA_ALIASES`, and :data:`CLASS_ALIASES` inside the PAL
result's ``by_priority`` classes); they will be removed.

Both result files (``pal-opt simulate --out``) also give one record per job under
:data:`PER_JOB_FIELD`, ``job_results``; each simulator keeps its own columns (the PAL
simulator's those of ``--jobs-csv``).  ``jobs`` meant two things: in the PAL result the number
of jobs (now ``n_jobs``), in the Sia result the per-job list.  Both are deprecated aliases for
this release (:data:`PAL_ALIASES`; :data:`SIA_FILE_ALIASES`, written by the command beside
``job_results``, the same list), so that afterwards neither file has ``jobs`` and both have
``n_jobs`` and ``job_results``.

Figures only one simulator gives (each defined where it is computed):

* the PAL simulator (:mod:`pal_opt.simulate.summary`): ``end_time`` (the last completion, or the
  first submission when none), ``stopped_at``, ``busy_gpu_seconds`` (the numerator of
  ``utilisation``), ``mean_job_slowdown`` (the mean over jobs of each job's slowdown averaged
  over the seconds it ran), ``gpu_weighted_slowdown`` (over all GPU-seconds run),
  ``spanning_round_fraction`` (job-rounds on GPUs of several servers / job-rounds run),
  ``preemptions``, ``moves`` (a running job given other GPUs), ``preempted_gpu_hours`` and
  ``preempted_gpu_hours_weighted``, ``by_priority``, ``fallbacks`` (rounds whose exact method
  fell back to its greedy answer), ``solver_crashes`` (solver processes that died; the round was
  solved again or fell back), ``solve_seconds_mean``, the pipeline figures, and in the file
  ``num_gpus``, ``config`` (every setting of the run), ``unplaceable``, ``round_log``;
* the simulator of GPU types (:mod:`pal_opt.hetero.simulate`): ``stopped_at``,
  ``avg_gpus_in_use`` and ``avg_gpus_in_use_by_type`` (GPUs held per round, restarting jobs
  included), ``n_jobs_by_app`` and ``avg_jct_by_app``, ``variability_slowdown`` (with
  variability: the mean over job-rounds of the slowest raw factor a job ran at, and its
  placement floor), ``rounds_not_optimal`` (rounds whose program was not proven optimal), and in
  the file its settings at the top level (``trace``, ``policy``, ``cluster``, ``round_length``,
  ``policy_parameters``: Sia's p, λn and λa; ``variability``, ``seed``), ``unplaceable`` and
  ``units`` (which figures are in seconds).

The two files keep their settings in different places (``config`` in the PAL result, the top
level in the other); a reader that needs both should read those by simulator.  A setting both
have carries one name: ``policy``, ``round_length`` (the Sia file's ``round_seconds`` before, a
deprecated alias in :data:`SIA_FILE_ALIASES`), ``trace``, ``cluster``, ``variability``, ``seed``.
The PAL file's ``queueing_delay`` is a deprecated alias of ``avg_queueing_delay``
(:data:`PAL_FILE_ALIASES`).  :func:`with_shared_names` reads a result saved under the earlier
names by the new ones (``pal-opt compare`` reads every file through it).

The two simulators' Python names follow the same rule: both ``SimConfig`` take ``policy`` (the
policy's name), ``round_length``, ``max_time`` and ``failures``, and both summaries are
``summarize``; the Sia simulator's ``SimConfig(method=...)``, ``SimConfig(policy=SiaParams(...))``
(now ``sia_params=``), ``config.method`` and ``summarise`` are deprecated, each with a
:class:`DeprecationWarning` naming the new name (:func:`warn_renamed`).  Sia's parameters are
``sia_params`` throughout ``pal_opt.hetero`` (:data:`SIA_PARAMS_NAME`): ``SimConfig``,
``TypedScheduler(sia_params=...)``, ``SiaPolicy`` and ``IlpTypesPolicy`` (``sia_params=``, the
attribute ``sia_params``); their ``params=`` and a policy's ``params`` attribute are deprecated the
same way (:func:`renamed_argument`), as are ``GavelPolicy(round_seconds=...)`` and its
``round_seconds`` attribute (now ``round_length``, as both ``SimConfig``).

With failures (``--failures``) both results give ``failures`` under the same names
(:meth:`pal_opt.simulate.failures.FailureStats.summary`: ``failures``, ``gpu_failures``,
``server_failures``, ``jobs_hit``, ``lost_gpu_hours``, ``gpu_hours_out_of_service``, ``repairs``,
``replaced_by_repair``, ``repair_seconds``, restarts per job and those after failures, mean and
max, and ``config``) and ``failure_log``: per failure its ``time``, ``kind`` (``gpu`` or
``server``), ``component`` (a GPU id or a server position), ``server`` (the server's id; the
simulator of GPU types names servers ``TYPE-NODE``, ``aws-0``, and numbers GPUs by position,
types in cluster order), the ``gpus`` out of service, ``until`` when they come back, and the
``jobs`` it stopped.  The simulator of GPU types repairs nothing inside a round (a job a failure
stops waits for the next round's policy), so its ``repairs`` and ``replaced_by_repair`` are 0.
Its earlier names ``events`` and ``interrupted_jobs`` are deprecated aliases
(:data:`FAILURE_ALIASES`).  Per job, both give ``failures`` (times a failure stopped it) and
``lost_gpu_seconds``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["SHARED_FIELDS", "PER_JOB_FIELD", "PAL_ALIASES", "SIA_ALIASES", "SIA_FILE_ALIASES", "PAL_FILE_ALIASES",
           "CLASS_ALIASES", "FAILURE_ALIASES", "with_aliases", "with_shared_names", "warn_renamed",
           "renamed_argument", "SIA_PARAMS_NAME"]

#: The figures both simulators' results carry, under these names.
SHARED_FIELDS: tuple[str, ...] = (
    "n_jobs",
    "n_completed",
    "avg_jct",
    "p50_jct",
    "p99_jct",
    "max_jct",
    "makespan",
    "utilisation",
    "avg_queueing_delay",
    "p50_queueing_delay",
    "p99_queueing_delay",
    "rounds",
    "restarts",
    "avg_restarts_per_job",
    "solve_seconds_total",
    "solve_seconds_max",
    "wall_seconds",
)

#: Deprecated names of the PAL simulator's result -> the shared name (same value).
PAL_ALIASES: Mapping[str, str] = {
    "jobs": "n_jobs",
    "jobs_finished": "n_completed",
    "median_jct": "p50_jct",
    "median_queueing_delay": "p50_queueing_delay",
    "utilization": "utilisation",
}

#: Deprecated names of the Sia simulator's result -> the shared name (same value).
SIA_ALIASES: Mapping[str, str] = {
    "solve_seconds": "solve_seconds_total",
    "max_solve_seconds": "solve_seconds_max",
}

#: The per-job list of both result files (one record per job, in each simulator's own columns).
PER_JOB_FIELD = "job_results"

#: Deprecated names of the Sia simulator's result file (``pal-opt simulate`` on a newTrace) ->
#: the name it shares with the PAL result file (same value): the per-job list, which was ``jobs``,
#: and the round length, which was ``round_seconds`` (the PAL file's ``config.round_length``).
SIA_FILE_ALIASES: Mapping[str, str] = {
    "jobs": PER_JOB_FIELD,
    "round_seconds": "round_length",
}

#: Deprecated names of the PAL simulator's result file -> the shared name (same value): the mean
#: queueing delay, which the file also gave as ``queueing_delay`` (the Sia file never did).
PAL_FILE_ALIASES: Mapping[str, str] = {
    "queueing_delay": "avg_queueing_delay",
}

#: Deprecated names inside the Sia result's ``failures`` -> the name it shares with the PAL result's.
FAILURE_ALIASES: Mapping[str, str] = {
    "events": "failures",
    "interrupted_jobs": "jobs_hit",
}

#: Deprecated names inside each class of the PAL result's ``by_priority`` -> the shared name.
CLASS_ALIASES: Mapping[str, str] = {
    "jobs": "n_jobs",
    "jobs_finished": "n_completed",
}


def with_aliases(figures: dict[str, Any], aliases: Mapping[str, str]) -> dict[str, Any]:
    """``figures`` with each deprecated name of ``aliases`` added after them, holding the value of
    the name it stands for (the dict is changed in place and returned)."""
    for old, new in aliases.items():
        figures[old] = figures[new]
    return figures


#: why a name of Sia's parameters (:class:`~pal_opt.hetero.policy.SiaParams`) changed: the one
#: name ``pal_opt.hetero`` gives them (``SimConfig``, ``TypedScheduler``, the policies)
SIA_PARAMS_NAME = "the name of Sia's parameters throughout pal_opt.hetero"


def warn_renamed(old: str, new: str, where: str, stacklevel: int = 3,
                 why: str = "the name both simulators use") -> None:
    """A :class:`DeprecationWarning` that ``where``'s ``old`` is now ``new`` (``why``: by default
    the name both simulators share), pointing at the caller's caller (``stacklevel``): what every
    deprecated argument, attribute and function of the simulators says."""
    warnings.warn(f"{where}: {old} is deprecated, use {new} ({why}); {old} will be removed",
                  DeprecationWarning, stacklevel=stacklevel)


def renamed_argument(old_value: Any, new_value: Any, old: str, new: str, where: str, stacklevel: int = 4,
                     why: str = "the name both simulators use") -> tuple[Any, str]:
    """``(value, the name it was given under)`` of an argument renamed from ``old`` to ``new``
    (both default None): ``new_value`` unless the deprecated ``old_value`` is given, which warns
    (:func:`warn_renamed`, pointing at the caller of the function that calls this one).  Both
    given is an :class:`~pal_opt.errors.OptionError`: two values of one setting."""
    if old_value is None:
        return new_value, new
    if new_value is not None:
        from ..errors import OptionError

        raise OptionError(f"{where}: give {new}= only ({old}= is its deprecated name), not both")
    warn_renamed(f"{old}=", f"{new}=", where, stacklevel=stacklevel, why=why)
    return old_value, old


def _fill(doc: dict[str, Any], aliases: Mapping[str, str]) -> None:
    """``doc`` given each new name of ``aliases`` it lacks from its old name (in place)."""
    for old, new in aliases.items():
        if new not in doc and old in doc:
            doc[new] = doc[old]


def with_shared_names(result: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a simulator's saved result (one result, as ``pal-opt simulate --out`` writes it
    for one policy) with the shared names filled in from the names it was written under before
    (:data:`PAL_ALIASES`, :data:`SIA_ALIASES`, :data:`SIA_FILE_ALIASES`, :data:`PAL_FILE_ALIASES`,
    :data:`FAILURE_ALIASES`, :data:`CLASS_ALIASES`), so that a reader reads every file by the
    new names.  The old names stay; a name already there is not changed.  ``jobs``, which meant
    the number of jobs in a PAL file and the per-job list in a Sia file, is read by its type (a
    list of records with a ``jct``: the per-job list)."""
    doc = dict(result)
    jobs = doc.get("jobs")
    if isinstance(jobs, list) and all(isinstance(r, Mapping) and "jct" in r for r in jobs):
        _fill(doc, {"jobs": PER_JOB_FIELD})  # the Sia file's per-job list (not, e.g., an instance's jobs)
    elif isinstance(jobs, int) and not isinstance(jobs, bool):
        _fill(doc, {"jobs": "n_jobs"})  # the PAL file's number of jobs
    _fill(doc, {**{k: v for k, v in PAL_ALIASES.items() if k != "jobs"}, **SIA_ALIASES,
                **{k: v for k, v in SIA_FILE_ALIASES.items() if k != "jobs"}, **PAL_FILE_ALIASES})
    if isinstance(doc.get("failures"), Mapping):
        doc["failures"] = _filled(doc["failures"], FAILURE_ALIASES)
    classes = doc.get("by_priority")
    if isinstance(classes, Mapping):
        doc["by_priority"] = {p: _filled(c, CLASS_ALIASES) for p, c in classes.items()}
    return doc


def _filled(figures: Any, aliases: Mapping[str, str]) -> Any:
    """A copy of ``figures`` with :func:`_fill` applied (anything but a mapping as it is)."""
    if not isinstance(figures, Mapping):
        return figures
    out = dict(figures)
    _fill(out, aliases)
    return out
