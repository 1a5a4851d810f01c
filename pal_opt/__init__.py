"""pal-opt: variability- and locality-aware placement of ML training jobs on GPU clusters.

The public API, re-exported here:

Rounds
    :class:`Cluster`, :class:`Job`, :class:`RoundParams`, :class:`RoundInstance`,
    :class:`GpuState`, :class:`Level`, :func:`pal_locality`; builders :func:`make_instance`
    (networkx graph + job list), :func:`instance_from_frames` (pandas, Blox shape),
    :func:`generate_instance` (synthetic); files :func:`load_instance`, :func:`save_instance`,
    :func:`load_blox`.
Placing
    :func:`solve` (one round, any method), :class:`RoundPolicy` (round after round, with state),
    :data:`METHODS`, :func:`available_backends`; results :class:`PlacementResult`,
    :class:`Status`.
Pricing and checking
    :func:`evaluate`, :func:`job_slowdown`, :func:`geomean_slowdown` (the one cost model),
    :func:`binned_factors`, :func:`check` (the independent validity checker).
Errors
    :class:`PalOptError` and its subclasses.

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

from importlib.metadata import PackageNotFoundError, version

from .binning import binned_factors
from .build import make_instance
from .check import check
from .cost import evaluate, geomean_slowdown, job_slowdown
from .errors import (
    BackendError,
    BackendUnavailableError,
    InfeasibleRoundError,
    InstanceError,
    OptionError,
    PalOptError,
)
from .generate import generate_instance
from .ilp import available_backends
from .io import instance_from_frames, load_blox, load_instance, save_instance
from .model import Cluster, GpuState, Job, Level, RoundInstance, RoundParams, pal_locality
from .policy import RoundPolicy
from .result import PlacementResult, Status
from .solve import METHODS, solve

try:
    __version__ = version("pal-opt")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "Cluster",
    "GpuState",
    "InfeasibleRoundError",
    "InstanceError",
    "Job",
    "Level",
    "METHODS",
    "OptionError",
    "PalOptError",
    "PlacementResult",
    "RoundInstance",
    "RoundParams",
    "RoundPolicy",
    "Status",
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
    "pal_locality",
    "save_instance",
    "solve",
]
