"""Reader for the Sia-Philly workload traces the PAL paper simulates.

A trace is a CSV file with the header ``job_id,num_gpus,submit_time,duration,model``
(extra columns are ignored, column order is free; the file is read through
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
    An integer priority class (blank or absent: 0); the simulator reports JCT per class.

Errors are :class:`~pal_opt.errors.InstanceError` naming the file and ``row N, column X``,
where *N* is the line number in the file (the header is row 1).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InstanceError
from ..model import MODEL_CLASS, MODEL_ITER_TIME, JobId
from .csvfile import CsvTable, read_csv

__all__ = ["TRACE_COLUMNS", "DEFAULT_ITER_TIME", "TraceJob", "read_trace", "trace_name"]

#: Columns every trace must have.
TRACE_COLUMNS: tuple[str, ...] = ("job_id", "num_gpus", "submit_time", "duration", "model")

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
    row
        Line of the trace file the job came from (header = 1).
    priority
        The optional ``priority`` column (0 when absent or blank).
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
    if not (math.isfinite(default_iter_time) and default_iter_time > 0):
        raise InstanceError(f"default iteration time must be > 0, got {default_iter_time!r}", source=source)
    models = _Models({**MODEL_CLASS, **(model_class or {})}, {**MODEL_ITER_TIME, **(iter_time or {})},
                     default_class, default_iter_time)
    table = _read_table(path)
    col = {c: table.header.index(c) for c in TRACE_COLUMNS}
    jobs: list[TraceJob] = []
    seen: dict[JobId, int] = {}
    for (line, f), jid in zip(table.rows, _job_ids(table, col["job_id"]), strict=True):
        if not f[col["job_id"]]:
            raise table.error(line, col["job_id"], "job id is empty")
        if jid in seen:
            raise table.error(line, col["job_id"], f"duplicate job id {f[col['job_id']]!r} (first on row {seen[jid]})")
        seen[jid] = line
        jobs.append(_trace_job(table, line, f, jid, col, models))
    return jobs


def _read_table(path: str | os.PathLike[str]) -> CsvTable:
    """The trace as a table with every column of :data:`TRACE_COLUMNS`; rows are ``row N``."""
    try:
        table = read_csv(path, what="trace file", row_label="row")
    except OSError as exc:
        raise InstanceError(f"cannot read trace: {exc.strerror or exc}", source=str(path)) from None
    missing = [c for c in TRACE_COLUMNS if c not in table.header]
    if missing:
        raise InstanceError(
            f"missing column(s) {', '.join(missing)}; expected header {','.join(TRACE_COLUMNS)}",
            source=str(path),
            path="row 1",
        )
    return table


def _job_ids(table: CsvTable, c: int) -> list[JobId]:
    """The ids as ints when every id is an integer, else as the strings written."""
    raw = [f[c] for _, f in table.rows]
    try:
        return [int(x) for x in raw]
    except ValueError:
        return list(raw)


def _trace_job(t: CsvTable, line: int, f: list[str], jid: JobId, col: dict[str, int], models: _Models) -> TraceJob:
    model = f[col["model"]]
    if not model:
        raise t.error(line, col["model"], "model is empty")
    cls = models.classes.get(model, models.default_class)
    if cls is None:
        raise t.error(line, col["model"], f"unknown model {model!r} (known: {', '.join(sorted(models.classes))}); give its class")
    c_dem, c_sub, c_dur = col["num_gpus"], col["submit_time"], col["duration"]
    return TraceJob(
        id=jid,
        demand=t.integer(line, c_dem, f[c_dem], minimum=1, what="a positive integer"),
        submit_time=t.number(line, c_sub, f[c_sub], minimum=0.0),
        iterations=t.number(line, c_dur, f[c_dur], positive=True),
        model=model,
        perfclass=cls,
        iter_time=float(models.iter_time.get(model, models.default_iter_time)),
        row=line,
        priority=_priority(t, line, f),
    )


def _priority(t: CsvTable, line: int, f: list[str]) -> int:
    """The optional ``priority`` cell: an integer, 0 when blank or the column is absent."""
    c = t.find("priority")
    return 0 if c is None or not f[c].strip() else t.integer(line, c, f[c].strip())


def trace_name(path: str | os.PathLike[str]) -> str:
    """The trace's file stem, used to label results (``workload-6.csv`` -> ``workload-6``)."""
    return Path(path).stem
