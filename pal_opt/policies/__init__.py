"""Greedy placement policies, one module each, behind a name -> function registry.

Every policy is ``place(instance, factors, *, seed=None) -> GreedyPlacement`` where ``factors``
are the per-class factor arrays by GPU position (normally
:func:`pal_opt.binning.binned_factors`).

==================  ==============================================  ===============
name                what                                            admission
==================  ==============================================  ===============
``pal``             PAL (variability × locality walk)               ``pal-order``
``pmfirst``         PM-First (fastest GPUs first)                   ``pal-order``
``packed``          consolidated, running jobs freed                ``queue-order``
``packed-sticky``   consolidated, running jobs kept, preemption     ``sticky``
``random``          uniform random GPUs (seeded)                    ``queue-order``
==================  ==============================================  ===============
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import OptionError
from . import packed, pal, pmfirst
from . import random as random_policy
from .base import GreedyPlacement

__all__ = ["POLICIES", "PolicyFn", "GreedyPlacement", "get_policy"]

PolicyFn = Callable[..., GreedyPlacement]

#: Registry: policy name -> ``place(instance, factors, *, seed=None)``.
POLICIES: dict[str, PolicyFn] = {
    "pal": pal.place,
    "pmfirst": pmfirst.place,
    "packed": packed.place,
    "packed-sticky": packed.place_sticky,
    "random": random_policy.place,
}


def get_policy(name: str) -> PolicyFn:
    """The policy function registered as ``name``.

    >>> get_policy("pal") is pal.place
    True
    >>> get_policy("best")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: unknown greedy policy 'best'; choose one of pal, pmfirst, packed, packed-sticky, random
    """
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise OptionError(f"unknown greedy policy {name!r}; choose one of {', '.join(POLICIES)}") from None

