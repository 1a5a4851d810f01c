"""Per-GPU variability factors for a simulated cluster, drawn from measurement files.

What the PAL artifact's simulator does (``blox/cluster_state.py``, simulation path), and what
we reproduce:

* each class reads one per-run measurement file (``profiles.json``: classA <- resnet,
  classB <- bert, classC <- bert, classD <- pagerank, all TACC Longhorn V100 runs);
* the ``perf`` of **every run** (row) is divided by the median ``perf`` of the file, so the
  median run is 1.0 (higher is slower);
* every simulated GPU gets one value per class drawn uniformly, with replacement, from those
  normalised runs.

The draw itself is :func:`pal_opt.io.measurements.sample_factors` (aggregate ``run``), seeded
through :func:`pal_opt.seeds.make_rng`.  Two differences from the artifact, both
deliberate and without effect on any single job's slowdown distribution:

* the artifact draws with Python's ``random`` seeded with 42; we draw with numpy per ``seed``,
  so results are deterministic per seed but not the artifact's exact draws;
* the artifact draws classB and classC separately although both read the bert file;
  ``sample_factors`` gives classes that share a file the same draw (as the project's reference
  rounds do).  A job only ever sees its own class's factors, so this changes no job's
  slowdown distribution, only how similar the classB and classC rankings of GPUs are.

For comparison with the paper, :func:`artifact_draw_factors` reproduces the artifact's own
draw exactly (Python's Mersenne Twister seeded with 42, one ``random.choice`` per GPU and
class, GPUs in id order, classes in ``profiles.json`` order).  It is a replay of the
artifact's data, not a random choice of ours, so it does not go through ``make_rng``.

Without the shared Longhorn files (a user machine without ``../shared``) a class without a file
falls back to :func:`pal_opt.generate.synthetic_factors` (:func:`synthetic_draw`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..io.measurements import PAL_CLASS_FILES, load_measurements, sample_factors
from ..model import PAL_CLASSES
from ..seeds import SeedLike, make_rng
from .choices import DRAWS

__all__ = [
    "shared_longhorn_dir",
    "class_files",
    "synthetic_draw",
    "draw_cluster_factors",
    "artifact_draw_factors",
    "DRAWS",
]

#: Ways to draw the factors: ``numpy`` (seeded per run) or ``artifact`` (the artifact's draw).


def shared_longhorn_dir() -> Path | None:
    """``../shared/data/pal-artifact/variability/longhorn`` beside the repository, if present.

    The environment variable ``PAL_OPT_SHARED`` (path of the ``shared`` directory) replaces
    the default location.
    """
    env = os.environ.get("PAL_OPT_SHARED")
    root = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    d = root / "data" / "pal-artifact" / "variability" / "longhorn"
    if all((d / f).is_file() for f in set(PAL_CLASS_FILES.values())):
        return d
    return None


def class_files(
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    classes: tuple[str, ...] = PAL_CLASSES,
) -> dict[str, str | None]:
    """``{class: measurement file or None}``: ``overrides`` first, then the shared Longhorn files.

    Classes in ``overrides`` but not in ``classes`` are added after them.
    """
    over = {c: os.fspath(p) for c, p in (overrides or {}).items()}
    lh = shared_longhorn_dir()
    out: dict[str, str | None] = {}
    for c in (*classes, *(c for c in over if c not in classes)):
        if c in over:
            out[c] = over[c]
        elif lh is not None and c in PAL_CLASS_FILES:
            out[c] = str(lh / PAL_CLASS_FILES[c])
        else:
            out[c] = None
    return out


def synthetic_draw(classes: tuple[str, ...], num_gpus: int, seed: SeedLike) -> dict[str, np.ndarray]:
    """Factors for classes without a measurement file: :func:`pal_opt.generate.synthetic_factors`.

    Classes the generator does not describe use its classB (BERT-like) model.
    """
    from ..generate import SYNTHETIC_VARIABILITY, synthetic_factors

    if not classes:
        return {}
    var = {c: SYNTHETIC_VARIABILITY.get(c, SYNTHETIC_VARIABILITY["classB"]) for c in classes}
    return synthetic_factors(num_gpus, seed, var)


def draw_cluster_factors(
    num_gpus: int,
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    seed: SeedLike = None,
    classes: tuple[str, ...] = PAL_CLASSES,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Draw every GPU's raw factor per class.

    Parameters
    ----------
    num_gpus
        GPUs in the cluster.
    overrides
        ``{class: measurement file}`` replacing the default files.
    seed
        Seed for the draw.
    classes
        Classes to draw.

    Returns
    -------
    factors, origins
        ``{class: array of num_gpus factors}`` and ``{class: file or "synthetic"}``.

    Examples
    --------
    >>> f, o = draw_cluster_factors(8, seed=3)
    >>> sorted(f), f["classA"].shape
    (['classA', 'classB', 'classC', 'classD'], (8,))
    """
    files = class_files(overrides, classes)
    rng = make_rng(seed)
    with_file = {c: p for c, p in files.items() if p is not None}
    drawn = sample_factors(with_file, num_gpus, rng) if with_file else {}
    drawn.update(synthetic_draw(tuple(c for c, p in files.items() if p is None), num_gpus, rng))
    factors = {c: drawn[c] for c in files}
    origins = {c: (p if p is not None else "synthetic") for c, p in files.items()}
    return factors, origins


def artifact_draw_factors(
    num_gpus: int,
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    seed: int = 42,
    classes: tuple[str, ...] = PAL_CLASSES,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The PAL artifact simulator's own draw, replayed exactly.

    ``blox/cluster_state.py`` seeds Python's ``random`` with 42, then for GPU 0, 1, ... and,
    per GPU, for each class in ``profiles.json`` order calls ``random.choice`` on the file's
    median-normalised per-run values.  Every class draws separately (classB and classC differ).
    Classes without a file use :func:`synthetic_draw` (seeded by ``seed``).

    Returns
    -------
    factors, origins
        As :func:`draw_cluster_factors`.
    """
    files = class_files(overrides, classes)
    cache: dict[str, np.ndarray] = {}
    values: dict[str, np.ndarray] = {}
    for c, p in files.items():
        if p is not None:
            if p not in cache:
                cache[p] = load_measurements(p, "run")
            values[c] = cache[p]
    gen = random.Random(seed)  # the artifact's generator; a replay, not a choice of ours
    idx = {c: np.empty(num_gpus, dtype=np.int64) for c in values}
    for g in range(num_gpus):
        for c in values:
            idx[c][g] = gen.choice(range(values[c].size))  # the index random.choice(seq) draws
    factors = {c: values[c][idx[c]] for c in values}
    factors.update(synthetic_draw(tuple(c for c, p in files.items() if p is None), num_gpus, seed))
    origins = {c: (p if p is not None else "synthetic") for c, p in files.items()}
    return {c: factors[c] for c in files}, origins


def describe_file(path: str | os.PathLike[str]) -> dict[str, float]:
    """Summary of a measurement file's normalised per-run values (for reports)."""
    v = load_measurements(path, "run")
    return {
        "runs": int(v.size),
        "p01": float(np.percentile(v, 1)),
        "p99": float(np.percentile(v, 99)),
        "max": float(v.max()),
        "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
    }
