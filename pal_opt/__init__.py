"""pal-opt: variability- and locality-aware placement of ML training jobs on GPU clusters.

The public API, re-exported here:

Rounds
    :class:`Cluster`, :class:`Job`, :class:`RoundParams`, :class:`RoundInstance`,
    :class:`GpuState`, :class:`Level`, :func:`pal_locality`; builders :func:`make_instance`
    (networkx graph + job list), :func:`instance_from_frames` (pandas, Blox shape),
    :func:`generate_instance` (synthetic); files :func:`load_instance`, :func:`save_instance`,
    :func:`load_blox`.
Placing
    :func:`solve` (one round, any method), :func:`repair` (re-place the jobs that lost a GPU,
    keeping the others), :class:`RoundPolicy` (round after round, with state),
    :class:`SolveOptions`; :class:`TypedScheduler` (Sia and the other policies of GPU types,
    round by round on the caller's jobs); the method registry :data:`METHODS`, :func:`method_names`,
    :func:`register_method`, :class:`Method`, :func:`greedy_method`; :func:`available_backends`,
    :func:`register_backend`;
    results :class:`PlacementResult`, :class:`Status`.
Pricing and checking
    :func:`evaluate`, :func:`job_slowdown`, :func:`geomean_slowdown` (the one cost model),
    :class:`CostTerm`, :func:`register_cost_term` (its registry of terms),
    :func:`binned_factors`, :func:`check` (the independent validity checker).
Errors
    :class:`PalOptError` and its subclasses; :class:`SolveInterrupted` (a ``KeyboardInterrupt``
    that stopped an exact solve, carrying the best placement found so far).

The names are loaded on first use, so ``import pal_opt`` itself is cheap.

Examples
--------
>>> import pal_opt
>>> inst = pal_opt.generate_instance(nodes=4, gpus_per_node=4, jobs=8, seed=0)
>>> greedy = pal_opt.solve(inst, "pal")
>>> exact = pal_opt.solve(inst, "ilp", backend="highs", jobs=list(greedy.placements))
>>> exact.status.value, exact.objective <= greedy.objective + 1e-9
('optimal', True)
>>> pal_opt.check(inst, exact)
[]
"""

from __future__ import annotations

import sys
import types
from importlib import import_module
from typing import TYPE_CHECKING, Any

# The public names are imported on first use (PEP 562), not here: ``import pal_opt`` and the
# ``pal-opt`` command's own start-up stay cheap (no numpy, scipy, networkx or pandas until
# needed), so that the CLI has its Ctrl-C handling in place before the heavy imports begin.
_EXPORTS: dict[str, str] = {
    "binned_factors": ".binning",
    "make_instance": ".build",
    "check": ".check",
    "evaluate": ".cost",
    "geomean_slowdown": ".cost",
    "job_slowdown": ".cost",
    "BackendError": ".errors",
    "BackendUnavailableError": ".errors",
    "InfeasibleRoundError": ".errors",
    "InfeasiblePartitionError": ".errors",
    "InstanceError": ".errors",
    "OptionError": ".errors",
    "PalOptError": ".errors",
    "SolveInterrupted": ".errors",
    "generate_instance": ".generate",
    "available_backends": ".ilp",
    "register_backend": ".ilp",
    "WarmStart": ".ilp",
    "instance_from_frames": ".io",
    "load_blox": ".io",
    "load_instance": ".io",
    "save_instance": ".io",
    "Cluster": ".model",
    "GpuState": ".model",
    "Job": ".model",
    "Pipeline": ".model",
    "Level": ".model",
    "RoundInstance": ".model",
    "RoundParams": ".model",
    "pal_locality": ".model",
    "RoundPolicy": ".scheduler",
    "TypedScheduler": ".hetero",
    "repair": ".repair",
    "plot_placement": ".placement_figure",
    "PlacementResult": ".result",
    "Status": ".result",
    "METHODS": ".solve",
    "solve": ".solve",
    "Method": ".methods",
    "greedy_method": ".methods",
    "method_names": ".methods",
    "register_method": ".methods",
    "SolveOptions": ".options",
    "CostTerm": ".cost",
    "register_cost_term": ".cost",
}

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from .binning import binned_factors
    from .build import make_instance
    from .check import check
    from .cost import CostTerm, evaluate, geomean_slowdown, job_slowdown, register_cost_term
    from .errors import (
        BackendError,
        BackendUnavailableError,
        InfeasiblePartitionError,
        InfeasibleRoundError,
        InstanceError,
        OptionError,
        PalOptError,
        SolveInterrupted,
    )
    from .generate import generate_instance
    from .hetero import TypedScheduler
    from .ilp import WarmStart, available_backends, register_backend
    from .io import instance_from_frames, load_blox, load_instance, save_instance
    from .methods import Method, greedy_method, method_names, register_method
    from .model import Cluster, GpuState, Job, Level, Pipeline, RoundInstance, RoundParams, pal_locality
    from .options import SolveOptions
    from .placement_figure import plot_placement
    from .repair import repair
    from .result import PlacementResult, Status
    from .scheduler import RoundPolicy
    from .solve import METHODS, solve

    __version__: str

__all__ = [
    "WarmStart",
    "BackendError",
    "BackendUnavailableError",
    "Cluster",
    "GpuState",
    "InfeasibleRoundError",
    "InfeasiblePartitionError",
    "InstanceError",
    "Job",
    "Pipeline",
    "Level",
    "METHODS",
    "Method",
    "CostTerm",
    "SolveOptions",
    "OptionError",
    "PalOptError",
    "PlacementResult",
    "RoundInstance",
    "RoundParams",
    "RoundPolicy",
    "SolveInterrupted",
    "Status",
    "TypedScheduler",
    "__version__",
    "available_backends",
    "binned_factors",
    "check",
    "evaluate",
    "generate_instance",
    "geomean_slowdown",
    "instance_from_frames",
    "job_slowdown",
    "load_blox",
    "load_instance",
    "make_instance",
    "greedy_method",
    "method_names",
    "register_backend",
    "register_cost_term",
    "register_method",
    "pal_locality",
    "plot_placement",
    "repair",
    "save_instance",
    "solve",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pal-opt")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pal_opt' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


#: The subpackages, which tab completion should offer too (they are imported on first use).
_SUBPACKAGES = ("adapters", "cost", "hetero", "ilp", "io", "pipeline", "policies", "simulate", "topology")


def __dir__() -> list[str]:
    """The public names and subpackages (``dir(pal_opt)``, tab completion), not the module's own
    imports."""
    return sorted({*__all__, *_SUBPACKAGES})


class _Package(types.ModuleType):
    """``pal_opt`` itself.  Three public functions share their name with the submodule that
    defines them (``solve`` in ``pal_opt/solve.py``, ``check`` in ``pal_opt/check.py``,
    ``repair`` in ``pal_opt/repair.py``).  When a
    submodule is first imported, the import system binds it as an attribute of the package,
    which would hide the function; here the function is bound instead (the submodule stays in
    ``sys.modules``, so ``from pal_opt.solve import solve`` works as before)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if (isinstance(value, types.ModuleType) and name in _EXPORTS
                and value.__name__ == f"{__name__}.{name}" and hasattr(value, name)):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
