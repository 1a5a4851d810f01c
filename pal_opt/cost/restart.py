"""Restart: a running job that is moved (or stopped) loses work.

The restart cost has one unit everywhere (instance files, :class:`~pal_opt.model.RoundParams`,
``--restart-cost`` of every command, the simulator's ``SimConfig``): **seconds of work a moved
job loses on each of its GPUs** (GPU-seconds per GPU moved).  A job of ``d`` GPUs that loses
``S`` of a round's ``R`` seconds makes the progress of running the whole round ``R / (R − S)``
times slower, and the round cost is ``Σ d · ln(slowdown)``, so the round program charges

    ``d · restart_cost_units(S, R) = d · (−ln(1 − S / R))``

for each running job that does not keep exactly its GPUs (``R`` is ``params.round_length``,
default 360 s).  :func:`restart_cost_units` is the one place that conversion is made.  0, the
default, reproduces PAL's non-sticky rounds.
"""

from __future__ import annotations

import math
import numbers

from ..errors import OptionError
from ..model import Job, RoundInstance, RoundParams
from ..options import check_finite
from .base import CostTerm

__all__ = ["Restart", "restart_cost_units", "restart_cost_seconds", "restart_units"]

#: A loss of a whole round (or more) is priced as losing all but this share of it.
_MAX_SHARE = 1.0 - 1e-6


def restart_cost_units(seconds: float, round_length: float) -> float:
    """The round-cost units per GPU of losing ``seconds`` of a ``round_length``-second round:
    ``−ln(1 − S/R)``, with ``S/R`` capped just below 1 (a loss of a whole round stays finite).

    >>> round(restart_cost_units(36.0, 360.0), 6)
    0.105361
    >>> restart_cost_units(0.0, 360.0)
    0.0

    Raises
    ------
    OptionError
        ``seconds`` is not a number (or is NaN), or ``round_length`` not a finite number > 0.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or math.isnan(seconds):
        raise OptionError(f"seconds must be a number of seconds, got {seconds!r}")
    check_finite(round_length, "round_length", strict=True)
    if seconds <= 0:
        return 0.0
    share = min(seconds / round_length, _MAX_SHARE)
    return -math.log1p(-share)


def restart_cost_seconds(units: float, round_length: float) -> float:
    """The inverse of :func:`restart_cost_units`: the seconds per GPU that cost ``units`` per GPU
    in a ``round_length``-second round, ``R · (1 − e^−units)``.

    >>> round(restart_cost_seconds(restart_cost_units(36.0, 360.0), 360.0), 9)
    36.0
    """
    if units <= 0:
        return 0.0
    return -round_length * math.expm1(-units)


def restart_units(params: RoundParams) -> float:
    """The restart cost of ``params`` in round-cost units per GPU of a moved job."""
    return restart_cost_units(params.restart_cost, params.round_length)


class Restart(CostTerm):
    name = "restart"
    summary = "demand x -ln(1 - S/R) for each running job that loses or changes its GPUs (S restart cost, R round)"

    def moved(self, instance: RoundInstance, job: Job) -> float:
        return restart_units(instance.params) * job.demand
