"""Measured step times of an application on each GPU type, and the Sia simulator's throughput model.

The Sia artifact profiles every application on every GPU type (``profiles/<app>/``):

``placements-<type>.csv`` (``placement,local_bsz,step_time,sync_time``, any column order)
    One row per (placement shape, per-GPU batch).  ``placement`` is a digit string, one digit
    per node giving the GPUs used there (``"22"`` = 2 nodes × 2 GPUs); it is written as its
    lexicographically smallest rotation.
``scalability-<type>.csv`` (``num_nodes,num_replicas,local_bsz,step_time,sync_time``)
    Larger shapes, known only by their node and GPU counts.
``validation-<B>.csv`` (``progress,iteration,metric,grad_sqr,grad_var``)
    One file per validated global batch size B; row e is epoch e + 1 (see
    :mod:`pal_opt.hetero.goodput`).

``step_time`` is the time of one optimiser step including the gradient synchronisation,
``sync_time`` the synchronisation part; one accumulation micro-step costs
``step_time - sync_time``.

Throughput model (the artifact's ``Application.get_throughput``)
----------------------------------------------------------------
For a placement p (GPUs per node, zeros dropped) and a per-GPU ("atomic") batch b:

1. p is rotated to its lexicographically smallest rotation, whose digits are its id.
2. If the id is profiled: (step, sync) are interpolated linearly in ``local_bsz`` among that
   placement's rows.  Outside the profiled range the value is undefined (NaN here; the artifact
   returns (-1, -1), which ``artifact_sentinel=True`` reproduces).
3. Otherwise: piecewise-linear interpolation on a Delaunay triangulation of the points
   (num_nodes, num_replicas, local_bsz), built from the placement rows averaged over equal points
   followed by the scalability rows, queried at (min(nodes, 16), GPUs, b).  Outside the convex
   hull the value is NaN (the artifact stops there).  Where the points span no volume
   (``gpt_pmp`` on ``rtx``: every shape has 8 GPUs per node) this path is NaN everywhere and a
   warning is logged.

``gpt_pmp`` (pipeline model parallelism) loads like the others, but its pipeline semantics are
not modelled here (SIA_MODEL.md leaves that application out).

Both interpolations use scipy's own ``interp1d`` and ``LinearNDInterpolator`` on the same points
in the same order as the artifact, so values agree to the last bit with the same scipy.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ..errors import InputTypeError, InstanceError, MissingFileError, OptionError
from ..options import (
    check_count,
    check_finite,
    check_seconds,
    file_path,
    require_items,
    require_mapping,
    require_text,
    require_type,
)
from .tables import MAX_EXACT_INT, Table, read_table

__all__ = [
    "PLACEMENT_COLUMNS",
    "SCALABILITY_COLUMNS",
    "VALIDATION_COLUMNS",
    "MAX_INTERP_NODES",
    "AppSettings",
    "APP_SETTINGS",
    "DEFAULT_SETTINGS",
    "MAX_LOCAL_BSZ_OVERRIDES",
    "StepTable",
    "TypeProfile",
    "ValidationCurves",
    "Application",
    "canonical_placement",
    "placement_id",
    "load_application",
    "load_applications",
    "application_names",
]

logger = logging.getLogger(__name__)

PLACEMENT_COLUMNS: tuple[str, ...] = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS: tuple[str, ...] = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
VALIDATION_COLUMNS: tuple[str, ...] = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
#: Largest ``grad_sqr`` or ``grad_var`` read (the artifact's reach 7e15): the statistical
#: efficiency multiplies them by batch sizes, and 1e308 overflowed into a NaN progress rate.
GRAD_STAT_MAX = 1e200

#: Node counts above this are queried as this many nodes in the 3-D interpolation (the
#: profiles reach 16 nodes).
MAX_INTERP_NODES = 16


@dataclass(frozen=True)
class AppSettings:
    """Per-application constants of the Sia simulator (not in the profile files).

    Attributes
    ----------
    max_epochs
        E: training stops after E epochs (no target metric is set, so every batch size
        completes at epoch E - 1, 0-based).  None: the number of validation rows.
    restart_delay
        Seconds a (re)start holds the GPUs without progress (simulator side).
    restart_penalty
        Seconds the policy charges per restart in its re-allocation factor.
    slowdown
        s: every simulated progress rate is divided by s (calibration to real runs).
    """

    max_epochs: int | None = None
    restart_delay: float = 30.0
    restart_penalty: float = 30.0
    slowdown: float = 1.0

    def __post_init__(self) -> None:
        """Each field checked (the values kept as given): a junk object or a zero slowdown
        failed later, in a simulated round."""
        if self.max_epochs is not None:
            check_count(self.max_epochs, "max_epochs")
        for name in ("restart_delay", "restart_penalty"):
            check_seconds(getattr(self, name), name, allow_zero=True)
        check_finite(self.slowdown, "slowdown", strict=True)

    @property
    def calibration(self) -> float:
        """κ = 1 / slowdown, the factor applied to simulated progress rates."""
        return 1.0 / self.slowdown


#: The artifact's constants per application (SIA_MODEL.md A.1 and B.5).
APP_SETTINGS: Mapping[str, AppSettings] = {
    "bert": AppSettings(max_epochs=2, restart_delay=120, restart_penalty=120, slowdown=1.2),
    "cifar10": AppSettings(max_epochs=100, restart_delay=50, restart_penalty=30, slowdown=1.8),
    "deepspeech2": AppSettings(max_epochs=80, restart_delay=25, restart_penalty=25, slowdown=1.2),
    "imagenet": AppSettings(max_epochs=90, restart_delay=250, restart_penalty=250, slowdown=1.2),
    "yolov3": AppSettings(max_epochs=50, restart_delay=80, restart_penalty=45, slowdown=1.2),
    "ncf": AppSettings(max_epochs=10, restart_delay=15, restart_penalty=30, slowdown=1.5),
    "gpt_pmp": AppSettings(max_epochs=2, restart_delay=30, restart_penalty=30, slowdown=1.0),
}

#: Settings of an application the table above does not know.
DEFAULT_SETTINGS = AppSettings()

#: (application, GPU type) -> largest atomic batch, where the artifact overrides the profile's.
MAX_LOCAL_BSZ_OVERRIDES: Mapping[tuple[str, str], int] = {("deepspeech2", "rtx"): 57}


#: What an argument that must be an :class:`Application` is, for the message about one that is not.
APP_WHAT = "an Application (pal_opt.hetero.load_application)"


@runtime_checkable
class ApplicationLike(Protocol):
    """What the model's functions check an ``app`` argument for: an :class:`Application`, or a
    stand-in with its name and per-type profiles (tests build such stand-ins); ``None`` or a
    string is neither."""

    name: str

    def profile(self, gpu_type: str) -> Any: ...


def canonical_placement(placement: Iterable[int]) -> tuple[int, ...]:
    """The placement with empty nodes dropped, rotated to its lexicographically smallest form.

    Examples
    --------
    >>> canonical_placement((2, 0, 1))
    (1, 2)
    >>> canonical_placement([4, 2, 3])
    (2, 3, 4)
    """
    try:
        if isinstance(placement, str | bytes):
            raise TypeError
        p = tuple(int(k) for k in placement if int(k) != 0)
    except (TypeError, ValueError):
        raise InputTypeError(f"must be GPU counts per node (a list of integers), got {type(placement).__name__} "
                             f"{placement!r:.60}", path="placement") from None
    if not p:
        return p
    return min(p[i:] + p[:i] for i in range(len(p)))


def placement_id(placement: Iterable[int]) -> str:
    """The digit string that names a placement in ``placements-<type>.csv`` (canonical form).

    >>> placement_id((4, 4, 2))
    '244'
    """
    return "".join(str(k) for k in canonical_placement(placement))


@dataclass(frozen=True, eq=False)
class StepTable:
    """Measured step times: one row per (shape, atomic batch).

    Attributes
    ----------
    num_nodes, num_replicas, local_bsz
        int64 arrays: nodes, GPUs and per-GPU batch of each row.
    step_time, sync_time
        float64 arrays (seconds).
    placement
        Object array of placement ids (digit strings), or None for scalability rows.
    """

    num_nodes: np.ndarray
    num_replicas: np.ndarray
    local_bsz: np.ndarray
    step_time: np.ndarray
    sync_time: np.ndarray
    placement: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.local_bsz.size)

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (columns ``num_nodes, num_replicas, local_bsz, step_time, sync_time``)."""
        return pd.DataFrame({name: getattr(self, name) for name in SCALABILITY_COLUMNS})


_DIGITS = re.compile(r"[1-9]+")


def _placement_table(table: Table) -> StepTable:
    table.require(*PLACEMENT_COLUMNS)
    ids = table.strings("placement")
    for i, pid in enumerate(ids):
        if not _DIGITS.fullmatch(pid):
            raise table.error(i, "placement", f"must be a string of digits 1-9 (GPUs per node), got {pid!r}")
        canon = placement_id(int(d) for d in pid)
        if canon != pid:
            raise table.error(
                i, "placement", f"must be written as its smallest rotation {canon!r}, got {pid!r}"
            )
    local_bsz = table.ints("local_bsz")
    rows = StepTable(
        num_nodes=np.fromiter((len(p) for p in ids), dtype=np.int64, count=len(ids)),
        num_replicas=np.fromiter((sum(map(int, p)) for p in ids), dtype=np.int64, count=len(ids)),
        local_bsz=local_bsz,
        step_time=table.floats("step_time", positive=True),
        sync_time=table.floats("sync_time", minimum=0.0),
        placement=ids,
    )
    dup = pd.DataFrame({"p": ids, "b": local_bsz}).duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise table.error(i, "local_bsz", f"placement {ids[i]!r} has local_bsz {local_bsz[i]} twice")
    return rows


def _scalability_table(table: Table) -> StepTable:
    table.require(*SCALABILITY_COLUMNS)
    nodes = table.ints("num_nodes")
    replicas = table.ints("num_replicas")
    bad = np.flatnonzero(replicas < nodes)
    if bad.size:
        i = int(bad[0])
        raise table.error(i, "num_replicas", f"must be ≥ num_nodes ({nodes[i]}), got {replicas[i]}")
    return StepTable(
        num_nodes=nodes,
        num_replicas=replicas,
        local_bsz=table.ints("local_bsz"),
        step_time=table.floats("step_time", positive=True),
        sync_time=table.floats("sync_time", minimum=0.0),
    )


@dataclass(frozen=True, eq=False)
class TypeProfile:
    """One application's measured step times on one GPU type, with the artifact's interpolation.

    Attributes
    ----------
    app, gpu_type
        Names.
    placements, scalability
        The two tables (see the module docstring).
    min_local_bsz, max_local_bsz
        b_min and b_max: the smallest and largest ``local_bsz`` of the placements table (the
        application's atomic-batch range on this type), after :data:`MAX_LOCAL_BSZ_OVERRIDES`.
    source
        The directory the tables came from (for messages).

    Examples
    --------
    >>> pl = pd.DataFrame({"placement": ["1", "1", "2", "2"], "local_bsz": [4, 8, 4, 8],
    ...                    "step_time": [1.0, 2.0, 1.5, 2.5], "sync_time": [0.0, 0.0, 0.5, 0.5]})
    >>> sc = pd.DataFrame({"num_nodes": [2, 2], "num_replicas": [2, 2], "local_bsz": [4, 8],
    ...                    "step_time": [3.0, 4.0], "sync_time": [2.0, 2.0]})
    >>> prof = TypeProfile.from_frames("demo", "t4", pl, sc)
    >>> prof.step_time((2,), 6)          # placement '2', halfway between local_bsz 4 and 8
    (2.0, 0.5)
    >>> prof.step_time((1, 1), 8)        # '11' is not profiled: 3-D interpolation
    (4.0, 2.0)
    >>> prof.step_time((2,), [2, 8])     # below the profiled range: undefined
    (array([nan, 2.5]), array([nan, 0.5]))
    >>> prof.placement_limit((2,)), prof.min_local_bsz, prof.max_local_bsz
    (8, 4, 8)
    """

    app: str
    gpu_type: str
    placements: StepTable
    scalability: StepTable
    min_local_bsz: int
    max_local_bsz: int
    source: str = "<memory>"
    # a dict, not functools.cached_property: entries per profiled shape too (``1d:<id>``), gone with the profile
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_tables(
        cls, app: str, gpu_type: str, placements: Table, scalability: Table, *, source: str = ""
    ) -> TypeProfile:
        """Validate two :class:`~pal_opt.hetero.tables.Table` objects into a profile."""
        pl = _placement_table(placements)
        sc = _scalability_table(scalability)
        b_max = MAX_LOCAL_BSZ_OVERRIDES.get((app, gpu_type), int(pl.local_bsz.max()))
        return cls(app, gpu_type, pl, sc, int(pl.local_bsz.min()), b_max, source or placements.source)

    @classmethod
    def from_frames(
        cls, app: str, gpu_type: str, placements: pd.DataFrame, scalability: pd.DataFrame
    ) -> TypeProfile:
        """A profile from two in-memory DataFrames shaped like the CSV files."""
        return cls.from_tables(
            app,
            gpu_type,
            Table.from_frame(placements, f"<{app}/placements-{gpu_type}>"),
            Table.from_frame(scalability, f"<{app}/scalability-{gpu_type}>"),
        )

    # -- lookups ------------------------------------------------------------------------------
    def _placement_rows(self) -> dict[str, np.ndarray]:
        rows = self._cache.get("rows")
        if rows is None:
            assert self.placements.placement is not None
            ids = self.placements.placement
            order = np.argsort(ids, kind="stable")
            sorted_ids = ids[order]
            cuts = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
            rows = {str(sorted_ids[g[0]]): g for g in np.split(order, cuts)}
            self._cache["rows"] = rows
        return rows

    def is_profiled(self, placement: Iterable[int]) -> bool:
        """Whether the placement's shape has rows of its own in the placements table."""
        return placement_id(placement) in self._placement_rows()

    def placement_limit(self, placement: Sequence[int]) -> int | None:
        """b_hi(p): the largest atomic batch profiled for this shape (SIA_MODEL.md A.5).

        The placement's own rows if it is profiled, else the scalability rows with at least as
        many nodes and GPUs; None when there are none.
        """
        p = canonical_placement(placement)
        idx = self._placement_rows().get(placement_id(p))
        if idx is not None:
            return int(self.placements.local_bsz[idx].max())
        sc = self.scalability
        sel = (sc.num_nodes >= len(p)) & (sc.num_replicas >= sum(p))
        return int(sc.local_bsz[sel].max()) if sel.any() else None

    def replica_limit(self, num_replicas: int) -> int | None:
        """The largest atomic batch profiled with exactly ``num_replicas`` GPUs in the placements
        table (the memory clamp of A.5), or None if no placement has that many GPUs."""
        sel = self.placements.num_replicas == num_replicas
        return int(self.placements.local_bsz[sel].max()) if sel.any() else None

    def single_gpu_throughput(self) -> float | None:
        """X(c) = largest ``local_bsz`` / largest ``step_time`` over the 1-GPU rows (B.3), or None."""
        idx = self._placement_rows().get("1")
        if idx is None:
            return None
        return float(self.placements.local_bsz[idx].max() / self.placements.step_time[idx].max())

    # -- interpolation --------------------------------------------------------------------------
    def _interp1d(self, pid: str) -> Any:
        key = "1d:" + pid
        f = self._cache.get(key)
        if f is None:
            from scipy.interpolate import interp1d

            idx = self._placement_rows()[pid]
            x = self.placements.local_bsz[idx].astype(np.float64)
            y = np.column_stack([self.placements.step_time[idx], self.placements.sync_time[idx]])
            if x.size == 1:  # interp1d needs two points; a single row is exact at its batch only
                x0, y0 = x[0], y[0]

                def f(b: np.ndarray) -> np.ndarray:
                    return np.where((b == x0)[:, None], y0[None, :], np.nan)

            else:
                f = interp1d(x, y, axis=0, bounds_error=False, fill_value=np.nan)
            self._cache[key] = f
        return f

    def _interp_nd(self) -> Any:
        f = self._cache.get("nd")
        if f is None:
            from scipy.interpolate import LinearNDInterpolator

            xs = ["num_nodes", "num_replicas", "local_bsz"]
            ys = ["step_time", "sync_time"]
            mean = self.placements.frame().groupby(xs, sort=True, as_index=False)[ys].mean()
            points = pd.concat([mean, self.scalability.frame()[xs + ys]], ignore_index=True)
            try:
                f = LinearNDInterpolator(points[xs].to_numpy(np.float64), points[ys].to_numpy(np.float64))
            except Exception as exc:  # noqa: BLE001 - Qhull: the points span no 3-D volume
                logger.warning(
                    "%s on %s: no 3-D interpolation of step times (%s); unprofiled shapes are undefined",
                    self.app,
                    self.gpu_type,
                    str(exc).splitlines()[0],
                )

                def f(pts: np.ndarray) -> np.ndarray:
                    return np.full((len(pts), 2), np.nan)

            self._cache["nd"] = f
        return f

    def step_time_shape(
        self, num_nodes: ArrayLike, num_replicas: ArrayLike, atomic_bsz: ArrayLike
    ) -> tuple[np.ndarray, np.ndarray]:
        """(step, sync) by the 3-D interpolation only (step 3 of the module docstring), vectorised.

        Arguments broadcast together; node counts above :data:`MAX_INTERP_NODES` are clamped.
        NaN outside the data's convex hull.
        """
        m, n, b = np.broadcast_arrays(
            np.asarray(num_nodes, dtype=np.float64),
            np.asarray(num_replicas, dtype=np.float64),
            np.asarray(atomic_bsz, dtype=np.float64),
        )
        pts = np.column_stack([np.minimum(m.ravel(), MAX_INTERP_NODES), n.ravel(), b.ravel()])
        out = np.asarray(self._interp_nd()(pts), dtype=np.float64).reshape(*m.shape, 2)
        return out[..., 0], out[..., 1]

    def step_time(
        self, placement: Sequence[int], atomic_bsz: ArrayLike, *, artifact_sentinel: bool = False
    ) -> tuple[Any, Any]:
        """(T_step, T_sync) of a placement at atomic batch size(s), as the artifact computes them.

        Parameters
        ----------
        placement
            GPUs per node (order and zeros do not matter).
        atomic_bsz
            Per-GPU batch size: a number or an array.
        artifact_sentinel
            Return -1 (as the artifact does) instead of NaN where a profiled placement is asked
            outside its batch range.

        Returns
        -------
        tuple
            Two floats for a scalar ``atomic_bsz``, else two arrays of its shape.
        """
        p = canonical_placement(placement)
        if not p:
            raise OptionError("a placement needs at least one GPU")
        b = np.asarray(atomic_bsz, dtype=np.float64)
        pid = placement_id(p)
        if pid in self._placement_rows():
            out = np.asarray(self._interp1d(pid)(b.ravel()), dtype=np.float64)
            step, sync = out[:, 0].reshape(b.shape), out[:, 1].reshape(b.shape)
            if artifact_sentinel:
                step, sync = np.where(np.isnan(step), -1.0, step), np.where(np.isnan(sync), -1.0, sync)
        else:
            step, sync = self.step_time_shape(len(p), sum(p), b)
        if b.ndim == 0:
            return float(step), float(sync)
        return step, sync


@dataclass(frozen=True, eq=False)
class ValidationCurves:
    """Training curves of one application at each validated global batch size.

    Attributes
    ----------
    batch_sizes
        Validated batch sizes, ascending (int64).
    progress, iteration, metric, grad_sqr, grad_var
        float64 arrays of shape (len(batch_sizes), epochs): row i is batch ``batch_sizes[i]``,
        column e is epoch e + 1 (gradient statistics measured during that epoch; ``progress``
        and ``iteration`` cumulative at its end).
    """

    batch_sizes: np.ndarray
    progress: np.ndarray
    iteration: np.ndarray
    metric: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray

    @property
    def epochs(self) -> int:
        """Number of epochs every curve covers."""
        return int(self.progress.shape[1])

    @classmethod
    def from_tables(cls, tables: Mapping[int, Table]) -> ValidationCurves:
        """Validate ``{batch size: table}`` (at least one) into curves.

        Curves of different lengths are cut to the shortest (the artifact's default number of
        epochs is the shortest curve too); a warning is logged.
        """
        if not tables:
            raise InstanceError("no validation curves (validation-<batch>.csv files)")
        cols: dict[str, list[np.ndarray]] = {c: [] for c in VALIDATION_COLUMNS}
        for batch in sorted(tables):
            t = tables[batch]
            t.require(*VALIDATION_COLUMNS)
            for c in VALIDATION_COLUMNS:
                cols[c].append(t.floats(c, minimum=0.0, maximum=GRAD_STAT_MAX) if c in ("grad_sqr", "grad_var")
                               else t.floats(c, positive=True) if c == "progress" else t.floats(c))
            both_zero = np.flatnonzero((cols["grad_sqr"][-1] == 0) & (cols["grad_var"][-1] == 0))
            if both_zero.size:
                raise t.error(
                    int(both_zero[0]),
                    "grad_var",
                    "grad_sqr and grad_var are both 0 (no gradient noise scale)",
                )
            bad = np.flatnonzero(np.diff(cols["progress"][-1]) < 0)
            if bad.size:
                raise t.error(int(bad[0]) + 1, "progress", "must not decrease from one epoch to the next")
        n = min(len(v) for v in cols["progress"])
        if any(len(v) != n for v in cols["progress"]):
            logger.warning("validation curves have different lengths; using the first %d epochs of each", n)
        arrays = {c: np.vstack([v[:n] for v in vs]) for c, vs in cols.items()}
        return cls(batch_sizes=np.array(sorted(tables), dtype=np.int64), **arrays)


@dataclass(frozen=True, eq=False)
class Application:
    """Everything measured about one application: validation curves and per-type profiles.

    Attributes
    ----------
    name
        Application name (``bert``, ``cifar10``...).
    validation
        The curves (shared by all GPU types).
    types
        GPU type -> :class:`TypeProfile`, in the order they were loaded.
    settings
        The artifact's constants (:data:`APP_SETTINGS`).
    """

    name: str
    validation: ValidationCurves
    types: Mapping[str, TypeProfile]
    settings: AppSettings = DEFAULT_SETTINGS

    def __post_init__(self) -> None:
        require_text(self.name, "name")  # the key of its class, caches and messages: None was taken
        require_type(self.validation, ValidationCurves, "validation", " (ValidationCurves.from_dir)")
        require_type(self.settings, AppSettings, "settings", " (APP_SETTINGS[name])")
        for t, prof in require_mapping(self.types, "types", "a mapping of GPU type names to TypeProfiles").items():
            require_type(prof, TypeProfile, f"types[{t!r}]")
        epochs = self.settings.max_epochs
        if epochs is not None and not 1 <= epochs <= self.validation.epochs:
            raise InstanceError(
                f"{self.name}: max_epochs {epochs} needs that many validation rows, the curves have "
                f"{self.validation.epochs}"
            )
        for prof in self.types.values():
            if self.max_batch_size < prof.min_local_bsz:
                raise InstanceError(
                    f"largest validated batch {self.max_batch_size} is below the smallest atomic batch "
                    f"{prof.min_local_bsz} on {prof.gpu_type}",
                    source=prof.source,
                )

    @property
    def init_batch_size(self) -> int:
        """B0: the smallest validated batch size (progress is counted in B0-equivalent steps)."""
        return int(self.validation.batch_sizes[0])

    @property
    def max_batch_size(self) -> int:
        """Bmax: the largest validated batch size."""
        return int(self.validation.batch_sizes[-1])

    @property
    def max_epochs(self) -> int:
        """E: epochs to train (the settings' value, else the number of validation rows)."""
        return self.settings.max_epochs or self.validation.epochs

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types profiled, in load order."""
        return tuple(self.types)

    def profile(self, gpu_type: str) -> TypeProfile:
        """The profile on ``gpu_type`` (an :class:`~pal_opt.errors.OptionError` names the known ones)."""
        try:
            return self.types[gpu_type]
        except KeyError:
            raise OptionError(
                f"application {self.name!r} has no profile for GPU type {gpu_type!r}; "
                f"it has: {', '.join(self.types) or '(none)'}"
            ) from None


#: What an ``app`` argument is checked against (:func:`~pal_opt.options.require_type`): an
#: :class:`Application` first, then a stand-in (:class:`ApplicationLike`).  A runtime protocol's
#: ``isinstance`` reads the protocol's members on every call (about 30 µs); the class first makes
#: the check of a real application about 0.05 µs, which counts in the per-job, per-round model
#: functions (``choose_batch``, ``clamp_batch``, ``progress_rate``, ``gang_state``).
APP_TYPES = (Application, ApplicationLike)


_VALIDATION_FILE = re.compile(r"validation-([0-9]+)\.csv")  # ASCII digits: \d takes '١٢٣' as 123
_PLACEMENTS_FILE = re.compile(r"placements-(.+)\.csv")


def _discover(app_dir: Path) -> tuple[dict[int, Path], list[str]]:
    validation: dict[int, Path] = {}
    types = []
    for p in sorted(app_dir.iterdir()):
        if m := _VALIDATION_FILE.fullmatch(p.name):
            batch = int(m.group(1))
            if not 0 < batch <= MAX_EXACT_INT:
                raise InstanceError(f"validated batch size must be between 1 and {MAX_EXACT_INT:,}, got {batch:,}"
                                    if batch else "validated batch size must be positive", source=str(p))
            if batch in validation:  # validation-0384.csv beside validation-384.csv: one would be dropped
                raise InstanceError(f"batch size {batch} has two validation files, {validation[batch].name} and "
                                    f"{p.name}", source=str(app_dir))
            validation[batch] = p
        elif m := _PLACEMENTS_FILE.fullmatch(p.name):
            types.append(m.group(1))
    return validation, types


def load_application(
    profiles_dir: str | os.PathLike[str],
    app: str,
    *,
    gpu_types: Sequence[str] | None = None,
    settings: AppSettings | None = None,
) -> Application:
    """Load and validate ``<profiles_dir>/<app>/``.

    Parameters
    ----------
    profiles_dir
        The folder holding one sub-folder per application (the artifact's ``traces/``).
    app
        Application name (sub-folder).
    gpu_types
        Types to load, in this order; default: every ``placements-<type>.csv`` found, sorted.
        Each needs its ``scalability-<type>.csv``.
    settings
        Constants; default :data:`APP_SETTINGS` ``[app]`` or :data:`DEFAULT_SETTINGS`.

    Raises
    ------
    InstanceError
        A missing folder or file, or a bad table (file, row and column named).
    """
    if not isinstance(app, str) or not app:
        raise InputTypeError(f"must be an application name (a non-empty str), got {app!r:.60}", path="app")
    app_dir = Path(file_path(profiles_dir, "profiles_dir")) / app
    if gpu_types is not None:
        gpu_types = require_items(gpu_types, "gpu_types", "a list of GPU type names", of=str)
    if settings is not None:
        require_type(settings, AppSettings, "settings", " (APP_SETTINGS[name])")
    if not app_dir.is_dir():
        known = application_names(profiles_dir)  # raises first when the folder itself is missing or not Sia's
        raise InstanceError(f"no profiles for application {app!r} (this folder has {', '.join(known)})",
                            source=str(app_dir))
    validation_files, found = _discover(app_dir)
    if not validation_files:
        raise InstanceError("no validation-<batch>.csv file", source=str(app_dir))
    curves = ValidationCurves.from_tables(
        {
            b: read_table(p, required=VALIDATION_COLUMNS, what="validation file")
            for b, p in validation_files.items()
        }
    )
    types: dict[str, TypeProfile] = {}
    for t in gpu_types if gpu_types is not None else found:
        pl_path, sc_path = app_dir / f"placements-{t}.csv", app_dir / f"scalability-{t}.csv"
        for path in (pl_path, sc_path):
            if not path.is_file():  # a FIFO there said "missing"
                raise InstanceError(f"missing profile file for GPU type {t!r}" if not path.exists() else
                                    f"the profile file for GPU type {t!r} is not a regular file (a FIFO, a device "
                                    "or a directory)", source=str(path))
        types[t] = TypeProfile.from_tables(
            app,
            t,
            read_table(pl_path, required=PLACEMENT_COLUMNS, what="placements file"),
            read_table(sc_path, required=SCALABILITY_COLUMNS, what="scalability file"),
            source=str(app_dir),
        )
    chosen = settings if settings is not None else APP_SETTINGS.get(app, DEFAULT_SETTINGS)
    return Application(app, curves, types, chosen)


def application_names(profiles_dir: str | os.PathLike[str]) -> tuple[str, ...]:
    """The applications (sub-folders) of a profiles folder, sorted."""
    root = Path(file_path(profiles_dir, "profiles_dir"))
    if not root.is_dir():
        if not root.exists():
            raise MissingFileError("profiles folder not found", source=str(root))
        raise InstanceError("not a folder (the Sia artifact's profiles/ folder: one sub-folder per application)",
                            source=str(root))
    # an application is a sub-folder with step times (a folder of other things is not one)
    names = tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("placements-*.csv"))))
    if not names:
        raise InstanceError("not a Sia profiles folder: no sub-folder holds a placements-<type>.csv (the Sia "
                            "artifact's profiles/ has one sub-folder per application, such as cifar10/)",
                            source=str(root))
    return names


@functools.lru_cache(maxsize=8)
def _load_all_cached(root: str, apps: tuple[str, ...]) -> Mapping[str, Application]:
    return {a: load_application(root, a) for a in apps}


def load_applications(
    profiles_dir: str | os.PathLike[str], apps: Sequence[str] | None = None, *, cache: bool = True
) -> Mapping[str, Application]:
    """Load several applications (default: all) with their default settings.

    With ``cache`` (the default) a repeated call with the same folder and names returns the same
    objects (the files are read once per process).
    """
    if isinstance(apps, str | bytes) or not (apps is None or isinstance(apps, Iterable)):  # a str: its letters
        raise InputTypeError(f"must be a list of application names, got {type(apps).__name__} {apps!r:.60}",
                             path="apps")
    root = os.path.abspath(file_path(profiles_dir, "profiles_dir"))
    require_type(cache, bool, "cache")
    names = tuple(apps) if apps is not None else application_names(profiles_dir)
    if cache:
        return _load_all_cached(root, names)
    return {a: load_application(root, a) for a in names}
