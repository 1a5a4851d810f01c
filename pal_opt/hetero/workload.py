"""Readers for the Sia artifact's workloads: the newTrace job lists and the Philly trace.

newTrace (``workloads/newtrace-N.csv``)
    Header ``name,time,application,num_replicas,batch_size`` plus an optional ``category``
    (any column order; other columns are ignored, but one whose name looks like a misspelt
    ``category`` is reported by a warning line, :func:`~pal_opt.io.csvfile.unused_column_note`).  ``name`` is unique, ``time`` the submission
    time in seconds (finite, ≥ 0), ``application`` a profiled application, ``num_replicas`` the
    requested GPU count and ``batch_size`` the requested global batch (positive integers).
    ``category`` is ``adaptive`` (also an empty cell or no column), ``scale-gpus``
    (``strong-scaling``), ``rigid`` or ``guaranteed`` (:class:`~pal_opt.hetero.goodput.JobKind`).
    Jobs are read in submission order, rows breaking ties (a job's index breaks ties in the
    placer; the artifact's files are sorted already, so their order is the file's).
Philly (``philly.csv``)
    ``timestamp,duration,num_gpus,gpu_time,cluster``: one row per job of Microsoft's Philly
    trace (ATC'19), ``timestamp`` as ``YYYY-MM-DD HH:MM:SS``, ``duration`` in seconds (> 0),
    ``gpu_time`` = ``duration × num_gpus`` GPU-seconds, ``cluster`` the virtual-cluster id.
    The rows are not in time order; they are kept in file order, as columns (82k rows).

Errors are :class:`~pal_opt.errors.InstanceError` naming the file and ``row N, column X``
(header = row 1).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InstanceError, OptionError
from ..io.csvfile import unused_column_note
from ..options import check_count, check_finite, require_items, require_mapping, require_type
from .goodput import JobKind
from .profiles import Application
from .tables import Table, read_table

__all__ = [
    "WORKLOAD_COLUMNS",
    "PHILLY_COLUMNS",
    "WorkloadJob",
    "Workload",
    "PhillyTrace",
    "read_workload",
    "workload_from_frame",
    "check_workload",
    "check_modelled",
    "UNMODELLED",
    "read_philly",
]

log = logging.getLogger(__name__)

WORKLOAD_COLUMNS: tuple[str, ...] = ("name", "time", "application", "num_replicas", "batch_size")
#: A newTrace workload's optional columns.
OPTIONAL_WORKLOAD_COLUMNS: tuple[str, ...] = ("category",)
PHILLY_COLUMNS: tuple[str, ...] = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class WorkloadJob:
    """One job of a newTrace workload.

    Attributes
    ----------
    name
        Unique job name (``cifar10-1``).
    submit_time
        Submission time (s).
    application
        Application name.
    num_replicas
        Requested GPU count.
    batch_size
        Requested global batch size.
    kind
        Job kind from the ``category`` column (adaptive when absent).
    row
        Row of the file (header = 1).
    """

    name: str
    submit_time: float
    application: str
    num_replicas: int
    batch_size: int
    kind: JobKind = JobKind.ADAPTIVE
    row: int = 0

    def __post_init__(self) -> None:
        # a job of 0 replicas or a NaN submit time ran; "rigid" as its kind, a str batch size
        # or a str submit time failed deep inside the simulator
        if self._canonical():
            return
        if not isinstance(self.name, str) or not self.name:
            raise OptionError(f"WorkloadJob: name must be a non-empty str, got {self.name!r:.60}")
        at = f"WorkloadJob {self.name!r}"
        if not isinstance(self.application, str) or not self.application:
            raise OptionError(f"{at}: application must be a non-empty str, got {self.application!r:.60}")
        if not isinstance(self.kind, JobKind):
            raise OptionError(f"{at}: kind must be a JobKind (JobKind.parse('rigid')), got {self.kind!r:.60}")
        set_ = object.__setattr__
        set_(self, "submit_time", check_finite(self.submit_time, f"{at}: submit_time"))
        set_(self, "num_replicas", check_count(self.num_replicas, f"{at}: num_replicas"))
        set_(self, "batch_size", check_count(self.batch_size, f"{at}: batch_size"))
        set_(self, "row", check_count(self.row, f"{at}: row", 0))

    def _canonical(self) -> bool:
        """Valid and already of the types the checks would convert to (the common case, checked
        quickly: what :func:`workload_from_frame` builds, one per row)."""
        return (
            type(self.name) is str and self.name != "" and type(self.application) is str and self.application != ""
            and type(self.kind) is JobKind and type(self.submit_time) is float and 0.0 <= self.submit_time < math.inf
            and type(self.num_replicas) is int and self.num_replicas >= 1
            and type(self.batch_size) is int and self.batch_size >= 1 and type(self.row) is int and self.row >= 0
        )


@dataclass(frozen=True, eq=False)
class Workload:
    """A newTrace workload: jobs in submission order (rows breaking ties).

    Examples
    --------
    >>> df = pd.DataFrame({"name": ["a-0", "b-1"], "time": [3.5, 60.0], "application": ["a", "b"],
    ...                    "num_replicas": [4, 8], "batch_size": [128, 256]})
    >>> w = workload_from_frame(df)
    >>> len(w), w.first_time, w.last_time, w[1].kind.value
    (2, 3.5, 60.0, 'adaptive')
    """

    source: str
    jobs: tuple[WorkloadJob, ...]

    def __post_init__(self) -> None:
        # a list is kept as a tuple; tuples of fields instead of jobs failed deep inside
        object.__setattr__(self, "jobs", require_items(self.jobs, "Workload.jobs", "a list of WorkloadJobs", of=WorkloadJob))

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[WorkloadJob]:
        return iter(self.jobs)

    def __getitem__(self, i: int) -> WorkloadJob:
        return self.jobs[i]

    @property
    def first_time(self) -> float:
        """Earliest submission time."""
        return min(j.submit_time for j in self.jobs)

    @property
    def last_time(self) -> float:
        """Latest submission time."""
        return max(j.submit_time for j in self.jobs)

    def applications(self) -> tuple[str, ...]:
        """Applications used, sorted."""
        return tuple(sorted({j.application for j in self.jobs}))

    def frame(self) -> pd.DataFrame:
        """The jobs as a DataFrame (columns as in the file, ``category`` always present)."""
        return pd.DataFrame(
            {
                "name": [j.name for j in self.jobs],
                "time": [j.submit_time for j in self.jobs],
                "application": [j.application for j in self.jobs],
                "num_replicas": [j.num_replicas for j in self.jobs],
                "batch_size": [j.batch_size for j in self.jobs],
                "category": [j.kind.value for j in self.jobs],
            }
        )


def _listed(names: list[str], most: int = 12) -> str:
    """``names`` comma-separated, at most ``most`` of them (then how many more)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names) - most} more)"


def _workload(table: Table, applications: Collection[str] | Mapping[str, Application] | None) -> Workload:
    table.require(*WORKLOAD_COLUMNS)
    names = table.strings("name")
    dup = pd.Series(names).duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero(names == names[i])[0])
        raise table.error(i, "name", f"duplicate job name {names[i]!r} (first on row {table.row(first)})")
    times = table.floats("time", minimum=0.0)
    apps = table.strings("application")
    if applications is not None:
        known = set(applications)
        unknown = np.flatnonzero([a not in known for a in apps])
        if unknown.size:
            i = int(unknown[0])
            raise table.error(
                i, "application", f"unknown application {apps[i]!r}; known: {_listed(sorted(known))}"
            )
    replicas = table.ints("num_replicas")
    batches = table.ints("batch_size")
    if "category" in table.columns:
        cats = table.strings("category", allow_empty=True)
        kinds = []
        for i, c in enumerate(cats):
            try:
                kinds.append(JobKind.parse(c))
            except OptionError as exc:
                raise table.error(i, "category", str(exc)) from None
    else:
        kinds = [JobKind.ADAPTIVE] * len(names)
    jobs = tuple(
        WorkloadJob(
            str(names[i]), float(times[i]), str(apps[i]), int(replicas[i]), int(batches[i]), kinds[i], table.row(i)
        )
        for i in range(len(names))
    )
    misspelt = unused_column_note(table.source, table.columns, WORKLOAD_COLUMNS,
                                  [(c,) for c in OPTIONAL_WORKLOAD_COLUMNS])
    if misspelt is not None:  # once the workload is good: bad input gives one line
        log.warning("%s", misspelt)
    # in submission order, rows breaking ties: a job's index breaks ties in the placer, so a file
    # whose rows are in another order would otherwise give other results (the artifact's are sorted)
    return Workload(table.source, tuple(sorted(jobs, key=lambda j: j.submit_time)))


def read_workload(
    path: str | os.PathLike[str], *, applications: Collection[str] | Mapping[str, Application] | None = None
) -> Workload:
    """Read and validate a newTrace workload CSV.

    Parameters
    ----------
    path
        The file.
    applications
        Known application names (or a ``{name: Application}`` map); when given, other names are
        errors.  See :func:`check_workload` for the batch-size check against the profiles.

    Raises
    ------
    InstanceError
        Unreadable file, missing column, bad value, duplicate name, unknown application or
        category (file, row and column named).
    """
    _check_applications(applications)
    return _workload(read_table(path, required=WORKLOAD_COLUMNS, what="workload file"), applications)


def workload_from_frame(
    frame: pd.DataFrame,
    *,
    source: str = "<memory>",
    applications: Collection[str] | Mapping[str, Application] | None = None,
) -> Workload:
    """A workload from an in-memory DataFrame shaped like the CSV file, with the same checks."""
    require_type(source, str, "source", " (a name for messages)")
    _check_applications(applications)
    return _workload(Table.from_frame(frame, source), applications)


def _check_applications(applications: object) -> None:
    """The ``applications`` argument: None, a mapping of names to Applications or a collection of names."""
    if applications is not None and not isinstance(applications, Mapping):
        require_items(applications, "applications",
                      "a collection of application names or a mapping of them to Applications", of=str)


#: Applications the profiles hold but the simulator of GPU types does not model, with why.
UNMODELLED: dict[str, str] = {
    "gpt_pmp": "its profiles are of pipeline model parallelism (stages per replica), which the goodput model of "
               "this simulator does not describe (SIA_MODEL.md leaves the application out)",
}


def check_modelled(workload: Workload) -> None:
    """Raise :class:`InstanceError` (row and column) for the first job of an :data:`UNMODELLED`
    application."""
    for job in workload:
        if job.application in UNMODELLED:
            raise InstanceError(f"application {job.application!r} is not simulated: {UNMODELLED[job.application]}",
                                source=workload.source, path=f"row {job.row}, column application")


def check_workload(workload: Workload, applications: Mapping[str, Application]) -> None:
    """Check a workload against the profiles: every application known and every requested batch
    inside its validated range [B0, Bmax] (the gradient statistics are defined only there).

    Raises
    ------
    InstanceError
        Naming the workload file, the job's row and the column.
    """
    require_type(workload, Workload, "workload", " (read_workload)")
    require_mapping(applications, "applications", "a mapping of application names to Applications (load_applications)")
    check_modelled(workload)
    for job in workload:
        where = f"row {job.row}, column "
        app = applications.get(job.application)
        if app is None:
            raise InstanceError(
                f"no profiles for application {job.application!r}",
                source=workload.source,
                path=where + "application",
            )
        if not app.init_batch_size <= job.batch_size <= app.max_batch_size:
            raise InstanceError(
                f"batch size {job.batch_size} outside {job.application}'s validated range "
                f"{app.init_batch_size}..{app.max_batch_size}",
                source=workload.source,
                path=where + "batch_size",
            )


@dataclass(frozen=True, eq=False)
class PhillyTrace:
    """The Philly trace as columns (file order).

    Attributes
    ----------
    source
        The file.
    timestamp
        Submission times, ``datetime64[s]``.
    duration
        Run time (s), float64.
    num_gpus
        GPUs, int64.
    gpu_time
        GPU-seconds, float64.
    cluster
        Virtual-cluster ids, object array of ``str``.
    """

    source: str
    timestamp: np.ndarray
    duration: np.ndarray
    num_gpus: np.ndarray
    gpu_time: np.ndarray
    cluster: np.ndarray

    def __len__(self) -> int:
        return int(self.duration.size)

    def submit_seconds(self) -> np.ndarray:
        """Submission times in seconds after the earliest one (float64, file order)."""
        t = self.timestamp.astype("datetime64[s]").astype(np.int64)
        return (t - t.min()).astype(np.float64)

    def frame(self) -> pd.DataFrame:
        """The trace as a DataFrame with the file's columns."""
        return pd.DataFrame({name: getattr(self, name) for name in PHILLY_COLUMNS})


def read_philly(path: str | os.PathLike[str]) -> PhillyTrace:
    """Read and validate the Philly trace file.

    Raises
    ------
    InstanceError
        Unreadable file, missing column, a bad timestamp or number, an empty cluster id, or a
        ``gpu_time`` that is not ``duration × num_gpus`` (file, row and column named).
    """
    table = read_table(path, required=PHILLY_COLUMNS, what="Philly trace")
    text = table.strings("timestamp")
    stamps = pd.to_datetime(pd.Series(text, dtype=object), format=_TIMESTAMP_FORMAT, errors="coerce")
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise table.error(i, "timestamp", f"must be a time like 2017-10-09 07:01:55, got {text[i]!r}")
    duration = table.floats("duration", positive=True)
    gpus = table.ints("num_gpus")
    gpu_time = table.floats("gpu_time", minimum=0.0)
    off = np.flatnonzero(~np.isclose(gpu_time, duration * gpus, rtol=1e-9, atol=0.0))
    if off.size:
        i = int(off[0])
        raise table.error(
            i, "gpu_time", f"must be duration × num_gpus = {duration[i] * gpus[i]:g}, got {gpu_time[i]:g}"
        )
    return PhillyTrace(
        source=table.source,
        timestamp=stamps.to_numpy(dtype="datetime64[s]"),
        duration=duration,
        num_gpus=gpus,
        gpu_time=gpu_time,
        cluster=table.strings("cluster"),
    )
