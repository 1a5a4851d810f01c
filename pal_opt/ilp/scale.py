"""Large rounds: a proven gap without the round program.

Above :data:`LARGE_ROUND_GPUS` free GPUs the round program's flows make it slow to build (8 s at
8,192 GPUs, minutes at 32,768) and large (gigabytes), while its LP bound is within a tenth of a
percent of the flow-free relaxation's (:mod:`pal_opt.ilp.relaxation`) and the packing greedy
is within about half a percent of both.  :func:`pal_opt.ilp.solve.solve_ilp` therefore first

1. places the admitted jobs with PAL's greedy, then with the packing greedy
   (:func:`~pal_opt.ilp.packing.fast_packing`, the same placement as the program-based one) in a
   helper thread (:class:`BackgroundPacking`) while
2. the calling thread solves the flow-free relaxation's LP (:func:`flow_free_bound`) for a
   valid bound (the LP solver releases the GIL, so on two cores the two overlap: at 65,536 GPUs
   the packing takes about 2 s and the LP about 2.5 s), with the
   chosen backend's own LP solver (HiGHS's simplex, CLP inside the CBC binary, or GLOP for
   CP-SAT) unless it is slow at that size, then with HiGHS when installed: GLOP takes 1.5-2.5 s
   at 8,192 GPUs (HiGHS 0.8 s, CLP 1.0 s) but 95 s at 65,536 (HiGHS 4.7 s, CLP 7.8 s), so CP-SAT
   hands LPs above :attr:`~pal_opt.ilp.backends.cpsat.CpSatBackend.relaxation_max_entries` to
   HiGHS (``info["relaxation"]`` names the solver);
3. returns the cheaper start placement with that bound when the gap target is met, or when a
   time limit leaves no room to build the program; otherwise it goes on with the program,
   keeping the bound.

Under a deadline each part gives up on its own: the packing before its next job
(:class:`~pal_opt.errors.TimeLimitReached`, PAL's placement stays the answer), the relaxation
before it is built when its estimated build time (:data:`RELAXATION_SECONDS_PER_GPU`) does not
fit, and its LP at the deadline it is given (no bound, the start placement stays valid).

Rounds at or below the threshold, with GPU types, on racked clusters, with running jobs whose
moves are charged, or given a start placement take the program's path unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..deadline import Deadline
from ..errors import BackendUnavailableError, OptionError, TimeLimitReached
from ..model import JobId, RoundInstance
from .backends import SolveOptions, get_backend
from .backends.base import Backend
from .packing import fast_packing, fast_packing_applies
from .relaxation import applies, build_relaxation
from .warm import WarmStart

__all__ = ["LARGE_ROUND_GPUS", "COUPLED_MAX_GPUS", "RELAXATION_SECONDS_PER_GPU", "is_large_round", "flow_free_bound",
           "relaxation_solver",
           "BackgroundPacking"]

#: Free GPUs above which a round takes the flow-free path first.
LARGE_ROUND_GPUS = 4096
#: Free GPUs up to which the relaxation couples the profiles by GPU class on the cluster (its LP
#: takes 1.2 s at 8,192 GPUs and about a minute at 32,768; uncoupled 4–5 s at 65,536).
COUPLED_MAX_GPUS = 16384
#: Under a deadline, seconds per free GPU that building the relaxation may take (measured 3-4 µs
#: at 8,192-65,536 GPUs, under 11 µs on a loaded machine): the build is skipped when it does
#: not fit.
RELAXATION_SECONDS_PER_GPU = 1e-5


def is_large_round(instance: RoundInstance, admitted: Sequence[int], threshold: int = LARGE_ROUND_GPUS) -> bool:
    """Whether the round takes the flow-free path: more than ``threshold`` free GPUs, a flat
    cluster without GPU types, and no running admitted job whose move is charged."""
    return (instance.free_gpus > threshold and fast_packing_applies(instance)
            and applies(instance, admitted))


def relaxation_solver(backend: type[Backend], entries: int, *, prefer_highs: bool = False) -> Backend | None:
    """Who solves an LP relaxation of ``entries`` matrix entries and columns: the chosen
    backend's own LP solver when it solves relaxations of that size quickly
    (:attr:`~pal_opt.ilp.backends.base.Backend.relaxation_max_entries`) and ``prefer_highs`` is
    not set, else HiGHS when installed, else the chosen backend's (slow, but a bound), else None.
    :func:`pal_opt.ilp.solve.solve_ilp` sets ``prefer_highs`` for round programs whose LP GLOP and
    CLP solve slowly (:data:`pal_opt.ilp.solve.PROGRAM_LP_OWN_MAX_ENTRIES`)."""
    own = backend.supports_relaxation
    fast = backend.relaxation_max_entries is None or entries <= backend.relaxation_max_entries
    if own and fast and not prefer_highs:
        return backend()
    try:
        cls = get_backend("highs")
    except (BackendUnavailableError, OptionError):  # HiGHS not installed
        cls = None
    if cls is not None and cls.supports_relaxation:
        return cls()
    return backend() if own else None


def flow_free_bound(instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                    backend: type[Backend], options: SolveOptions, warm: WarmStart | None = None,
                    ) -> tuple[float | None, dict[str, Any]]:
    """The flow-free relaxation's LP optimum, a valid lower bound on the round's cost (None when
    no installed backend solves LPs or the LP did not finish in time), and what to report.
    With ``warm`` (:mod:`pal_opt.ilp.warm`) the relaxation keeps the last round's job types and
    the LP starts from the last one's optimal basis when its structure is the same; the types
    are recorded in ``warm``.

    Raises
    ------
    TimeLimitReached
        When the deadline in ``options`` leaves no time to start the LP.
    """
    if not backend.supports_relaxation and relaxation_solver(backend, 0) is None:
        return None, {"relaxation": "flow-free: no backend that solves LP relaxations"}
    if options.deadline is not None:
        Deadline(options.deadline).check("building the flow-free relaxation",
                                         need=RELAXATION_SECONDS_PER_GPU * instance.free_gpus)
    t0 = time.perf_counter()
    couple = instance.free_gpus <= COUPLED_MAX_GPUS
    relax = warm.relaxation(instance, admitted, couple) if warm is not None else None
    reused = relax is not None
    if relax is None:
        relax = build_relaxation(instance, admitted, factors, couple=couple,
                                 also=warm.types if warm is not None else ())
    if relax is None:  # pragma: no cover - is_large_round checked that it applies
        return None, {}
    if warm is not None and not reused:
        warm.keep_relaxation(instance, relax, couple)
    t1 = time.perf_counter()
    solver = relaxation_solver(backend, relax.program.A.nnz + relax.program.num_vars)
    assert solver is not None  # checked above
    bound = solver.relaxation_bound(relax.program, options, warm.lp if warm is not None else None)
    info: dict[str, Any] = {"relaxation": f"flow-free ({solver.name})", **relax.summary(),
                            "relaxation_build_seconds": t1 - t0, "relaxation_seconds": time.perf_counter() - t1}
    if warm is not None:
        warm.types = relax.used_types()  # this round's: the set must not grow without bound
        info["relaxation_start"] = warm.lp.last
        info["relaxation_reused"] = reused
    return bound, info


class BackgroundPacking:
    """:func:`~pal_opt.ilp.packing.fast_packing` in a helper thread, started at once, while the
    calling thread does other work (the flow-free LP).  It gives up at ``deadline`` or when
    :meth:`cancel` is called (a Ctrl-C in the caller).

    Examples
    --------
    >>> from pal_opt.generate import generate_instance
    >>> from pal_opt.binning import binned_factors
    >>> inst = generate_instance(4, 8, 6, seed=0)
    >>> job = BackgroundPacking(inst, [0, 1, 2], binned_factors(inst.cluster), Deadline.after(60.0))
    >>> placement, stopped = job.wait()
    >>> sorted(placement) == sorted(inst.jobs[i].id for i in (0, 1, 2)), stopped
    (True, None)
    """

    def __init__(self, instance: RoundInstance, admitted: Sequence[int], factors: Mapping[str, np.ndarray],
                 deadline: Deadline):
        self.deadline = deadline
        self.seconds = 0.0
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._box: dict[str, Any] = {}
        args = (instance, list(admitted), factors)
        self._thread = threading.Thread(target=self._work, args=args, name="pal-opt packing", daemon=True)
        self._thread.start()

    def _work(self, instance: RoundInstance, admitted: list[int], factors: Mapping[str, np.ndarray]) -> None:
        t0 = time.perf_counter()
        try:
            self._box["placement"] = fast_packing(instance, admitted, factors, give_up=self._give_up)
        except TimeLimitReached as exc:
            self._box["stopped"] = exc.stage
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self._box["error"] = exc
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()

    def _give_up(self) -> bool:
        return self._cancelled.is_set() or self.deadline.passed()

    def cancel(self) -> None:
        """Ask the packing to stop before its next job (it does not wait)."""
        self._cancelled.set()

    def wait(self) -> tuple[dict[JobId, tuple[int, ...]] | None, str | None]:
        """The packing placement (None if it gave up or found no GPUs for a job) and the stage the
        deadline stopped (None if it finished); waits until the thread ends, which it does by the
        deadline (before its next job)."""
        self._done.wait()
        if "error" in self._box:
            raise self._box["error"]
        return self._box.get("placement"), self._box.get("stopped")
