"""pal_opt.kmeans against scikit-learn, which it replaces (scikit-learn is a test dependency).

``kmeans_1d`` + ``predict`` must give the labels of ``KMeans(n_clusters=k, init="k-means++",
algorithm="lloyd", random_state=1)`` fitted on ``values.reshape(-1, 1)`` (``labels_`` and
``predict``) and its ``cluster_centers_`` to 1e-12 relative, on:

* every PAL measurement file in ``../shared`` (per-run values and the per-GPU ``max`` and
  ``median`` aggregates), the per-GPU draws the project makes from them (the simulator's numpy
  draw, the artifact's replayed draw, ``sample_factors`` with each aggregate), the PerfVar
  columns of ``32gpu-variability.csv``, the reference rounds' ``perfvar``, and the committed
  instances, for every k from 2 to 12;
* random arrays (ties, duplicates, outliers, integers, over and under scikit-learn's 256-point
  chunk), k from 2 to 12, and clusters with many outliers (k up to 89);
* given starting centres that leave clusters empty (scikit-learn's relocation code paths).

scikit-learn sums each cluster over OpenMP threads; with one thread the order is ours and the
results agree to the bit, which is what the comparisons below use.  With several threads its
centres can move in the last bit (and labels of points exactly between two centres with them);
on the real data the labels still agree, which ``test_real_data_default_threads`` checks.
``bin_values`` is compared in both modes with the same function running on scikit-learn.
"""

from __future__ import annotations

import csv
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score as sk_silhouette_score
from threadpoolctl import threadpool_limits

from pal_opt import binning
from pal_opt.errors import OptionError
from pal_opt.generate import generate_instance
from pal_opt.io.instance import load_instance
from pal_opt.io.measurements import AGGREGATES, longhorn_paths, sample_factors
from pal_opt.kmeans import KMeansResult, kmeans_1d, predict, silhouette_score
from pal_opt.simulate.variability import artifact_draw_factors, draw_cluster_factors

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
VARIABILITY = SHARED / "data" / "pal-artifact" / "variability"
LONGHORN = VARIABILITY / "longhorn"
REFERENCE = SHARED / "reference" / "pal"
INSTANCES = sorted((ROOT / "instances").glob("*.json"))
K_MAX = 12


@contextmanager
def one_thread() -> Iterator[None]:
    """scikit-learn's Lloyd loop on one OpenMP thread (sums in index order, as ours)."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def sk_fit(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's (centres, labels_, predict labels), as the PAL artifact calls it."""
    km = KMeans(n_clusters=k, init="k-means++", algorithm="lloyd", random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km.fit(values.reshape(-1, 1))
    return km.cluster_centers_[:, 0], km.labels_, km.predict(values.reshape(-1, 1))


def mismatch(values: np.ndarray, k: int) -> str | None:
    """Why ours differs from scikit-learn on (values, k), or None."""
    centres, labels, predicted = sk_fit(values, k)
    ours = kmeans_1d(values, k)
    if not np.array_equal(ours.labels, labels):
        return f"labels_ differ at {np.flatnonzero(ours.labels != labels)[:5]}"
    if not np.array_equal(predict(values, ours.centres), predicted):
        return "predict differs"
    if not np.allclose(ours.centres, centres, rtol=1e-12, atol=0):
        return f"centres {ours.centres} vs {centres}"
    return None


def ks(values: np.ndarray) -> range:
    return range(2, min(K_MAX, np.unique(values).size) + 1)


def _measurement_sets() -> Iterator[tuple[str, np.ndarray]]:
    from pal_opt.io.measurements import load_measurements

    for f in sorted(LONGHORN.glob("*.csv")):
        for agg in AGGREGATES:
            yield f"{f.stem}:{agg}", load_measurements(f, agg)
    paths = longhorn_paths(LONGHORN)
    for n, seed in ((64, 0), (512, 1), (2048, 2)):
        for agg in AGGREGATES:
            for c, v in sample_factors(paths, n, seed, aggregate=agg).items():
                yield f"sample_factors({n}, {seed}, {agg}):{c}", v
        for c, v in draw_cluster_factors(n, seed=seed)[0].items():
            yield f"draw_cluster_factors({n}, {seed}):{c}", v
    for n in (64, 512):
        for c, v in artifact_draw_factors(n)[0].items():
            yield f"artifact_draw_factors({n}):{c}", v
    with open(VARIABILITY / "32gpu-variability.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for col in (c for c in rows[0] if c.startswith("PerfVar")):
        yield f"32gpu:{col}", np.array([float(r[col]) for r in rows])
    for p in sorted(REFERENCE.glob("*.json")):
        for c, v in json.loads(p.read_text())["perfvar"].items():
            yield f"{p.stem}:{c}", np.asarray(v, dtype=np.float64)


def real_sets() -> list[tuple[str, np.ndarray]]:
    """Every real data set: the shared measurements (when present) and the instances."""
    out = list(_measurement_sets()) if SHARED.is_dir() else []
    for p in INSTANCES:
        out += [(f"{p.stem}:{c}", np.asarray(v)) for c, v in load_instance(p).cluster.factors.items()]
    return out


GROUPS = ("longhorn", "draw", "32gpu", "lh-", "instance")


def group_of(name: str) -> str:
    if name.startswith(("resnet", "bert", "pagerank")):
        return "longhorn"
    if name.startswith(("sample_factors", "draw_cluster", "artifact_draw")):
        return "draw"
    if name.startswith("32gpu"):
        return "32gpu"
    return "lh-" if name.startswith("lh-") else "instance"


@pytest.fixture(scope="module")
def sets() -> list[tuple[str, np.ndarray]]:
    return real_sets()


def test_shared_data_found(sets: list[tuple[str, np.ndarray]]) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not available at {SHARED}")
    found = {group_of(n) for n, _ in sets}
    assert found == set(GROUPS), found


@pytest.mark.parametrize("group", GROUPS)
def test_real_data_every_k(group: str, sets: list[tuple[str, np.ndarray]]) -> None:
    chosen = [(n, v) for n, v in sets if group_of(n) == group]
    if not chosen:
        pytest.skip(f"shared data not available at {SHARED}")
    with one_thread():
        bad = [(n, k, why) for n, v in chosen for k in ks(v) if (why := mismatch(v, k))]
    assert not bad, bad[:5]


def test_real_data_default_threads(sets: list[tuple[str, np.ndarray]]) -> None:
    """The k that PAL's binning picks, against scikit-learn on its default thread count.

    Up to 256 points scikit-learn uses one thread whatever the setting, so only larger sets
    can differ.
    """
    bad = []
    for name, v in sets:
        outliers = int((v > v.mean() + 3.0 * v.std(ddof=1)).sum())
        k = min(2 + outliers, np.unique(v).size)
        if v.size > 256 and k >= 2 and (why := mismatch(v, k)):
            bad.append((name, k, why))
    assert not bad, bad[:5]


class SklearnKMeans:
    """``pal_opt.kmeans``'s functions on scikit-learn: the binning before it had its own k-means."""

    def __init__(self) -> None:
        self.last: KMeans | None = None

    def kmeans_1d(self, values: np.ndarray, k: int, *, seed: int = 1) -> KMeansResult:
        km = KMeans(n_clusters=k, init="k-means++", algorithm="lloyd", random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            km.fit(values.reshape(-1, 1))
        self.last = km
        return KMeansResult(km.cluster_centers_[:, 0], km.labels_, km.n_iter_)

    def predict(self, values: np.ndarray, centres: np.ndarray) -> np.ndarray:
        assert self.last is not None and np.array_equal(self.last.cluster_centers_[:, 0], centres)
        return self.last.predict(values.reshape(-1, 1))

    @staticmethod
    def silhouette_score(values: np.ndarray, labels: np.ndarray) -> float:
        return float(sk_silhouette_score(values.reshape(-1, 1), labels))


@pytest.mark.parametrize("mode", ["pal-artifact", "silhouette"])
def test_bin_values_as_with_sklearn(
    mode: str, sets: list[tuple[str, np.ndarray]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both modes; scikit-learn's silhouette is quadratic, so that mode skips the 2,048-GPU sets."""
    chosen = [(n, v) for n, v in sets if mode == "pal-artifact" or v.size <= 1500]
    ours = [binning.bin_values(v, mode) for _, v in chosen]
    sk = SklearnKMeans()
    for name in ("kmeans_1d", "predict", "silhouette_score"):
        monkeypatch.setattr(binning, name, getattr(sk, name))
    with one_thread():
        bad = [n for (n, v), b in zip(chosen, ours, strict=True)
               if not np.allclose(b, binning.bin_values(v, mode), rtol=1e-12, atol=0)]
    assert not bad, bad[:5]


def test_bin_values_rules_by_hand() -> None:
    """The binning's own rules, with the expected levels worked out by hand (the test above runs
    the same rules on both sides, and the real-data tests need ``../shared``): K is 2 plus the
    values above mean + 3 sd (ddof 1), and the levels are the centres over their median."""
    tens = [1.0] * 10 + [1.2] * 10
    # 2.0 is above mean + 3 sd (1.804): K = 3, centres 1.0, 1.2, 2.0, median 1.2
    levels = binning.bin_values(np.array([*tens, 2.0]))
    assert sorted(set(levels.tolist())) == pytest.approx([1.0 / 1.2, 1.0, 2.0 / 1.2], rel=1e-12)
    # 1.5 is above mean + 2 sd (1.385) but not 3 sd (1.517): K = 2, centres 1.0 and 13.5 / 11
    centres = np.array([1.0, 13.5 / 11])
    levels = binning.bin_values(np.array([*tens, 1.5]))
    assert sorted(set(levels.tolist())) == pytest.approx((centres / centres.mean()).tolist(), rel=1e-12)


@pytest.mark.parametrize(("clusters", "k"), [(3, 3), (10, 10), (11, 10)])
def test_silhouette_binning_picks_the_clusters_up_to_ten(clusters: int, k: int) -> None:
    """``silhouette`` mode: K from 2 to 10 by silhouette score; tight clusters 0.1 apart give one
    level each, at most 10."""
    v = np.array([1.0 + 0.1 * i + d for i in range(clusters) for d in (-0.001, 0.0, 0.001)])
    assert len(set(binning.bin_values(v, "silhouette").tolist())) == k
    assert len(set(binning.bin_values(v, "pal-artifact").tolist())) == 2


@st.composite
def samples(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """1-D data of several shapes (seeded numpy draws) and a k that fits it."""
    n = draw(st.integers(2, 600))
    kind = draw(st.sampled_from(["normal", "ties", "rounded", "outliers", "integers", "exponential"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "normal":
        v = rng.normal(1.0, 0.05, n)
    elif kind == "ties":
        v = rng.choice(rng.normal(1.0, 0.1, int(rng.integers(2, 20))), n)
    elif kind == "rounded":
        v = np.round(rng.normal(1.0, 0.05, n), 2)
    elif kind == "outliers":
        v = rng.normal(1.0, 0.03, n)
        v[rng.integers(0, n, int(rng.integers(1, 6)))] *= rng.uniform(1.5, 4.0)
    elif kind == "integers":
        v = rng.integers(0, 8, n).astype(np.float64)
    else:
        v = rng.exponential(1.0, n)
    distinct = np.unique(v).size
    k = draw(st.integers(2, K_MAX))
    return v, max(1, min(k, distinct))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples())
def test_random_arrays(case: tuple[np.ndarray, int]) -> None:
    v, k = case
    with one_thread():
        assert mismatch(v, k) is None


POOL = st.sampled_from([0.9, 0.95, 1.0, 1.0 + 2**-40, 1.05, 1.1, 2.5, 10.0])


@settings(max_examples=200, deadline=None)
@given(st.lists(POOL | st.floats(0.0, 100.0, allow_subnormal=False), min_size=2, max_size=300), st.integers(2, K_MAX))
def test_hypothesis_lists(values: list[float], k: int) -> None:
    v = np.array(values)
    with one_thread():
        assert mismatch(v, min(k, np.unique(v).size)) is None


def test_many_outliers_large_k() -> None:
    """Large clusters have many outliers, so k grows (86-89 on 16,384 GPUs, over 300 on 65,536):
    above 48 centres the E-step brackets each point between sorted centres instead of computing
    all k distances."""
    from pal_opt.generate import generate_instance

    factors = generate_instance(2048, 8, 4800, seed=0).cluster.factors
    with one_thread():
        for c, v in factors.items():
            k = min(2 + int((v > v.mean() + 3.0 * v.std(ddof=1)).sum()), np.unique(v).size)
            assert mismatch(v, k) is None, (c, k)


@st.composite
def points_and_centres(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Points and 2-160 centres where rounding decides: equal and adjacent floats, midpoints."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k, n = draw(st.integers(2, 160)), draw(st.integers(1, 200))
    kind = draw(st.sampled_from(["normal", "integers", "ulps", "midpoints", "scales"]))
    if kind == "normal":
        c, x = rng.normal(1.0, 0.05, k), rng.normal(1.0, 0.05, n)
    elif kind == "integers":
        c, x = rng.integers(0, 6, k).astype(np.float64), rng.integers(-2, 16, n) / 2.0
    elif kind == "ulps":
        c, x = 1.0 + rng.integers(0, 4, k) * 2.0**-50, 1.0 + rng.integers(-2, 10, n) * 2.0**-51
    elif kind == "midpoints":
        c = np.round(rng.normal(1.0, 0.05, k), 3)
        x = (c[rng.integers(0, k, n)] + c[rng.integers(0, k, n)]) / 2
    else:
        c, x = rng.exponential(1.0, k) * 10.0 ** rng.integers(-150, 140), rng.exponential(1.0, n) * 10.0 ** rng.integers(-150, 140)
    return x, c


@settings(max_examples=400, deadline=None)
@given(points_and_centres())
def test_sorted_assignment_is_the_dense_one(case: tuple[np.ndarray, np.ndarray]) -> None:
    """``predict`` (all distances up to 48 centres, bracketing centres above) equals the argmin
    over all ``c² - 2 x c`` as scikit-learn rounds them (first centre on ties)."""
    x, c = case
    dense = np.argmin(c * c + -2.0 * (x[:, None] * c[None, :]), axis=1)
    assert predict(x, c).tolist() == dense.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=40),
       st.lists(st.sampled_from([-5.0, 0.0, 0.5, 1.0, 3.0, 100.0, 1e6]), min_size=1, max_size=12))
def test_given_centres_empty_clusters(data: list[int], init: list[float]) -> None:
    """Bad starting centres leave clusters empty: relocation to the farthest points, the
    no-op when every point sits on its centre, and an empty cluster's copy of the largest one."""
    v, c = np.array(data, dtype=np.float64), np.array(init[: len(data)])
    with one_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km = KMeans(n_clusters=c.size, init=c.reshape(-1, 1), n_init=1, algorithm="lloyd").fit(v.reshape(-1, 1))
    ours = kmeans_1d(v, c.size, init=c)
    assert ours.labels.tolist() == km.labels_.tolist() and ours.n_iter == km.n_iter_
    assert np.allclose(ours.centres, km.cluster_centers_[:, 0], rtol=1e-12, atol=0)


@settings(max_examples=150, deadline=None)
@given(samples())
def test_silhouette_matches_sklearn(case: tuple[np.ndarray, int]) -> None:
    v, k = case
    labels = kmeans_1d(v, k).labels
    if not 2 <= np.unique(labels).size <= v.size - 1:
        return
    assert silhouette_score(v, labels) == pytest.approx(sk_silhouette_score(v.reshape(-1, 1), labels), abs=1e-9)


def test_silhouette_small_cases() -> None:
    v = np.array([0.0, 1.0, 10.0, 11.0])
    # every a is 1; b is 10.5 for the outer points and 9.5 for the inner ones
    expected = np.mean([(10.5 - 1) / 10.5, (9.5 - 1) / 9.5, (9.5 - 1) / 9.5, (10.5 - 1) / 10.5])
    assert silhouette_score(v, np.array([0, 0, 1, 1])) == pytest.approx(expected, abs=1e-15)
    # a point alone in its cluster scores 0; identical points are at distance exactly 0
    assert silhouette_score(np.array([1.0, 1.0, 5.0]), np.array([3, 3, 7])) == pytest.approx(2 / 3, abs=1e-15)


def test_one_cluster_and_bad_input() -> None:
    r = kmeans_1d(np.array([3.0, 1.0, 2.0]), 1)
    assert r.labels.tolist() == [0, 0, 0] and r.centres.tolist() == pytest.approx([2.0])
    with pytest.raises(OptionError, match="k-means needs 1 <= k"):
        kmeans_1d(np.array([1.0, 2.0]), 3)
    with pytest.raises(OptionError, match="finite"):
        kmeans_1d(np.array([1.0, np.nan, 2.0]), 2)
    with pytest.raises(OptionError, match="1-D"):
        kmeans_1d(np.ones((3, 2)), 2)
    with pytest.raises(OptionError, match="max_iter"):
        kmeans_1d(np.array([1.0, 2.0]), 2, max_iter=0)
    with pytest.raises(OptionError, match="2 initial centres"):
        kmeans_1d(np.array([1.0, 2.0]), 2, init=np.array([1.0]))
    with pytest.raises(OptionError, match="2 to n - 1 clusters"):
        silhouette_score(np.array([1.0, 2.0]), np.array([0, 0]))
    with pytest.raises(OptionError, match="2 to n - 1 clusters"):  # every point alone: as scikit-learn
        silhouette_score(np.array([1.0, 2.0, 4.0]), np.array([0, 1, 2]))


def test_large_input_is_fast_and_deterministic() -> None:
    v = np.random.default_rng(5).normal(1.0, 0.05, 65_536)
    a, b = kmeans_1d(v, 4), kmeans_1d(v.copy(), 4)
    assert np.array_equal(a.centres, b.centres) and np.array_equal(a.labels, b.labels)


def _plusplus_cases() -> list[tuple[str, np.ndarray, int]]:
    """Data with few distinct values (k-means++ then works on them: ``kmeans._PlusPlus``)."""
    rng = np.random.default_rng(11)
    out = [
        ("rounded", np.round(rng.normal(1.0, 0.05, 3000), 3), 9),
        ("ties", rng.choice(rng.normal(1.0, 0.1, 30), 2000), 12),
        ("integers", rng.integers(0, 8, 1500).astype(np.float64), 8),
        ("ulps", 1.0 + rng.integers(0, 5, 1000) * 2.0**-40, 5),
        ("symmetric", np.repeat([-1.0, 0.0, 1.0], 400), 3),  # candidates of equal potential
        ("signed zeros", np.repeat([-0.0, 0.0, 2.0, 3.0], 100), 4),
    ]
    v = generate_instance(512, 8, 10, seed=4).cluster.factors["classA"]
    out.append(("generated 4,096", v, min(2 + int((v > v.mean() + 3 * v.std(ddof=1)).sum()), 60)))
    return out


@pytest.mark.parametrize("room", [None, 1e12])
def test_plusplus_on_distinct_values_is_sklearns(room: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """k-means++ on distinct values, its potentials and running sums checked against rounding
    bounds, gives scikit-learn's seeds; with the bounds made absurdly wide every step takes the
    recomputation on all points (both kinds, counted), with the same result."""
    from pal_opt import kmeans

    calls = {"potentials": 0, "running sums": 0}
    if room is not None:
        monkeypatch.setattr(kmeans, "_ROOM", room)
        orig_pot, orig_loc = kmeans._PlusPlus.exact_potential, kmeans._RunningSums.locate

        def exact_potential(self: Any, *a: Any) -> Any:
            calls["potentials"] += 1
            return orig_pot(self, *a)

        def locate(self: Any, *a: Any) -> Any:
            got = orig_loc(self, *a)
            calls["running sums"] += got is None
            return got

        monkeypatch.setattr(kmeans._PlusPlus, "exact_potential", exact_potential)
        monkeypatch.setattr(kmeans._RunningSums, "locate", locate)
    with one_thread():
        for name, v, k in _plusplus_cases():
            x = (v - v.mean()).reshape(-1, 1)
            direct = kmeans._kmeans_plusplus_direct(x, k, np.random.RandomState(1))
            ours = kmeans._kmeans_plusplus(x, k, np.random.RandomState(1), kmeans._Distinct.of(x[:, 0]))
            assert ours.view(np.int64).tolist() == direct.view(np.int64).tolist(), name
            assert mismatch(v, k) is None, name
    if room is not None:
        assert calls["potentials"] > 0 and calls["running sums"] > 0, calls


def test_outliers_use_the_sample_standard_deviation() -> None:
    """On twenty values at 1.0 and 1.2 and one at 1.52, mean + 3 sd is 1.527 with ddof=1 (no
    outlier: K = 2) but 1.517 with ddof=0 (a mutant with ddof=0 passed the other tests)."""
    v = np.array([1.0] * 10 + [1.2] * 10 + [1.52])
    assert v[-1] <= v.mean() + 3.0 * v.std(ddof=1) and v[-1] > v.mean() + 3.0 * v.std(ddof=0)
    assert len(set(binning.bin_values(v).tolist())) == 2


def test_silhouette_picks_k1_on_the_values_without_their_outliers() -> None:
    """K = K1 (silhouette over the non-outliers) + the outliers; a mutant that searched K1 over
    every value, the outlier included, gave one level too many here."""
    rest = np.array([1.0, 1.001] * 3 + [1.1, 1.101] * 3 + [1.2, 1.201] * 3)
    v = np.append(rest, 2.0)  # 2.0 is above mean + 3 sd; rest has no outlier
    assert v[-1] > v.mean() + 3.0 * v.std(ddof=1) and (rest <= rest.mean() + 3.0 * rest.std(ddof=1)).all()
    k1 = len(set(binning.bin_values(rest, "silhouette").tolist()))
    assert k1 == 5
    assert len(set(binning.bin_values(v, "silhouette").tolist())) == k1 + 1


def test_binnings_kept_across_clusters_are_keyed_by_class_name_too() -> None:
    """Two clusters with the same values under another class name each get their own classes (a
    mutant whose cache digest left the names out gave the second cluster the first's)."""
    from pal_opt.model import Cluster

    binning.forget_binnings()
    values = [1.0, 1.05, 1.3, 1.31]
    a = binning.binned_factors(Cluster.uniform(2, 2, {"classA": values}), "pal-artifact")
    b = binning.binned_factors(Cluster.uniform(2, 2, {"classB": values}), "pal-artifact")
    assert list(a) == ["classA"] and list(b) == ["classB"]
    assert np.array_equal(a["classA"], b["classB"])
