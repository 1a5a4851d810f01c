"""Measured variability -> factor levels, per application class, as PAL bins it.

Modes
-----
``pal-artifact`` (default)
    What the PAL authors' artifact computes.  Outliers are values above mean + 3σ (sample σ).
    K = 2 + number of outliers (the artifact's silhouette search returns in its first pass,
    so K1 is always 2).  1-D k-means (k-means++, Lloyd, ``random_state=1``) over every GPU's
    value; a GPU's factor is its centre divided by the median of the centres.  The artifact
    calls scikit-learn's ``KMeans``; :func:`pal_opt.kmeans.kmeans_1d` computes the same labels
    and centres (to the last bit against scikit-learn on one OpenMP thread) without the two
    seconds its import costs.
``silhouette``
    As the paper intends: K1 in 2..10 maximises the silhouette score on the non-outliers
    (:func:`pal_opt.kmeans.silhouette_score`, exact for 1-D data; scikit-learn's
    ``silhouette_score`` agrees to rounding).
``none``
    The raw measurements.

Binning depends only on the cluster's measurements, so it is computed once per cluster and
mode (:meth:`~pal_opt.model.Cluster.memo`), and a scheduler that builds a new cluster every
round with the same measurements reuses the last few results (keyed by a digest of the
measurements, :func:`functools.lru_cache`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from .errors import InputTypeError
from .kmeans import kmeans_1d, predict, silhouette_score
from .model import Cluster
from .options import Binning, validate_choice

__all__ = ["BINNING_MODES", "bin_values", "binned_factors", "forget_binnings", "is_cluster_factor_array"]

#: The binning modes' names (:class:`pal_opt.options.Binning`).
BINNING_MODES: tuple[str, ...] = tuple(b.value for b in Binning)

#: The artifact's ``KMeans(random_state=1)``.
_SEED = 1


def _outliers(values: np.ndarray) -> np.ndarray:
    if values.size < 2:
        return np.zeros(values.shape, dtype=bool)
    return values > values.mean() + 3.0 * values.std(ddof=1)


def _n_distinct(values: np.ndarray) -> int:
    # not np.unique: numpy 2 imports numpy.ma for it (tens of ms at the CLI's start)
    s = np.sort(values)
    return int(s.size > 0) + int(np.count_nonzero(s[1:] != s[:-1]))


def _median(values: np.ndarray) -> float:
    """``np.median`` (the same float), without the numpy.ma import numpy 2 makes for it.

    >>> v = np.array([3.0, 0.1, 0.7, 0.2])
    >>> bool(_median(v) == np.median(v)), bool(_median(v[:3]) == np.median(v[:3]))
    (True, True)
    """
    s = np.sort(values)
    m = s.size // 2
    return float(s[m]) if s.size % 2 else float((s[m - 1] + s[m]) / 2)


def _silhouette_k1(values: np.ndarray) -> int:
    best_k, best_s = 2, -np.inf
    n_distinct = _n_distinct(values)
    for k in range(2, 11):
        if k >= n_distinct:
            break
        s = silhouette_score(values, kmeans_1d(values, k, seed=_SEED).labels)
        if s > best_s:
            best_k, best_s = k, s
    return best_k


def bin_values(values: np.ndarray, mode: str = "pal-artifact") -> np.ndarray:
    """Bin one class's per-GPU factors.

    >>> v = np.array([0.95, 0.96, 1.0, 1.01, 1.05, 1.06])
    >>> sorted(set(np.round(bin_values(v), 6).tolist()))
    [0.963145, 1.036855]
    """
    values = np.asarray(values, dtype=np.float64)
    if mode == "none":
        return values.copy()
    validate_choice(mode, BINNING_MODES, "binning mode")
    out = _outliers(values)
    if mode == "pal-artifact":
        k1 = 2
    else:
        k1 = _silhouette_k1(values[~out]) if (~out).sum() > 2 else 2
    n_distinct = _n_distinct(values)
    k = min(k1 + int(out.sum()), n_distinct)
    if k <= 1:
        return np.ones_like(values)
    centres = kmeans_1d(values, k, seed=_SEED).centres
    return centres[predict(values, centres)] / _median(centres)


class _Measurements:
    """A cluster's per-class factors, hashed by content (the cache key of :func:`_bin_all`)."""

    __slots__ = ("factors", "digest")

    def __init__(self, factors: Mapping[str, np.ndarray]):
        h = hashlib.blake2b(digest_size=16)
        for c in sorted(factors):
            h.update(c.encode())
            h.update(np.ascontiguousarray(factors[c], dtype=np.float64).tobytes())
        self.factors = factors
        self.digest = h.digest()

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Measurements) and other.digest == self.digest


@lru_cache(maxsize=8)
def _bin_all(measurements: _Measurements, mode: str) -> Mapping[str, np.ndarray]:
    out = {}
    for c, v in measurements.factors.items():
        arr = bin_values(v, mode)
        arr.setflags(write=False)
        out[c] = arr
    return out


def forget_binnings() -> None:
    """Drop the binnings kept across clusters (for benchmarks that time a cold binning)."""
    _bin_all.cache_clear()


def binned_factors(cluster: Cluster, mode: str = "pal-artifact") -> Mapping[str, np.ndarray]:
    """Per-class binned factors of ``cluster`` (computed once per measurements and mode).

    On a cluster with a throughput table (:attr:`~pal_opt.model.Cluster.throughput`) a class's
    binned factor on each GPU is divided by the class's relative throughput on the GPU's type,
    so that a gang's slowdown (its slowest GPU's factor) is its speed on that type and set.

    >>> c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0, 1.0, 1.2, 1.2]},
    ...                         gpu_types="aabb", throughput={"classA": {"a": 1.0, "b": 2.0}})
    >>> binned_factors(c, "none")["classA"].tolist()
    [1.0, 1.0, 0.6, 0.6]
    """
    validate_choice(mode, BINNING_MODES, "binning mode")
    if not isinstance(cluster, Cluster):
        hint = " (a round's is instance.cluster)" if hasattr(cluster, "cluster") else ""
        raise InputTypeError(f"binned_factors takes a Cluster, got {type(cluster).__name__}{hint}", path="cluster")
    if mode == "none":
        return cluster.memo(("binned", mode), lambda: _per_type(cluster, dict(cluster.factors)))
    return cluster.memo(("binned", mode), lambda: _per_type(cluster, _bin_all(_Measurements(cluster.factors), mode)))


def is_cluster_factor_array(cluster: Cluster, array: object) -> bool:
    """True if ``array`` is one of ``cluster``'s own factor arrays: a class's measurements
    (:attr:`~pal_opt.model.Cluster.factors`) or its binned factors under a mode
    :func:`binned_factors` has computed for this cluster already.  Never bins; a few identity
    tests per class and mode.

    >>> c = Cluster.from_arrays(range(2), [0, 0], {"classA": [1.0, 1.2]})
    >>> f = binned_factors(c, "pal-artifact")["classA"]
    >>> is_cluster_factor_array(c, f), is_cluster_factor_array(c, f.copy())
    (True, False)
    """
    if any(a is array for a in cluster.factors.values()):
        return True
    for mode in BINNING_MODES:
        kept = cluster.memoized(("binned", mode))
        if kept is not None and any(a is array for a in kept.values()):
            return True
    return False


def _per_type(cluster: Cluster, factors: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """``factors`` divided by each class's throughput on each GPU's type (unchanged without a table)."""
    if not cluster.throughput:
        return factors
    out = dict(factors)
    for c, v in factors.items():
        speed = cluster.speed(c)
        if speed is not None:
            arr = np.asarray(v, dtype=np.float64) / speed
            arr.setflags(write=False)
            out[c] = arr
    return out
