"""One entry point for every method: :func:`solve`.

The method is a parameter (``"pal"``, ``"pmfirst"``, ``"packed"``, ``"packed-sticky"``,
``"random"`` or ``"ilp"``).  Greedy policies and integer programs return the same
:class:`~pal_opt.result.PlacementResult`, priced by the one cost model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .binning import BINNING_MODES, binned_factors
from .cost import evaluate
from .errors import OptionError
from .model import JobId, RoundInstance
from .result import PlacementResult, Status
from .seeds import SeedLike

__all__ = ["METHODS", "GREEDY_METHODS", "solve", "greedy_result"]

GREEDY_METHODS: tuple[str, ...] = ("pal", "pmfirst", "packed", "packed-sticky", "random")
METHODS: tuple[str, ...] = (*GREEDY_METHODS, "ilp")

_ILP_OPTIONS = {"backend", "admission", "time_limit", "gap", "threads", "jobs", "warm_start", "deterministic"}
_GREEDY_OPTIONS = {"seed"}


def greedy_result(
    instance: RoundInstance,
    method: str,
    placements: dict[JobId, tuple[int, ...]],
    *,
    admission: str,
    seconds: float,
    jobs_to_terminate: Sequence[JobId] = (),
    binning: str | None = None,
    seed: int | None = None,
) -> PlacementResult:
    """Wrap a greedy placement into a :class:`PlacementResult`, priced by :mod:`pal_opt.cost`."""
    factors = binned_factors(instance.cluster, binning or instance.params.binning)
    summary = evaluate(instance, placements, factors)
    return PlacementResult(
        placements=dict(placements),
        method=method,
        status=Status.FEASIBLE,
        objective=summary.cost,
        geomean_slowdown=summary.geomean,
        gpus_used=summary.gpus,
        solve_seconds=seconds,
        admission=admission,
        jobs_to_terminate=tuple(jobs_to_terminate),
        spanning=summary.spanning,
        seed=seed,
        info={"binning": binning or instance.params.binning},
    )


def solve(
    instance: RoundInstance,
    method: str = "pal",
    *,
    binning: str | None = None,
    seed: SeedLike = None,
    **options: Any,
) -> PlacementResult:
    """Place one round.

    Parameters
    ----------
    instance
        The round.
    method
        ``"pal"`` (default), ``"pmfirst"``, ``"packed"``, ``"packed-sticky"``, ``"random"`` or
        ``"ilp"``.
    binning
        Variability binning mode; defaults to ``instance.params.binning`` (``"pal-artifact"``).
    seed
        Seed for ``"random"`` (int, numpy Generator or None = 0).
    **options
        For ``"ilp"`` only: ``backend`` (``"highs"``, ``"cpsat"``, ``"cbc"``; default: the first
        installed), ``admission`` (``"prefix"`` or ``"backfill"``), ``time_limit`` (s),
        ``gap`` (relative gap target on the geometric-mean slowdown), ``threads``, ``jobs``
        (explicit job ids to place instead of an admission rule), ``warm_start`` (bool),
        ``deterministic`` (bool).  Options that do not belong to the method raise
        :class:`~pal_opt.errors.OptionError`.

    Returns
    -------
    PlacementResult
    """
    if method not in METHODS:
        raise OptionError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    mode = binning or instance.params.binning
    if mode not in BINNING_MODES:
        raise OptionError(f"unknown binning mode {mode!r}; choose one of {', '.join(BINNING_MODES)}")
    if method == "ilp":
        bad = set(options) - _ILP_OPTIONS
        if seed is not None:
            bad.add("seed")
        if bad:
            raise OptionError(f"option(s) {', '.join(sorted(bad))} do not apply to method 'ilp'")
        from .ilp import solve_ilp

        res = solve_ilp(instance, binning=mode, **options)
        res.info.setdefault("binning", mode)
        return res
    if options:
        raise OptionError(
            f"option(s) {', '.join(sorted(options))} do not apply to method {method!r}"
        )
    from .policies import get_policy

    policy = get_policy(method)
    factors = binned_factors(instance.cluster, mode)
    t0 = time.perf_counter()
    out = policy(instance, factors, seed=seed)
    seconds = time.perf_counter() - t0
    return greedy_result(
        instance,
        method,
        out.placements,
        admission=out.admission,
        seconds=seconds,
        jobs_to_terminate=out.jobs_to_terminate,
        binning=mode,
        seed=seed if isinstance(seed, int) else None,
    )
