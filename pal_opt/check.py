"""The independent validity checker.

It does not trust a method's own report.  Given a round and a placement (a
:class:`~pal_opt.result.PlacementResult` or the dict of a PLACEMENT.json file) it checks:

* every placed job is in the queue and gets exactly its demand, with no GPU listed twice;
* every GPU exists and no GPU is used by two jobs;
* the stages of a job, when the result gives them (``stages``, :attr:`PlacementResult.stages`):
  as many as its pipeline has (one for a gang), each with its replica count of GPUs, every GPU
  of the job in exactly one stage; the cost is then priced with the GPUs in stage order;
* no busy or failed GPU is used;
* the placed set obeys the queue rule the result declares (``admission``):

  - ``pal-order`` / ``queue-order``: the placed jobs are an initial segment of the PAL order
    (:func:`pal_opt.admission.pal_order`) or of the queue, and the first job left out needs more
    GPUs than are still free;
  - ``sticky``: every running job keeps exactly its GPUs or is terminated; the new jobs placed
    are an initial segment of the waiting jobs in queue order, and the first left out needs more
    GPUs than are still free;
  - ``prefix`` / ``backfill``: the placed set is exactly the admitted set
    (:func:`pal_opt.admission.admit`);
  - ``given``: no queue rule;

* the reported objective, when present, equals the cost recomputed by :mod:`pal_opt.cost`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .admission import admit, pal_order
from .binning import BINNING_MODES, binned_factors
from .cost import evaluate
from .model import GpuState, JobId, RoundInstance
from .result import PlacementResult

__all__ = ["check", "violations", "Kind", "Violation", "ADMISSION_RULES"]

ADMISSION_RULES: tuple[str, ...] = (
    "pal-order", "queue-order", "sticky", "pal-order-backfill", "queue-order-backfill", "sticky-backfill",
    "prefix", "backfill", "given",
)


class Kind(enum.StrEnum):
    """The kinds of violation the checker reports."""

    FORM = "form"  #: the result is not of the expected shape
    UNKNOWN_JOB = "unknown-job"  #: a placed job is not in the queue
    ADMISSION_RULE = "admission-rule"  #: the declared queue rule is not one the checker knows
    GANG_SIZE = "gang-size"  #: a job does not get exactly its demand of distinct GPUs
    UNKNOWN_GPU = "unknown-gpu"  #: a GPU that does not exist
    GPU_NOT_FREE = "gpu-not-free"  #: a busy or failed GPU
    GPU_SHARED = "gpu-shared"  #: a GPU given to two jobs
    ORDER = "order"  #: jobs placed past one the queue rule says comes first and was left out
    LEFT_OUT = "left-out"  #: the first job left out would have fit
    STICKY = "sticky"  #: a running job moved without being terminated, or terminated and placed
    ADMISSION = "admission"  #: the placed set is not the admitted set
    OBJECTIVE = "objective"  #: the reported objective is not the recomputed cost
    STAGE_COUNT = "stage-count"  #: a job's stages are not as many as its pipeline's (one for a gang)
    STAGE_REPLICAS = "stage-replicas"  #: a stage does not get its replica count of GPUs
    STAGE_GPUS = "stage-gpus"  #: a GPU in two stages, or stages that do not hold exactly the job's GPUs


@dataclass(frozen=True)
class Violation:
    """One violation: its kind and the line that describes it."""

    kind: Kind
    message: str

    def __str__(self) -> str:
        return self.message


def _normalise(instance: RoundInstance, result: PlacementResult | Mapping[str, Any]) -> tuple[
    dict[JobId, list[int]], str, list[JobId], float | None, str, list[Violation]
]:
    """Placements keyed by the instance's own job ids, plus the declared fields."""
    problems: list[Violation] = []
    by_str = {str(j.id): j.id for j in instance.jobs}
    if isinstance(result, PlacementResult):
        raw: Mapping[Any, Any] = result.placements
        admission = result.admission
        terminate = list(result.jobs_to_terminate)
        objective: float | None = result.objective
        binning = str(result.info.get("binning", instance.params.binning))
    else:
        raw = result.get("placements", {})
        if not isinstance(raw, Mapping):
            return {}, "given", [], None, instance.params.binning, [
                Violation(Kind.FORM, "placements: must be an object")]
        admission = str(result.get("admission", "given"))
        terminate = list(result.get("jobs_to_terminate", []) or [])
        obj = result.get("objective")
        objective = float(obj) if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None
        info = result.get("info") or {}
        binning = str(info.get("binning", instance.params.binning)) if isinstance(info, Mapping) else instance.params.binning
    placements: dict[JobId, list[int]] = {}
    for key, gpus in raw.items():
        jid = key if key in instance.job_by_id else by_str.get(str(key))
        if jid is None:
            problems.append(Violation(Kind.UNKNOWN_JOB, f"job {key!r}: not in the queue"))
            continue
        if not isinstance(gpus, (list, tuple)) or not all(
            isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in gpus
        ):
            problems.append(Violation(Kind.FORM, f"job {key!r}: GPU list must be a list of integer ids"))
            continue
        placements[jid] = [int(g) for g in gpus]
    term = [t if t in instance.job_by_id else by_str.get(str(t), t) for t in terminate]
    if admission not in ADMISSION_RULES:
        problems.append(Violation(Kind.ADMISSION_RULE,
                                  f"admission {admission!r} is not one of {', '.join(ADMISSION_RULES)}"))
    if binning not in BINNING_MODES:
        binning = instance.params.binning
    return placements, admission, term, objective, binning, problems


def _segment_rule(
    instance: RoundInstance, order: list[int], placed: set[JobId], free_left: int, label: str
) -> list[Violation]:
    ids = [instance.jobs[i].id for i in order]
    k = 0
    while k < len(ids) and ids[k] in placed:
        k += 1
    problems: list[Violation] = []
    extra = placed - set(ids[:k])
    if extra:
        problems.append(Violation(
            Kind.ORDER, f"{label}: jobs {sorted(map(str, extra))} are placed after job {ids[k]!r}, which was not"
        ))
    elif k < len(ids):
        nxt = instance.jobs[order[k]]
        if nxt.demand <= free_left:
            problems.append(Violation(
                Kind.LEFT_OUT, f"{label}: job {nxt.id!r} needs {nxt.demand} GPUs and {free_left} are still free, "
                "but it was not placed"
            ))
    return problems


def violations(instance: RoundInstance, result: PlacementResult | Mapping[str, Any]) -> list[Violation]:
    """The violations of ``result`` on ``instance``, each with its :class:`Kind` (empty if valid).

    The checks run in three stages and a stage runs only if the one before found nothing: the
    form of the result (known jobs, GPU lists); each gang (demand, GPUs that exist, are free and
    are used once); then the queue rule the result declares and its reported objective.
    """
    placements, admission, terminate, objective, binning, problems = _normalise(instance, result)
    stages, form = _read_stages(result, placements, instance)
    problems += form
    if not problems:
        problems = _gang_violations(instance, placements) + _stage_violations(instance, placements, stages)
    if not problems:
        placements = {**placements, **{j: [g for stage in stages[j] for g in stage] for j in stages}}
        problems = _rule_violations(instance, placements, admission, terminate)
        problems += _objective_violations(instance, placements, objective, binning)
    return problems


def check(instance: RoundInstance, result: PlacementResult | Mapping[str, Any]) -> list[str]:
    """Return the list of violations of ``result`` on ``instance`` (empty if valid), as text.

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.1, 0.9, 1.0]})
    >>> inst = RoundInstance(c, (Job(1, 2, "classA"),))
    >>> check(inst, {"placements": {"1": [0, 1]}, "admission": "prefix"})
    []
    >>> check(inst, {"placements": {"1": [0, 0]}, "admission": "given"})
    ['job 1: needs 2 distinct GPUs, got [0, 0]']
    """
    return [v.message for v in violations(instance, result)]


def _gang_violations(instance: RoundInstance, placements: Mapping[JobId, list[int]]) -> list[Violation]:
    cl = instance.cluster
    jobs = instance.job_by_id
    owner: dict[int, JobId] = {}
    out: list[Violation] = []
    for jid, gpus in placements.items():
        job = jobs[jid]
        if len(set(gpus)) != len(gpus) or len(gpus) != job.demand:
            out.append(Violation(Kind.GANG_SIZE, f"job {jid!r}: needs {job.demand} distinct GPUs, got {gpus}"))
        for g in gpus:
            pos = cl.position.get(g)
            if pos is None:
                out.append(Violation(Kind.UNKNOWN_GPU, f"job {jid!r}: GPU {g} does not exist"))
                continue
            st = int(cl.state[pos])
            if st != GpuState.FREE:
                out.append(Violation(Kind.GPU_NOT_FREE, f"job {jid!r}: GPU {g} is {GpuState(st).name.lower()}"))
            if g in owner and owner[g] != jid:
                out.append(Violation(Kind.GPU_SHARED, f"GPU {g}: used by jobs {owner[g]!r} and {jid!r}"))
            owner.setdefault(g, jid)
    return out


def _read_stages(result: PlacementResult | Mapping[str, Any], placements: Mapping[JobId, list[int]],
                 instance: RoundInstance) -> tuple[dict[JobId, list[list[int]]], list[Violation]]:
    """The stages the result gives, keyed like ``placements``; FORM violations for bad shapes."""
    raw = result.stages if isinstance(result, PlacementResult) else result.get("stages", {}) or {}
    if not isinstance(raw, Mapping):
        return {}, [Violation(Kind.FORM, "stages: must be an object {job id: [[GPU ids], ...]}")]
    by_str = {str(j): j for j in placements}
    out: dict[JobId, list[list[int]]] = {}
    problems: list[Violation] = []
    for key, value in raw.items():
        jid = key if key in placements else by_str.get(str(key))
        if jid is None:
            problems.append(Violation(Kind.FORM, f"stages of job {key!r}: the job is not placed"))
        elif not isinstance(value, (list, tuple)) or not all(
            isinstance(st, (list, tuple)) and all(isinstance(g, (int, np.integer)) and not isinstance(g, bool)
                                                  for g in st) for st in value):
            problems.append(Violation(Kind.FORM, f"stages of job {key!r}: must be a list of GPU id lists"))
        else:
            out[jid] = [[int(g) for g in st] for st in value]
    return out, problems


def _stage_violations(instance: RoundInstance, placements: Mapping[JobId, list[int]],
                      stages: Mapping[JobId, list[list[int]]]) -> list[Violation]:
    """Each job's stages against its pipeline (a gang is one stage of ``demand`` replicas)."""
    out: list[Violation] = []
    for jid, given in stages.items():
        job = instance.job_by_id[jid]
        want = job.pipeline.replicas if job.pipeline is not None else (job.demand,)
        if len(given) != len(want):
            what = f"its pipeline has {len(want)} stages" if job.pipeline is not None else "a gang is one stage"
            out.append(Violation(Kind.STAGE_COUNT, f"job {jid!r}: {what}, got {len(given)}"))
            continue
        out += [Violation(Kind.STAGE_REPLICAS, f"job {jid!r}: stage {k} needs {r} GPU{'s' * (r != 1)} "
                          f"(its replicas), got {st}")
                for k, (st, r) in enumerate(zip(given, want, strict=True)) if len(st) != r]
        flat = [g for st in given for g in st]
        twice = sorted({g for g in flat if flat.count(g) > 1})
        if twice:
            out.append(Violation(Kind.STAGE_GPUS, f"job {jid!r}: GPUs {twice} are in more than one stage"))
        elif set(flat) != set(placements[jid]):
            out.append(Violation(Kind.STAGE_GPUS, f"job {jid!r}: its stages hold GPUs {sorted(flat)}, "
                                 f"it is placed on {sorted(placements[jid])}"))
    return out


def _rule_violations(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], admission: str, terminate: list[JobId]
) -> list[Violation]:
    jobs = instance.job_by_id
    placed = set(placements)
    free_left = instance.free_gpus - sum(jobs[j].demand for j in placed)
    if admission.endswith("-backfill"):
        return _backfill_rule(instance, placements, admission, terminate, free_left)
    if admission == "pal-order":
        return _segment_rule(instance, pal_order(instance), placed, free_left, "pal-order")
    if admission == "queue-order":
        return _segment_rule(instance, list(range(len(instance.jobs))), placed, free_left, "queue-order")
    if admission == "sticky":
        return _sticky_rule(instance, placements, terminate, free_left)
    if admission in ("prefix", "backfill"):
        want = {instance.jobs[i].id for i in admit(instance, admission)}
        if placed != want:
            missing = sorted(map(str, want - placed))
            extra = sorted(map(str, placed - want))
            return [Violation(Kind.ADMISSION,
                              f"{admission}: admitted set differs (missing {missing}, extra {extra})")]
    return []


def _backfill_rule(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], admission: str, terminate: list[JobId],
    free_left: int,
) -> list[Violation]:
    """A greedy walk that skips what does not fit leaves out only jobs needing more GPUs than
    are free at the end (GPUs only get fewer after a job is skipped); sticky running jobs keep
    their GPUs or are terminated."""
    sticky = admission == "sticky-backfill"
    out = _running_kept(instance, placements, terminate) if sticky else []
    term = set(terminate)
    for j in instance.jobs:
        waiting = not sticky or j.placement is None or j.id in term
        if waiting and j.id not in placements and j.demand <= free_left:
            out.append(Violation(Kind.LEFT_OUT, f"{admission}: job {j.id!r} needs {j.demand} GPUs and "
                                 f"{free_left} are still free, but it was not placed"))
    return out


def _sticky_rule(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], terminate: list[JobId], free_left: int
) -> list[Violation]:
    jobs = instance.job_by_id
    term = set(terminate)
    waiting = [i for i, j in enumerate(instance.jobs) if j.placement is None or j.id in term]
    new_placed = {jid for jid in placements if jobs[jid].placement is None or jid in term}
    return _running_kept(instance, placements, terminate) + _segment_rule(
        instance, waiting, new_placed, free_left, "sticky")


def _running_kept(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], terminate: list[JobId]
) -> list[Violation]:
    """Every running job keeps exactly its GPUs, or is terminated and not placed."""
    term = set(terminate)
    out: list[Violation] = []
    for j in instance.jobs:
        if j.placement is None:
            continue
        if j.id in term:
            if j.id in placements:
                out.append(Violation(Kind.STICKY, f"sticky: job {j.id!r} is terminated but placed"))
        elif sorted(placements.get(j.id, [])) != sorted(j.placement):
            out.append(Violation(Kind.STICKY, f"sticky: running job {j.id!r} was moved without being terminated"))
    return out


def _objective_violations(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], objective: float | None, binning: str
) -> list[Violation]:
    if objective is None or not placements:
        return []
    factors = binned_factors(instance.cluster, binning)
    cost = evaluate(instance, {k: tuple(v) for k, v in placements.items()}, factors).cost
    if math.isclose(cost, objective, rel_tol=1e-6, abs_tol=1e-6):
        return []
    return [Violation(Kind.OBJECTIVE, f"objective {objective!r} differs from the recomputed round cost {cost!r}")]
