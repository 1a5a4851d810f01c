"""A Blox placement policy backed by pal-opt.

Blox (the scheduler framework the PAL artifact is built on) calls a placement object's
``place(job_state, cluster_state, new_job_schedule)`` every round.  :class:`BloxPlacement`
has that shape, so it drops in where the artifact's ``PALPlacement`` or ``PMFirstPlacement``
would, with any pal-opt method behind it.  It does not import Blox.

What it reads
-------------
``cluster_state.gpu_df``
    pandas DataFrame with ``GPU_ID``, ``Node_ID``, ``IN_USE``, ``JOB_IDS`` and one
    ``PerfVar_<class>`` column per class (optional ``Rack_ID``, ``FAILED``; ``Local_GPU_ID`` is
    kept as each GPU's device number, :attr:`pal_opt.model.Cluster.devices`, and set aside with a
    warning when a cell cannot be one: it never stops a round).  Each warning (this one, a
    misspelt column, a job larger than the cluster) is logged once in the adapter's life, known
    again by what it is about (a job's by the job, whatever its place in the queue or the
    cluster's size that round; a cell's by its row and column), not by its text.  An empty one (no
    node registered yet) places nothing.  GPUs given to the adapter's ``policy.repair`` are held
    out of service whatever ``gpu_df`` says, until ``policy.restore``
    (:class:`~pal_opt.scheduler.RoundPolicy`).
``job_state.active_jobs``
    ``{job_id: {"num_GPUs": int, "perfclass": str or "model": str, "is_running": bool, ...}}``;
    optional ``priority`` (or Blox's ``job_priority``; an integer, higher is more important)
    and ``started`` (or ``start_time``; seconds), which the preemptive methods
    (``preempt-greedy``, ``ilp-preempt``) read as the job CSV's columns of the same names
    (:mod:`pal_opt.io.jobs`).
``new_job_schedule["job_order"]``
    The queue: a list of ``(job_id, ...)`` tuples (or bare job ids), highest priority first.

What it returns
---------------
``(jobs_to_terminate, {job_id: [GPU_ID, ...]})`` as the artifact's policies do: running jobs
that lose or change their GPUs are terminated; for the non-sticky methods every job placed this
round is in the launch dict (the artifact's PAL also re-lists a job placed back on its own
GPUs), for ``packed-sticky`` only the newly started ones.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import pandas as pd

from ..errors import InputTypeError, InstanceError, OptionError, TableError
from ..io.blox import frames_round
from ..io.csvfile import TableNote
from ..methods import get_method
from ..model import RoundInstance, RoundParams, keeps_placement
from ..options import DEFAULT_ILP_TIME_LIMIT, DEFAULT_ROUND_LENGTH, SolveOptions
from ..result import PlacementResult
from ..scheduler import RoundPolicy

__all__ = ["BloxPlacement"]

log = logging.getLogger(__name__)

_STICKY = frozenset({"packed-sticky"})
#: What the constructor takes, which :meth:`BloxPlacement.place` refuses (its other keyword
#: arguments it ignores, as the artifact's policies do).
_ADAPTER_OPTIONS = frozenset({"method", "backend", "restart_cost", "round_length", "options", *SolveOptions.names()})


def _queue_ids(new_job_schedule: Mapping[str, Any]) -> list[Any]:
    try:
        order = new_job_schedule["job_order"]
    except (KeyError, TypeError):
        raise InstanceError("missing 'job_order'", source="new_job_schedule", path="job_order") from None
    if isinstance(order, (str, bytes, Mapping)) or not isinstance(order, Iterable):
        raise InstanceError(f"must be a list of job ids or (job id, ...) entries, got {type(order).__name__}",
                            source="new_job_schedule", path="job_order")
    ids = []
    seen: dict[str, int] = {}
    for i, item in enumerate(order):
        if isinstance(item, (tuple, list)):
            if not item:
                raise InstanceError("empty entry", source="new_job_schedule", path=f"job_order[{i}]")
            jid = item[0]
        elif isinstance(item, Mapping):  # Gavel-style {(job_id, gpu_type): ...}
            raise InstanceError(
                "Gavel-style job orders are not supported", source="new_job_schedule", path=f"job_order[{i}]"
            )
        else:
            jid = item
        key = str(jid)  # as the round matches ids: 7 and "7" are one job
        if key in seen:
            raise InstanceError(f"job {jid!r} is in the job order twice (also job_order[{seen[key]}])",
                                source="new_job_schedule", path=f"job_order[{i}]")
        seen[key] = i
        ids.append(jid)
    return ids


#: Optional keys of a Blox job dict passed on to the round, as the job CSV reads them
#: (:mod:`pal_opt.io.jobs`): a column of the round's jobs frame, then the keys it is read from.
_OPTIONAL_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("priority", ("priority", "job_priority")),
    ("started", ("started", "start_time")),
    # false: the job waits, so a failed GPU gpu_df still lists under it is out of service, not
    # the job's (as the importer reads it, pal_opt.io.blox)
    ("is_running", ("is_running",)),
)


def _optional(job: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first of ``keys`` that ``job`` has (None: none)."""
    return next((job[k] for k in keys if job.get(k) is not None), None)


def _jobs_frame(active_jobs: Mapping[Any, Mapping[str, Any]], order: list[Any]) -> pd.DataFrame:
    rows = []
    for jid in order:
        if jid not in active_jobs:
            raise InstanceError(
                f"job {jid!r} is in the job order but not in active_jobs", source="job_state", path="active_jobs"
            )
        job = active_jobs[jid]
        if not isinstance(job, Mapping):
            raise InstanceError("must be a dict", source="job_state", path=f"active_jobs[{jid!r}]")
        if "num_GPUs" not in job:
            raise InstanceError("missing 'num_GPUs'", source="job_state", path=f"active_jobs[{jid!r}]")
        rows.append(
            {
                "job_id": jid,
                "num_gpus": job["num_GPUs"],
                "perfclass": job.get("perfclass") or "",
                "model": job.get("model") or job.get("job_model") or "",
                **{column: _optional(job, keys) for column, keys in _OPTIONAL_KEYS},
            }
        )
    columns = ["job_id", "num_gpus", "perfclass", "model"]
    columns += [c for c, _ in _OPTIONAL_KEYS if any(r[c] is not None for r in rows)]  # (none given: as before)
    return pd.DataFrame(rows, columns=columns)


#: The jobs frame's columns (:func:`_jobs_frame`) as Blox's ``active_jobs`` keys.
_BLOX_KEYS = {"num_gpus": "num_GPUs", "perfclass": "perfclass", "model": "job_model", "priority": "priority",
              "started": "started", "is_running": "is_running"}
#: The name :func:`~pal_opt.io.blox.frames_round` gives the jobs frame in errors and warnings.
_JOBS = "jobs"


def _in_blox_terms(exc: InstanceError, order: list[Any]) -> InstanceError:
    """An error about a row of the jobs frame this adapter built, said of Blox's ``active_jobs``
    (the frame's row k is the k-th job of the order); other errors as they are.

    The row and column are the error's own (:class:`~pal_opt.io.csvfile.TableError`), never
    read back out of its text, so a change of the importers' wording cannot break the naming."""
    if not isinstance(exc, TableError) or exc.source != _JOBS or exc.row is None or not 0 <= exc.row < len(order):
        return exc
    key = _BLOX_KEYS.get(exc.column or "")
    return InstanceError(exc.message, source="job_state",
                         path=f"active_jobs[{order[exc.row]!r}]" + (f".{key}" if key else ""))


def _number(value: Any, what: str) -> float:
    """A number the adapter was given (``args.locality_penalty``, ``restart_cost``, ...) as a
    float; its range is checked where it is used (:class:`~pal_opt.model.RoundParams`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptionError(f"{what} must be a number, got {value!r}")
    return float(value)


class BloxPlacement:
    """Blox placement policy running a pal-opt method.

    Parameters
    ----------
    args
        Blox's argument namespace (or None).  ``args.locality_penalty`` is used as λ when present.
    method
        Any pal-opt method (``"pal"``, ``"pmfirst"``, ``"packed"``, ``"packed-sticky"``,
        ``"random"``, ``"ilp"``).
    backend
        Solver for ``method="ilp"`` (default: the first installed).
    **options
        Further options: ``binning``, ``seed``, ``restart_cost`` and ``round_length`` (round
        parameters: seconds lost per GPU of a moved job, seconds per round), and the
        ILP options of :func:`pal_opt.solve` (``admission``, ``time_limit``, ``gap``, ...).
        Blox runs its rounds back to back, so an exact method is given
        ``time_limit=``:data:`~pal_opt.options.DEFAULT_ILP_TIME_LIMIT` (10 s) per round unless
        ``time_limit`` is given (``time_limit=None``: no limit; ``deadline``, a moment of one
        round, is refused as :class:`~pal_opt.scheduler.RoundPolicy` refuses it).  Or
        ``options=`` a :class:`~pal_opt.options.SolveOptions`; one that sets no ``time_limit``
        gets the 10 s too (a ``SolveOptions`` cannot say "no limit": give the keyword
        ``time_limit=None`` for that).

    Examples
    --------
    >>> import pandas as pd
    >>> from types import SimpleNamespace
    >>> gpu_df = pd.DataFrame({"GPU_ID": [0, 1, 2, 3], "Node_ID": [0, 0, 1, 1],
    ...     "IN_USE": [False] * 4, "JOB_IDS": [None] * 4,
    ...     "PerfVar_classA": [1.0, 1.3, 0.9, 1.0]})
    >>> jobs = SimpleNamespace(active_jobs={5: {"num_GPUs": 2, "perfclass": "classA", "is_running": False}})
    >>> policy = BloxPlacement(SimpleNamespace(locality_penalty=1.7), method="pal")
    >>> policy.place(jobs, SimpleNamespace(gpu_df=gpu_df), {"job_order": [(5, 0)]})
    ([], {5: [2, 3]})
    """

    def __init__(self, args: Any = None, method: str = "pal", backend: str | None = None, **options: Any) -> None:
        lam = getattr(args, "locality_penalty", None) if args is not None else None
        self.locality_penalty = _number(lam, "args.locality_penalty") if lam is not None else 1.7
        self.restart_cost = _number(options.pop("restart_cost", 0.0), "restart_cost")
        self.round_length = _number(options.pop("round_length", DEFAULT_ROUND_LENGTH), "round_length")
        try:  # their ranges: now, not in the first place()
            RoundParams(restart_cost=self.restart_cost, round_length=self.round_length)
        except InstanceError as exc:
            raise OptionError(f"{(exc.path or '').removeprefix('params.')} {exc.message}") from None
        #: what the warnings logged so far were about (:meth:`_warn_once`): Blox calls place() every round
        self._warned: set[tuple[Hashable, ...]] = set()
        if "track_running" in options:
            raise OptionError("track_running does not apply to BloxPlacement: Blox's gpu_df says which jobs run where")
        given = options.pop("options", None)
        if given is not None:  # a SolveOptions (RoundPolicy checks it), with the round-time default below
            if options or backend is not None:
                raise InputTypeError("give either options= or keyword options (and backend=), not both",
                                     path="options")
            options = {n: getattr(given, n) for n in given.given()} if isinstance(given, SolveOptions) else {"options": given}
        binning = options.pop("binning", None)
        self.binning = binning or "pal-artifact"
        seed = options.pop("seed", None)
        if backend is not None:
            options["backend"] = backend
        if "time_limit" in get_method(method).options and "time_limit" not in options and "options" not in options:
            options["time_limit"] = DEFAULT_ILP_TIME_LIMIT  # Blox runs its rounds back to back
        self.method = method
        # Blox's gpu_df already says which jobs run where, so no carrying over is needed.
        self.policy = RoundPolicy(method, binning=binning, seed=seed, track_running=False, **options)
        self.last_result: PlacementResult | None = None
        self._round_params()  # λ and the binning checked now too, not in the first place()

    def _round_params(self) -> RoundParams:
        """The round parameters from the attributes as they are now (a caller may set
        ``round_length`` or ``locality_penalty`` between rounds)."""
        return RoundParams.from_arguments(locality_penalty=self.locality_penalty, binning=self.binning,
                                          restart_cost=self.restart_cost, round_length=self.round_length)

    def _warn_once(self, notes: list[TableNote], order: list[Any]) -> None:
        """Log each of a round's warnings (a job larger than the cluster, a misspelt ``gpu_df``
        column, device numbers set aside) once in this adapter's life, not at every round, and a
        job's in Blox's terms (``active_jobs[7]``, not a row of the adapter's jobs frame).

        A warning is known again by what it is about, never by its text: its kind, table and
        columns, and its row, which for the jobs frame is the job (row k is the k-th job of the
        queue, so a job that moves in the queue, or whose warning's figures change as nodes
        register, is the same warning)."""
        for note in notes:
            subject: Hashable = note.row
            if note.source == _JOBS and note.row is not None and note.row < len(order):
                jid = order[note.row]
                subject = ("job", str(jid))  # as the round matches ids: 7 and "7" are one job
                note = replace(note, source="job_state", path=f"active_jobs[{jid!r}]")
            key = (note.kind, note.source, note.columns, subject)
            if key not in self._warned:
                self._warned.add(key)
                log.warning("%s", note)

    def instance(self, job_state: Any, cluster_state: Any, new_job_schedule: Mapping[str, Any]) -> RoundInstance:
        """The pal-opt round that :meth:`place` solves (useful for logging and checking)."""
        order = _queue_ids(new_job_schedule)
        active = getattr(job_state, "active_jobs", None)
        if not isinstance(active, Mapping):
            raise InstanceError("must be a dict of jobs", source="job_state", path="active_jobs")
        gpu_df = getattr(cluster_state, "gpu_df", None)
        notes: list[TableNote] = []
        try:
            inst = frames_round(gpu_df, _jobs_frame(active, order), self._round_params(), notes=notes)
        except InstanceError as exc:
            raise _in_blox_terms(exc, order) from None
        self._warn_once(notes, order)
        for j, jid in zip(inst.jobs, order, strict=True):
            flag = active[jid].get("is_running")
            if flag is True and j.placement is None:
                raise InstanceError(
                    f"job {j.id!r} is running but holds no GPU in gpu_df", source="job_state", path=f"active_jobs[{j.id!r}]"
                )
        return inst

    def place(
        self, job_state: Any, cluster_state: Any, new_job_schedule: Mapping[str, Any], **kwargs: Any
    ) -> tuple[list[Any], dict[Any, list[int]]]:
        """One Blox round: ``(jobs_to_terminate, {job_id: [GPU_ID, ...]})``.

        A ``gpu_df`` without rows (Blox's scheduler loop runs before any node has registered)
        gives ``([], {})``: the queued jobs wait, as with the artifact's PAL; ``last_result`` is
        then None.  Further keyword arguments are accepted and ignored, as the artifact's
        ``PALPlacement.place`` does, except the adapter's own options (``time_limit``,
        ``backend``, ``restart_cost``, ...: an :class:`~pal_opt.errors.OptionError`, as they go
        to the constructor).
        """
        misplaced = sorted(set(kwargs) & _ADAPTER_OPTIONS)
        if misplaced:  # would be ignored without a word
            name = misplaced[0]
            raise OptionError(f"{name} is an option of the adapter, not of one round: give it to "
                              f"BloxPlacement(args, ..., {name}=...)")
        gpu_df = getattr(cluster_state, "gpu_df", None)
        if isinstance(gpu_df, pd.DataFrame) and gpu_df.empty:
            active = getattr(job_state, "active_jobs", None)
            if not isinstance(active, Mapping):
                raise InstanceError("must be a dict of jobs", source="job_state", path="active_jobs")
            _jobs_frame(active, _queue_ids(new_job_schedule))  # the queue is still checked
            self.last_result = None
            return [], {}
        inst = self.instance(job_state, cluster_state, new_job_schedule)
        result = self.policy.place(inst)
        self.last_result = result
        # Job ids come back as Blox gave them (a text id that looks like a number stays text, a
        # float id stays a float): the round's jobs are the queue's, in its order.
        orig = {j.id: item for j, item in zip(inst.jobs, _queue_ids(new_job_schedule), strict=True)}
        by_id = inst.job_by_id
        launch: dict[Any, list[int]] = {}
        for jid, gpus in result.placements.items():
            if self.method in _STICKY and keeps_placement(by_id[jid], gpus):
                continue
            launch[orig[jid]] = [int(g) for g in gpus]
        return [orig[j] for j in result.jobs_to_terminate], launch
