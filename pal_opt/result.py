"""What every method returns: the normalised :class:`PlacementResult`, and the one function
that builds it from a placement (:func:`priced_result`), pricing it with :mod:`pal_opt.cost`."""

from __future__ import annotations

import copy
import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .admission import unplaceable
from .cost import CostSummary, evaluate, unseen_terms
from .model import JobId, RoundInstance, keeps_placement

#: ``format`` and ``version`` of a placement file (:meth:`PlacementResult.to_dict`).  A file
#: without them (older pal-opt, or a bare ``{job id: [GPU ids]}`` object) is read as version 1;
#: a later version is refused rather than half-understood (:mod:`pal_opt.io.placements`).
PLACEMENT_FORMAT = "pal-opt/placement"
PLACEMENT_VERSION = 1
#: Relative geometric-mean gap under which a proven solve is reported OPTIMAL (the round program's,
#: ``pal_opt.ilp.solve``, and the stage program's and its search's, ``pal_opt.ilp.stageround``).
OPTIMALITY_TOL = 1e-6

__all__ = ["PLACEMENT_FORMAT", "PLACEMENT_VERSION", "OPTIMALITY_TOL", "Status", "PlacementResult", "priced_result", "kept_as_given", "pipeline_stages", "jobs_to_terminate", "finite_or_none"]


def finite_or_none(v: Any) -> Any:
    """``v``, or None if it is a non-finite float (JSON has no NaN or infinity).

    >>> finite_or_none(float("inf")), finite_or_none(1.5)
    (None, 1.5)
    """
    return None if isinstance(v, float) and not math.isfinite(v) else v


def jobs_to_terminate(
    instance: RoundInstance, placements: Mapping[JobId, Sequence[int]]
) -> tuple[JobId, ...]:
    """Running jobs (queue order) that are not placed or do not keep their placement: a gang
    given another GPU set, a pipeline given another set or another stage map of the same GPUs
    (:func:`~pal_opt.model.keeps_placement`)."""
    out = []
    for j in instance.jobs:
        if j.placement is None:
            continue
        if not keeps_placement(j, placements.get(j.id)):
            out.append(j.id)
    return tuple(out)


class Status(enum.StrEnum):
    """Outcome of a solve.

    ``FEASIBLE`` is never reported as ``OPTIMAL``: a greedy policy's placement, or an integer
    program stopped with a gap, is ``FEASIBLE``.  ``FALLBACK`` means an exact solve found no
    solution in time and the result is the greedy placement, flagged as such.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    FALLBACK = "fallback"


@dataclass
class PlacementResult:
    """A placement and how it was obtained.  Identical in shape for every method and backend.

    Attributes
    ----------
    placements
        ``{job id: (GPU id, ...)}`` for every job placed this round (input ids).  A running job
        that keeps its GPUs gets them back exactly as the round gave them (same order), so
        ``placements.get(j) == job.placement`` tells a round loop that ``j`` goes on running;
        any other running job is in ``jobs_to_terminate``.
    method
        ``"pal"``, ``"pmfirst"``, ``"packed"``, ``"packed-sticky"``, ``"random"`` or ``"ilp"``.
    status
        A :class:`Status`.
    objective
        Round cost of ``placements`` under the round's (binned) factors, from :mod:`pal_opt.cost`.
    bound
        Best proven lower bound on the round cost for the admitted jobs (exact methods), else None.
    gap
        Relative gap of the geometric-mean slowdown, gm(objective)/gm(bound) − 1, else None.
    geomean_slowdown
        exp(objective / gpus_used) when no running job is left out; the charges for running jobs
        left out (``info["cost_terms"]``, e.g. ``preemption``, priced by every method) are in
        ``objective`` but not in this mean over the placed jobs (:class:`~pal_opt.cost.CostSummary`).
    gpus_used
        Σ demand over placed jobs.
    solve_seconds, build_seconds
        Time inside the policy or solver, and time building the formulation (no file I/O).
    backend, backend_version
        Solver used (None for greedy policies).
    admission
        The queue rule the placed set follows: ``"pal-order"``, ``"queue-order"``, ``"sticky"``,
        ``"prefix"``, ``"backfill"`` or ``"given"``.
    jobs_to_terminate
        Running jobs that lose or change their GPUs this round (a pipeline also when its stages
        are re-mapped on the same GPUs, :func:`~pal_opt.model.keeps_placement`).
    spanning
        Jobs whose GPUs lie on more than one server.
    unplaceable
        ``{job id: reason}`` for queued jobs no placement of this round can serve (e.g. a job
        needing more GPUs than the cluster has); they are left unplaced, not rejected.
    message
        Free-text detail: infeasibility reason, fallback cause.
    info
        Extra, method-specific figures (e.g. model size).
    stages
        ``{job id: ((GPU id, ...), ...)}``: for each placed pipeline job
        (:class:`~pal_opt.model.Pipeline`), its GPUs stage by stage, the same GPUs in the same
        order as in ``placements``.
    """

    placements: dict[JobId, tuple[int, ...]]
    method: str
    status: Status
    objective: float
    geomean_slowdown: float
    gpus_used: int
    solve_seconds: float
    admission: str
    bound: float | None = None
    gap: float | None = None
    build_seconds: float = 0.0
    backend: str | None = None
    backend_version: str | None = None
    jobs_to_terminate: tuple[JobId, ...] = ()
    spanning: int = 0
    unplaceable: dict[JobId, str] = field(default_factory=dict)
    message: str = ""
    seed: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    stages: dict[JobId, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    @property
    def jobs_placed(self) -> int:
        return len(self.placements)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; job ids become strings in ``placements``."""
        # as dataclasses.asdict, without deep-copying the placements only to replace them
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "placements"}
        d = {"format": PLACEMENT_FORMAT, "version": PLACEMENT_VERSION,
             "placements": {str(k): [int(g) for g in v] for k, v in self.placements.items()}, **d}
        d["status"] = self.status.value
        d["jobs_to_terminate"] = list(self.jobs_to_terminate)
        d["unplaceable"] = [{"job": k, "reason": v} for k, v in self.unplaceable.items()]
        d["jobs_placed"] = self.jobs_placed
        d.pop("stages")
        if self.stages:  # only rounds with pipeline jobs carry the key
            d["stages"] = {str(k): [[int(g) for g in stage] for stage in v] for k, v in self.stages.items()}
        for k in ("objective", "bound", "gap", "geomean_slowdown"):
            d[k] = finite_or_none(d[k])
        return d

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text: ``json.dumps(self.to_dict(), indent=indent)``.

        >>> r = PlacementResult({"a": (0, 1), 7: ()}, "pal", Status.FEASIBLE, 0.0, 1.0, 2, 0.0, "pal-order")
        >>> r.to_json() == json.dumps(r.to_dict(), indent=2)
        True
        """
        d = self.to_dict()
        if indent is None or not d["placements"]:
            return json.dumps(d, indent=indent)
        # json's indenting encoder is pure Python, slow on 10,000 placements: lay them out here
        # exactly as it would, and the rest with it
        mark = "\x00placements\x00"
        text = json.dumps({**d, "placements": mark}, indent=indent)
        one, two, three = (" " * (indent * k) for k in (1, 2, 3))
        sep = ",\n" + three
        jobs = ",\n".join(
            f"{two}{json.dumps(k)}: " + (f"[\n{three}{sep.join(map(str, v))}\n{two}]" if v else "[]")
            for k, v in d["placements"].items()
        )
        return text.replace(json.dumps(mark), "{\n" + jobs + "\n" + one + "}", 1)

    def to_dataframe(self) -> Any:
        """One row per placed job: job id, GPU ids, GPU count (pandas DataFrame)."""
        import pandas as pd

        rows = [
            {"job_id": k, "gpus": list(v), "num_gpus": len(v)} for k, v in self.placements.items()
        ]
        return pd.DataFrame(rows, columns=["job_id", "gpus", "num_gpus"])


def pipeline_stages(
    instance: RoundInstance, placements: Mapping[JobId, Sequence[int]]
) -> dict[JobId, tuple[tuple[int, ...], ...]]:
    """The stages of every placed pipeline job, read from its GPU list in order
    (:meth:`pal_opt.model.Pipeline.slices`)."""
    jobs = instance.job_by_id
    out: dict[JobId, tuple[tuple[int, ...], ...]] = {}
    for jid, gpus in placements.items():
        pipe = jobs[jid].pipeline
        if pipe is not None:
            out[jid] = tuple(tuple(int(g) for g in gpus[a:b]) for a, b in pipe.slices())
    return out


def kept_as_given(
    instance: RoundInstance, placements: Mapping[JobId, Sequence[int]]
) -> dict[JobId, tuple[int, ...]]:
    """``placements`` with every running job that keeps its placement
    (:func:`~pal_opt.model.keeps_placement`: a gang on the same set of GPUs, a pipeline with
    every stage on the same set) given its GPUs in the order the round gave them, so that a
    round loop's ``result.placements[j] == job.placement`` holds exactly when ``j`` goes on
    running (a method or a repair may list the same GPUs in another order).

    >>> from pal_opt.model import Cluster, Job, RoundInstance
    >>> c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    >>> inst = RoundInstance(c, (Job("a", 2, "classA", 0, placement=(3, 1)),))
    >>> kept_as_given(inst, {"a": (1, 3)})
    {'a': (3, 1)}
    """
    out = {k: tuple(int(g) for g in v) for k, v in placements.items()}
    jobs = instance.job_by_id
    for jid, gpus in out.items():
        job = jobs.get(jid)
        if job is not None and job.placement is not None and gpus != job.placement and keeps_placement(job, gpus):
            out[jid] = tuple(job.placement)
    return out


def _without_proof(status: Status, fields: dict[str, Any], info: dict[str, Any], unseen: tuple[str, ...]) -> Status:
    """An exact method's result priced with terms its program did not see: its bound bounds the
    program's cost only (a negative unseen charge puts the optimum below it), so it is kept in
    ``info["program_bound"]``, the answer is no longer proven, and the message says why."""
    info["program_bound"] = fields.pop("bound")
    fields["gap"] = None
    why = (f"cost term(s) {', '.join(map(repr, unseen))} give no slots, so the program could neither see nor "
           "bound them: no proven bound")
    fields["message"] = f"{fields['message']}; {why}" if fields.get("message") else why
    return Status.FEASIBLE if status == Status.OPTIMAL else status


def priced_result(
    instance: RoundInstance,
    placements: Mapping[JobId, tuple[int, ...]],
    factors: Mapping[str, np.ndarray],
    *,
    method: str,
    status: Status,
    admission: str,
    solve_seconds: float,
    jobs_to_terminate_: Sequence[JobId] | None = None,
    summary: CostSummary | None = None,
    **fields: Any,
) -> PlacementResult:
    """The :class:`PlacementResult` of ``placements``, priced by :func:`pal_opt.cost.evaluate`
    under ``factors``; every method builds its result here.  ``jobs_to_terminate_`` defaults to
    the running jobs that lose or change their GPUs; ``summary``: that price when the caller has
    just computed it (the same :func:`~pal_opt.cost.evaluate` of the same placement);
    ``fields`` sets the other attributes."""
    placements = kept_as_given(instance, placements)
    if summary is None:
        summary = evaluate(instance, placements, factors)
    term = jobs_to_terminate(instance, placements) if jobs_to_terminate_ is None else tuple(jobs_to_terminate_)
    fields.setdefault("unplaceable", unplaceable(instance))
    info = dict(fields.pop("info", {}) or {})
    info.setdefault("cost_terms", dict(summary.by_term))
    if fields.get("bound") is not None and (unseen := unseen_terms()):
        status = _without_proof(status, fields, info, unseen)
    fields.setdefault("stages", pipeline_stages(instance, placements))
    return PlacementResult(
        placements=placements,
        method=method,
        status=status,
        objective=summary.cost,
        geomean_slowdown=summary.geomean,
        gpus_used=summary.gpus,
        solve_seconds=solve_seconds,
        admission=admission,
        jobs_to_terminate=term,
        spanning=summary.spanning,
        info=info,
        **fields,
    )
