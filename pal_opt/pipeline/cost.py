"""The cost model of PipeDream's partitioner: the time per sample of one replicated stage.

Every method that prices a stage uses these two functions: the dynamic program
(:mod:`pal_opt.pipeline.tables`), the read-back of its stages (:mod:`pal_opt.pipeline.partition`)
and, later, an integer program over the same segments.  They work on Python floats and,
elementwise, on numpy arrays, with the same operations in the same order, so every method gets
bit-identical stage times.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..errors import InputTypeError
from ..options import check_count, check_finite

__all__ = ["allreduce_time", "stage_time"]


def _checked(value: Any, what: str, *, positive: bool = False, infinite: bool = False, count: bool = False) -> None:
    """Refuse a wrong argument to :func:`stage_time` or :func:`allreduce_time`: not a number (nor
    a numpy array of numbers, whose values are the caller's) is an :class:`InputTypeError`, a
    number out of range an :class:`OptionError` (``positive``: > 0; ``infinite``: inf allowed, a
    segment without a pipeline; ``count``: an integer >= 1).  numpy is not imported: the pure
    Python engine runs without it."""
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind is not None and getattr(value, "ndim", 0) > 0:
        if kind not in ("iu" if count else "iuf"):
            raise InputTypeError(f"must be {'integers' if count else 'numbers'}, got an array of {value.dtype}",
                                 path=what)
        return
    if kind is not None:  # a 0-d array (or a numpy scalar): checked as its number
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"must be {'an integer' if count else 'a number'}, got {type(value).__name__} "
                             f"{value!r:.60}", path=what)
    if count:
        check_count(value, what)
    elif not (infinite and value == math.inf):
        check_finite(value, what, strict=positive)


def allreduce_time(parameters: Any, replicas: int, bandwidth: float, divisor: float = 1.0) -> Any:
    """Data-parallel synchronisation time of a stage on ``replicas`` workers (before dividing by
    ``replicas``).

    ``4 (r - 1) P / (b r)``: each of ``r`` replicas exchanges its share of the ``P`` parameter
    bytes four times (gradients and weights, each a reduce-scatter plus an all-gather), divided by
    ``divisor`` (see :func:`stage_time`).

    >>> allreduce_time(2e8, 2, 25e9)
    0.016
    """
    _check_allreduce(parameters, replicas, bandwidth, divisor)
    return (4 * (replicas - 1) * parameters) / (bandwidth * replicas) / divisor


def stage_time(compute: Any, parameters: Any, replicas: int, bandwidth: float, divisor: float = 1.0) -> Any:
    """Time per sample of a stage replicated on ``replicas`` workers of one level.

    Parameters
    ----------
    compute
        The stage's time on one worker (seconds per sample): at the innermost level its layers'
        forward plus backward time; at an outer level the inner level's optimum for the segment.
    parameters
        The stage's parameter bytes.
    replicas
        Workers of this level that hold a copy of the stage.
    bandwidth
        The level's bandwidth in bytes per second.
    divisor
        Divides the synchronisation time.  PipeDream divides it by the inner level's worker count
        (``W``) for the *first* stage of a segment (the term that replicates a whole segment) and
        by 1 for every stage split off after it: pass ``W`` or 1 accordingly.  At the innermost
        level ``W = 1`` and the two agree.

    Returns
    -------
    float or numpy.ndarray
        ``(compute + allreduce_time(parameters, replicas, bandwidth, divisor)) / replicas``.

    Examples
    --------
    >>> round(stage_time(0.010, 2e8, 2, 25e9), 12)  # 10 ms of compute, 200 MB of weights, 2 replicas
    0.013
    >>> stage_time(0.010, 2e8, 1, 25e9)  # one replica: no synchronisation
    0.01
    """
    _checked(compute, "compute", infinite=True)
    return (compute + allreduce_time(parameters, replicas, bandwidth, divisor)) / replicas


def _check_allreduce(parameters: Any, replicas: Any, bandwidth: Any, divisor: Any) -> None:
    _checked(parameters, "parameters")
    _checked(replicas, "replicas", count=True)
    _checked(bandwidth, "bandwidth", positive=True, infinite=True)
    _checked(divisor, "divisor", positive=True)
