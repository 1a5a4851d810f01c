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
mode and cached on the :class:`~pal_opt.model.Cluster`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from .errors import OptionError
from .model import Cluster

__all__ = ["BINNING_MODES", "bin_values", "binned_factors"]

BINNING_MODES: tuple[str, ...] = ("pal-artifact", "silhouette", "none")


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
    if mode not in BINNING_MODES:
        raise OptionError(f"unknown binning mode {mode!r}; choose one of {', '.join(BINNING_MODES)}")
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


def binned_factors(cluster: Cluster, mode: str = "pal-artifact") -> Mapping[str, np.ndarray]:
    """Per-class binned factors of ``cluster`` (cached on the cluster)."""
    key = ("binned", mode)
    cached = cluster._cache.get(key)
    if cached is None:
        if mode not in BINNING_MODES:
            raise OptionError(f"unknown binning mode {mode!r}; choose one of {', '.join(BINNING_MODES)}")
        cached = {}
        for c, v in cluster.factors.items():
            arr = bin_values(v, mode)
            arr.setflags(write=False)
            cached[c] = arr
        cluster._cache[key] = cached
    return cached
