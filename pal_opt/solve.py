"""One entry point for every method: :func:`solve`.

The method is a parameter, looked up in the registry (:mod:`pal_opt.methods`): the greedy
policies ``"pal"`` (default), ``"pmfirst"``, ``"packed"``, ``"packed-sticky"``, ``"random"``,
and the integer programs ``"ilp"`` and ``"ilp-partitioned"``, plus any method registered since.
Every method returns the same :class:`~pal_opt.result.PlacementResult`, priced by the one cost
model.
"""

from __future__ import annotations

from typing import Any

from .methods import METHODS, get_method
from .model import RoundInstance, require_instance
from .options import SolveOptions, options_from
from .result import PlacementResult
from .seeds import SeedLike

__all__ = ["METHODS", "solve"]


def solve(
    instance: RoundInstance,
    method: str = "pal",
    *,
    binning: str | None = None,
    seed: SeedLike = None,
    options: SolveOptions | None = None,
    **kwargs: Any,
) -> PlacementResult:
    """Place one round.

    Parameters
    ----------
    instance
        The round.
    method
        A registered method name (:func:`pal_opt.methods.method_names`); default ``"pal"``.
    binning
        Variability binning mode; defaults to ``instance.params.binning`` (``"pal-artifact"``).
    seed
        Seed of the greedy methods' random choices (``"random"``): an integer >= 0, a numpy
        Generator or None (= 0); the integer programs take none.
    options
        A :class:`~pal_opt.options.SolveOptions`; or give its fields as keyword arguments:
        ``backend`` (``"highs"``, ``"cpsat"``, ``"cbc"``; default: the first installed),
        ``admission`` (``"prefix"`` or ``"backfill"``), ``time_limit`` (s, for the whole call), ``deadline``
        (a ``time.monotonic()`` value), ``gap`` (relative gap
        target on the geometric-mean slowdown), ``threads``, ``jobs`` (explicit job ids to place
        instead of an admission rule), ``warm_start``, ``deterministic``, ``backend_params``
        (passed to the solver), ``parts`` (``"ilp-partitioned"``).  Options that do not belong to
        the method raise :class:`~pal_opt.errors.OptionError`.

    Returns
    -------
    PlacementResult
    """
    require_instance(instance)
    m = get_method(method)
    options = options_from(options, {"binning": binning, "seed": seed, **kwargs})
    m.validate_options(options)
    if options.backend_params:  # refused now, not only when the round gets as far as its solver
        from .ilp.backends import check_backend_params

        check_backend_params(options.backend, options.backend_params)
    return m.run(instance, options)

