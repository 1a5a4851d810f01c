"""The registry of cost terms: every method prices a round with the terms listed here.

Adding a term means one module defining a :class:`~pal_opt.cost.base.CostTerm` subclass, one
line in :data:`_BUILTIN` below (or a call to :func:`register_cost_term` from outside the
package), and its tests.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OptionError
from ..model import RoundInstance, require_instance
from ..registry import Registry
from .base import CostTerm
from .locality import Locality
from .migration import Migration
from .preemption import Preemption
from .restart import Restart
from .variability import Variability

__all__ = ["COST_TERMS", "register_cost_term", "unregister_cost_term", "cost_terms", "unseen_terms",
           "validate_cost_params"]

#: The built-in terms, in the order they are summed.
_BUILTIN: tuple[CostTerm, ...] = (
    Variability(),
    Locality(),
    Restart(),
    Migration(),
    Preemption(),
)

#: name -> term, in summation order.
COST_TERMS: Registry[CostTerm] = Registry("cost term", ((t.name, t) for t in _BUILTIN))


def register_cost_term(term: CostTerm, *, replace: bool = False) -> CostTerm:
    """Add ``term`` (an instance) to the registry; every method prices with it from now on.

    Raises
    ------
    OptionError
        If a term of that name exists and ``replace`` is False.
    """
    if not isinstance(term, CostTerm):
        raise OptionError(f"a cost term must be a CostTerm instance, got {term!r}")
    return COST_TERMS.register(term.name, term, replace=replace)


def unregister_cost_term(name: str) -> None:
    """Remove a term (a no-op for an unknown name)."""
    COST_TERMS.unregister(name)


def cost_terms() -> tuple[CostTerm, ...]:
    """The registered terms, in summation order."""
    return tuple(COST_TERMS.values())


def unseen_terms() -> tuple[str, ...]:
    """The registered terms that override ``placed`` but not ``slots``: they price every answer,
    but the integer program neither sees nor bounds them (:mod:`pal_opt.cost.base`)."""
    return tuple(t.name for t in cost_terms()
                 if type(t).placed is not CostTerm.placed and type(t).slots is CostTerm.slots)


def validate_cost_params(instance: RoundInstance) -> None:
    """Check ``instance.params.costs`` against the registered terms' parameters."""
    require_instance(instance)
    costs: Mapping[str, Mapping[str, float]] = instance.params.costs
    for name, given in costs.items():
        if name not in COST_TERMS:
            raise OptionError(f"unknown cost term {name!r} in params.costs; known: {', '.join(COST_TERMS)}")
        COST_TERMS[name].validate_params(given)
