"""Seeded 1-D k-means that reproduces scikit-learn's ``KMeans`` without importing it.

PAL's binning (:mod:`pal_opt.binning`) clusters each class's per-GPU factors the way the PAL
authors' artifact does::

    km = KMeans(n_clusters=k, init="k-means++", algorithm="lloyd", random_state=1)
    km.fit(values.reshape(-1, 1))
    centres, labels = km.cluster_centers_[:, 0], km.predict(values.reshape(-1, 1))

Importing :mod:`sklearn.cluster` costs about two seconds (it loads scipy.stats), more than a
whole small ``pal-opt solve``.  :func:`kmeans_1d` and :func:`predict` compute the same thing for
one feature, with numpy only, following scikit-learn 1.9's ``sklearn/cluster/_kmeans.py``,
``_k_means_lloyd.pyx`` and ``_k_means_common.pyx`` step for step, and doing the arithmetic in the
same order so that the results agree to the bit:

* ``tol`` becomes ``mean(var(X)) * tol`` on the raw data; X is then centred on its mean
  (``X -= X.mean(axis=0)``) and the final centres are shifted back.
* One k-means++ initialisation (``n_init="auto"`` means one for k-means++) drawn from
  ``RandomState(seed)``: the first centre by ``choice`` with uniform ``p``, then
  ``2 + int(log k)`` local trials per centre, drawn by ``uniform`` times the current potential
  and located by ``searchsorted`` in the cumulative squared distances.  Squared distances are
  ``max(-2 x·c + c² + x², 0)`` and the potentials are the same numpy matrix products.
* Lloyd iterations (at most ``max_iter``): the E-step assigns each point to the centre of least
  ``c² - 2 x·c`` (the constant ``x²`` is left out, as scikit-learn's gemm does), the first centre
  winning ties; the M-step sums each cluster's points in index order (scikit-learn with one
  OpenMP thread; with several threads it adds per-thread partial sums, which can differ in the
  last bit), relocates empty clusters to the points farthest from their centres, and scales the
  sums by ``1 / count``.  It stops when the labels repeat (strict convergence) or when the sum
  of squared centre shifts is at most ``tol``; in the latter case a last E-step makes the labels
  match the centres.
* :func:`predict` is the same E-step on the raw (uncentred) values and the final centres, as
  ``KMeans.predict`` does.

Every step is vectorised over the points.  The E-step computes all ``n × k`` distances for up
to 48 centres.  With more (binning's k is 2 plus the number of outliers: 11 on 2,048 GPUs, 36 on
8,192, 86-89 on 16,384, over 300 on 65,536) it compares each point's two bracketing centres in
sorted order and checks that no other centre can come within rounding of them
(:func:`_assign_sorted`): the same labels in O(n log k).  k-means++ stays O(n k) (its
potentials are sums over all points, kept as scikit-learn's numpy products so that they round
alike) and is most of the time on large clusters.  ``tests/test_kmeans.py`` checks labels and
centres against scikit-learn on the PAL measurements, the per-GPU draws, the instances, the
reference rounds and random data; ``benchmarks/startup.py`` times both.

:func:`silhouette_score` is the mean silhouette coefficient, ``(b - a) / max(a, b)`` per point
(0 for a point alone in its cluster), computed exactly for 1-D data from sorted prefix sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import OptionError

__all__ = ["KMeansResult", "kmeans_1d", "predict", "silhouette_score"]


@dataclass(frozen=True)
class KMeansResult:
    """The fitted model (scikit-learn's ``cluster_centers_[:, 0]``, ``labels_``, ``n_iter_``).

    Attributes
    ----------
    centres
        Shape ``(k,)``, in the original units.
    labels
        Shape ``(n,)``, int32: each point's cluster after the fit (``labels_``).
    n_iter
        Lloyd iterations run.
    """

    centres: np.ndarray
    labels: np.ndarray
    n_iter: int


def _check_values(values: np.ndarray) -> np.ndarray:
    try:
        x = np.ascontiguousarray(values, dtype=np.float64)
    except OverflowError:  # an integer past a float's range (10**400): not finite, as NaN (was a traceback)
        raise OptionError("k-means values must be finite") from None
    if x.ndim != 1:
        raise OptionError(f"k-means needs a 1-D array of values, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise OptionError("k-means values must be finite")
    return x


def _sq_distances(a: np.ndarray, x: np.ndarray, x_sq: np.ndarray, closest: np.ndarray | None = None) -> np.ndarray:
    """scikit-learn's ``_euclidean_distances(a, x, Y_norm_squared=x_sq, squared=True)``, then
    ``np.minimum(closest, ...)`` if ``closest`` is given, in place.

    ``a * x.T`` is scikit-learn's ``a @ x.T``: with one feature each entry is one rounded product.
    """
    d = np.multiply(a, x.T)
    d *= -2
    d += np.einsum("ij,ij->i", a, a)[:, None]
    d += x_sq
    np.maximum(d, 0, out=d)
    if closest is not None:
        np.minimum(closest, d, out=d)
    return d


def _kmeans_plusplus_direct(x: np.ndarray, k: int, rs: np.random.RandomState) -> np.ndarray:
    """k-means++ seeds, ``(k, 1)``, for centred ``x`` of shape ``(n, 1)`` (``_kmeans_plusplus``),
    computed on every point as scikit-learn does."""
    n = x.shape[0]
    weight = np.ones(n, dtype=np.float64)
    x_sq = np.einsum("ij,ij->i", x, x)
    centres = np.empty((k, 1), dtype=np.float64)
    n_local_trials = 2 + int(np.log(k))
    centres[0] = x[rs.choice(n, p=weight / weight.sum())]
    closest = _sq_distances(centres[0, np.newaxis], x, x_sq)
    current_pot = closest @ weight
    for c in range(1, k):
        rand_vals = rs.uniform(size=n_local_trials) * current_pot
        candidates = np.searchsorted(np.cumsum(closest), rand_vals)  # weights are 1: no product
        np.clip(candidates, None, closest.size - 1, out=candidates)
        to_candidates = _sq_distances(x[candidates], x, x_sq, closest)
        candidates_pot = to_candidates @ weight.reshape(-1, 1)
        best = int(np.argmin(candidates_pot))
        current_pot = candidates_pot[best]
        closest = to_candidates[best]
        centres[c] = x[candidates[best]]
    return centres


@dataclass(frozen=True)
class _Distinct:
    """The distinct values of ``n`` points (equal as floats *and* in their bits, so -0.0 and 0.0
    stay apart): point ``i`` is ``values[inverse[i]]``; ``counts`` (float64) per value."""

    values: np.ndarray
    inverse: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray) -> _Distinct:
        bits = np.ascontiguousarray(x).view(np.int64)
        order = np.argsort(bits, kind="stable")
        b = bits[order]
        new = np.empty(b.size, dtype=bool)
        new[:1] = True
        np.not_equal(b[1:], b[:-1], out=new[1:])
        inverse = np.empty(b.size, dtype=np.int64)
        inverse[order] = np.cumsum(new) - 1
        starts = np.flatnonzero(new)
        counts = np.diff(np.append(starts, b.size)).astype(np.float64)
        return cls(x[order[starts]], inverse, counts)


#: Unit roundoff and smallest normal number of float64.
_U = 2.0**-53
_TINY = 2.0**-1022
#: Factor on the rounding-error bounds of k-means++ on distinct values (above 1: room for the
#: bounds' second-order terms).  Tests raise it to force every recomputation on all points.
_ROOM = 1.01


class _RunningSums:
    """Where draws fall among the running sums of the points' distances (``np.cumsum`` in point
    order, then ``np.searchsorted``), without summing every point at every step.

    The points are cut into blocks of consecutive points; a block's sum is its count of each
    distinct value times that value's distance.  A draw is located in its block, and within it
    by the running sum of that block's points.  These sums are not ``np.cumsum``'s: any
    sum of up to ``n`` non-negative floats is within ``γ(n)`` of the exact one, so both lie within
    ``margin`` of each other.  A draw that falls within ``margin`` of a running sum it must be
    compared with is not decided here (None): the caller sums every point as scikit-learn does.
    """

    def __init__(self, distinct: _Distinct, draws: int):
        n, m = distinct.inverse.size, distinct.values.size
        self.n = n
        self.size = max(64, int(math.sqrt(n * m / max(draws, 1) / 4)))
        self.blocks = -(-n // self.size)
        block = np.arange(n, dtype=np.int64) // self.size
        self.counts = np.bincount(block * m + distinct.inverse, minlength=self.blocks * m).reshape(
            self.blocks, m).astype(np.float64)
        # each block's points as distinct-value indices; the last block padded with value m,
        # whose distance is 0
        padded = np.full(self.blocks * self.size, m, dtype=np.int64)
        padded[:n] = distinct.inverse
        self.points = padded.reshape(self.blocks, self.size)
        self.tol = _ROOM * (2 * n + m + 4) * _U
        self.slack = _ROOM * 4.0 * (n + m) * _TINY

    def locate(self, closest: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
        """``np.searchsorted(np.cumsum(closest[inverse]), r)`` for every draw ``r`` known to lie
        in ``[lo, hi]``, or None if that is not certain."""
        prefix = np.cumsum(self.counts @ closest)
        margin = self.tol * float(prefix[-1]) + self.slack
        where = np.searchsorted(prefix, lo)
        if where.max() >= self.blocks:
            return None
        before = np.where(where > 0, prefix[where - 1], 0.0)
        run = np.cumsum(np.append(closest, 0.0)[self.points[where]], axis=1)
        run += before[:, None]
        i = np.count_nonzero(run < lo[:, None], axis=1)  # searchsorted in each (sorted) row
        ids = where * self.size + i
        if i.max() >= self.size or ids.max() >= self.n:
            return None
        rows = np.arange(lo.size)
        below = np.where(i > 0, run[rows, i - 1], np.where(where > 0, before, -np.inf))
        if not ((below < lo - margin).all() and (run[rows, i] >= hi + margin).all()):
            return None
        return ids


class _PlusPlus:
    """k-means++ on the distinct values, with scikit-learn's answer (``_kmeans_plusplus_direct``).

    Everything per point is a function of the point's value, so it is computed once per distinct
    value.  Two quantities are not: the potentials (BLAS sums over all points, whose rounding
    depends on the BLAS kernel) and the running sums that locate the draws (``np.cumsum`` in
    point order).  The running sums are computed as scikit-learn does, on the points.  The
    potentials are computed over the distinct values (``counts @ values``): any order of summing
    ``n`` non-negative floats is within ``γ(n-1)`` of the exact sum, so scikit-learn's potential
    lies in an interval around ours.  Whenever a decision could depend on where in that interval
    it lies -- two candidates of different values whose intervals meet, or a draw ``u × potential``
    whose position among the running sums differs at the two ends -- the step is recomputed on all
    points, as scikit-learn computes it.  Each decision is therefore scikit-learn's; the
    recomputations are rare (intervals are about ``1e-11`` of the potential wide at 65,536 points).
    """

    def __init__(self, x: np.ndarray, distinct: _Distinct, rs: np.random.RandomState):
        self.x, self.d, self.rs = x, distinct, rs
        self.v = distinct.values[:, None]
        self.v_sq = distinct.values * distinct.values
        self.x_sq = np.einsum("ij,ij->i", x, x)
        self.weight = np.ones(x.shape[0], dtype=np.float64)
        # relative bound of |BLAS sum - our sum|: γ(n-1) + γ(m), with room to spare
        self.tol = _ROOM * (x.shape[0] + distinct.values.size) * _U
        self.slack = _ROOM * (x.shape[0] + distinct.values.size) * _TINY  # underflow

    def run(self, k: int) -> np.ndarray:
        x, inv, rs = self.x, self.d.inverse, self.rs
        n = x.shape[0]
        n_local_trials = 2 + int(np.log(k))
        sums_at = _RunningSums(self.d, n_local_trials)
        centres = np.empty((k, 1), dtype=np.float64)
        first = rs.choice(n, p=self.weight / self.weight.sum())
        centres[0] = x[first]
        closest = _sq_distances(centres[0, np.newaxis], self.v, self.v_sq)[0]
        ours = float(closest @ self.d.counts)
        pot: tuple[float, float] | np.ndarray = (ours - self.tol * ours - self.slack, ours + self.tol * ours + self.slack)
        pending: tuple[np.ndarray, np.ndarray | None] = (closest, None)
        for c in range(1, k):
            draws = rs.uniform(size=n_local_trials)
            lo, hi = (draws * pot[0], draws * pot[1]) if isinstance(pot, tuple) else (draws * pot,) * 2
            ids = sums_at.locate(closest, lo, hi)
            if ids is None:
                running = np.cumsum(closest[inv])
                ids = np.searchsorted(running, lo)
                if isinstance(pot, tuple) and not np.array_equal(ids, np.searchsorted(running, hi)):
                    pot = self.exact_potential(*pending)
                    ids = np.searchsorted(running, draws * pot)
            ids = np.minimum(ids, n - 1)
            cand = inv[ids]
            to_candidates = _sq_distances(self.v[cand], self.v, self.v_sq, closest)
            sums = to_candidates @ self.d.counts
            err = self.tol * sums + self.slack
            best = int(np.argmin(sums))
            rivals = (cand != cand[best]) & (sums - err <= sums[best] + err[best])
            if rivals.any():  # too close to call on our sums: scikit-learn's own on all points
                pots = self.potentials(closest, cand)
                best = int(np.argmin(pots))
                pot = pots[best]
            else:
                pot = (float(sums[best] - err[best]), float(sums[best] + err[best]))
                pending = (closest, cand)
            centres[c] = self.v[cand[best]]
            closest = to_candidates[best]
        return centres

    def potentials(self, closest: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """scikit-learn's ``candidates_pot`` on all points: shape ``(t, 1)``."""
        full = _sq_distances(self.v[cand], self.x, self.x_sq, closest[self.d.inverse])
        return full @ self.weight.reshape(-1, 1)

    def exact_potential(self, closest: np.ndarray, cand: np.ndarray | None) -> np.ndarray:
        """scikit-learn's ``current_pot`` after the step that started from ``closest`` and tried
        ``cand`` (None: the first centre, whose distances ``closest`` are)."""
        if cand is None:
            return closest[self.d.inverse][None, :] @ self.weight
        pots = self.potentials(closest, cand)
        return pots[int(np.argmin(pots))]


def _kmeans_plusplus(x: np.ndarray, k: int, rs: np.random.RandomState, distinct: _Distinct) -> np.ndarray:
    """k-means++ seeds, ``(k, 1)``, for centred ``x`` of shape ``(n, 1)`` (``_kmeans_plusplus``):
    on the distinct values when they are at most half the points, else directly."""
    if 2 * distinct.values.size > x.shape[0]:
        return _kmeans_plusplus_direct(x, k, rs)
    return _PlusPlus(x, distinct, rs).run(k)


#: Up to this many centres the E-step computes every distance; above, it looks at the centres
#: bracketing each point (:func:`_assign_sorted`), which is faster from about 40 centres on.
_DENSE_MAX_K = 48


def _distances(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """scikit-learn's E-step quantity ``c² - 2 x c`` (its gemm leaves out ``x²``), rounded as it
    rounds it: ``fl(fl(c c) + -2 fl(x c))``.  Broadcasts ``x`` against ``centres``."""
    d = x * centres
    d *= -2.0
    d += centres * centres
    return d


def _assign(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """E-step: the index of the centre of least :func:`_distances` (first on ties), int32."""
    big = float(np.max(np.abs(centres))) * max(1.0, float(np.max(np.abs(x)))) if x.size else 0.0
    if centres.shape[0] <= _DENSE_MAX_K or not big < 1e150:  # (squares that overflow: as scikit-learn)
        return np.argmin(_distances(x[:, None], centres[None, :]), axis=1).astype(np.int32)
    return _assign_sorted(x, centres)


def _assign_sorted(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """:func:`_assign` in O(n log k): the same labels as computing all ``n × k`` distances.

    In exact arithmetic the nearest centre brackets the point in sorted order, and the exact
    ``c² - 2 x c`` grows away from the point on either side.  So each point compares the
    (rounded) distances of its two bracketing centres, and checks the next centre out on each
    side: the rounded values differ from the exact ones by less than ``e = 8 u (max c² + 2 |x|
    max |c|)`` plus the smallest normal float (underflow), so if both are above the best by more
    than ``2 e``, no centre further out can be smaller or equal.  Points that fail the check
    (centres closer than about 1e-8 of the scale, equal centres) get the full computation.
    """
    k = centres.shape[0]
    order = np.argsort(centres, kind="stable")  # equal centres keep their index order
    pos = np.searchsorted(centres[order], x)  # centres[order][pos - 1] < x <= centres[order][pos]
    near = order[np.clip(pos[:, None] + np.array([-1, 0]), 0, k - 1)]
    d = _distances(x[:, None], centres[near])
    best = d.min(axis=1)
    labels = np.where(d == best[:, None], near, k).min(axis=1)
    scale = float(np.max(centres * centres)) + 2.0 * np.abs(x) * float(np.max(np.abs(centres)))
    margin = best + 2.0 * (8.0 * _U * scale + _TINY)
    unsure = np.zeros(x.shape[0], dtype=bool)
    for step, ok in ((-2, pos >= 2), (1, pos + 1 < k)):
        out = order[np.clip(pos + step, 0, k - 1)]
        unsure |= ok & ~(_distances(x, centres[out]) > margin)
    if unsure.any():
        labels[unsure] = np.argmin(_distances(x[unsure][:, None], centres[None, :]), axis=1)
    return labels.astype(np.int32)


def _relocate_empty(
    x: np.ndarray, centres_old: np.ndarray, sums: np.ndarray, counts: np.ndarray, labels: np.ndarray
) -> None:
    """``_relocate_empty_clusters_dense``: move empty clusters to the farthest points (in place)."""
    empty = np.where(np.equal(counts, 0))[0]
    n_empty = empty.shape[0]
    if n_empty == 0:
        return
    distances = ((x[:, None] - centres_old[:, None][labels]) ** 2).sum(axis=1)
    far = np.argpartition(distances, -n_empty)[: -n_empty - 1 : -1]
    if np.max(distances) == 0:
        return
    for new_id, far_idx in zip(empty.tolist(), far.tolist(), strict=True):
        old_id = int(labels[far_idx])
        sums[old_id] -= x[far_idx]
        sums[new_id] = x[far_idx]
        counts[new_id] = 1.0
        counts[old_id] -= 1.0


def _m_step(x: np.ndarray, labels: np.ndarray, centres_old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """New centres (means of the labels' clusters) and each centre's shift."""
    k = centres_old.shape[0]
    sums = np.bincount(labels, weights=x, minlength=k)
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    _relocate_empty(x, centres_old, sums, counts, labels)
    # _average_centers: scale by 1 / count; an empty cluster takes the (current) value of the
    # largest one, which is still a sum when the largest comes later.
    largest = int(np.argmax(counts))
    for j in range(k):
        if counts[j] > 0:
            sums[j] *= 1.0 / counts[j]
        else:
            sums[j] = sums[largest]
    shift = np.sqrt((sums - centres_old) * (sums - centres_old))
    return sums, shift


def _lloyd(
    x: np.ndarray, centres: np.ndarray, max_iter: int, tol: float, distinct: _Distinct
) -> tuple[np.ndarray, np.ndarray, int]:
    """``_kmeans_single_lloyd`` on centred ``x``: (labels, centres, iterations).  The E-step
    labels the distinct values when they are at most half the points (a point's label depends
    only on its value)."""
    few = 2 * distinct.values.size <= x.shape[0]

    def assign(c: np.ndarray) -> np.ndarray:
        return _assign(distinct.values, c)[distinct.inverse] if few else _assign(x, c)

    labels_old = np.full(x.shape[0], -1, dtype=np.int32)
    labels = labels_old
    strict = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        labels = assign(centres)
        centres, shift = _m_step(x, labels, centres)
        if np.array_equal(labels, labels_old):
            strict = True
            break
        if (shift**2).sum() <= tol:
            break
        labels_old = labels
    if not strict:
        labels = assign(centres)
    return labels, centres, n_iter


def kmeans_1d(
    values: np.ndarray,
    k: int,
    *,
    seed: int = 1,
    max_iter: int = 300,
    tol: float = 1e-4,
    init: np.ndarray | None = None,
) -> KMeansResult:
    """Fit k-means to 1-D ``values`` as scikit-learn's ``KMeans`` does.

    Same result as ``KMeans(n_clusters=k, init="k-means++", algorithm="lloyd",
    random_state=seed, max_iter=max_iter, tol=tol).fit(values.reshape(-1, 1))``.

    Parameters
    ----------
    values
        Finite values, shape ``(n,)`` with ``n >= k``.
    k
        Number of clusters, at least 1.
    seed
        Seed of the ``numpy.random.RandomState`` that draws the k-means++ seeds.
    max_iter, tol
        Lloyd iteration limit and relative tolerance (times the variance of ``values``).
    init
        ``k`` initial centres in place of k-means++ (scikit-learn's ``init=array``).

    Returns
    -------
    KMeansResult

    Examples
    --------
    >>> r = kmeans_1d(np.array([1.0, 1.1, 5.0, 5.2, 9.0]), 3)
    >>> r.centres.round(2).tolist(), r.labels.tolist()
    ([5.1, 1.05, 9.0], [1, 1, 0, 0, 2])
    """
    x = _check_values(values)
    if not 1 <= k <= x.shape[0]:
        raise OptionError(f"k-means needs 1 <= k <= number of values ({x.shape[0]}), got k={k}")
    if max_iter < 1:
        raise OptionError(f"k-means needs max_iter >= 1, got {max_iter}")
    x2 = x.reshape(-1, 1).copy()
    tol_abs = float(np.mean(np.var(x2, axis=0)) * tol) if tol != 0 else 0.0
    mean = x2.mean(axis=0)
    x2 -= mean
    distinct = _Distinct.of(x2[:, 0])
    if init is None:
        start = _kmeans_plusplus(x2, k, np.random.RandomState(seed), distinct)[:, 0]
    else:
        start = _check_values(init) - mean
        if start.shape != (k,):
            raise OptionError(f"k-means needs {k} initial centres, got shape {start.shape}")
    labels, centres, n_iter = _lloyd(x2[:, 0], start, max_iter, tol_abs, distinct)
    centres2 = centres.reshape(-1, 1)
    centres2 += mean
    return KMeansResult(centres=centres2[:, 0], labels=labels, n_iter=n_iter)


def predict(values: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of each value's nearest centre, as ``KMeans.predict`` computes it (first on ties).

    >>> predict(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.5, 2.5])).tolist()
    [0, 0, 1, 1]
    """
    return _assign(_check_values(values), np.asarray(centres, dtype=np.float64))


def _distance_sums(x: np.ndarray, members: np.ndarray) -> np.ndarray:
    """``sum(|x_i - y| for y in members)`` for every ``x_i`` (sorted prefix sums)."""
    s = np.sort(members)
    origin = s[s.size // 2]  # shifting by a member keeps equal values' distances exactly 0
    s = s - origin
    x = x - origin
    prefix = np.concatenate(([0.0], np.cumsum(s)))
    below = np.searchsorted(s, x, side="right")
    above = s.size - below
    return (x * below - prefix[below]) + ((prefix[-1] - prefix[below]) - x * above)


def silhouette_score(values: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette coefficient of a 1-D clustering.

    For point i with mean distance ``a`` to the other points of its cluster and least mean
    distance ``b`` to the points of another cluster, ``s_i = (b - a) / max(a, b)``, and 0 when
    i is alone in its cluster.  Labels need not be consecutive; at least two distinct labels
    are required.

    >>> round(silhouette_score(np.array([0.0, 1.0, 10.0, 11.0]), np.array([0, 0, 1, 1])), 6)
    0.899749
    """
    x = _check_values(values)
    _, lab = np.unique(np.asarray(labels), return_inverse=True)
    lab = lab.reshape(-1)
    if lab.shape != x.shape:
        raise OptionError(f"{lab.size} labels for {x.size} values")
    freqs = np.bincount(lab)
    if not 2 <= freqs.size <= x.size - 1:
        raise OptionError(f"silhouette needs 2 to n - 1 clusters, got {freqs.size} for {x.size} values")
    sums = np.stack([_distance_sums(x, x[lab == c]) for c in range(freqs.size)], axis=1)
    own = np.arange(x.size), lab
    with np.errstate(divide="ignore", invalid="ignore"):
        a = sums[own] / (freqs[lab] - 1)
        mean_to = sums / freqs
        mean_to[own] = np.inf
        b = mean_to.min(axis=1)
        s = (b - a) / np.maximum(a, b)
    return float(np.mean(np.where(freqs[lab] > 1, s, 0.0)))
