"""One round of the simulator of GPU types: the policy decides, the jobs take their new GPUs.

The one step both loops over rounds run: the simulator's (:func:`pal_opt.hetero.simulate.simulate_sia`,
whose jobs train by the profiles between rounds) and a scheduler author's
(:class:`pal_opt.hetero.scheduler.TypedScheduler`, whose jobs report what they measured).  Given
the active jobs (submitted, not finished, not unplaceable; in workload order) at time ``now``:

1. the policy allocates GPU positions for the next round (``policy.allocate(active, now)``, any
   entry of :data:`~pal_opt.hetero.methods.HETERO_POLICIES`);
2. every job whose GPUs changed takes them (:meth:`~pal_opt.hetero.simjob.SimJob.reallocate`,
   SIA_MODEL.md D: a new type or per-node shape restarts it, the same shape on other GPUs costs
   nothing, no GPUs suspend it; the slowest variability factor of its class among its GPUs
   divides its speed);
3. the jobs the policy found unplaceable while allocating (given no GPUs) are returned with
   their reasons.

GPUs out of service (``out_of_service``, a bool per position: failed or drained GPUs, from
:meth:`pal_opt.hetero.scheduler.TypedScheduler.fail`) go to the policy as its
``out_of_service`` attribute; every built-in policy leaves them out (a registered policy without
the attribute is refused while any GPU is out of service), and an allocation on one is an error.
A job that held one when it left service is the caller's to suspend
(:meth:`~pal_opt.hetero.simjob.SimJob.lose_gpus`) and the policy's to forget
(:func:`forget_allocation`) before the next round step.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import BackendError, OptionError
from ..options import check_finite, number_array, require_items, require_type
from .gpus import Layout, Variability
from .simjob import SimJob
from .typeblind import gang_state_unchecked

__all__ = ["apply_allocations", "forget_allocation", "round_step", "one_blas_thread"]


def forget_allocation(policy: Any, index: int) -> None:
    """Make ``policy`` forget where job ``index`` ran: it lost its GPUs to a failure and holds
    none, so it comes back as a job without a configuration (Sia's re-allocation factor then
    prices no configuration as "staying", SIA_MODEL.md B.5) or GPUs to keep."""
    for name in ("previous", "holding"):
        state = getattr(policy, name, None)
        if isinstance(state, dict):
            state.pop(index, None)


def apply_allocations(
    layout: Layout, variability: Variability, jobs: Sequence[SimJob], allocations: Mapping[int, Any], now: float
) -> None:
    """Apply a round's allocations (GPU positions per job index) to the jobs (module docstring):
    the type and shape decide restarts, the GPUs the variability slowdown."""
    for job in jobs:
        new = allocations[job.index]
        if new == job.allocation:
            continue
        t, shape = gang_state_unchecked(layout, job.app, new)
        job.reallocate(t, shape, now, variability.slowdown(job.app.name, new))
        job.allocation = new


@runtime_checkable
class AllocatingPolicy(Protocol):
    """What :func:`round_step` asks of a policy (:func:`~pal_opt.hetero.simulate.make_policy`'s):
    ``allocate(active jobs, now)`` -> {job index: GPU positions}, and ``unplaceable``."""

    unplaceable: Mapping[int, str]

    def allocate(self, active: Sequence[SimJob], now: float) -> Mapping[int, Sequence[int]]: ...


def round_step(policy: Any, layout: Layout, variability: Variability, active: Sequence[SimJob], now: float,
               out_of_service: np.ndarray | None = None) -> dict[int, str]:
    """Steps 1-3 of the module docstring for the active jobs at ``now``; returns {job index: why
    it can never run} for the active jobs the policy found unplaceable (they hold no GPUs).

    Raises
    ------
    OptionError
        GPUs out of service for a policy that does not take them.
    BackendError
        The policy allocated a GPU out of service.
    """
    require_type(policy, AllocatingPolicy, "policy", " (make_policy(cluster, cfg))")
    require_type(layout, Layout, "layout", " (Layout(cluster))")  # read only by jobs whose GPUs change
    require_type(variability, Variability, "variability", " (parse_variability or draw_variability)")
    active = require_items(active, "active", "a list of SimJobs")
    check_finite(now, "now")  # the jobs' restart and start times: None was taken with no job to move
    if out_of_service is not None:
        out_of_service = number_array(out_of_service, "out_of_service", "b")
    return round_step_unchecked(policy, layout, variability, active, now, out_of_service)


def round_step_unchecked(policy: Any, layout: Layout, variability: Variability, active: Sequence[SimJob], now: float,
                         out_of_service: np.ndarray | None = None) -> dict[int, str]:
    """:func:`round_step` without the checks of ``policy`` and ``active``, for the simulator's and
    :class:`~pal_opt.hetero.scheduler.TypedScheduler`'s loops, whose policy and jobs are their own
    (not in ``__all__``)."""
    oos = None if out_of_service is None or not np.any(out_of_service) else np.asarray(out_of_service, dtype=bool)
    if hasattr(policy, "out_of_service"):
        policy.out_of_service = oos
    elif oos is not None:
        raise OptionError(f"the policy {type(policy).__name__} does not take GPUs out of service "
                          "(it has no out_of_service attribute)")
    if hasattr(policy, "retain"):  # the jobs' cached state, of the active ones only
        policy.retain({j.index for j in active})
    allocations = policy.allocate(active, now)
    if oos is not None:
        bad = [(i, g) for i, gpus in allocations.items() for g in gpus if oos[g]]
        if bad:
            raise BackendError(f"the policy gave job {bad[0][0]} GPU {bad[0][1]}, which is out of service")
    apply_allocations(layout, variability, active, allocations, now)
    return {j.index: policy.unplaceable[j.index] for j in active if j.index in policy.unplaceable}


@functools.cache
def _blas_controller() -> Any:
    """One :class:`threadpoolctl.ThreadpoolController` for the process (finding the BLAS
    libraries is what costs), made once scipy's BLAS is loaded."""
    import scipy.interpolate
    import scipy.optimize  # noqa: F401 - load scipy's BLAS before limiting its threads
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class _OneBlasThread:
    """The process-wide BLAS limit of :func:`one_blas_thread`, counted: BLAS's thread count is
    one setting for the whole process, so overlapping contexts (schedulers in several threads)
    share one limit, set by the first to enter and restored by the last to leave (each context
    restoring its own would end the limit under the others)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.limiter: Any = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.depth == 0:
                self.limiter = _blas_controller().limit(limits=1, user_api="blas")
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    self.limiter.restore_original_limits()
                    self.limiter = None


_ONE_BLAS_THREAD = _OneBlasThread()


def one_blas_thread() -> Any:
    """A context in which BLAS runs one thread: the jobs' model fits are tiny L-BFGS-B runs, and
    more threads only spin (15x slower on 2 cores).  The limit is process-wide (BLAS has one
    thread count), held while any thread is inside such a context."""
    return _ONE_BLAS_THREAD()
