"""Reader for the Sia-Philly workload traces the PAL paper simulates.

A trace is a CSV file with the header ``job_id,num_gpus,submit_time,duration,model``
(extra columns are ignored, column order is free; the file is read through
:func:`pal_opt.io.safe.read_csv`, so size, encoding and field-count guards apply):

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
from .csvfile import read_csv

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
    """

    id: JobId
    demand: int
    submit_time: float
    iterations: float
    model: str
    perfclass: str
    iter_time: float
    row: int = 0

    @property
    def ideal_seconds(self) -> float:
        """Run time on median GPUs within one server: ``iterations × iter_time``."""
        return self.iterations * self.iter_time


def _parse_int(text: str, where: str, source: str) -> int:
    try:
        val = float(text)
    except ValueError:
        raise InstanceError(f"must be a positive integer, got {text!r}", source=source, path=where) from None
    if not math.isfinite(val) or val != int(val) or val < 1:
        raise InstanceError(f"must be a positive integer, got {text!r}", source=source, path=where)
    return int(val)


def _parse_float(text: str, where: str, source: str, *, positive: bool) -> float:
    what = "a finite number > 0" if positive else "a finite number ≥ 0"
    try:
        val = float(text)
    except ValueError:
        raise InstanceError(f"must be {what}, got {text!r}", source=source, path=where) from None
    if not math.isfinite(val) or val < 0 or (positive and val == 0):
        raise InstanceError(f"must be {what}, got {text!r}", source=source, path=where)
    return val


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
    classes = dict(MODEL_CLASS)
    classes.update(model_class or {})
    times = dict(MODEL_ITER_TIME)
    times.update(iter_time or {})
    if not (math.isfinite(default_iter_time) and default_iter_time > 0):
        raise InstanceError(f"default iteration time must be > 0, got {default_iter_time!r}", source=source)
    try:
        table = read_csv(path, what="trace file")
    except OSError as exc:
        raise InstanceError(f"cannot read trace: {exc.strerror or exc}", source=source) from None
    missing = [c for c in TRACE_COLUMNS if c not in table.header]
    if missing:
        raise InstanceError(
            f"missing column(s) {', '.join(missing)}; expected header {','.join(TRACE_COLUMNS)}",
            source=source,
            path="row 1",
        )
    col = {c: table.header.index(c) for c in TRACE_COLUMNS}
    rows = [(line, {c: fields[i] for c, i in col.items()}) for line, fields in table.rows]

    all_int = True
    for _, r in rows:
        try:
            int(r["job_id"])
        except ValueError:
            all_int = False
            break
    jobs: list[TraceJob] = []
    seen: dict[JobId, int] = {}
    for line, r in rows:
        where = f"row {line}, column "
        raw_id = r["job_id"]
        if not raw_id:
            raise InstanceError("job id is empty", source=source, path=where + "job_id")
        jid: JobId = int(raw_id) if all_int else raw_id
        if jid in seen:
            raise InstanceError(
                f"duplicate job id {raw_id!r} (first on row {seen[jid]})", source=source, path=where + "job_id"
            )
        seen[jid] = line
        demand = _parse_int(r["num_gpus"], where + "num_gpus", source)
        submit = _parse_float(r["submit_time"], where + "submit_time", source, positive=False)
        iters = _parse_float(r["duration"], where + "duration", source, positive=True)
        model = r["model"]
        if not model:
            raise InstanceError("model is empty", source=source, path=where + "model")
        cls = classes.get(model, default_class)
        if cls is None:
            raise InstanceError(
                f"unknown model {model!r} (known: {', '.join(sorted(classes))}); give its class",
                source=source,
                path=where + "model",
            )
        jobs.append(
            TraceJob(
                id=jid,
                demand=demand,
                submit_time=submit,
                iterations=iters,
                model=model,
                perfclass=cls,
                iter_time=float(times.get(model, default_iter_time)),
                row=line,
            )
        )
    return jobs


def trace_name(path: str | os.PathLike[str]) -> str:
    """The trace's file stem, used to label results (``workload-6.csv`` -> ``workload-6``)."""
    return Path(path).stem
