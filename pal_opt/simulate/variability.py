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

Where the factors come from is the caller's choice: measurement files per class (``overrides``;
``pal-opt simulate --variability CLASS=FILE`` or ``--variability DIR``), or the synthetic
Longhorn-like model of :func:`pal_opt.generate.synthetic_factors` (:func:`synthetic_draw`) with a
seed of its own (``synthetic_seed``; ``--synthetic-variability SEED``), which also keeps the
shared files out.  A class neither names takes the shared Longhorn files when they are present
(a development machine with ``../shared``) and the synthetic model otherwise;
:func:`variability_source` says which, and ``pal-opt simulate`` warns when a class the trace uses
was left to that default.
"""

from __future__ import annotations

import os
import random
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputTypeError
from ..io.measurements import PAL_CLASS_FILES, load_measurements, sample_factors
from ..model import PAL_CLASSES
from ..options import check_count, check_flag, file_path, require_items, require_mapping
from ..seeds import SeedLike, make_rng
from .choices import DRAWS

__all__ = [
    "shared_longhorn_dir",
    "shared_roots",
    "shared_sia_profiles_dir",
    "class_files",
    "synthetic_draw",
    "draw_cluster_factors",
    "artifact_draw_factors",
    "variability_source",
    "DRAWS",
]

#: Ways to draw the factors: ``numpy`` (seeded per run) or ``artifact`` (the artifact's draw).


def shared_roots() -> list[Path]:
    """Where the ``shared`` data directory is looked for: beside the source tree the package runs
    from (an editable install) and beside the working directory (``../shared`` from a checkout,
    where an installed copy of the package runs); the environment variable ``PAL_OPT_SHARED`` (its
    path) replaces both."""
    env = os.environ.get("PAL_OPT_SHARED")
    return [Path(env)] if env else [Path(__file__).resolve().parents[3] / "shared", Path.cwd().parent / "shared"]


def shared_longhorn_dir() -> Path | None:
    """``../shared/data/pal-artifact/variability/longhorn`` (:func:`shared_roots`), if present."""
    for root in shared_roots():
        d = root / "data" / "pal-artifact" / "variability" / "longhorn"
        if all((d / f).is_file() for f in set(PAL_CLASS_FILES.values())):
            return d
    return None


def shared_sia_profiles_dir() -> Path | None:
    """``../shared/data/sia-artifact/profiles`` (:func:`shared_roots`), if present: a folder of
    application folders, each with at least one ``placements-<type>.csv``."""
    for root in shared_roots():
        d = root / "data" / "sia-artifact" / "profiles"
        if d.is_dir() and any(d.glob("*/placements-*.csv")):
            return d
    return None


def class_files(
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    classes: tuple[str, ...] = PAL_CLASSES,
    *,
    shared: bool = True,
) -> dict[str, str | None]:
    """``{class: measurement file or None}``: ``overrides`` first, then (unless ``shared`` is
    False) the shared Longhorn files.

    Classes in ``overrides`` but not in ``classes`` are added after them.
    """
    over = {} if overrides is None else {c: file_path(p, f"overrides[{c!r}]") for c, p in require_mapping(
        overrides, "overrides", "a mapping of class names to measurement files").items()}
    classes = require_items(classes, "classes", "a sequence of class names", of=str)
    check_flag(shared, "shared")  # any object was a truthy flag
    lh = shared_longhorn_dir() if shared else None
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

    Raises
    ------
    InputTypeError
        ``classes`` is not a sequence of class names (a str is one name, not a sequence).
    OptionError
        ``num_gpus`` is not an integer >= 0, or ``seed`` not a seed (when a class is drawn).
    """
    from ..generate import SYNTHETIC_VARIABILITY, synthetic_factors

    if isinstance(classes, str) or not isinstance(classes, Sequence) or not all(isinstance(c, str) for c in classes):
        raise InputTypeError(f"must be a sequence of class names, got {type(classes).__name__} {classes!r:.60}",
                             path="classes")
    check_count(num_gpus, "num_gpus", 0)
    if not classes:
        return {}
    var = {c: SYNTHETIC_VARIABILITY.get(c, SYNTHETIC_VARIABILITY["classB"]) for c in classes}
    return synthetic_factors(num_gpus, seed, var)


def draw_cluster_factors(
    num_gpus: int,
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    seed: SeedLike = None,
    classes: tuple[str, ...] = PAL_CLASSES,
    *,
    synthetic_seed: SeedLike = None,
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
    synthetic_seed
        Given: every class without an override draws from the synthetic model with this seed
        (the shared files are not used).  None: such classes take the shared files if present,
        else the synthetic model drawn from ``seed``'s stream.

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
    files = class_files(overrides, classes, shared=synthetic_seed is None)
    rng = make_rng(seed)
    with_file = {c: p for c, p in files.items() if p is not None}
    drawn = sample_factors(with_file, num_gpus, rng) if with_file else {}
    synthetic = tuple(c for c, p in files.items() if p is None)
    drawn.update(synthetic_draw(synthetic, num_gpus, rng if synthetic_seed is None else synthetic_seed))
    factors = {c: drawn[c] for c in files}
    origins = {c: (p if p is not None else "synthetic") for c, p in files.items()}
    return factors, origins


def artifact_draw_factors(
    num_gpus: int,
    overrides: Mapping[str, str | os.PathLike[str]] | None = None,
    seed: int = 42,
    classes: tuple[str, ...] = PAL_CLASSES,
    *,
    synthetic_seed: SeedLike = None,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The PAL artifact simulator's own draw, replayed exactly.

    ``blox/cluster_state.py`` seeds Python's ``random`` with 42, then for GPU 0, 1, ... and,
    per GPU, for each class in ``profiles.json`` order calls ``random.choice`` on the file's
    median-normalised per-run values.  Every class draws separately (classB and classC differ).
    Classes without a file use :func:`synthetic_draw`, seeded by ``synthetic_seed`` (which also
    keeps the shared files out, as in :func:`draw_cluster_factors`) or else by ``seed``.

    Returns
    -------
    factors, origins
        As :func:`draw_cluster_factors`.
    """
    files = class_files(overrides, classes, shared=synthetic_seed is None)
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
    synthetic = tuple(c for c, p in files.items() if p is None)
    factors.update(synthetic_draw(synthetic, num_gpus, seed if synthetic_seed is None else synthetic_seed))
    origins = {c: (p if p is not None else "synthetic") for c, p in files.items()}
    return {c: factors[c] for c in files}, origins


def variability_source(
    origins: Mapping[str, str],
    given: Collection[str],
    synthetic_seed: int | None,
    used: Collection[str] | None = None,
) -> dict[str, Any]:
    """Where the factors of the classes in ``used`` (default: all of ``origins``) came from, and
    whether an option chose it: the ``variability_source`` of a simulation's result file.

    Parameters
    ----------
    origins
        ``{class: file or "synthetic"}`` as :func:`draw_cluster_factors` returns it.
    given
        Classes whose file an option named (``--variability``).
    synthetic_seed
        The seed of ``--synthetic-variability``, or None.
    used
        The classes that matter (the trace's).

    Returns
    -------
    dict
        ``kind``: ``"measurements"``, ``"synthetic"`` or ``"measurements+synthetic"``;
        ``chosen_by``: ``"options"``, or ``"default"`` when some class in ``used`` took the
        default source; ``defaulted``: ``{class: file or "synthetic"}`` for those classes;
        ``synthetic_seed``.

    Examples
    --------
    >>> variability_source({"classA": "synthetic", "classB": "synthetic"}, (), 7)["chosen_by"]
    'options'
    >>> variability_source({"classA": "a.csv", "classB": "synthetic"}, ("classA",), None, ["classA"])["kind"]
    'measurements'
    """
    classes = [c for c in origins if used is None or c in used]
    synthetic = {origins[c] == "synthetic" for c in classes}
    kind = {frozenset({False}): "measurements", frozenset({True}): "synthetic"}.get(
        frozenset(synthetic), "measurements+synthetic")
    defaulted = {} if synthetic_seed is not None else {c: origins[c] for c in classes if c not in given}
    return {
        "kind": kind,
        "chosen_by": "default" if defaulted else "options",
        "defaulted": defaulted,
        "synthetic_seed": synthetic_seed,
    }


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
