"""What a cost term is.

The round cost of a placement is a sum of terms.  Each term prices three things, and every
method reaches the term through the same three questions:

``placed(instance, job, pos, level, max_factor)``
    what the term charges for ``job`` running on the GPUs at positions ``pos`` (spanning
    ``level``; ``max_factor`` is the largest of the job's class factors on them, or for a
    pipeline job the factor its slowest stage runs at, :func:`~pal_opt.cost.evaluate.pace_factor`).  The greedy
    policies, the checker, the simulator and the benchmarks price placements through it
    (:func:`pal_opt.cost.evaluate`).
``slots(perfclass, demand, locality, values, span)``
    the same, vectorised for the integer program: one cost per slot column of a job type, where
    ``values`` are the factor levels of the columns and ``span`` the topology levels they pay for.
    It must equal ``placed`` for any GPU set whose largest factor is the level's value and which
    spans that level.  A term that gives ``placed`` without ``slots`` (a charge the slot columns
    cannot say, e.g. per server) prices every answer but is invisible to the program: an exact
    method's answer is then not proven (status ``feasible``, no bound; the program's own bound
    is kept in ``info["program_bound"]``).
``moved(instance, job)``
    what the term charges when a *running* job is placed on other GPUs than it holds.  The
    integer program then adds a binary "keep" variable per running job; a term whose ``moved``
    is zero for every job adds nothing.
``preempted(instance, job)``
    what the term charges when a *running* job is not placed at all (it is preempted).  A
    constant for the jobs the admission rule leaves out; the preemptive round program
    (:mod:`pal_opt.ilp.preempt`) chooses the jobs that pay it.

Parameters of a term live in ``instance.params.costs[term.name]`` (a mapping of numbers), which
the term reads and checks itself (:meth:`CostTerm.validate_params`).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..errors import OptionError
from ..model import Job, RoundInstance
from ..options import is_finite_number, shown_number

__all__ = ["CostTerm"]


class CostTerm(ABC):  # noqa: B024 - every hook has a neutral default; subclasses override some
    """One additive part of the round cost.  Subclasses override the hooks that apply.

    Class attributes
    ----------------
    name
        Registry name; also the key of the term's parameters in ``params.costs``.
    summary
        One line for documentation and ``--help``.
    params
        ``{parameter: default}`` the term reads from ``params.costs[name]``; numbers >= 0.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    params: ClassVar[Mapping[str, float]] = {}

    # ------------------------------------------------------------------ parameters
    def validate_params(self, given: Mapping[str, Any]) -> None:
        """Raise :class:`~pal_opt.errors.OptionError` for an unknown or bad parameter."""
        for key, v in given.items():
            if key not in self.params:
                known = ", ".join(self.params) or "none"
                raise OptionError(f"cost term {self.name!r} has no parameter {key!r} (known: {known})")
            if not isinstance(v, (int, float)) or not is_finite_number(v) or v < 0:
                raise OptionError(f"costs.{self.name}.{key} must be a finite number >= 0, got {shown_number(v)}")

    def param(self, instance: RoundInstance, key: str) -> float:
        """The value of parameter ``key`` in ``instance`` (its default when not given)."""
        given = instance.params.costs.get(self.name, {})
        return float(given.get(key, self.params[key]))

    # ------------------------------------------------------------------ pricing
    def placed(self, instance: RoundInstance, job: Job, pos: np.ndarray, level: int, max_factor: float) -> float:
        """Charge for ``job`` on the GPUs at ``pos``."""
        return 0.0

    def slots(
        self, instance: RoundInstance, perfclass: str, demand: int, locality: tuple[float, float, float],
        values: np.ndarray, span: np.ndarray,
    ) -> np.ndarray | float:
        """Charge per slot column (vectorised :meth:`placed`) of a job of ``perfclass``, ``demand``
        and ``locality`` in the round ``instance`` (its parameters: :meth:`param`): ``values`` are
        the columns' factor levels and ``span`` the topology levels they pay for (arrays of one
        length)."""
        return 0.0

    def moved(self, instance: RoundInstance, job: Job) -> float:
        """Charge when the running ``job`` is placed on other GPUs."""
        return 0.0

    def preempted(self, instance: RoundInstance, job: Job) -> float:
        """Charge when the running ``job`` is left unplaced (preempted)."""
        return 0.0

    def __repr__(self) -> str:
        return f"<cost term {self.name!r}>"
