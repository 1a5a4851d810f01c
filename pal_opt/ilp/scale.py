"""Large rounds: a proven gap without the round program.

Above :data:`LARGE_ROUND_GPUS` free GPUs the round program's flows make it slow to build (8 s at
8,192 GPUs, minutes at 32,768) and large (gigabytes), while its LP bound is within a tenth of a
percent of the flow-free relaxation's (:mod:`pal_opt.ilp.relaxation`) and the packing greedy
is within about half a percent of both.  :func:`pal_opt.ilp.solve.solve_ilp` therefore first

1. places the admitted jobs with PAL's greedy and the packing greedy
   (:func:`~pal_opt.ilp.packing.fast_packing`, the same placement as the program-based one);
2. solves the flow-free relaxation's LP (:func:`flow_free_bound`) for a valid bound, with the
   chosen backend's own LP solver (HiGHS's simplex, CLP inside the CBC binary, or GLOP for
   CP-SAT) unless it is slow at that size, then with HiGHS when installed: GLOP takes 1.5-2.5 s
   at 8,192 GPUs (HiGHS 0.8 s, CLP 1.0 s) but 95 s at 65,536 (HiGHS 4.7 s, CLP 7.8 s), so CP-SAT
   hands LPs above :attr:`~pal_opt.ilp.backends.cpsat.CpSatBackend.relaxation_max_entries` to
   HiGHS (``info["relaxation"]`` names the solver);
3. returns the cheaper start placement with that bound when the gap target is met, or when a
   time limit leaves no room to build the program; otherwise it goes on with the program,
   keeping the bound.

Rounds at or below the threshold, with GPU types, on racked clusters, with running jobs whose
moves are charged, or given a start placement take the program's path unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, OptionError
from ..model import RoundInstance
from .backends import SolveOptions, get_backend
from .backends.base import Backend
from .packing import fast_packing_applies
from .relaxation import applies, build_relaxation

__all__ = ["LARGE_ROUND_GPUS", "COUPLED_MAX_GPUS", "is_large_round", "flow_free_bound"]

#: Free GPUs above which a round takes the flow-free path first.
LARGE_ROUND_GPUS = 4096
#: Free GPUs up to which the relaxation couples the profiles by GPU class on the cluster (its LP
#: takes 1.2 s at 8,192 GPUs and about a minute at 32,768; uncoupled 4–5 s at 65,536).
COUPLED_MAX_GPUS = 16384


def is_large_round(instance: RoundInstance, admitted: Sequence[int], threshold: int = LARGE_ROUND_GPUS) -> bool:
    """Whether the round takes the flow-free path: more than ``threshold`` free GPUs, a flat
    cluster without GPU types, and no running admitted job whose move is charged."""
    return (instance.free_gpus > threshold and fast_packing_applies(instance)
            and applies(instance, admitted))


def _relaxation_solver(backend: type[Backend], entries: int) -> Backend | None:
    """Who solves a flow-free LP of ``entries`` matrix entries and columns: the chosen backend's
    own LP solver when it solves relaxations of that size quickly
    (:attr:`~pal_opt.ilp.backends.base.Backend.relaxation_max_entries`), else HiGHS when
    installed, else the chosen backend's (slow, but a bound), else None."""
    own = backend.supports_relaxation
    if own and (backend.relaxation_max_entries is None or entries <= backend.relaxation_max_entries):
        return backend()
    try:
        cls = get_backend("highs")
    except (BackendUnavailableError, OptionError):  # HiGHS not installed
        cls = None
    if cls is not None and cls.supports_relaxation:
        return cls()
    return backend() if own else None


def flow_free_bound(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                    backend: type[Backend], options: SolveOptions) -> tuple[float | None, dict[str, Any]]:
    """The flow-free relaxation's LP optimum, a valid lower bound on the round's cost (None when
    no installed backend solves LPs or the LP did not finish in time), and what to report.

    Raises
    ------
    TimeLimitReached
        When the deadline in ``options`` leaves no time to start the LP.
    """
    if not backend.supports_relaxation and _relaxation_solver(backend, 0) is None:
        return None, {"relaxation": "flow-free: no backend that solves LP relaxations"}
    t0 = time.perf_counter()
    relax = build_relaxation(instance, admitted, factors, couple=instance.free_gpus <= COUPLED_MAX_GPUS)
    if relax is None:  # pragma: no cover - is_large_round checked that it applies
        return None, {}
    t1 = time.perf_counter()
    solver = _relaxation_solver(backend, relax.program.A.nnz + relax.program.num_vars)
    assert solver is not None  # checked above
    bound = solver.relaxation_bound(relax.program, options)
    info: dict[str, Any] = {"relaxation": f"flow-free ({solver.name})", **relax.summary(),
                            "relaxation_build_seconds": t1 - t0, "relaxation_seconds": time.perf_counter() - t1}
    return bound, info
