"""Job queue CSV importer.

One row per job, in queue order.  Columns (names are matched case-insensitively; extra
columns such as ``submit_time`` or ``duration`` are ignored, so the PAL artifact's Sia-Philly
traces load as they are, but one whose name looks like a misspelt optional column, ``priorty``,
is reported by a warning line: :func:`~pal_opt.io.csvfile.unused_column_note`):

``job_id`` (or ``id``)
    Integer or text, unique.
``num_gpus`` (or ``num_GPUs``, ``demand``)
    Positive integer.
``perfclass`` (or ``class``) and/or ``model``
    At least one of the two columns.  A row with an empty ``perfclass`` takes its class from
    the model via :data:`pal_opt.model.MODEL_CLASS`; an unknown model with no class is an error.
``locality_penalty`` (optional)
    The job's own λ (≥ 1); the job's penalties become ``(1, λ, λ)``.  Blank: the round's λ.
``is_running`` (optional)
    true/false.  Cross-checked against the GPU table by :mod:`pal_opt.io.blox`.  Blank: not
    said (nothing to cross-check), as without the column.
``priority`` (optional; also ``job_priority``)
    Integer 0..1,000,000 (:attr:`pal_opt.model.Job.priority`); blank: 0.
``started`` (optional; also ``start_time``)
    When a running job last started, seconds ≥ 0 (:attr:`pal_opt.model.Job.started`); blank:
    unknown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TableError, counted
from ..model import FACTOR_RANGE, MAX_PRIORITY, MODEL_CLASS, Job, pal_locality
from ..options import check_count, require_items
from .csvfile import CsvTable, NoteKind, TableNote, cell_place, read_csv
from .textfile import DEFAULT_MAX_BYTES

log = logging.getLogger(__name__)

__all__ = ["JobTable", "load_jobs", "parse_jobs", "parse_priority", "JOB_COLUMNS", "OPTIONAL_JOB_COLUMNS"]

#: The job table's columns, each with its aliases: the required ones (``perfclass`` or ``model``
#: at least) ...
JOB_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("job_id", "id", "JOB_ID"),
    ("num_gpus", "num_GPUs", "demand", "job_gpu_demand"),
)
#: ... and the optional ones (a column close to one of these is reported as a likely misspelling).
OPTIONAL_JOB_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("perfclass", "class", "job_perfclass"),
    ("model", "job_model"),
    ("locality_penalty",),
    ("is_running",),
    ("priority", "job_priority"),
    ("started", "start_time"),
)


@dataclass(frozen=True)
class JobTable:
    """Jobs read from a CSV, with where each came from.

    Attributes
    ----------
    jobs
        The queue (``placement`` is None; the GPU table says who runs where).
    lines
        Line number of each job in the file.
    running
        The ``is_running`` cell per job, or None where the column is absent.
    source
        The file.
    """

    jobs: tuple[Job, ...]
    lines: tuple[int, ...]
    running: tuple[bool | None, ...]
    source: str

    row_label: str = "line"
    #: warnings about jobs needing more GPUs than the cluster has (kept: they are unplaceable),
    #: logged by :meth:`warn` once the round built from the table is known to be good; each
    #: note's ``row`` is the job's line (a frame's row), so ``lines.index(note.row)`` is the job
    oversized: tuple[TableNote, ...] = ()
    #: the warning about columns that look like misspelt optional ones (``priorty``), or None;
    #: logged by :meth:`warn` too
    misspelt: TableNote | None = None

    def warnings(self) -> list[TableNote]:
        """The table's warnings: a misspelt column, then the jobs larger than the cluster."""
        return ([self.misspelt] if self.misspelt is not None else []) + list(self.oversized)

    def warn(self) -> None:
        """Log the table's warnings (call once the round is built: bad input gives one line)."""
        for note in self.warnings():
            log.warning("%s", note)

    def error(self, index: int, message: str, column: str | None = None) -> TableError:
        """A :class:`~pal_opt.io.csvfile.TableError` about the ``index``-th job's row (and its
        ``column``), holding the job's line (a frame's row) as its ``row``."""
        line = self.lines[index]
        return TableError(message, source=self.source, path=cell_place(self.row_label, line, column or None),
                          row=line, column=column or None)


def load_jobs(
    path: str | os.PathLike[str],
    *,
    classes: Collection[str] | None = None,
    locality_penalty: float = 1.7,
    max_gpus: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> JobTable:
    """Read a job queue CSV (columns in the module docstring).

    Parameters
    ----------
    path
        The CSV file.
    classes
        Application classes the cluster has factors for; a job of another class is an error.
        None: no check.
    locality_penalty
        λ for jobs without their own ``locality_penalty``.
    max_gpus
        The cluster's GPU count; a job needing more is kept (it is unplaceable) and logged as a
        warning.  None: no check.
    max_bytes
        Size limit of the file.

    Returns
    -------
    JobTable
    """
    t = read_csv(path, max_bytes=max_bytes, what="job CSV")
    return parse_jobs(t, classes=classes, locality_penalty=locality_penalty, max_gpus=max_gpus)


def parse_jobs(
    t: CsvTable,
    *,
    classes: Collection[str] | None = None,
    locality_penalty: float = 1.7,
    max_gpus: int | None = None,
) -> JobTable:
    """Parse a job table already read (from a file or a DataFrame); see :func:`load_jobs`."""
    if classes is not None:
        classes = require_items(classes, "classes", "a collection of class names", of=str)
    if max_gpus is not None:
        check_count(max_gpus, "max_gpus", 0)
    c_id, c_dem = (t.column(*names) for names in JOB_COLUMNS)
    c_cls, c_mod, c_lam, c_run, c_pri, c_start = (t.find(*names) for names in OPTIONAL_JOB_COLUMNS)
    if c_cls is None and c_mod is None:
        t.column("perfclass", "model")  # raises, naming both
    default_loc = pal_locality(locality_penalty)

    jobs: list[Job] = []
    lines: list[int] = []
    running: list[bool | None] = []
    seen: dict[str, int] = {}
    oversized: list[TableNote] = []
    for line, f in t.rows:
        jid = t.ident(line, c_id, f[c_id])
        key = str(jid)
        if key in seen:
            raise t.error(line, c_id, f"duplicate job id {f[c_id]!r} (also on {t.row_label} {seen[key]})")
        seen[key] = line
        demand = t.integer(line, c_dem, f[c_dem], minimum=1, what="a positive integer")
        if max_gpus is not None and demand > max_gpus:  # kept: a fact of the queue, reported as unplaceable
            oversized.append(t.note(NoteKind.OVERSIZED_JOB, line, f"job {jid!r} needs {counted(demand, 'GPU')} but the cluster "
                                    f"has {max_gpus}; kept in the queue, it cannot be placed"))
        model = f[c_mod] if c_mod is not None and f[c_mod] else None
        perfclass = f[c_cls] if c_cls is not None and f[c_cls] else None
        if perfclass is None:
            if model is None:
                col = c_cls if c_cls is not None else c_mod
                raise t.error(line, col, f"job {jid!r} has neither a class nor a model")
            if model not in MODEL_CLASS:
                raise t.error(
                    line,
                    c_mod,
                    f"unknown model {model!r} and no perfclass given (known models: {', '.join(MODEL_CLASS)})",
                )
            perfclass = MODEL_CLASS[model]
        if classes is not None and perfclass not in classes:
            col = c_cls if c_cls is not None and f[c_cls] else c_mod
            raise t.error(
                line, col, f"class {perfclass!r} has no GPU factors (the GPU table has: {', '.join(classes)})"
            )
        loc = default_loc
        if c_lam is not None and f[c_lam]:
            lam = t.number(line, c_lam, f[c_lam], positive=True)
            if not 1.0 <= lam <= FACTOR_RANGE[1]:  # the bound a round's locality factors obey (model.FACTOR_RANGE)
                raise t.error(line, c_lam, f"must be from 1 to {FACTOR_RANGE[1]:g}, got {f[c_lam]!r}")
            loc = pal_locality(lam)
        # a blank cell says nothing (no cross-check), as a missing column
        run = t.boolean(line, c_run, f[c_run]) if c_run is not None and f[c_run].strip() else None
        jobs.append(
            Job(id=jid, demand=demand, perfclass=perfclass, position=len(jobs), locality=loc, model=model,
                **_priority_cells(t, line, f, c_pri, c_start))
        )
        lines.append(line)
        running.append(run)
    misspelt = t.misspelt_column_note((n for names in JOB_COLUMNS for n in names), OPTIONAL_JOB_COLUMNS)
    return JobTable(tuple(jobs), tuple(lines), tuple(running), t.source, t.row_label, tuple(oversized), misspelt)


def _priority_cells(t: CsvTable, line: int, f: Sequence[str], c_pri: int | None, c_start: int | None) -> dict[str, Any]:
    """The ``priority`` and ``started`` keywords of a row's job (absent or blank cells: defaults)."""
    out: dict[str, Any] = {}
    if c_pri is not None and f[c_pri]:
        out["priority"] = parse_priority(t, line, c_pri, f[c_pri])
    if c_start is not None and f[c_start]:
        out["started"] = t.number(line, c_start, f[c_start], minimum=0.0)
    return out


def parse_priority(t: CsvTable, line: int, col: int, text: str) -> int:
    """A ``priority`` cell: an integer in 0..:data:`~pal_opt.model.MAX_PRIORITY` (errors name
    the file, line and column)."""
    what = f"an integer in 0..{MAX_PRIORITY}"
    p = t.integer(line, col, text, minimum=0, what=what)
    if p > MAX_PRIORITY:
        raise t.error(line, col, f"must be {what}, got {text!r}")
    return p
