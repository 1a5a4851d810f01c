"""Reader for the Sia-Philly workload traces the PAL paper simulates.

A trace is a CSV file with the header ``job_id,num_gpus,submit_time,duration,model``
(extra columns are ignored, but one whose name looks like a misspelt optional column,
``priorty``, is reported by a warning line, :func:`~pal_opt.io.csvfile.unused_column_note`;
column order is free, names are case-insensitive: ``Job_ID`` is ``job_id``; the file is read through
:func:`pal_opt.io.csvfile.read_csv`, so size, encoding and field-count guards apply, and its cells
through :class:`~pal_opt.io.csvfile.CsvTable`'s parsers, like every importer's):

``job_id``
    Unique id; kept as an int when every id is an integer, else as a string.
``num_gpus``
    GPUs the job needs (a positive integer; ``4.0`` is accepted as 4).
``submit_time``
    Arrival time in seconds (finite, ≥ 0).
``duration``
    The job's total training **iterations** (finite, > 0), not seconds.
``model``
    Model name; it selects the application class (:data:`pal_opt.model.MODEL_CLASS`) and the
    seconds per iteration on a median GPU (:data:`pal_opt.model.MODEL_ITER_TIME`).
``priority`` (optional)
    The job's integer priority, 0..1,000,000 (default 0 when the column is absent or the cell
    blank; higher is more important, :attr:`pal_opt.model.Job.priority`).

and, optionally:

``pipeline``
    Empty for a gang (data-parallel job); else the job is pipeline-parallel
    (:class:`pal_opt.model.Pipeline`) and the cell lists its stages in order, separated by ``;``,
    each ``TIMExREPLICAS`` (or ``TIME`` alone for one replica): the stage's time per sample on
    median GPUs (any unit common to the stages; only their ratios matter) and the GPUs that run
    it, e.g. ``0.0102x3;0.0098x1`` (:func:`pipeline_cell` writes one from a partition's
    ``job_pipeline()``).  The replicas add up to ``num_gpus``.  Such a job runs at the pace of
    its slowest stage (:func:`pal_opt.cost.pace_factor`); ``duration`` and the model's
    iteration time mean what they mean for a gang (``iterations × iter_time`` seconds on median
    GPUs within one server).

Errors are :class:`~pal_opt.errors.InstanceError` naming the file and ``row N, column X``,
where *N* is the line number in the file (the header is row 1).
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InstanceError, MissingFileError
from ..model import MODEL_CLASS, MODEL_ITER_TIME, JobId, Pipeline
from ..options import is_finite_number, require_type, shown_number
from .csvfile import CsvTable, integer_id, read_csv, separator_hint
from .jobs import parse_priority

__all__ = ["TRACE_COLUMNS", "OPTIONAL_TRACE_COLUMNS", "DEFAULT_ITER_TIME", "TraceJob", "read_trace", "trace_name", "pipeline_cell",
           "parse_pipeline_cell"]

log = logging.getLogger(__name__)

#: Columns every trace must have.
TRACE_COLUMNS: tuple[str, ...] = ("job_id", "num_gpus", "submit_time", "duration", "model")
#: Columns a trace may have.
OPTIONAL_TRACE_COLUMNS: tuple[str, ...] = ("priority", "pipeline")

#: Seconds per iteration assumed for a model without a known iteration time (Blox's default
#: synthetic job runs one iteration per second).
DEFAULT_ITER_TIME: float = 1.0


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace.

    Attributes
    ----------
    id
        The trace's job id.
    demand
        GPUs needed (gang-scheduled).
    submit_time
        Arrival time (s).
    iterations
        Total training iterations.
    model
        Model name.
    perfclass
        Application class.
    iter_time
        Seconds per iteration on a median GPU within one server.
    priority
        Integer priority (0 unless the trace has a ``priority`` column).
    row
        Line of the trace file the job came from (header = 1).
    pipeline
        The job's pipeline stages, or ``None`` for a gang (the optional ``pipeline`` column).
    """

    id: JobId
    demand: int
    submit_time: float
    iterations: float
    model: str
    perfclass: str
    iter_time: float
    row: int = 0
    priority: int = 0
    pipeline: Pipeline | None = None

    @property
    def ideal_seconds(self) -> float:
        """Run time on median GPUs within one server: ``iterations × iter_time``."""
        return self.iterations * self.iter_time


@dataclass(frozen=True)
class _Models:
    """Model name -> class and seconds per iteration, with the caller's overrides and defaults."""

    classes: Mapping[str, str]
    iter_time: Mapping[str, float]
    default_class: str | None
    default_iter_time: float


def read_trace(
    path: str | os.PathLike[str],
    *,
    model_class: Mapping[str, str] | None = None,
    iter_time: Mapping[str, float] | None = None,
    default_class: str | None = None,
    default_iter_time: float = DEFAULT_ITER_TIME,
) -> list[TraceJob]:
    """Read and validate a Sia-Philly trace.

    Parameters
    ----------
    path
        The CSV file.
    model_class
        Extra or overriding ``{model: class}`` entries on top of :data:`~pal_opt.model.MODEL_CLASS`.
    iter_time
        Extra or overriding ``{model: seconds per iteration}`` entries on top of
        :data:`~pal_opt.model.MODEL_ITER_TIME`.
    default_class
        Class for models missing from the map; without it an unknown model is an error.
    default_iter_time
        Seconds per iteration for models without a known iteration time.

    Returns
    -------
    list of TraceJob
        In file order.

    Raises
    ------
    InstanceError
        Unreadable file, missing column, bad value (``row N, column X``), duplicate job id,
        unknown model without ``default_class``, or an empty trace.
    """
    source = str(path)
    # a string raised TypeError from math.isfinite, 10**400 OverflowError: an InputTypeError (a
    # TypeError still), and 10**400 refused as NaN is
    require_type(default_iter_time, numbers.Real, "default_iter_time", what="a number of seconds")
    if not (is_finite_number(default_iter_time) and default_iter_time > 0):
        raise InstanceError(f"default iteration time must be > 0, got {shown_number(default_iter_time)}",
                            source=source)
    models = _Models({**MODEL_CLASS, **(model_class or {})}, {**MODEL_ITER_TIME, **(iter_time or {})},
                     default_class, default_iter_time)
    table = _read_table(path)
    found = {c: table.find(c) for c in (*TRACE_COLUMNS, *OPTIONAL_TRACE_COLUMNS)}
    col = {c: i for c, i in found.items() if i is not None}
    jobs: list[TraceJob] = []
    seen: dict[JobId, int] = {}
    for (line, f), jid in zip(table.rows, _job_ids(table, col["job_id"]), strict=True):
        if not f[col["job_id"]]:
            raise table.error(line, col["job_id"], "job id is empty")
        if jid in seen:
            raise table.error(line, col["job_id"], f"duplicate job id {f[col['job_id']]!r} (first on row {seen[jid]})")
        seen[jid] = line
        jobs.append(_trace_job(table, line, f, jid, col, models))
    misspelt = table.unused_column_note(TRACE_COLUMNS, [(c,) for c in OPTIONAL_TRACE_COLUMNS])
    if misspelt is not None:  # once the trace is good: bad input gives one line
        log.warning("%s", misspelt)
    return jobs


def _read_table(path: str | os.PathLike[str]) -> CsvTable:
    """The trace as a table with every column of :data:`TRACE_COLUMNS`; rows are ``row N``."""
    try:
        table = read_csv(path, what="trace file", row_label="row")
    except OSError as exc:
        raise MissingFileError.reading(exc, "cannot read trace", source=str(path)) from None
    # a column named twice, in any case, is refused by the table (CsvTable)
    missing = [c for c in TRACE_COLUMNS if table.find(c) is None]
    if missing:
        raise InstanceError(
            f"missing column(s) {', '.join(missing)}; expected header {','.join(TRACE_COLUMNS)}"
            + separator_hint(table.header),
            source=str(path),
            path="row 1",
        )
    return table


def _job_ids(table: CsvTable, c: int) -> list[JobId]:
    """The ids as ints when every id is written as an integer (:func:`~pal_opt.io.csvfile.integer_id`:
    not ``4567_1`` or ``0042``), else as the strings written."""
    raw = [f[c] for _, f in table.rows]
    ints = [integer_id(x) for x in raw]
    return list(raw) if any(v is None for v in ints) else [v for v in ints if v is not None]


def _trace_job(t: CsvTable, line: int, f: list[str], jid: JobId, col: dict[str, int], models: _Models) -> TraceJob:
    model = f[col["model"]]
    if not model:
        raise t.error(line, col["model"], "model is empty")
    cls = models.classes.get(model, models.default_class)
    if cls is None:
        raise t.error(line, col["model"], f"unknown model {model!r} (known: {', '.join(sorted(models.classes))}); give its class "
                                           f"(pal-opt simulate: --model-class {model}=CLASS, or --default-class CLASS "
                                           "for every unknown model)")
    c_dem, c_sub, c_dur = col["num_gpus"], col["submit_time"], col["duration"]
    demand = t.integer(line, c_dem, f[c_dem], minimum=1, what="a positive integer")
    return TraceJob(
        id=jid,
        demand=demand,
        submit_time=t.number(line, c_sub, f[c_sub], minimum=0.0),
        iterations=t.number(line, c_dur, f[c_dur], positive=True),
        model=model,
        perfclass=cls,
        iter_time=float(models.iter_time.get(model, models.default_iter_time)),
        row=line,
        priority=_priority(t, line, f, col.get("priority")),
        pipeline=_pipeline(t, line, f, col.get("pipeline"), demand),
    )


def _priority(t: CsvTable, line: int, f: list[str], c: int | None) -> int:
    """The row's ``priority`` cell (0 when the column is absent or the cell blank)."""
    return parse_priority(t, line, c, f[c]) if c is not None and f[c] else 0


def _pipeline(t: CsvTable, line: int, f: list[str], c: int | None, demand: int) -> Pipeline | None:
    """The row's pipeline (``None``: no ``pipeline`` column, or an empty cell)."""
    if c is None or not f[c].strip():
        return None
    try:
        pipe = parse_pipeline_cell(f[c])
    except (InstanceError, ValueError) as exc:
        raise t.error(line, c, f"{exc}; expected stages like 0.0102x3;0.0098x1 (TIMExREPLICAS)") from None
    if pipe.gpus != demand:
        raise t.error(line, c, f"the stages' replicas add up to {pipe.gpus}, num_gpus is {demand}")
    return pipe


def parse_pipeline_cell(text: str) -> Pipeline:
    """A ``pipeline`` cell as a :class:`~pal_opt.model.Pipeline`.

    >>> parse_pipeline_cell("0.5x3; 0.25")
    Pipeline(stage_times=(0.5, 0.25), replicas=(3, 1))

    Raises
    ------
    InstanceError, ValueError
        A stage that is not ``TIME`` or ``TIMExREPLICAS``, or one the pipeline refuses.
    """
    times, reps = [], []
    for k, stage in enumerate(text.split(";")):
        m = _STAGE.fullmatch(stage)
        if m is None:
            raise ValueError(f"stage {k} is {stage.strip()!r}")
        times.append(float(m.group(1)))
        reps.append(int(m.group(2) or 1))
    if not all(math.isfinite(x) for x in times):
        raise ValueError("stage times must be finite")
    return Pipeline(tuple(times), tuple(reps))


_STAGE = re.compile(r"\s*([0-9.eE+-]+)\s*(?:[xX*]\s*(\d+)\s*)?")


def pipeline_cell(pipeline: Pipeline) -> str:
    """The ``pipeline`` cell of a job with these stages (:func:`parse_pipeline_cell` reads it back).

    >>> pipeline_cell(Pipeline((0.5, 0.25), (3, 1)))
    '0.5x3;0.25x1'
    """
    return ";".join(f"{t!r}x{r}" for t, r in zip(pipeline.stage_times, pipeline.replicas, strict=True))


def trace_name(path: str | os.PathLike[str]) -> str:
    """The trace's file stem, used to label results (``workload-6.csv`` -> ``workload-6``)."""
    return Path(path).stem
