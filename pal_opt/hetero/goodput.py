"""Statistical efficiency, goodput and batch-size choice, as the Sia simulator computes them.

Terms (SIA_MODEL.md, sections A.3-A.7):

gradient statistics
    (μ², σ²) = (``grad_sqr``, ``grad_var``) of the validation curves at the job's epoch,
    linearly interpolated in the global batch B between the two validated batch sizes around it.
gain
    With s = B / B0: gain = (σ² + μ²) / (σ²/s + μ²), between 1 and s.  One optimiser step at batch
    B advances training by ``gain`` B0-steps (the gradient noise scale of McCandlish et al., as
    Pollux uses it).
efficiency
    gain / s, in (0, 1]: the fraction of the extra samples of a larger batch that is useful.
goodput
    throughput × efficiency (samples/s × useful fraction) = B0 · gain / (time of one step).
progress
    Counted in B0-steps; epoch e ends at P(e) = the smallest ``progress`` of row e - 1 over the
    validated batch sizes.  A job is done after ``max_epochs`` epochs (no target metric).

A step with A accumulation micro-steps at atomic (per-GPU) batch b on n GPUs has global batch
B = n · b · (A + 1) and takes ``step_time + A · accum_time`` where ``accum_time = step_time -
sync_time``.  Step times come from a *step model*: a callable ``(num_nodes, num_replicas,
atomic_bsz) -> (accum_time, step_time)`` over arrays; :class:`ProfileStepModel` gives the
measured ("true") times of :mod:`pal_opt.hetero.profiles`, and the Sia scheduler's learned model
(A.7, :class:`pal_opt.hetero.perfmodel.PerfParams`) plugs in the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputTypeError, InstanceError, OptionError
from ..options import check_count, check_finite, number_array, require_items, require_type
from .profiles import (
    APP_TYPES,
    APP_WHAT,
    Application,
    TypeProfile,
    ValidationCurves,
    canonical_placement,
)

__all__ = [
    "EPS",
    "CANDIDATES",
    "JobKind",
    "StepModel",
    "ProfileStepModel",
    "BatchChoice",
    "TrainingTarget",
    "even_placement",
    "grad_stats",
    "gain",
    "efficiency",
    "epoch_progress",
    "epoch_of",
    "training_target",
    "geomspace",
    "optimize_goodput",
    "initial_batch",
    "clamp_batch",
    "choose_batch",
    "progress_rate",
]

#: Tolerance of the artifact's ceiling operations (``ceil(x - EPS)``).
EPS = 1e-8
#: Number of candidate global batch sizes (geometrically spaced) when tuning the batch.
CANDIDATES = 50

#: ``(num_nodes, num_replicas, atomic_bsz) -> (accum_time, step_time)``, all arrays of one shape.
StepModel = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


class JobKind(Enum):
    """What a job lets the scheduler choose (the workload's ``category``; SIA_MODEL.md A.5, B.2).

    ``ADAPTIVE``
        GPU type, GPU count and batch size (the default; the newTrace workloads have no category).
    ``STRONG_SCALING``
        GPU type and count (at most the requested count) at the requested global batch
        (the artifact's ``scale-gpus``).
    ``RIGID``
        GPU type only: the requested count at the requested batch.
    ``GUARANTEED``
        Nothing: count, type and batch fixed (the paper's fourth kind; the artifact's simulator
        has no code path for it, so the round program must pin it; see the report).

    Examples
    --------
    >>> JobKind.parse("scale-gpus"), JobKind.parse(""), JobKind.RIGID.tunes_batch
    (<JobKind.STRONG_SCALING: 'scale-gpus'>, <JobKind.ADAPTIVE: 'adaptive'>, False)
    """

    ADAPTIVE = "adaptive"
    STRONG_SCALING = "scale-gpus"
    RIGID = "rigid"
    GUARANTEED = "guaranteed"

    @property
    def tunes_batch(self) -> bool:
        """Whether the batch size is chosen by goodput (else it is the requested batch)."""
        return self is JobKind.ADAPTIVE

    @property
    def chooses_count(self) -> bool:
        """Whether the GPU count is the scheduler's choice (else the requested count)."""
        return self in (JobKind.ADAPTIVE, JobKind.STRONG_SCALING)

    @property
    def chooses_type(self) -> bool:
        """Whether the GPU type is the scheduler's choice."""
        return self is not JobKind.GUARANTEED

    @classmethod
    def parse(cls, text: str) -> JobKind:
        """A workload ``category`` cell: empty means adaptive; ``strong-scaling`` is accepted too."""
        t = text.strip().lower()
        if not t:
            return cls.ADAPTIVE
        if t == "strong-scaling":
            return cls.STRONG_SCALING
        try:
            return cls(t)
        except ValueError:
            names = ", ".join(k.value for k in cls)
            raise OptionError(f"unknown job category {text!r}; expected one of: {names} (or empty)") from None


@dataclass(frozen=True)
class TrainingTarget:
    """When a job is done: after ``epochs`` epochs, i.e. at ``progress`` B0-steps."""

    epochs: int
    progress: float


@dataclass(frozen=True)
class BatchChoice:
    """A per-GPU batch and accumulation steps; the global batch is ``n · atomic_bsz · (accum_steps + 1)``."""

    atomic_bsz: int
    accum_steps: int

    def global_batch(self, num_replicas: int) -> int:
        """Global batch on ``num_replicas`` GPUs."""
        return num_replicas * self.atomic_bsz * (self.accum_steps + 1)


def even_placement(num_nodes: int, num_replicas: int) -> tuple[int, ...]:
    """``num_replicas`` GPUs spread over ``num_nodes`` nodes as evenly as possible (larger first).

    >>> even_placement(2, 8), even_placement(3, 7), even_placement(1, 4)
    ((4, 4), (3, 2, 2), (4,))
    """
    check_count(num_nodes, "num_nodes")
    check_count(num_replicas, "num_replicas")
    if not 1 <= num_nodes <= num_replicas:
        raise OptionError(f"need 1 ≤ num_nodes ≤ num_replicas, got {num_nodes} nodes for {num_replicas} GPUs")
    q, r = divmod(num_replicas, num_nodes)
    return tuple(q + 1 if i < r else q for i in range(num_nodes))


# -- gradient statistics and efficiency ----------------------------------------------------------
def grad_stats(curves: ValidationCurves, batch_size: ArrayLike, epoch: int) -> tuple[Any, Any]:
    """(grad_sqr, grad_var) at global batch(es) ``batch_size`` during ``epoch`` (0-based).

    Linear in B between the validated batch sizes around it, written as the artifact writes it
    (``((B - lo)·v_hi + (hi - B)·v_lo) / (hi - lo)``), exact at a validated size.

    Raises
    ------
    OptionError
        A batch outside the validated range, or an epoch outside the curves.

    Examples
    --------
    >>> import numpy as np
    >>> c = ValidationCurves(np.array([8, 16]), *(np.array([[1.0], [1.0]]),) * 3,
    ...                      grad_sqr=np.array([[1.0], [3.0]]), grad_var=np.array([[4.0], [8.0]]))
    >>> grad_stats(c, 12, 0)
    (2.0, 6.0)
    """
    require_type(curves, ValidationCurves, "curves", " (app.validation)")
    b = number_array(batch_size, "batch_size", dtype=np.float64)
    check_count(epoch, "epoch", 0)
    return grad_stats_unchecked(curves, b, epoch)


def grad_stats_unchecked(curves: ValidationCurves, batch_size: ArrayLike, epoch: int) -> tuple[Any, Any]:
    """:func:`grad_stats` without the checks of its arguments' types, for the simulator's inner
    loop, whose arguments are its own (not in ``__all__``; the range checks stay)."""
    b = np.asarray(batch_size, dtype=np.float64)
    bs = curves.batch_sizes
    if not 0 <= epoch < curves.epochs:
        raise OptionError(f"epoch {epoch} outside the validation curves (0..{curves.epochs - 1})")
    if np.any(b < bs[0]) or np.any(b > bs[-1]) or np.any(np.isnan(b)):
        raise OptionError(f"batch size outside the validated range {bs[0]}..{bs[-1]}: {b}")
    hi = np.searchsorted(bs, b, side="left")
    lo = np.searchsorted(bs, b, side="right") - 1
    out = []
    for table in (curves.grad_sqr, curves.grad_var):
        col = table[:, epoch]
        b_lo, b_hi = bs[lo].astype(np.float64), bs[hi].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mixed = ((b - b_lo) * col[hi] + (b_hi - b) * col[lo]) / (b_hi - b_lo)
        v = np.where(lo == hi, col[lo], mixed)
        out.append(float(v) if v.ndim == 0 else v)
    return out[0], out[1]


def gain(batch_size: ArrayLike, init_batch_size: ArrayLike, grad_sqr: ArrayLike, grad_var: ArrayLike) -> Any:
    """Progress (in B0-steps) of one step at global batch B: (σ² + μ²) / (σ²/s + μ²), s = B / B0.

    1 where the denominator is not positive (no gradient statistics).

    >>> round(float(gain(128, 8, 1.0, 15.0)), 6)   # s = 16, noise scale 15: (15+1)/(15/16+1)
    8.258065
    """
    return gain_unchecked(*_gain_arrays(batch_size, init_batch_size, grad_sqr, grad_var))


def _gain_arrays(*values: ArrayLike) -> tuple[np.ndarray, ...]:
    """The four arguments of :func:`gain` as float64 arrays, checked in order."""
    names = ("batch_size", "init_batch_size", "grad_sqr", "grad_var")
    return tuple(number_array(v, k, dtype=np.float64) for k, v in zip(names, values, strict=True))


def gain_unchecked(batch_size: ArrayLike, init_batch_size: ArrayLike, grad_sqr: ArrayLike, grad_var: ArrayLike) -> Any:
    """:func:`gain` without the checks of its arguments, for the simulator's inner loop, whose
    arguments are its own numbers (not in ``__all__``)."""
    scale = np.asarray(batch_size, dtype=np.float64) / np.asarray(init_batch_size, dtype=np.float64)
    sqr, var = np.asarray(grad_sqr, dtype=np.float64), np.asarray(grad_var, dtype=np.float64)
    denom = var / scale + sqr
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(denom > 0, (var + sqr) / denom, 1.0)
    return float(g) if g.ndim == 0 else g


def efficiency(
    batch_size: ArrayLike, init_batch_size: ArrayLike, grad_sqr: ArrayLike, grad_var: ArrayLike
) -> Any:
    """Statistical efficiency gain / s in (0, 1]; 1 at B = B0.

    >>> efficiency(8, 8, 1.0, 15.0), round(float(efficiency(128, 8, 1.0, 15.0)), 6)
    (1.0, 0.516129)
    """
    return _efficiency(*_gain_arrays(batch_size, init_batch_size, grad_sqr, grad_var))


def _efficiency(batch_size: ArrayLike, init_batch_size: ArrayLike, grad_sqr: ArrayLike, grad_var: ArrayLike) -> Any:
    """:func:`efficiency` without the checks of its arguments."""
    g = gain_unchecked(batch_size, init_batch_size, grad_sqr, grad_var)
    e = np.asarray(g) / (np.asarray(batch_size, dtype=np.float64) / np.asarray(init_batch_size, dtype=np.float64))
    return float(e) if e.ndim == 0 else e


# -- epochs and progress -----------------------------------------------------------------------
def epoch_progress(curves: ValidationCurves, epoch: int) -> float:
    """P(e): progress at the end of epoch e (1-based), the smallest over the validated sizes; P(0) = 0."""
    require_type(curves, ValidationCurves, "curves", " (app.validation)")
    check_count(epoch, "epoch", 0)
    if epoch == 0:
        return 0.0
    if not 1 <= epoch <= curves.epochs:
        raise OptionError(f"epoch {epoch} outside the validation curves (1..{curves.epochs})")
    return float(curves.progress[:, epoch - 1].min())


def epoch_of(curves: ValidationCurves, progress: float) -> int:
    """The number of epochs some validated curve has completed at ``progress`` (artifact ``get_epoch``)."""
    require_type(curves, ValidationCurves, "curves", " (app.validation)")
    check_finite(progress, "progress")
    return int(max(np.searchsorted(row, progress, side="right") for row in curves.progress))


def training_target(app: Application) -> TrainingTarget:
    """The job's end: ``max_epochs`` epochs, at progress P(max_epochs)."""
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    e = app.max_epochs
    return TrainingTarget(epochs=e, progress=epoch_progress(app.validation, e))


# -- step models -------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ProfileStepModel:
    """The measured step times of one type as a step model; (m, n) runs on ``even_placement(m, n)``.

    NaN where the profile is undefined (outside a placement's batch range or the 3-D hull).
    """

    profile: TypeProfile

    def __call__(
        self, num_nodes: np.ndarray, num_replicas: np.ndarray, atomic_bsz: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        m, n, b = np.broadcast_arrays(np.asarray(num_nodes), np.asarray(num_replicas), np.asarray(atomic_bsz))
        step = np.full(b.shape, np.nan)
        sync = np.full(b.shape, np.nan)
        pairs = np.unique(np.column_stack([m.ravel(), n.ravel()]).astype(np.int64), axis=0)
        for mm, nn in pairs:
            sel = (m == mm) & (n == nn)
            s, y = self.profile.step_time(even_placement(int(mm), int(nn)), b[sel])
            step[sel], sync[sel] = s, y
        return step - sync, step


def geomspace(start: np.ndarray, stop: np.ndarray, num: int) -> np.ndarray:
    """``np.geomspace(start, stop, num)`` for positive float64 arrays (new axis 0), by numpy's own
    arithmetic (``10 ** linspace(log10 start, log10 stop)``, endpoints exact) without its overhead.

    >>> bool(np.array_equal(geomspace(np.array([2.0, 5.0]), np.array([64.0, 5.0]), 7),
    ...                     np.geomspace(np.array([2.0, 5.0]), np.array([64.0, 5.0]), 7)))
    True
    """
    lo, hi = np.log10(start), np.log10(stop)
    delta = hi - lo
    step = delta / (num - 1)
    y = np.arange(num, dtype=np.float64).reshape(-1, *([1] * delta.ndim))
    y = (y / (num - 1)) * delta if np.any(step == 0) else y * step
    y = y + lo
    y[-1] = hi
    out = np.power(10.0, y)
    out[0] = start
    out[-1] = stop
    return out


def _pair(value: Any, arg: str, what: str) -> tuple[Any, Any]:
    """``value`` as its two items; an :class:`~pal_opt.errors.InputTypeError` naming ``arg`` if it is
    not a pair ``what``."""
    items = require_items(value, arg, f"a pair {what}")
    if len(items) != 2:
        raise InputTypeError(f"must be a pair {what}, got {len(items)} items", path=arg)
    return items[0], items[1]


def check_grad(grad: Any) -> None:
    """Refuse ``grad`` unless it is a pair (grad_sqr, grad_var) of numbers or arrays of them: an
    :class:`~pal_opt.errors.InputTypeError` naming ``grad``, ``grad[0]`` or ``grad[1]``
    (:func:`choose_batch`, :func:`pal_opt.hetero.configs.scheduler_goodput_fn`; not in ``__all__``)."""
    for k, v in zip(("grad[0]", "grad[1]"), _pair(grad, "grad", "(grad_sqr, grad_var)"), strict=True):
        number_array(v, k, dtype=np.float64)


def optimize_goodput(
    step_model: StepModel,
    grad: tuple[ArrayLike, ArrayLike],
    init_batch_size: ArrayLike,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    max_batch_size: ArrayLike,
    atomic_range: tuple[ArrayLike, ArrayLike],
    *,
    accumulation: bool = True,
    tune_batch: ArrayLike = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best goodput of each configuration (m, n) over candidate batch sizes (artifact ``optimize``).

    Candidates: ``CANDIDATES`` global batches spaced geometrically from max(B0, b_min·n) to
    ``max_batch_size`` (only ``max_batch_size`` when not tuning).  For each, local = B/n,
    A = ceil(local/b_max - EPS) - 1 (at least 1 when n = 1 and local > B0, so that one GPU still
    sees two micro-batches), b = ceil(local/(A+1) - EPS); candidates with b outside ``atomic_range``
    score 0 (and NaN step times score 0).

    Every argument but ``step_model`` and ``accumulation`` broadcasts over the configurations, so
    one call can score configurations of several jobs and GPU types (a step model whose
    parameters are per-configuration arrays, e.g. :class:`~pal_opt.hetero.perfmodel.PerfParams`
    built from arrays).

    Parameters
    ----------
    step_model
        See :data:`StepModel`.
    grad
        (grad_sqr, grad_var) to score efficiency with.
    init_batch_size
        B0.
    num_nodes, num_replicas
        Configurations (broadcast together).
    max_batch_size
        Upper end of the candidates: Bmax for the job's own choice, the requested batch for the
        scheduler's estimates (SIA_MODEL.md A.5 vs A.7).
    atomic_range
        (b_min, b_max) per-GPU batch limits.
    accumulation
        Allow accumulation steps (the Sia path always does).
    tune_batch
        False for strong-scaling and rigid jobs.

    Returns
    -------
    goodput, atomic_bsz, accum_steps
        Arrays of the configurations' broadcast shape (goodput in samples/s × efficiency).
    """
    require_type(step_model, Callable, "step_model", " (a StepModel: ProfileStepModel or PerfParams)")
    b_lo, b_hi = _pair(atomic_range, "atomic_range", "(b_min, b_max)")
    sqr, var = _pair(grad, "grad", "(grad_sqr, grad_var)")
    named = {"num_nodes": num_nodes, "num_replicas": num_replicas, "init_batch_size": init_batch_size,
             "max_batch_size": max_batch_size, "atomic_range[0]": b_lo, "atomic_range[1]": b_hi, "grad[0]": sqr,
             "grad[1]": var}
    m, n, b0, top, lo, hi, g_sqr, g_var = (number_array(v, k, dtype=np.float64) for k, v in named.items())
    require_type(accumulation, bool, "accumulation")
    number_array(tune_batch, "tune_batch", "b")
    return optimize_goodput_unchecked(step_model, (g_sqr, g_var), b0, m, n, top, (lo, hi), accumulation=accumulation,
                                      tune_batch=tune_batch)


def optimize_goodput_unchecked(
    step_model: StepModel,
    grad: tuple[ArrayLike, ArrayLike],
    init_batch_size: ArrayLike,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    max_batch_size: ArrayLike,
    atomic_range: tuple[ArrayLike, ArrayLike],
    *,
    accumulation: bool = True,
    tune_batch: ArrayLike = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`optimize_goodput` without the checks of its arguments, for the simulator's and the
    Sia policy's inner loops, whose arguments are their own arrays (not in ``__all__``)."""
    b_lo, b_hi = atomic_range
    sqr, var = grad
    m, n, b0, top, lo, hi, g_sqr, g_var, tune = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (num_nodes, num_replicas, init_batch_size, max_batch_size, b_lo, b_hi,
                                                    sqr, var)),
        np.asarray(tune_batch, dtype=bool))
    shape = m.shape
    m, n, b0, top, lo, hi, g_sqr, g_var, tune = (v.ravel() for v in (m, n, b0, top, lo, hi, g_sqr, g_var, tune))
    start = np.where(tune, np.maximum(b0, lo * n), top)
    batch = geomspace(start, top, CANDIDATES)  # (CANDIDATES, configs)
    local = batch / n
    if accumulation:
        accum = np.maximum(np.ceil(local / hi - EPS) - 1, 0)  # -1 where local < EPS * hi (a huge atomic limit)
        accum = np.where((n == 1) & (local > b0 + EPS), np.maximum(accum, 1), accum).astype(np.int64)
    else:
        accum = np.zeros(local.shape, dtype=np.int64)
    atomic = np.ceil(local / (accum + 1) - EPS).astype(np.int64)
    mm, nn = np.broadcast_to(m, atomic.shape), np.broadcast_to(n, atomic.shape)
    accum_time, step_time = step_model(mm, nn, atomic)
    total = nn * atomic * (accum + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        throughput = total / (accum * accum_time + step_time)
    good = throughput * _efficiency(total, b0, g_sqr, g_var)
    valid = (lo <= atomic) & (atomic <= hi) & np.isfinite(good)
    good = np.where(valid, good, 0.0)
    best = np.argmax(good, axis=0), np.arange(good.shape[1])
    return good[best].reshape(shape), atomic[best].reshape(shape), accum[best].reshape(shape)


# -- the job's own batch choice (A.5) -------------------------------------------------------------
def _batch_limit(app: Application, profile: TypeProfile, placement: tuple[int, ...]) -> int:
    b_hi = profile.placement_limit(placement)
    if b_hi is None:
        raise OptionError(
            f"{app.name} on {profile.gpu_type}: no profiled batch limit for placement {placement}"
        )
    return b_hi


def initial_batch(
    app: Application, profile: TypeProfile, placement: Sequence[int], batch_size: int | None = None
) -> BatchChoice:
    """The batch a job uses without a throughput model (or with a fixed batch), before clamping.

    B = ``batch_size`` if given (strong-scaling, rigid) else max(B0, b_min·n); local =
    ceil(B/n); A = ceil(local / b_hi(p)) - 1, at least 1 when n = 1 and B > B0; b = ceil(local/(A+1)).
    """
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    require_type(profile, TypeProfile, "profile", " (app.profile(gpu_type))")
    if batch_size is not None:
        batch_size = check_count(batch_size, "batch_size")
    return initial_batch_unchecked(app, profile, placement, batch_size)


def initial_batch_unchecked(
    app: Application, profile: TypeProfile, placement: Sequence[int], batch_size: int | None = None
) -> BatchChoice:
    """:func:`initial_batch` without the checks of ``app`` and ``profile`` (not in ``__all__``)."""
    p = canonical_placement(placement)
    n = sum(p)
    b_hi = _batch_limit(app, profile, p)
    big = batch_size if batch_size is not None else max(app.init_batch_size, profile.min_local_bsz * n)
    local = math.ceil(big / n - EPS)
    accum = math.ceil(local / b_hi - EPS) - 1
    if n == 1 and big > app.init_batch_size:
        accum = max(1, accum)
    return BatchChoice(math.ceil(local / (accum + 1) - EPS), accum)


def clamp_batch(
    app: Application, profile: TypeProfile, num_replicas: int, choice: BatchChoice
) -> BatchChoice:
    """The memory clamps of A.5: b ≤ the largest batch profiled with n GPUs (if any), then
    b ≤ ⌊Bmax / (n·(A+1))⌋."""
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    require_type(profile, TypeProfile, "profile", " (app.profile(gpu_type))")
    check_count(num_replicas, "num_replicas")
    require_type(choice, BatchChoice, "choice")
    return _clamp_batch(app, profile, num_replicas, choice)


def _clamp_batch(app: Application, profile: TypeProfile, num_replicas: int, choice: BatchChoice) -> BatchChoice:
    """:func:`clamp_batch` without the checks of its arguments."""
    b = choice.atomic_bsz
    limit = profile.replica_limit(num_replicas)
    if limit is not None:
        b = min(b, limit)
    b = min(b, int(app.max_batch_size / (num_replicas * (choice.accum_steps + 1))))
    return BatchChoice(b, choice.accum_steps)


def choose_batch(
    app: Application,
    gpu_type: str,
    placement: Sequence[int],
    kind: JobKind = JobKind.ADAPTIVE,
    *,
    requested_batch: int | None = None,
    step_model: StepModel | None = None,
    grad: tuple[float, float] | None = None,
) -> BatchChoice:
    """The job's (atomic batch, accumulation steps) on a placement (SIA_MODEL.md A.5).

    An adaptive job with a step model and gradient statistics maximises that model's goodput up
    to Bmax with atomic range [b_min, b_hi(p)]; otherwise the initial rule is used (with the
    requested batch for kinds that do not tune it).  The clamps of :func:`clamp_batch` follow.
    Each argument given is checked whether or not this call reads it (a requested batch of an
    adaptive job, a step model without gradient statistics).
    """
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    require_type(kind, JobKind, "kind", " (JobKind.ADAPTIVE, JobKind.parse('rigid'))")
    if requested_batch is not None:
        check_count(requested_batch, "requested_batch")
    if step_model is not None:
        require_type(step_model, Callable, "step_model", " (a StepModel: ProfileStepModel or PerfParams)")
    if grad is not None:
        check_grad(grad)
    return choose_batch_unchecked(app, gpu_type, placement, kind, requested_batch=requested_batch,
                                  step_model=step_model, grad=grad)


def choose_batch_unchecked(
    app: Application,
    gpu_type: str,
    placement: Sequence[int],
    kind: JobKind = JobKind.ADAPTIVE,
    *,
    requested_batch: int | None = None,
    step_model: StepModel | None = None,
    grad: tuple[float, float] | None = None,
) -> BatchChoice:
    """:func:`choose_batch` without the checks of its arguments' types, for the simulator, whose
    arguments are its own (not in ``__all__``)."""
    profile = app.profile(gpu_type)
    p = canonical_placement(placement)
    n = sum(p)
    if not kind.tunes_batch:
        if requested_batch is None:
            raise OptionError(f"a {kind.value} job needs its requested batch size")
        choice = initial_batch_unchecked(app, profile, p, requested_batch)
    elif step_model is None or grad is None:
        choice = initial_batch_unchecked(app, profile, p)
    else:
        b_hi = _batch_limit(app, profile, p)
        _, atomic, accum = optimize_goodput_unchecked(
            step_model,
            grad,
            app.init_batch_size,
            len(p),
            n,
            app.max_batch_size,
            (profile.min_local_bsz, b_hi),
        )
        choice = BatchChoice(int(atomic), int(accum))
    return _clamp_batch(app, profile, n, choice)


def progress_rate(
    app: Application, gpu_type: str, placement: Sequence[int], choice: BatchChoice, epoch: int
) -> float:
    """Simulated progress per second (A.4): κ · gain(B, epoch) / (T_step + A·T_acc), true step times.

    Raises
    ------
    InstanceError
        The profile has no step time for this placement and batch.
    """
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    require_type(choice, BatchChoice, "choice")
    p = canonical_placement(placement)
    n = sum(p)
    big = choice.global_batch(n)
    sqr, var = grad_stats(app.validation, big, epoch)
    step, sync = app.profile(gpu_type).step_time(p, choice.atomic_bsz)
    if not (math.isfinite(step) and step > 0):
        raise InstanceError(
            f"{app.name} on {gpu_type}: no step time for placement {p} at atomic batch {choice.atomic_bsz}"
        )
    total = step + choice.accum_steps * (step - sync)
    return app.settings.calibration * gain(big, app.init_batch_size, sqr, var) / total
