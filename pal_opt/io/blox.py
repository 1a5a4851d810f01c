"""Importer for Blox's ``gpu_df`` (the GPU table PAL's scheduler keeps) plus an optional job queue CSV.

GPU table columns
-----------------
``GPU_ID``
    Unique non-negative integer.
``Node_ID``
    The GPU's server (integer or text).
``IN_USE``
    true/false.
``JOB_IDS`` (optional)
    The job holding the GPU (``3``, ``3.0``, ``[3]``; several ids separated by commas).
``PerfVar_<class>``
    One column per application class: the GPU's measured slowdown (1.0 = median GPU).
``Rack_ID`` (optional)
    The server's rack; all GPUs of a server must name the same rack.  Makes the cluster racked.
``FAILED`` (optional)
    true/false; a failed GPU is out of service this round.
``GPU_TYPE`` (optional)
    The GPU's type (``aws``, ``V100``...), on every row.  Blox's own ``gpu_df`` has no such
    column (its nodes register a GPU count only), so a table from Blox gives an untyped cluster;
    with the column, the cluster is typed (:attr:`pal_opt.model.Cluster.type_names`).
``Local_GPU_ID`` (optional)
    The GPU's device number on its node (what Blox's launcher puts in ``CUDA_VISIBLE_DEVICES``):
    the cluster's :attr:`~pal_opt.model.Cluster.devices`, by which the exports (``pal-opt export
    slurm``, ``k8s``) name a node's GPUs.  It decides nothing else, so a column that cannot serve
    (a blank, NaN or negative cell, a number given twice on a node) is set aside with a warning
    naming its first such cell, and the exports number a node's GPUs by rank.

Other columns (the unnamed index, ``GPU_UUID``, ``IP_addr``...) are ignored; one whose name
looks like a misspelt optional column (``Rak_ID`` for ``Rack_ID``) is reported by a warning
line (:func:`~pal_opt.io.csvfile.unused_column_note`).

How the round is read
---------------------
* A GPU in use by a job **in the queue** means that job is running there: the job's
  ``placement`` lists those GPUs and the GPUs are ``free`` for this round (the policy may move
  the job).  The job must hold exactly its demand.
* A GPU in use by anything else (a job not in the queue, or no job id) is ``busy``.
* A GPU with ``FAILED`` true is ``failed``.  If it is in use by a job in the queue, that job
  is running on a GPU that failed under it: it keeps the GPU as its placement and must move,
  as in an instance file (:class:`~pal_opt.model.RoundInstance`), unless the job CSV marks it
  not running (``is_running`` false), in which case the job is waiting and the failed GPU is
  simply out of service.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Unpack

import numpy as np

from ..errors import InstanceError, counted
from ..model import FACTOR_RANGE, Cluster, GpuState, Job, RoundArguments, RoundInstance, RoundParams
from .csvfile import CsvTable, NoteKind, TableNote, misspelt_column_note, read_csv
from .jobs import JobTable, parse_jobs
from .textfile import DEFAULT_MAX_BYTES, source_name

__all__ = [
    "GpuTable",
    "read_gpu_table",
    "parse_gpu_table",
    "load_blox",
    "blox_round",
    "frames_round",
    "instance_from_frames",
    "blox_gpu_rows",
]

log = logging.getLogger(__name__)

_PERFVAR = "PerfVar_"
#: The GPU table's required and optional columns (besides the ``PerfVar_<class>`` ones).
GPU_COLUMNS: tuple[str, ...] = ("GPU_ID", "Node_ID", "IN_USE")
OPTIONAL_GPU_COLUMNS: tuple[str, ...] = ("JOB_IDS", "Rack_ID", "FAILED", "GPU_TYPE", "Local_GPU_ID")
_SPLIT = re.compile(r"[,;\s]+")


@dataclass(eq=False, repr=False)  # compared by identity, as before; its table is long
class GpuTable:
    """The parsed GPU table: per-GPU columns and who holds what.

    Attributes
    ----------
    gpu_ids, server, rack_of_server, factors, failed, gpu_types, devices
        Cluster columns (``rack_of_server`` is None for a flat table, ``gpu_types`` without a
        ``GPU_TYPE`` column, ``devices`` without a ``Local_GPU_ID`` column or with one set aside).
    devices_set_aside
        The warning that the ``Local_GPU_ID`` column was set aside, naming its first unusable
        cell (its ``row`` and ``columns``), or None.
    misspelt
        The warning about columns that look like misspelt optional ones, or None.
    holders
        Per GPU, the job ids in ``JOB_IDS`` (empty tuple if none) — only meaningful where
        ``in_use`` is true.
    in_use
        Per GPU, the ``IN_USE`` flag.
    lines
        Per GPU, its line in the file.
    table
        The underlying :class:`~pal_opt.io.csvfile.CsvTable` (for error messages).
    """

    table: CsvTable
    gpu_ids: list[int]
    server: list[Any]
    rack_of_server: dict[Any, Any] | None
    factors: dict[str, np.ndarray]
    in_use: list[bool]
    holders: list[tuple[Any, ...]]
    failed: list[bool]
    lines: list[int]
    gpu_types: list[str] | None = None
    devices: list[int] | None = None
    devices_set_aside: TableNote | None = None
    misspelt: TableNote | None = None

    @property
    def source(self) -> str:
        return self.table.source


def read_gpu_table(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> GpuTable:
    """Parse a Blox ``gpu_df`` CSV (columns in the module docstring)."""
    return parse_gpu_table(read_csv(path, max_bytes=max_bytes, what="GPU table"))


def parse_gpu_table(t: CsvTable) -> GpuTable:
    """Parse a GPU table already read (from a file or a DataFrame); see :func:`read_gpu_table`."""
    c_gpu, c_node, c_use = (t.column(n) for n in GPU_COLUMNS)
    c_jobs, c_rack, c_fail, c_type, c_dev = (t.find(n) for n in OPTIONAL_GPU_COLUMNS)
    fcols = [(h[len(_PERFVAR):], t.unique(i)) for i, h in enumerate(t.header) if h.startswith(_PERFVAR)]
    if not fcols:
        raise InstanceError(
            f"no {_PERFVAR}<class> column; columns are: {', '.join(t.header)}", source=t.source, path="header"
        )
    for cname, i in fcols:
        if not cname:
            raise InstanceError(f"column {t.header[i]!r} names no class", source=t.source, path="header")

    gpu_ids: list[int] = []
    server: list[Any] = []
    in_use: list[bool] = []
    holders: list[tuple[Any, ...]] = []
    failed: list[bool] = []
    lines: list[int] = []
    racks: dict[Any, tuple[Any, int]] = {}
    seen: dict[int, int] = {}
    fvals: dict[str, list[float]] = {c: [] for c, _ in fcols}
    types: list[str] | None = [] if c_type is not None else None
    devices: list[int] | None = [] if c_dev is not None else None
    device_line: dict[tuple[Any, int], int] = {}
    set_aside: TableNote | None = None
    for line, f in t.rows:
        gid = t.integer(line, c_gpu, f[c_gpu], minimum=0, what="a non-negative integer")
        if gid in seen:
            raise t.error(line, c_gpu, f"duplicate GPU id {gid} (also on {t.row_label} {seen[gid]})")
        seen[gid] = line
        node = t.ident(line, c_node, f[c_node])
        use = t.boolean(line, c_use, f[c_use])
        hold: tuple[Any, ...] = ()
        if c_jobs is not None and f[c_jobs]:
            cell = f[c_jobs].strip().strip("[]()").strip()
            if cell and cell.lower() not in ("none", "nan"):
                hold = tuple(t.ident(line, c_jobs, x.strip("'\"")) for x in _SPLIT.split(cell) if x)
        if c_rack is not None:
            rack = t.ident(line, c_rack, f[c_rack])
            prev = racks.get(node)
            if prev is None:
                racks[node] = (rack, line)
            elif prev[0] != rack:
                raise t.error(
                    line, c_rack, f"server {node!r} is in rack {prev[0]!r} on line {prev[1]} but in {rack!r} here"
                )
        for cname, i in fcols:
            v = t.number(line, i, f[i], positive=True)
            if not FACTOR_RANGE[0] <= v <= FACTOR_RANGE[1]:  # said here, of the cell, not of the cluster's GPU
                raise t.error(line, i, f"must be in {FACTOR_RANGE[0]:g}..{FACTOR_RANGE[1]:g} (a slowdown relative "
                                       f"to a typical GPU), got {f[i].strip()!r}")
            fvals[cname].append(v)
        failed.append(t.boolean(line, c_fail, f[c_fail]) if c_fail is not None else False)
        if types is not None and c_type is not None:
            if not f[c_type].strip():
                raise t.error(line, c_type, "empty GPU type (the GPU_TYPE column names every GPU's type)")
            types.append(f[c_type].strip())
        if devices is not None and c_dev is not None:
            try:
                dev = t.integer(line, c_dev, f[c_dev], minimum=0, what="a non-negative integer (a device number)")
                first = device_line.setdefault((node, dev), line)
                if first != line:
                    raise t.error(line, c_dev, f"device {dev} of node {node!r} is also on {t.row_label} {first}")
                devices.append(dev)
            except InstanceError as exc:  # an annotation for the exports: not a reason to refuse the round
                set_aside, devices = t.note(NoteKind.COLUMN_SET_ASIDE, line, f"{exc.message}; Local_GPU_ID set aside: "
                                            "the exports number each node's GPUs by rank", c_dev), None
        gpu_ids.append(gid)
        server.append(node)
        in_use.append(use)
        holders.append(hold)
        lines.append(line)
    factors = {c: np.asarray(v, dtype=np.float64) for c, v in fvals.items()}
    rmap = {s: r for s, (r, _) in racks.items()} if c_rack is not None else None
    misspelt = misspelt_column_note(t.source, [h for h in t.header if not h.startswith(_PERFVAR)], GPU_COLUMNS,
                                    [(n,) for n in OPTIONAL_GPU_COLUMNS])
    return GpuTable(t, gpu_ids, server, rmap, factors, in_use, holders, failed, lines, types, devices, set_aside,
                    misspelt)


def load_blox(
    gpus_path: str | os.PathLike[str],
    jobs_path: str | os.PathLike[str] | None,
    *,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    **params: Unpack[RoundArguments],
) -> RoundInstance:
    """Build a round from a Blox GPU table and a job queue CSV (or none: the cluster alone).

    Parameters
    ----------
    gpus_path
        Blox ``gpu_df`` CSV (see the module docstring).
    jobs_path
        Job queue CSV (see :mod:`pal_opt.io.jobs`); None: an empty queue (the cluster alone,
        every GPU in use busy).
    name
        Round name; defaults to the GPU table's file stem (``blox`` when it is not a regular file,
        such as a pipe).
    max_bytes
        Size limit per file.
    **params
        The round's parameters (:class:`~pal_opt.model.RoundArguments`: ``locality_penalty``,
        PAL's λ for jobs without their own, ``binning``, ``restart_cost``, ``round_length``).

    Returns
    -------
    RoundInstance
    """
    rp = RoundParams.from_arguments(**params)
    gpu_table = read_csv(gpus_path, max_bytes=max_bytes, what="GPU table", arg="gpus_path")
    job_table = None if jobs_path is None else read_csv(jobs_path, max_bytes=max_bytes, what="job CSV", arg="jobs_path")
    return blox_round(gpu_table, job_table, rp, name or source_name(gpus_path, "blox", stem=True))


def instance_from_frames(
    gpu_df: Any,
    jobs_df: Any,
    *,
    name: str = "",
    **params: Unpack[RoundArguments],
) -> RoundInstance:
    """Build a round from pandas DataFrames: a Blox ``gpu_df`` and a job queue.

    The frames follow the same columns and rules as the CSV files of :func:`load_blox`
    (``jobs_df``: ``job_id``, ``num_gpus``, ``perfclass`` and/or ``model``, optional
    ``is_running``, ``locality_penalty``, ``priority`` and ``started``; :mod:`pal_opt.io.jobs`), in
    queue order.  Errors name ``gpu_df`` or ``jobs_df`` and the 0-based row.

    Examples
    --------
    >>> import pandas as pd
    >>> gpus = pd.DataFrame({"GPU_ID": [0, 1, 2, 3], "Node_ID": [0, 0, 1, 1],
    ...                      "IN_USE": [False, False, True, False], "JOB_IDS": [None, None, 9, None],
    ...                      "PerfVar_classA": [1.0, 1.2, 0.9, 1.0]})
    >>> jobs = pd.DataFrame({"job_id": [7], "num_gpus": [2], "model": ["resnet50"]})
    >>> inst = instance_from_frames(gpus, jobs)
    >>> inst.free_gpus, inst.jobs[0].perfclass
    (3, 'classA')
    """
    return frames_round(gpu_df, jobs_df, RoundParams.from_arguments(**params), name, jobs_name="jobs_df")


def frames_round(gpu_df: Any, jobs_df: Any, params: RoundParams, name: str = "", *,
                 notes: list[TableNote] | None = None, jobs_name: str = "jobs") -> RoundInstance:
    """:func:`instance_from_frames` with the round's parameters built; ``notes``: as for
    :func:`blox_round` (a caller that builds a round from frames every round, as the Blox
    adapter does, logs each warning once rather than every round); ``jobs_name``: what errors
    call the jobs frame (the argument's name, or the frame the Blox adapter builds, ``jobs``)."""
    return blox_round(CsvTable.from_frame(gpu_df, "gpu_df"), CsvTable.from_frame(jobs_df, jobs_name), params, name,
                      notes=notes)


def blox_round(gpu_table: CsvTable, job_table: CsvTable | None, params: RoundParams, name: str = "", *,
               notes: list[TableNote] | None = None) -> RoundInstance:
    """Assemble a round from a parsed GPU table and job table (the rules of :func:`load_blox`;
    no job table: an empty queue).

    ``params`` come from :meth:`RoundParams.from_arguments <pal_opt.model.RoundParams.from_arguments>`; jobs without their own λ get
    ``params.locality_penalty``.  The tables' warnings (a misspelt optional column, device
    numbers set aside, a job larger than the cluster) are logged once the round is built, or,
    with ``notes``, appended to it instead, as :class:`~pal_opt.io.csvfile.TableNote` objects
    (``str(note)`` is the line; ``kind``, ``row`` and ``columns`` say what it is about, the
    ``row`` of a job's note being the job's line or row in the job table).
    """
    gt = parse_gpu_table(gpu_table)
    if job_table is None:
        jt = JobTable((), (), (), gt.source)
    else:
        jt = parse_jobs(job_table, classes=tuple(gt.factors), locality_penalty=params.locality_penalty,
                        max_gpus=len(gt.gpu_ids))
    state, held = _gpu_states(gt, {str(j.id): k for k, j in enumerate(jt.jobs)}, jt.running)
    jobs = _with_placements(jt, held, gt.source)
    cluster = Cluster.from_arrays(gt.gpu_ids, gt.server, gt.factors, state, gt.rack_of_server, source=gt.source,
                                  gpu_types=gt.gpu_types, devices=gt.devices)
    instance = RoundInstance(cluster=cluster, jobs=tuple(jobs), params=params, name=name)
    # the round is good: now its warnings (bad input gives one line, no warning)
    found = [n for n in (gt.misspelt, gt.devices_set_aside) if n is not None] + jt.warnings()
    if notes is not None:
        notes.extend(found)
    for note in found if notes is None else ():
        log.warning("%s", note)
    return instance


def _gpu_states(gt: GpuTable, queued: dict[str, int],
                running: tuple[bool | None, ...]) -> tuple[np.ndarray, dict[int, list[int]]]:
    """Each GPU's state, and the GPUs held by each queued job (by queue index).  A failed GPU
    held by a queued job is the job's (it must move), unless ``running`` (the job CSV's
    ``is_running``) says the job is not running: then nothing holds it."""
    n = len(gt.gpu_ids)
    state = np.zeros(n, dtype=np.int8)
    held: dict[int, list[int]] = {}
    for i in range(n):
        if gt.failed[i]:
            state[i] = GpuState.FAILED
        if not gt.in_use[i]:
            continue
        mine = [queued[str(h)] for h in gt.holders[i] if str(h) in queued]
        if not mine:
            if not gt.failed[i]:
                state[i] = GpuState.BUSY
            continue
        if len(gt.holders[i]) > 1:
            raise gt.table.error(
                gt.lines[i],
                gt.table.column("JOB_IDS"),
                f"GPU {gt.gpu_ids[i]} is shared by jobs {list(gt.holders[i])}; a queued job's GPUs must be its own",
            )
        if gt.failed[i] and running[mine[0]] is False:
            continue
        held.setdefault(mine[0], []).append(gt.gpu_ids[i])
    return state, held


def _with_placements(jt: JobTable, held: dict[int, list[int]], source: str) -> list[Job]:
    """The queue, running jobs with their GPUs, cross-checked against ``is_running``."""
    jobs: list[Job] = []
    for k, job in enumerate(jt.jobs):
        gpus = held.get(k)
        flag = jt.running[k]
        if gpus is None:
            if flag:
                raise jt.error(k, f"job {job.id!r} is marked running but holds no GPU in {source}", "is_running")
            jobs.append(job)
            continue
        if flag is False:
            raise jt.error(k, f"job {job.id!r} is marked not running but {source} lists it on GPUs {gpus}", "is_running")
        if len(gpus) != job.demand:
            raise jt.error(k, f"job {job.id!r} needs {counted(job.demand, 'GPU')} but holds {len(gpus)} in {source} (GPUs {gpus})")
        jobs.append(replace(job, placement=tuple(gpus)))
    return jobs


def blox_gpu_rows(instance: RoundInstance) -> list[Mapping[str, Any]]:
    """The round's GPUs as Blox ``gpu_df`` rows (the inverse of :func:`load_blox`'s GPU side).

    Queued running jobs appear in ``JOB_IDS`` of their GPUs; busy GPUs are in use with no job
    id; failed GPUs have ``FAILED`` true.
    """
    cl = instance.cluster
    holder: dict[int, Any] = {}
    for j in instance.jobs:
        for g in j.placement or ():
            holder[g] = j.id
    rows: list[Mapping[str, Any]] = []
    for i, gid in enumerate(cl.gpu_ids.tolist()):
        st = int(cl.state[i])
        row: dict[str, Any] = {
            "GPU_ID": gid,
            "Node_ID": cl.server_ids[cl.server_of[i]],
            "IN_USE": gid in holder or st == GpuState.BUSY,
            "JOB_IDS": holder.get(gid, ""),
        }
        if cl.racked:
            row["Rack_ID"] = cl.rack_ids[cl.rack_of_server[cl.server_of[i]]]
        for c, v in cl.factors.items():
            row[f"{_PERFVAR}{c}"] = float(v[i])
        row["FAILED"] = st == GpuState.FAILED
        if cl.typed:
            row["GPU_TYPE"] = cl.type_names[int(cl.type_of[i])]
        if cl.devices is not None:
            row["Local_GPU_ID"] = int(cl.devices[i])
        rows.append(row)
    return rows
