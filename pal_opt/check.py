"""The independent validity checker.

It does not trust a method's own report.  Given a round and a placement (a
:class:`~pal_opt.result.PlacementResult`, the dict of a PLACEMENT.json file, or a bare
``{job id: [GPU ids]}`` mapping such as ``result.placements``, read as
``{"placements": mapping}`` with admission ``"given"``, as :mod:`pal_opt.io.placements` reads a
bare placement file) it checks:

* every placed job is in the queue and gets exactly its demand (or, for a job that allows
  several counts, one of them), with no GPU listed twice;
* every GPU exists and no GPU is used by two jobs;
* the stages of a job, when the result gives them (``stages``, :attr:`PlacementResult.stages`):
  as many as its pipeline has (one for a gang), each with its replica count of GPUs, every GPU
  of the job in exactly one stage; the cost is then priced with the GPUs in stage order;
* no busy or failed GPU is used;
* with GPU types (:mod:`pal_opt.gputypes`): every job is on GPUs of its usable types (a
  guaranteed job on its type), and on one type unless it allows mixing;
* the placed set obeys the queue rule the result declares (``admission``):

  - ``pal-order`` / ``queue-order``: the placed jobs are an initial segment of the PAL order
    (:func:`pal_opt.admission.pal_order`) or of the queue, and the first job left out needs more
    GPUs than are still free;
  - ``sticky``: every running job keeps exactly its GPUs (a pipeline job: each stage on the
    same GPUs as before, :func:`~pal_opt.model.keeps_placement`; re-mapped stages are a move)
    or is terminated (it then waits in its queue place like a new job, and may be placed again
    on other GPUs: a job on a GPU that failed or was taken must move, and a job preempted for one
    waiting job may fit once a later one has preempted others); the new jobs placed are an initial
    segment of the waiting jobs in queue order, and the first left out needs more GPUs than are
    still free;
  - ``prefix`` / ``backfill``: the placed set is exactly the admitted set
    (:func:`pal_opt.admission.admit`);
  - ``given``: no queue rule;
  - ``preempt`` (the preemptive methods, :mod:`pal_opt.priority`): every running job that is
    not placed on exactly its GPUs (a pipeline: each stage on its GPUs) is listed in
    ``jobs_to_terminate``; a running job left out (preempted) has a lower priority than some
    waiting job placed this round; and no waiting job left out fits the GPUs still free (a
    running job on a GPU that failed or was taken counts as waiting: it must move); with GPU
    types, a preempted job holds a GPU of a type that a started waiting job of a higher priority
    may use;
  - ``repair`` (:mod:`pal_opt.repair`): checked on the repair round the result declares
    (:func:`pal_opt.inforce.round_of_result`: its failed GPUs out of service, the placement in
    force running): every job placed was in force, on no more GPUs than it ran on there (a
    repair never grows a job); every job in force not listed in ``jobs_to_terminate`` keeps
    exactly its GPUs (a pipeline: its stage map); a job left out lost a GPU and needs more GPUs
    than are still free, even at the smallest count a repair may give it (an allowed count up to
    the one it ran on, :func:`pal_opt.inforce.repair_counts`);

  with GPU types, "needs more GPUs than are still free" means: more than are still free in
  each of its type groups;

* the reported objective, when present, equals the cost recomputed by :mod:`pal_opt.cost`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .admission import admit, pal_order
from .binning import BINNING_MODES, binned_factors
from .cost import evaluate
from .errors import InstanceError, OptionError, counted
from .gputypes import fits_types, free_per_type, has_types, type_groups, usable_types
from .inforce import repair_counts, round_of_result
from .model import GpuState, Job, JobId, RoundInstance, keeps_placement, non_integer_at
from .result import PlacementResult, Status, jobs_to_terminate

__all__ = ["check", "violations", "checked_start", "Kind", "Violation", "ADMISSION_RULES", "RESULT_FIELDS"]

ADMISSION_RULES: tuple[str, ...] = (
    "pal-order", "queue-order", "sticky", "pal-order-backfill", "queue-order-backfill", "sticky-backfill",
    "prefix", "backfill", "given", "repair", "preempt",
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
    COUNT = "count"  #: a job that allows several GPU counts gets another one, or a repair grows a job
    GPU_TYPE = "gpu-type"  #: a GPU of a type the job may not use (a guaranteed job off its type)
    MIXED_TYPES = "mixed-types"  #: GPUs of several types for a job that does not mix types
    STAGE_COUNT = "stage-count"  #: a job's stages are not as many as its pipeline's (one for a gang)
    STAGE_REPLICAS = "stage-replicas"  #: a stage does not get its replica count of GPUs
    STAGE_GPUS = "stage-gpus"  #: a GPU in two stages, or stages that do not hold exactly the job's GPUs
    UNREPORTED = "unreported"  #: a running job preempted or moved but not in jobs_to_terminate, or listed there and kept
    PRIORITY = "priority"  #: a running job preempted with no waiting job of a higher priority started


@dataclass(frozen=True)
class Violation:
    """One violation: its kind and the line that describes it."""

    kind: Kind
    message: str

    def __str__(self) -> str:
        return self.message


#: The keys of a result dict (``PlacementResult.to_dict()``) that are not placements: a mapping
#: without ``"placements"`` holding one of them (and no job of that id) is ambiguous.
RESULT_FIELDS: frozenset[str] = frozenset(
    {f.name for f in dataclasses.fields(PlacementResult)} | {"spanning", "jobs_placed", "stages", "format", "version"})


def _as_result(instance: RoundInstance, result: PlacementResult | Mapping[str, Any]
               ) -> PlacementResult | Mapping[str, Any]:
    """``result`` itself, or a bare ``{job id: [GPU ids]}`` mapping (no ``"placements"`` key)
    wrapped as ``{"placements": result}``.

    Raises
    ------
    InstanceError
        A mapping without ``"placements"`` whose keys include a result field (``admission``,
        ``objective``, ...) that is not a job id: a result dict missing its placements; or
        an ``instance`` that is not a round, or a ``result`` that is none of these.
    """
    if not isinstance(instance, RoundInstance):
        raise InstanceError(f"check takes a RoundInstance, got {type(instance).__name__}", path="instance")
    if not isinstance(result, (PlacementResult, Mapping)):
        raise InstanceError("check takes a PlacementResult, a result dict or a {job id: [GPU ids]} mapping, "
                            f"got {type(result).__name__}", path="result")
    if isinstance(result, PlacementResult) or not isinstance(result, Mapping) or "placements" in result:
        return result
    ids = {str(j.id) for j in instance.jobs}
    fields = sorted(str(k) for k in result if str(k) in RESULT_FIELDS and str(k) not in ids)
    if fields:
        raise InstanceError(f"missing: a result dict needs its placements (it has {', '.join(fields)}); "
                            "a bare {job id: [GPU ids]} mapping has only job ids", path="placements")
    return {"placements": result}


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
        admission = result.get("admission", "given")
        if not isinstance(admission, str):
            problems.append(Violation(Kind.FORM, f"admission: must be a queue rule's name, got {_shown(admission)}"))
            admission = "given"
        declared = result.get("jobs_to_terminate")
        # not a list: a form violation (_declared_violations); a number or true was a TypeError here
        terminate = list(declared) if isinstance(declared, (list, tuple)) else []
        obj = result.get("objective")
        objective = float(obj) if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None
        info = result.get("info") or {}
        binning = str(info.get("binning", instance.params.binning)) if isinstance(info, Mapping) else instance.params.binning
    placements: dict[JobId, list[int]] = {}
    seen: dict[JobId, Any] = {}
    for key, gpus in raw.items():
        jid = key if key in instance.job_by_id else by_str.get(str(key))
        if jid is None:
            problems.append(Violation(Kind.UNKNOWN_JOB, f"job {key!r}: not in the queue"))
            continue
        bad = non_integer_at(gpus) if isinstance(gpus, (list, tuple)) else None
        if not isinstance(gpus, (list, tuple)) or bad is not None:
            got = f", got {_shown(gpus[bad])} at [{bad}]" if bad is not None else f", got {type(gpus).__name__}"
            problems.append(Violation(Kind.FORM, f"job {key!r}: GPU list must be a list of integer ids{got}"))
            continue
        if jid in placements:  # 2 and "2" are one job: placed twice, not the last one kept
            problems.append(Violation(Kind.FORM, f"job {key!r}: placed twice (also under the key {seen[jid]!r})"))
            continue
        seen[jid] = key
        placements[jid] = [int(g) for g in gpus]
    term = [t if not isinstance(t, Hashable) or t in instance.job_by_id else by_str.get(str(t), t) for t in terminate]
    if admission not in ADMISSION_RULES:
        problems.append(Violation(Kind.ADMISSION_RULE,
                                  f"admission {admission!r} is not one of {', '.join(ADMISSION_RULES)}"))
    if binning not in BINNING_MODES:
        binning = instance.params.binning
    return placements, admission, term, objective, binning, problems


@dataclass(frozen=True)
class _FreeLeft:
    """The free GPUs a placement leaves: in all, and per GPU type when types matter."""

    total: int
    per_type: np.ndarray | None

    @classmethod
    def of(cls, instance: RoundInstance, placements: Mapping[JobId, list[int]]) -> _FreeLeft:
        cl = instance.cluster
        total = instance.free_gpus - sum(len(g) for g in placements.values())
        if not has_types(instance):
            return cls(total, None)
        free = cl.free_mask.copy()
        for gpus in placements.values():
            free[cl.positions(gpus)] = False
        return cls(total, free_per_type(cl, free))

    def fits(self, instance: RoundInstance, job: Job, count: int | None = None) -> bool:
        """Whether ``job`` fits the free GPUs on ``count`` GPUs (default: its demand)."""
        need = job.demand if count is None else count
        if self.per_type is None:
            return need <= self.total
        return fits_types(type_groups(instance.cluster, job), need, self.per_type)

    def left_out(self, instance: RoundInstance, job: Job, label: str, count: int | None = None) -> Violation:
        if self.per_type is None:
            free = f"{self.total} are still free"
        else:
            most = max((int(self.per_type[list(g)].sum()) for g in type_groups(instance.cluster, job)), default=0)
            free = f"{most} of its GPU types are still free"
        need = counted(job.demand, "GPU") if count is None or count == job.demand else \
            f"{counted(count, 'GPU')} (one of its allowed counts)"
        return Violation(Kind.LEFT_OUT, f"{label}: job {job.id!r} needs {need} and {free}, but it was not placed")


def _segment_rule(
    instance: RoundInstance, order: list[int], placed: set[JobId], free_left: _FreeLeft, label: str
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
        if free_left.fits(instance, nxt):
            problems.append(free_left.left_out(instance, nxt, label))
    return problems


def violations(instance: RoundInstance, result: PlacementResult | Mapping[str, Any]) -> list[Violation]:
    """The violations of ``result`` on ``instance``, each with its :class:`Kind` (empty if valid).

    The checks run in three stages and a stage runs only if the one before found nothing: the
    form of the result (known jobs, GPU lists, and the fields it declares besides: admission,
    status, objective, jobs to terminate and unplaceable jobs); each gang (demand, GPUs that exist, are free and
    are used once); then the queue rule the result declares and its reported objective.
    """
    result = _as_result(instance, result)
    placements, admission, terminate, objective, binning, problems = _normalise(instance, result)
    stages, form = _read_stages(result, placements, instance)
    problems += form + _declared_violations(instance, result, placements, terminate, admission)
    if not problems and admission == "repair":
        instance, problems = _repair_round(instance, result, placements)
    if not problems:
        problems = _gang_violations(instance, placements) + _stage_violations(instance, placements, stages)
    if not problems:
        placements = {**placements, **{j: [g for stage in stages[j] for g in stage] for j in stages}}
        problems = _rule_violations(instance, placements, admission, terminate)
        if admission in _TERMINATE_EXACT and _declares_terminate(result):
            problems += _terminate_violations(instance, placements, terminate)
        problems += _objective_violations(instance, placements, objective, binning)
    return problems


def check(instance: RoundInstance, result: PlacementResult | Mapping[str, Any]) -> list[str]:
    """Return the list of violations of ``result`` on ``instance`` (empty if valid), as text.

    ``result`` is a :class:`~pal_opt.result.PlacementResult`, a result dict with
    ``"placements"``, or a bare ``{job id: [GPU ids]}`` mapping (``result.placements``), checked
    with admission ``"given"``.

    Raises
    ------
    InstanceError
        A mapping without ``"placements"`` that holds result fields (``admission``, ...).

    Examples
    --------
    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.1, 0.9, 1.0]})
    >>> inst = RoundInstance(c, (Job(1, 2, "classA"),))
    >>> check(inst, {"placements": {"1": [0, 1]}, "admission": "prefix"})
    []
    >>> check(inst, {"placements": {"1": [0, 0]}, "admission": "given"})
    ['job 1: needs 2 distinct GPUs, got [0, 0]']
    >>> check(inst, {1: [0, 0]})
    ['job 1: needs 2 distinct GPUs, got [0, 0]']
    """
    return [v.message for v in violations(instance, result)]


#: Queue rules under which ``jobs_to_terminate`` is exactly the running jobs that lose or change
#: their GPUs (the sticky, preempt and repair rules check it their own way).
_TERMINATE_EXACT: frozenset[str] = frozenset(
    {"pal-order", "queue-order", "prefix", "backfill", "given", "pal-order-backfill", "queue-order-backfill"})


def _declares_terminate(result: PlacementResult | Mapping[str, Any]) -> bool:
    return isinstance(result, PlacementResult) or "jobs_to_terminate" in result


def _declared_violations(instance: RoundInstance, result: PlacementResult | Mapping[str, Any],
                         placements: Mapping[JobId, list[int]], terminate: list[Any], admission: str) -> list[Violation]:
    """What a result dict declares besides its placements, against them: a known status (``infeasible`` with nothing placed), a numeric objective, jobs to terminate
    that are running jobs of the queue (of the repair round for a repair, checked there), and
    unplaceable jobs of the queue that are not placed."""
    if isinstance(result, PlacementResult):
        return []
    out: list[Violation] = []
    status = result.get("status")
    if status is not None and (not isinstance(status, str) or status not in {s.value for s in Status}):
        out.append(Violation(Kind.FORM,
                             f"status: must be one of {', '.join(s.value for s in Status)}, got {_shown(status)}"))
    elif status == Status.INFEASIBLE.value and placements:
        out.append(Violation(Kind.FORM, f"status: infeasible, but {len(placements)} jobs are placed"))
    obj = result.get("objective")
    if obj is not None and (isinstance(obj, bool) or not isinstance(obj, (int, float))):
        out.append(Violation(Kind.FORM, f"objective: must be a number, got {_shown(obj)}"))
    raw_term = result.get("jobs_to_terminate", [])
    if raw_term is not None and not isinstance(raw_term, (list, tuple)):
        out.append(Violation(Kind.FORM, "jobs_to_terminate: must be a list of job ids"))
    else:
        jobs = instance.job_by_id
        for t in terminate:
            if not isinstance(t, Hashable) or t not in jobs:
                out.append(Violation(Kind.UNKNOWN_JOB, f"jobs_to_terminate: job {_shown(t)} is not in the queue"))
            elif jobs[t].placement is None and admission != "repair":
                out.append(Violation(Kind.FORM, f"jobs_to_terminate: job {t!r} is not running"))
    out += _unplaceable_violations(instance, result.get("unplaceable"), placements)
    return out


def _shown(value: Any) -> str:
    """A value from a result file as JSON spells it, cut to 60 characters."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _unplaceable_violations(instance: RoundInstance, declared: Any,
                            placements: Mapping[JobId, list[int]]) -> list[Violation]:
    """``unplaceable``, as :meth:`PlacementResult.to_dict` writes it (``[{"job", "reason"}]``) or
    as a mapping, names jobs of the queue that are not placed."""
    if declared is None:
        return []
    if isinstance(declared, Mapping):
        names: list[Any] = list(declared)
    elif isinstance(declared, (list, tuple)) and all(isinstance(e, Mapping) and "job" in e for e in declared):
        names = [e["job"] for e in declared]
    else:
        return [Violation(Kind.FORM, 'unplaceable: must be a list of {"job", "reason"} objects')]
    by_str = {str(j.id): j.id for j in instance.jobs}
    out = []
    for name in names:
        jid = name if isinstance(name, Hashable) and name in instance.job_by_id else by_str.get(str(name))
        if jid is None:
            out.append(Violation(Kind.UNKNOWN_JOB, f"unplaceable: job {_shown(name)} is not in the queue"))
        elif jid in placements:
            out.append(Violation(Kind.FORM, f"unplaceable: job {jid!r} is placed"))
    return out


def _terminate_violations(instance: RoundInstance, placements: Mapping[JobId, list[int]],
                          terminate: list[JobId]) -> list[Violation]:
    """``jobs_to_terminate`` is exactly the running jobs not placed on exactly their GPUs
    (:func:`pal_opt.result.jobs_to_terminate`)."""
    term, must = set(terminate), set(jobs_to_terminate(instance, placements))
    out = []
    for j in instance.jobs:
        if j.placement is None:
            continue
        kept = j.id not in must
        if not kept and j.id not in term:
            how = "is left out" if j.id not in placements else "is moved"
            out.append(Violation(Kind.UNREPORTED, f"running job {j.id!r} {how} but not in jobs_to_terminate"))
        elif kept and j.id in term:
            out.append(Violation(Kind.UNREPORTED, f"job {j.id!r} is in jobs_to_terminate but keeps its GPUs"))
    return out


def checked_start(instance: RoundInstance, admitted: Sequence[int], start: Mapping[JobId, Sequence[int]],
                  what: str = "") -> dict[JobId, tuple[int, ...]]:
    """A start placement given to a solve, checked as :func:`check` checks an answer (placing
    exactly the ``admitted`` jobs, given by index), as a placement; for solves that must use it
    before (or without) a program that could encode it.

    Raises
    ------
    OptionError
        ``start is not a placement of the admitted jobs`` (then ``what``), with the first
        violation.
    """
    placement = {jid: tuple(int(g) for g in gids) for jid, gids in start.items()}
    wanted = {instance.jobs[i].id for i in admitted}
    problems = [v.message for v in violations(instance, {"placements": placement, "admission": "given"})]
    if set(placement) != wanted:
        missing, extra = sorted(map(str, wanted - set(placement))), sorted(map(str, set(placement) - wanted))
        problems.insert(0, f"missing {missing}, extra {extra}")
    if problems:
        raise OptionError(f"start is not a placement of the admitted jobs{what}: {problems[0]}")
    return placement


def _gang_violations(instance: RoundInstance, placements: Mapping[JobId, list[int]]) -> list[Violation]:
    cl = instance.cluster
    jobs = instance.job_by_id
    owner: dict[int, JobId] = {}
    out: list[Violation] = []
    typed = has_types(instance)
    for jid, gpus in placements.items():
        job = jobs[jid]
        if len(set(gpus)) != len(gpus) or (len(gpus) != job.demand and len(job.counts) == 1):
            out.append(Violation(Kind.GANG_SIZE, f"job {jid!r}: needs {counted(job.demand, 'distinct GPU')}, got {gpus}"))
        elif len(gpus) not in job.counts:
            out.append(Violation(Kind.COUNT, f"job {jid!r}: may run on {list(job.counts)} GPUs, got {len(gpus)}"))
        if typed and all(g in cl.position for g in gpus):
            out += _type_violations(instance, job, gpus)
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


def _type_violations(instance: RoundInstance, job: Job, gpus: list[int]) -> list[Violation]:
    """A gang off its job's usable GPU types, or on several types when the job does not mix."""
    cl = instance.cluster
    if not gpus:
        return []
    kinds = cl.type_of[cl.positions(gpus)]
    use = usable_types(cl, job)
    name = cl.type_names
    out: list[Violation] = []
    bad = [g for g, k in zip(gpus, kinds.tolist(), strict=True) if k not in use]
    if bad:
        may = ", ".join(repr(name[k]) for k in use) or "none"
        what = f"guaranteed GPU type {job.gpu_type!r}" if job.kind == "guaranteed" else f"usable GPU types: {may}"
        out.append(Violation(Kind.GPU_TYPE, f"job {job.id!r}: GPUs {bad} are not of its type ({what})"))
    distinct = sorted(set(kinds.tolist()))
    if len(distinct) > 1 and not job.mix_types:
        names = ", ".join(repr(name[k]) for k in distinct)
        out.append(Violation(Kind.MIXED_TYPES, f"job {job.id!r}: GPUs of types {names}, but it does not mix types"))
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
                isinstance(st, (list, tuple)) and non_integer_at(st) is None for st in value):
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
    placed = set(placements)
    free_left = _FreeLeft.of(instance, placements)
    if admission.endswith("-backfill"):
        return _backfill_rule(instance, placements, admission, terminate, free_left)
    if admission == "pal-order":
        return _segment_rule(instance, pal_order(instance), placed, free_left, "pal-order")
    if admission == "queue-order":
        return _segment_rule(instance, list(range(len(instance.jobs))), placed, free_left, "queue-order")
    if admission == "sticky":
        return _sticky_rule(instance, placements, terminate, free_left)
    if admission == "repair":
        return _repair_rule(instance, placements, terminate, free_left)
    if admission == "preempt":
        return _preempt_rule(instance, placements, terminate, free_left)
    if admission in ("prefix", "backfill"):
        want = {instance.jobs[i].id for i in admit(instance, admission)}
        if placed != want:
            missing = sorted(map(str, want - placed))
            extra = sorted(map(str, placed - want))
            return [Violation(Kind.ADMISSION,
                              f"{admission}: admitted set differs (missing {missing}, extra {extra})")]
    return []


def _preempt_rule(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], terminate: list[JobId], free_left: _FreeLeft
) -> list[Violation]:
    """Preemption by priority: moved and preempted jobs are reported; a preempted job made room
    for a job of a higher priority; what is left out does not fit.  A running job on a GPU that
    failed or was taken (it must move) counts as waiting: placed, it is started anew; left out,
    it was not preempted.  With GPU types "fits" is per type group, and a preempted job must hold
    a GPU of a type that one of the higher-priority jobs started may use (:func:`_typed_priority`)."""
    term = set(terminate)
    cl = instance.cluster
    homeless = {j.id for j in instance.jobs
                if j.placement is not None and not (cl.state[cl.positions(j.placement)] == GpuState.FREE).all()}
    starts = [j for j in instance.jobs if (j.placement is None or j.id in homeless) and j.id in placements]
    top = max((j.priority for j in starts), default=None)
    out: list[Violation] = []
    for j in instance.jobs:
        now = placements.get(j.id)
        if j.placement is not None and not keeps_placement(j, now) and j.id not in term:
            what = "preempted" if now is None else "re-mapped" if _remapped(j, now) else "moved"
            out.append(Violation(Kind.UNREPORTED, f"preempt: running job {j.id!r} is {what} but not in "
                                                  "jobs_to_terminate"))
        if j.placement is None or j.id in homeless:
            if now is None and free_left.fits(instance, j):
                out.append(free_left.left_out(instance, j, "preempt"))
            continue
        if now is None and (top is None or top <= j.priority):
            out.append(Violation(Kind.PRIORITY, f"preempt: running job {j.id!r} (priority {j.priority}) is "
                                                "preempted, but no waiting job of a higher priority was started"))
        elif now is None and free_left.per_type is not None:
            out += _typed_priority(instance, j, starts)
    return out


def _typed_priority(instance: RoundInstance, job: Job, starts: list[Job]) -> list[Violation]:
    """With GPU types, a preempted running job must hold a GPU of a type that some job of a higher
    priority started this round may use (its GPUs can serve no other)."""
    cl = instance.cluster
    kinds = set(cl.type_of[cl.positions(job.placement or ())].tolist())
    if any(h.priority > job.priority and kinds & set(usable_types(cl, h)) for h in starts):
        return []
    names = ("GPU type " if len(kinds) == 1 else "GPU types ") + ", ".join(repr(cl.type_names[k]) for k in sorted(kinds))
    return [Violation(Kind.PRIORITY, f"preempt: running job {job.id!r} (priority {job.priority}, on "
                                     f"{names}) is preempted, but no waiting job of a higher priority that may "
                                     "use those types was started")]


def _backfill_rule(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], admission: str, terminate: list[JobId],
    free_left: _FreeLeft,
) -> list[Violation]:
    """A greedy walk that skips what does not fit leaves out only jobs needing more GPUs than
    are free at the end (GPUs only get fewer after a job is skipped); sticky running jobs keep
    their GPUs or are terminated."""
    sticky = admission == "sticky-backfill"
    out = _running_kept(instance, placements, terminate) if sticky else []
    term = set(terminate)
    for j in instance.jobs:
        waiting = not sticky or j.placement is None or j.id in term
        if waiting and j.id not in placements and free_left.fits(instance, j):
            out.append(free_left.left_out(instance, j, admission))
    return out


def _sticky_rule(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], terminate: list[JobId], free_left: _FreeLeft
) -> list[Violation]:
    jobs = instance.job_by_id
    term = set(terminate)
    waiting = [i for i, j in enumerate(instance.jobs) if j.placement is None or j.id in term]
    new_placed = {jid for jid in placements if jobs[jid].placement is None or jid in term}
    return _running_kept(instance, placements, terminate) + _segment_rule(
        instance, waiting, new_placed, free_left, "sticky")


def _repair_round(instance: RoundInstance, result: PlacementResult | Mapping[str, Any],
                  placements: Mapping[JobId, list[int]]) -> tuple[RoundInstance, list[Violation]]:
    """The repair round ``result`` declares, or the violations that it declares none usable or
    places a job that was not in force."""
    try:
        rnd = round_of_result(instance, result)
    except InstanceError as exc:
        return instance, [Violation(Kind.FORM, str(exc))]
    started = [jid for jid in placements if jid not in rnd.job_by_id]
    return rnd, [Violation(Kind.ADMISSION, f"repair: job {jid!r} was not in the placement in force; a repair "
                                           "starts no queued job") for jid in started]


def _repair_rule(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], terminate: list[JobId], free_left: _FreeLeft
) -> list[Violation]:
    """A repair keeps every running job not terminated on exactly its GPUs, places no job on
    more GPUs than it ran on, and leaves out only jobs that lost a GPU and do not fit the GPUs
    still free, at any count the repair may give them (:func:`~pal_opt.inforce.repair_counts`: an
    allowed count up to the one it ran on).  (The round holds only the jobs in force,
    :func:`~pal_opt.inforce.round_of_result`, so every job in it is running.)"""
    term = set(terminate)
    cl = instance.cluster
    out: list[Violation] = []
    for j in instance.jobs:
        now = placements.get(j.id)
        if j.placement is None:
            continue
        if now is not None and len(now) > len(j.placement):
            out.append(Violation(Kind.COUNT, f"repair: job {j.id!r} ran on {counted(len(j.placement), 'GPU')} and is "
                                             f"placed on {len(now)}; a repair never grows a job"))
        if j.id not in term:
            if _remapped(j, now):
                out.append(Violation(Kind.STICKY, f"repair: running job {j.id!r} was re-mapped (its stages on "
                                                  "other GPUs of its set) without being listed in jobs_to_terminate"))
            elif not keeps_placement(j, now):
                out.append(Violation(Kind.STICKY, f"repair: running job {j.id!r} was moved or left out without "
                                                  "being listed in jobs_to_terminate"))
        elif now is None:
            if (cl.state[cl.positions(j.placement)] == GpuState.FREE).all():
                out.append(Violation(Kind.LEFT_OUT, f"repair: job {j.id!r} lost no GPU but was left out"))
            elif free_left.fits(instance, j, smallest := min(repair_counts(j))):
                out.append(free_left.left_out(instance, j, "repair", smallest))
    return out


def _running_kept(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], terminate: list[JobId]
) -> list[Violation]:
    """Every running job keeps exactly its GPUs or is terminated.  A terminated job waits in its
    queue place and may be placed again, on other GPUs, when its turn comes: a job on a GPU that
    failed or was taken must move, and a job preempted for one waiting job may fit once a later
    one has preempted others (:mod:`pal_opt.policies.packed`).  Terminated and placed on exactly
    its GPUs is a contradiction."""
    term = set(terminate)
    out: list[Violation] = []
    for j in instance.jobs:
        if j.placement is None:
            continue
        if j.id in term:
            if j.id in placements and keeps_placement(j, placements[j.id]):
                out.append(Violation(Kind.STICKY, f"sticky: job {j.id!r} is terminated but placed on its own GPUs"))
        elif not keeps_placement(j, placements.get(j.id, [])):
            how = "re-mapped (its stages on other GPUs of its set)" if _remapped(j, placements.get(j.id)) else "moved"
            out.append(Violation(Kind.STICKY, f"sticky: running job {j.id!r} was {how} without being terminated"))
    return out


def _remapped(job: Job, now: list[int] | None) -> bool:
    """Whether running pipeline ``job`` is placed on its GPUs with its stages re-mapped: the same
    set, not the same GPUs per stage (:func:`~pal_opt.model.keeps_placement`); a move all the same."""
    return (now is not None and job.placement is not None and set(now) == set(job.placement)
            and not keeps_placement(job, now))


def _objective_violations(
    instance: RoundInstance, placements: Mapping[JobId, list[int]], objective: float | None, binning: str
) -> list[Violation]:
    if objective is None or (not placements and math.isinf(objective)):
        return []  # an infeasible round: nothing placed, objective inf (a result dict's None)
    factors = binned_factors(instance.cluster, binning)
    cost = evaluate(instance, {k: tuple(v) for k, v in placements.items()}, factors).cost
    if math.isclose(cost, objective, rel_tol=1e-6, abs_tol=1e-6):
        return []
    return [Violation(Kind.OBJECTIVE, f"objective {objective!r} differs from the recomputed round cost {cost!r}")]
