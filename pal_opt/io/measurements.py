"""PAL's per-run variability measurements (``*-longhorn-agg.csv``) and drawing GPU factors from them.

Each row of a measurement file is one training run on one GPU; ``uuid`` names the GPU and
``perf`` is a time-like figure (higher is slower).  PAL normalises ``perf`` by the file's median
and gives every simulated GPU a value drawn from that distribution; the reference rounds'
factors are such per-run values.  PAL's class map (the artifact's ``profiles.json``) is
classA ← ResNet, classB ← BERT, classC ← BERT, classD ← PageRank.  Two classes backed by the
same file receive the same draw per GPU (the artifact's classB and classC factors are equal).

Aggregates
----------
``run`` (default)
    Every run, divided by the median run: the distribution PAL's simulator samples.
``max``
    One value per GPU, its slowest run, divided by the median of those (what Blox's
    ``cluster_state`` assigns to a GPU whose uuid appears in the file).
``median``
    One value per GPU, its median run, divided by the median of those.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import InputTypeError, InstanceError, MissingFileError, OptionError
from ..model import FACTOR_RANGE
from ..options import check_count, file_path
from ..seeds import SeedLike, make_rng
from .csvfile import read_csv
from .textfile import DEFAULT_MAX_BYTES

__all__ = [
    "AGGREGATES",
    "PAL_CLASS_FILES",
    "load_measurements",
    "longhorn_paths",
    "sample_factors",
]

AGGREGATES: tuple[str, ...] = ("run", "max", "median")

#: PAL's class -> measurement file (TACC Longhorn V100s), per the artifact's profiles.json.
PAL_CLASS_FILES: dict[str, str] = {
    "classA": "resnet-longhorn-agg.csv",
    "classB": "bert-longhorn-agg.csv",
    "classC": "bert-longhorn-agg.csv",
    "classD": "pagerank-longhorn-agg.csv",
}


def load_measurements(
    path: str | os.PathLike[str], aggregate: str = "run", *, max_bytes: int = DEFAULT_MAX_BYTES
) -> np.ndarray:
    """Median-normalised performance values from one measurement file.

    Parameters
    ----------
    path
        A CSV with a ``perf`` column (positive, finite) and, for the per-GPU aggregates,
        ``uuid``.  Other columns are ignored.
    aggregate
        ``"run"``, ``"max"`` or ``"median"`` (module docstring).

    Returns
    -------
    ndarray of float64
        The values, in file order (``run``) or in order of first appearance of each uuid; the
        median is 1.0.

    Raises
    ------
    InstanceError
        A bad cell, or a value that divided by the median falls outside
        :data:`~pal_opt.model.FACTOR_RANGE` (no GPU factor may), naming the file, line and column.
    """
    if aggregate not in AGGREGATES:
        raise OptionError(f"unknown aggregate {aggregate!r}; choose one of {', '.join(AGGREGATES)}")
    t = read_csv(path, max_bytes=max_bytes, what="measurement file")
    c_perf = t.column("perf")
    c_uuid = t.column("uuid") if aggregate != "run" else None
    perf = np.fromiter(
        (t.number(line, c_perf, f[c_perf], positive=True) for line, f in t.rows), dtype=np.float64, count=len(t.rows)
    )
    lines = [line for line, _ in t.rows]  # the line of each value (a GPU's: its first run)
    if aggregate == "run":
        values = perf
    else:
        assert c_uuid is not None
        groups: dict[str, list[float]] = {}
        first: dict[str, int] = {}
        for (line, f), v in zip(t.rows, perf.tolist(), strict=True):
            u = f[c_uuid]
            if not u:
                raise t.error(line, c_uuid, "must not be empty")
            groups.setdefault(u, []).append(v)
            first.setdefault(u, line)
        agg = max if aggregate == "max" else _median
        values = np.asarray([agg(v) for v in groups.values()], dtype=np.float64)
        lines = list(first.values())
    med = _median(values)
    if not med > 0:  # pragma: no cover - perf is positive
        raise InstanceError("median perf is not positive", source=t.source, path="column perf")
    with np.errstate(over="ignore", divide="ignore"):  # past the floats: inf, refused below
        factors = values / med
    bad = (factors < FACTOR_RANGE[0]) | (factors > FACTOR_RANGE[1])
    if bad.any():  # such a factor is refused by every cluster (Cluster's check): say where it comes from
        i = int(np.argmax(bad))
        what = "perf" if aggregate == "run" else f"the GPU's {aggregate} perf"
        raise t.error(lines[i], c_perf, f"{what} {values[i]:g} is {factors[i]:g} times the file's median {med:g}; "
                                        f"a factor must be in {FACTOR_RANGE[0]:g}..{FACTOR_RANGE[1]:g} (a slowdown "
                                        "relative to a typical GPU)")
    return factors


def longhorn_paths(directory: str | os.PathLike[str]) -> dict[str, Path]:
    """``{class: file}`` for PAL's four classes inside ``directory`` (files need not exist yet)."""
    d = Path(file_path(directory, "directory"))
    return {c: d / f for c, f in PAL_CLASS_FILES.items()}


def longhorn_files(directory: str | os.PathLike[str], option: str = "--measurements",
                   classes: Iterable[str] | None = None) -> dict[str, Path]:
    """:func:`longhorn_paths` of a directory that exists and holds the files of ``classes``
    (default: all four classes; the others' files need not be there).

    Raises
    ------
    InstanceError
        ``directory`` is not a directory (a file given for it was reported as
        ``FILE/resnet-longhorn-agg.csv: no such file``), or one of the files is missing.
    """
    d = Path(directory)
    if not d.is_dir():
        if not d.exists():
            raise MissingFileError("no such directory", source=os.fspath(directory), path=option)
        raise InstanceError(f"not a directory: give the directory that holds PAL's "
                            f"{', '.join(sorted(set(PAL_CLASS_FILES.values())))}", source=os.fspath(directory), path=option)
    paths = longhorn_paths(d)
    wanted = list(paths) if classes is None else list(classes)
    for c in wanted:
        if not paths[c].is_file():  # named with the option, as simulate --variability DIR names it
            raise not_a_file_error(paths[c], f"{option} {os.fspath(directory)}")
    return {c: paths[c] for c in wanted}


def sample_factors(
    paths_by_class: Mapping[str, str | os.PathLike[str]],
    n_gpus: int,
    rng: SeedLike = None,
    *,
    aggregate: str = "run",
) -> dict[str, np.ndarray]:
    """Draw per-GPU factors for each class from measurement files, with replacement.

    Parameters
    ----------
    paths_by_class
        ``{class: measurement file}``, e.g. :func:`longhorn_paths`.  Classes that name the
        same file share one draw (each GPU gets the same value for them).
    n_gpus
        Number of GPUs.
    rng
        Seed or Generator (:func:`pal_opt.seeds.make_rng`); classes are drawn in the mapping's
        order, so a seed fixes the result.
    aggregate
        Passed to :func:`load_measurements`.

    Returns
    -------
    dict of str -> ndarray, shape (n_gpus,)
    """
    check_count(n_gpus, "n_gpus")
    if not isinstance(paths_by_class, Mapping):
        raise InputTypeError("must map class names to measurement files (longhorn_paths), got "
                             f"{type(paths_by_class).__name__}", path="paths_by_class")
    gen = make_rng(rng)
    draws: dict[str, np.ndarray] = {}
    out: dict[str, np.ndarray] = {}
    for cname, p in paths_by_class.items():
        key = os.path.realpath(os.fspath(p))
        if key not in draws:
            values = load_measurements(p, aggregate)
            draws[key] = values[gen.integers(0, values.size, size=n_gpus)]
        out[cname] = draws[key].copy()
    return out


def _median(values: Sequence[float] | np.ndarray) -> float:
    """The median of positive finite ``values``: ``np.median``'s (bit for bit, as the factors
    always were), and where that overflows (it averages the two middle values of an even count:
    perf near the largest float gave a numpy warning and a median of inf) the median of the
    values scaled by their largest."""
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        med = float(np.median(v))
    if np.isfinite(med):
        return med
    top = float(v.max())
    return float(np.median(v / top)) * top


def not_a_file_error(path: str | os.PathLike[str], field: str | None = None) -> InstanceError:
    """The error for a measurement file ``path`` that is not one (:func:`not_a_file`, at the
    option or field ``field``): a :class:`~pal_opt.errors.MissingFileError` (also a
    ``FileNotFoundError``) when nothing is there."""
    why = not_a_file(path)
    cls = MissingFileError if why == "no such file" else InstanceError
    return cls(why, source=os.fspath(path), path=field)


def not_a_file(path: str | os.PathLike[str]) -> str:
    """Why ``path`` cannot be read as a measurement file: a directory, something that is not a
    regular file (a FIFO, a device, a link to itself: once reported as "no such file"), or
    nothing at all."""
    p = Path(path)
    if p.is_dir():
        return "a directory, not a measurement CSV file"
    if p.exists() or p.is_symlink():
        return "not a regular file (a FIFO, a device or a symbolic link that leads nowhere)"
    return "no such file"
