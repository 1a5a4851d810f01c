"""The Sia scheduler's learned throughput model (SIA_MODEL.md A.7, Pollux's performance model).

Each job learns, per GPU type, seven parameters θ = (α_c, β_c, α_n, β_n, α_r, β_r, γ) from the step
times it has observed:

* compute time of one micro-step  T_acc(b) = α_c + β_c·b  (b = atomic batch);
* network time  T_net(m, n) = α_n + β_n·max(n − 2, 1e-8) across nodes (m > 1),
  α_r + β_r·max(n − 2, 1e-8) within a node (m = 1, n > 1), and 1e-8 + 1e-8·1e-8 on one GPU;
* step time  T_step = (T_acc^γ + T_net^γ)^{1/γ}  (γ ∈ [1, 10]: 1 = no overlap, large = max).

The fit minimises RMSE(log T_acc) + RMSE(log T_step) + 1e-3 (γ − 1)² + 1e-2 ((β_n/α_n)² +
(β_r/α_r)²) with L-BFGS-B (scipy, ``tol=1e-5``) from θ0 = (0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001),
bounds [1e-8, ∞) and γ ∈ [1, 10], pinning what the observations cannot identify (see
:func:`fit_perf_params`).  The artifact differentiates with autograd; here the gradient is written
out (:func:`objective_and_gradient`), which is the same function up to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple, dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import OptionError
from ..options import number_array

__all__ = [
    "PerfParams",
    "INITIAL_PARAMS",
    "TINY",
    "ProfileObservations",
    "fit_perf_params",
    "objective_and_gradient",
]

#: The smallest value of a parameter, and the network term of a single GPU.
TINY = 1e-8


@dataclass(frozen=True)
class PerfParams:
    """θ of the step-time model; callable as a :data:`~pal_opt.hetero.goodput.StepModel`.

    Examples
    --------
    >>> th = PerfParams(0.1, 0.01, 0.2, 0.02, 0.05, 0.01, 1.0)
    >>> float(th.accum_time(10)), float(th.network_time(2, 8)), float(th.network_time(1, 1))
    (0.2, 0.32, 1.00000001e-08)
    >>> acc, step = th(np.array([2]), np.array([8]), np.array([10]))   # γ = 1: no overlap
    >>> round(float(step[0]), 12)
    0.52
    """

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def as_array(self) -> np.ndarray:
        """θ as a float64 array in field order."""
        return np.array(astuple(self), dtype=np.float64)

    def accum_time(self, atomic_bsz: ArrayLike) -> np.ndarray:
        """T_acc(b) = α_c + β_c·b."""
        return self.alpha_c + self.beta_c * np.asarray(atomic_bsz, dtype=np.float64)

    def network_time(self, num_nodes: ArrayLike, num_replicas: ArrayLike) -> np.ndarray:
        """T_net(m, n) (module docstring)."""
        m = np.asarray(num_nodes, dtype=np.float64)
        n = np.asarray(num_replicas, dtype=np.float64)
        conds = [m > 1, n > 1]
        alpha = np.select(conds, [self.alpha_n, self.alpha_r], TINY)
        beta = np.select(conds, [self.beta_n, self.beta_r], TINY)
        return alpha + beta * np.maximum(n - 2, TINY)

    def step_time(self, num_nodes: ArrayLike, num_replicas: ArrayLike, atomic_bsz: ArrayLike) -> np.ndarray:
        """T_step = exp(log(T_acc^γ + T_net^γ) / γ), written as the artifact writes it."""
        acc = self.accum_time(atomic_bsz)
        net = self.network_time(num_nodes, num_replicas)
        return np.exp(np.log(acc**self.gamma + net**self.gamma) / self.gamma)

    def __call__(
        self, num_nodes: np.ndarray, num_replicas: np.ndarray, atomic_bsz: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.accum_time(atomic_bsz), self.step_time(num_nodes, num_replicas, atomic_bsz)


#: θ0 of the fit.
INITIAL_PARAMS = PerfParams(0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001)


def _network_parts(m: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks (inter-node, intra-node) and the retrogression multiplier max(n - 2, 1e-8)."""
    inter = m > 1
    intra = ~inter & (n > 1)
    return inter, intra, np.maximum(n - 2, TINY)


def objective_and_gradient(
    theta: np.ndarray,
    num_nodes: np.ndarray,
    num_replicas: np.ndarray,
    atomic_bsz: np.ndarray,
    accum_time: np.ndarray,
    step_time: np.ndarray,
) -> tuple[float, np.ndarray]:
    """The fit's loss at θ and its gradient (module docstring).

    >>> obs = (np.array([1, 1]), np.array([1, 2]), np.array([8, 8]), np.array([0.2, 0.2]), np.array([0.2, 0.3]))
    >>> loss, grad = objective_and_gradient(INITIAL_PARAMS.as_array(), *obs)
    >>> round(loss, 6), grad.shape   # ≈ |log(0.18/0.2)| + rms(log(0.18/0.2), log(0.28/0.3)) + 2e-4
    (0.194866, (7,))
    """
    ac, bc, an, bn, ar, br, g = (float(v) for v in theta)
    inter, intra, r = _network_parts(num_nodes.astype(np.float64), num_replicas.astype(np.float64))
    b = atomic_bsz.astype(np.float64)
    acc = ac + bc * b
    net = np.where(inter, an + bn * r, np.where(intra, ar + br * r, TINY + TINY * r))
    s = acc**g + net**g
    log_step = np.log(s) / g
    e1 = np.log(acc) - np.log(accum_time)
    e2 = log_step - np.log(step_time)
    rmse1, rmse2 = float(np.sqrt(np.mean(e1**2))), float(np.sqrt(np.mean(e2**2)))
    loss = rmse1 + rmse2 + 1e-3 * (g - 1) ** 2 + 1e-2 * ((bn / an) ** 2 + (br / ar) ** 2)
    # d rmse / d pred = e / (N · rmse); chain through log(acc) and log_step.
    w1 = e1 / (e1.size * rmse1) if rmse1 > 0 else np.zeros_like(e1)
    w2 = e2 / (e2.size * rmse2) if rmse2 > 0 else np.zeros_like(e2)
    d_acc = w1 / acc + w2 * acc ** (g - 1) / s  # d loss / d acc, per observation
    d_net = w2 * net ** (g - 1) / s
    d_g = w2 * ((acc**g * np.log(acc) + net**g * np.log(net)) / (s * g) - np.log(s) / g**2)
    grad = np.array(
        [
            d_acc.sum(),
            (d_acc * b).sum(),
            d_net[inter].sum() - 2e-2 * bn**2 / an**3,
            (d_net * r)[inter].sum() + 2e-2 * bn / an**2,
            d_net[intra].sum() - 2e-2 * br**2 / ar**3,
            (d_net * r)[intra].sum() + 2e-2 * br / ar**2,
            d_g.sum() + 2e-3 * (g - 1),
        ]
    )
    return loss, grad


def fit_perf_params(
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_time: ArrayLike,
    step_time: ArrayLike,
) -> PerfParams:
    """Fit θ to observed (nodes, GPUs, atomic batch) -> (compute time, step time).

    Pinned at their start value (bounds lower = upper) when the observations cannot identify
    them: α_c at mean(compute time)/2 with a single distinct atomic batch; α_n, β_n at 1e-8
    without a multi-node observation; α_r, β_r at 1e-8 without a single-node multi-GPU one;
    β_n, β_r at 1e-8 with no observation above 2 GPUs.  After the fit, without a multi-node
    observation, α_n ← max(α_n, 1.1·α_r) and β_n ← max(β_n, 1.1·β_r) (inter-node is no faster
    than intra-node).

    Raises
    ------
    OptionError
        No observations, arrays of different lengths, or non-positive times.
    """
    named = {"num_nodes": num_nodes, "num_replicas": num_replicas, "atomic_bsz": atomic_bsz, "accum_time": accum_time,
             "step_time": step_time}
    return fit_perf_params_unchecked(*(number_array(v, k, dtype=np.float64) for k, v in named.items()))


def fit_perf_params_unchecked(
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_time: ArrayLike,
    step_time: ArrayLike,
) -> PerfParams:
    """:func:`fit_perf_params` without the checks of its arguments' types, for the simulator,
    whose observations are its own float arrays (not in ``__all__``; the checks of their lengths
    and values stay)."""
    from scipy.optimize import Bounds, minimize

    m, n, b, acc, step = (np.asarray(v, dtype=np.float64).ravel()
                          for v in (num_nodes, num_replicas, atomic_bsz, accum_time, step_time))
    if not (m.size == n.size == b.size == acc.size == step.size) or m.size == 0:
        raise OptionError("fit_perf_params needs equally long, non-empty observation arrays")
    if np.any(acc <= 0) or np.any(step <= 0) or not np.all(np.isfinite(acc) & np.isfinite(step)):
        raise OptionError("observed compute and step times must be finite and positive")
    x0 = INITIAL_PARAMS.as_array()
    lower = np.array([TINY] * 6 + [1.0])
    upper = np.array([np.inf] * 6 + [10.0])

    def pin(i: int, value: float) -> None:
        x0[i] = lower[i] = upper[i] = value

    if np.unique(b).size == 1:
        pin(0, float(np.mean(acc)) / 2)
    if not np.any(m > 1):
        pin(2, TINY)
        pin(3, TINY)
    if not np.any((m == 1) & (n > 1)):
        pin(4, TINY)
        pin(5, TINY)
    if not np.any(n > 2):
        pin(3, TINY)
        pin(5, TINY)
    result = minimize(
        objective_and_gradient,
        x0,
        args=(m, n, b, acc, step),
        jac=True,
        method="L-BFGS-B",
        bounds=Bounds(lower, upper, keep_feasible=True),
        tol=1e-5,
    )
    theta = np.asarray(result.x, dtype=np.float64)
    if not np.any(m > 1):
        theta[2] = max(theta[2], theta[4] * 1.1)
        theta[3] = max(theta[3], theta[5] * 1.1)
    return PerfParams(*(float(v) for v in theta))


class ProfileObservations:
    """One job's observed step times on one GPU type, refitted when a new shape appears.

    The artifact records the first (step, sync) seen for each (nodes, GPUs, atomic batch) and
    refits θ from scratch whenever a new key is added.

    Examples
    --------
    >>> obs = ProfileObservations()
    >>> obs.add(1, 1, 32, 0.10, 0.001), obs.add(1, 1, 32, 0.11, 0.001), len(obs)
    (True, False, 1)
    >>> obs.max_replicas, obs.params is not None
    (1, True)
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int, int], tuple[float, float]] = {}
        self._params: PerfParams | None = None

    def __len__(self) -> int:
        return len(self._seen)

    @property
    def observations(self) -> Mapping[tuple[int, int, int], tuple[float, float]]:
        """(nodes, GPUs, atomic batch) -> (step time, sync time), first observation of each."""
        return dict(self._seen)

    @property
    def max_replicas(self) -> int:
        """The largest GPU count observed (0 if none): r_c(j) of the replica cap."""
        return max((k[1] for k in self._seen), default=0)

    @property
    def params(self) -> PerfParams | None:
        """The current fit, or None before the first observation."""
        return self._params

    def add(
        self, num_nodes: int, num_replicas: int, atomic_bsz: int, step_time: float, sync_time: float
    ) -> bool:
        """Record an observation; refit and return True if its key is new."""
        key = (int(num_nodes), int(num_replicas), int(atomic_bsz))
        if key in self._seen:
            return False
        self._seen[key] = (float(step_time), float(sync_time))
        keys = np.array(list(self._seen), dtype=np.float64)
        vals = np.array(list(self._seen.values()), dtype=np.float64)
        self._params = fit_perf_params(
            keys[:, 0], keys[:, 1], keys[:, 2], vals[:, 0] - vals[:, 1], vals[:, 0]
        )
        return True
