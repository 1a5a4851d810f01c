"""Measured variability -> factor levels, per application class, as PAL bins it.

Modes
-----
``pal-artifact`` (default)
    What the PAL authors' artifact computes.  Outliers are values above mean + 3σ (sample σ).
    K = 2 + number of outliers (the artifact's silhouette search returns in its first pass,
    so K1 is always 2).  1-D k-means (k-means++, Lloyd, ``random_state=1``) over every GPU's
    value; a GPU's factor is its centre divided by the median of the centres.
``silhouette``
    As the paper intends: K1 in 2..10 maximises the silhouette score on the non-outliers.
``none``
    The raw measurements.

Binning depends only on the cluster's measurements, so it is computed once per cluster and
mode (:meth:`~pal_opt.model.Cluster.memo`), and a scheduler that builds a new cluster every
round with the same measurements reuses the last few results (keyed by a digest of the
measurements, :func:`functools.lru_cache`).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from .model import Cluster
from .options import Binning, validate_choice

__all__ = ["BINNING_MODES", "bin_values", "binned_factors", "forget_binnings"]

#: The binning modes' names (:class:`pal_opt.options.Binning`).
BINNING_MODES: tuple[str, ...] = tuple(b.value for b in Binning)


def _outliers(values: np.ndarray) -> np.ndarray:
    if values.size < 2:
        return np.zeros(values.shape, dtype=bool)
    return values > values.mean() + 3.0 * values.std(ddof=1)


def _kmeans(values: np.ndarray, k: int):  # type: ignore[no-untyped-def]
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, init="k-means++", algorithm="lloyd", random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km.fit(values.reshape(-1, 1))
    return km


def _silhouette_k1(values: np.ndarray) -> int:
    from sklearn.metrics import silhouette_score

    best_k, best_s = 2, -np.inf
    n_distinct = np.unique(values).size
    for k in range(2, 11):
        if k >= n_distinct:
            break
        labels = _kmeans(values, k).labels_
        s = silhouette_score(values.reshape(-1, 1), labels)
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
    n_distinct = np.unique(values).size
    k = min(k1 + int(out.sum()), n_distinct)
    if k <= 1:
        return np.ones_like(values)
    km = _kmeans(values, k)
    centres = km.cluster_centers_[:, 0]
    labels = km.predict(values.reshape(-1, 1))
    return centres[labels] / np.median(centres)


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
    """Per-class binned factors of ``cluster`` (computed once per measurements and mode)."""
    validate_choice(mode, BINNING_MODES, "binning mode")
    if mode == "none":
        return cluster.memo(("binned", mode), lambda: dict(cluster.factors))
    return cluster.memo(("binned", mode), lambda: _bin_all(_Measurements(cluster.factors), mode))
