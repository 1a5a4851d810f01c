"""The Sia policy: every round, a configuration per active job (round program) and node ids (placer).

Per round (SIA_MODEL.md B, C; ``formulations/sia_round.md``):

1. each adaptive (or strong-scaling) job's goodput row over the configurations: its replica
   cap, raw goodput from its learned model per type (projected from the first type it has a
   model on, for the others), normalised by its least useful configuration
   (:mod:`pal_opt.hetero.configs`); memoised on what it depends on;
2. the re-allocation factor on every entry but last round's configuration, the fairness power,
   two-decimal rounding and clip: the cost matrix;
3. rigid jobs: one cost per type from their measured throughput at the requested count;
4. the round program (:mod:`pal_opt.hetero.round`), jobs still restarting pinned to their
   configuration;
5. the placer per type (:mod:`pal_opt.hetero.placer`), rigid jobs first, then the others, each
   in workload order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..errors import OptionError, counted
from ..options import (
    check_flag,
    check_time_limit,
    is_finite_number,
    require_items,
    require_type,
    shown_number,
)
from ..simulate.fields import SIA_PARAMS_NAME, renamed_argument, warn_renamed
from .configs import (
    CONFIGS_HINT,
    FLOOR,
    ConfigSet,
    GpuType,
    enumerate_configs,
    fairness_costs_unchecked,
    max_replicas,
    max_replicas_unchecked,
    normalise_row_unchecked,
    reallocation_factor_unchecked,
    throughput_ratio_unchecked,
    valid_configs,
    valid_configs_unchecked,
)
from .goodput import JobKind, initial_batch_unchecked, optimize_goodput_unchecked
from .gpus import Layout
from .perfmodel import PerfParams
from .placer import fit_shape_unchecked, place_type_unchecked, placement_shape_unchecked
from .profiles import Application
from .round import LAMBDA_N, RoundDecision, RoundInput, solve_round
from .simjob import SimJob, shape_runs, true_step_time

__all__ = [
    "SiaParams",
    "SiaPolicy",
    "RoundStats",
    "RowRequest",
    "goodput_rows",
    "rigid_throughputs",
    "rigid_problem",
    "configuration_problem",
]

#: An allocation: (type index or None, node ids, one per GPU).
Allocation = tuple[int | None, tuple[int, ...]]


@dataclass(frozen=True)
class SiaParams:
    """The Sia policy's parameters (the artifact's Table 3 settings by default).

    Attributes
    ----------
    p
        Fairness power (negative: minimise Σ A).
    lambda_n
        No-allocation penalty.
    lambda_a
        Re-allocation penalty: read but unused, as in the artifact (restarts are discouraged
        through the re-allocation factor only).
    project_throughputs
        Project a job's goodput to types it has not run on (implies ``share_max_replicas``).
    share_max_replicas
        Every type gets the job's largest replica cap.
    backend
        Solver backend of the round program (None: the first available).
    time_limit
        Seconds per round program (None: until proven optimal); under ``ilp`` the placement
        program after Sia's is given at most 10 s, or ``time_limit`` if smaller
        (:data:`~pal_opt.hetero.ilptypes.STAGE2_TIME_LIMIT`).
    """

    p: float = -0.5
    lambda_n: float = LAMBDA_N
    lambda_a: float = 0.01
    project_throughputs: bool = True
    share_max_replicas: bool = True
    backend: str | None = "highs"
    time_limit: float | None = None

    def __post_init__(self) -> None:
        for name in ("p", "lambda_n", "lambda_a"):
            v = getattr(self, name)
            if not isinstance(v, int | float | np.integer | np.floating) or not is_finite_number(v):  # 10**400 too
                raise OptionError(f"{name} must be a finite number, got {shown_number(v)}")
        if self.p >= 0:
            raise OptionError(f"the Sia policy here needs a negative fairness power p, got {self.p}")
        if not self.lambda_n > 1:
            raise OptionError(f"lambda_n must be finite and > 1 (a job must be worth allocating), got {self.lambda_n}")
        for name in ("project_throughputs", "share_max_replicas"):
            check_flag(getattr(self, name), name)
        if self.backend is not None and not isinstance(self.backend, str):
            raise OptionError(f"backend must be a backend name or None, got {self.backend!r}")
        check_time_limit(self.time_limit)


@dataclass
class RoundStats:
    """Totals over the rounds a policy solved."""

    rounds: int = 0
    solve_seconds: float = 0.0
    max_solve_seconds: float = 0.0
    not_optimal: int = 0

    def add(self, decision: RoundDecision) -> None:
        self.rounds += 1
        self.solve_seconds += decision.seconds
        self.max_solve_seconds = max(self.max_solve_seconds, decision.seconds)
        self.not_optimal += decision.status != "optimal"


@dataclass(frozen=True)
class RowRequest:
    """What a job's goodput row depends on (a cache key): its application and kind, its request,
    its learned models per type, its gradient statistics and the largest GPU count it has run with
    per type."""

    app: Application
    kind: JobKind
    requested_replicas: int
    requested_batch: int
    params: tuple[PerfParams | None, ...]
    grad: tuple[float, float] | None
    profiled: tuple[int, ...]


@functools.lru_cache(maxsize=1 << 16)
def _theta(params: PerfParams) -> tuple[float, ...]:
    """A model's parameters in field order (``dataclasses.astuple`` is slow)."""
    return tuple(getattr(params, f.name) for f in fields(params))


def _row_columns(cs: ConfigSet, req: RowRequest, project: bool, share: bool) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """The columns of one job's raw row to score: (config, nodes, GPUs, model, atomic range, ratio)
    per valid configuration of a known or projected type, and which types are known (B.2, B.3)."""
    names = [t.name for t in cs.types]
    caps = max_replicas_unchecked(
        req.app, req.kind, req.requested_replicas, dict(zip(names, req.profiled, strict=True)), names, share=share
    )
    valid = valid_configs_unchecked(cs, caps)
    has = [th is not None and req.grad is not None for th in req.params]
    source = next((i for i, h in enumerate(has) if h), None)
    known = np.zeros(len(cs.types), dtype=bool)
    cols: list[tuple[Any, ...]] = []
    for i, t in enumerate(cs.types):
        sel = np.flatnonzero(cs.of_type(i) & valid)
        d = i if has[i] else (source if project else None)
        if sel.size == 0 or d is None:
            continue
        prof = req.app.profile(cs.types[d].name)
        ratio = 1.0 if d == i else throughput_ratio_unchecked(req.app, t.name, cs.types[d].name)
        g_d = cs.types[d].gpus_per_node
        for k in sel.tolist():
            n = int(cs.num_gpus[k])
            m = int(cs.num_nodes[k]) if d == i else -(-n // g_d)
            cols.append((k, m, n, req.params[d], prof.min_local_bsz, prof.max_local_bsz, ratio))
        known[i] = True
    return cols, known


def goodput_rows(cs: ConfigSet, requests: Sequence[RowRequest], *, project: bool = True, share: bool = True) -> list[np.ndarray]:
    """Normalised goodput rows (float32, one per request; B.2-B.4), every configuration of every
    job scored in one vectorised :func:`~pal_opt.hetero.goodput.optimize_goodput` call (the
    scheduler's candidate batches end at the requested batch; strong-scaling jobs use it only)."""
    require_type(cs, ConfigSet, "cs", CONFIGS_HINT)
    requests = require_items(requests, "requests", "a list of RowRequests", of=RowRequest)
    require_type(project, bool, "project")
    require_type(share, bool, "share")
    return _goodput_rows(cs, requests, project, share)


def _goodput_rows(cs: ConfigSet, requests: Sequence[RowRequest], project: bool, share: bool) -> list[np.ndarray]:
    """:func:`goodput_rows` without the checks of its arguments (the policy's own requests)."""
    per_job = [_row_columns(cs, r, project, share) for r in requests]
    owner = [j for j, (cols, _) in enumerate(per_job) for _ in cols]
    flat = [c for cols, _ in per_job for c in cols]
    raw = np.full((len(requests), len(cs)), FLOOR)
    if flat:
        k, m, n, models, lo, hi, ratio = zip(*flat, strict=True)
        theta = np.array([_theta(th) for th in models], dtype=np.float64).T
        req = [requests[j] for j in owner]
        grad = np.array([r.grad for r in req], dtype=np.float64).T
        good, _, _ = optimize_goodput_unchecked(
            PerfParams(*theta), (grad[0], grad[1]),
            np.array([r.app.init_batch_size for r in req]), np.array(m), np.array(n),
            np.array([r.requested_batch for r in req]), (np.array(lo), np.array(hi)),
            tune_batch=np.array([r.kind.tunes_batch for r in req]),
        )
        raw[np.array(owner), np.array(k)] = good * np.array(ratio)
    return [normalise_row_unchecked(cs, raw[j], known) for j, (_, known) in enumerate(per_job)]


@functools.lru_cache(maxsize=1 << 12)
def rigid_throughputs(app: Application, types: tuple[GpuType, ...], replicas: int, batch: int) -> np.ndarray:
    """Calibrated throughput (samples/s) of a rigid job at its requested count and batch on each
    type: whole nodes plus the rest on one more (NaN where the profile has no value)."""
    out = np.full(len(types), np.nan)
    for i, t in enumerate(types):
        g = t.gpus_per_node
        shape = (replicas,) if replicas <= g else (g,) * (replicas // g) + ((replicas % g,) if replicas % g else ())
        prof = app.profile(t.name)
        if replicas > t.total_gpus or prof.placement_limit(shape) is None:
            continue
        choice = initial_batch_unchecked(app, prof, shape, batch)
        b = min(choice.atomic_bsz, int(app.max_batch_size / (replicas * (choice.accum_steps + 1))))
        step, sync = true_step_time(prof, shape, b)
        if math.isfinite(step) and step > 0:
            out[i] = batch / (step + (step - sync) * choice.accum_steps) * app.settings.calibration
    return out


def rigid_problem(app: Application, types: Sequence[GpuType], replicas: int, batch: int) -> str | None:
    """Why a rigid job (its requested count and batch on one type) can run on no type of the
    cluster, or None if :func:`rigid_throughputs` has a value on some type."""
    if np.isfinite(rigid_throughputs(app, tuple(types), replicas, batch)).any():
        return None
    largest = max(types, key=lambda t: t.total_gpus)  # the first of equals
    if replicas > largest.total_gpus:
        return f"a rigid job needs {counted(replicas, 'GPU')} of one type; the largest type, {largest.name}, has {largest.total_gpus}"
    return (f"a rigid job of {counted(replicas, 'GPU')} at batch {batch}: {app.name} has no measured step time for it on any "
            "type that has that many GPUs")


def configuration_problem(
    app: Application, kind: JobKind, replicas: int, batch: int, cs: ConfigSet, *, share: bool = True
) -> str | None:
    """Why an adaptive or strong-scaling job can never run on the cluster, or None.

    It may use the configurations up to its GPU cap on a job that has run nowhere yet
    (:func:`~pal_opt.hetero.configs.max_replicas`: 1 GPU for an adaptive job, whose cap then
    grows with what it has run; the requested count for a strong-scaling one).  It can run if one
    of them has a measured step time at the batch the job would choose there
    (:func:`~pal_opt.hetero.simjob.shape_runs`).
    """
    caps = max_replicas(app, kind, replicas, {}, [t.name for t in cs.types], share=share)
    valid = np.flatnonzero(valid_configs(cs, caps)).tolist()
    if not valid:
        return f"no configuration is valid for a job of kind {kind.value}: its GPU cap is 0 on every type"
    for k in valid:
        c = cs.configs[k]
        if shape_runs(app, c.gpu_type, c.placement(), kind, batch):
            return None
    return (f"no configuration a job of kind {kind.value} may use (up to {max(caps.values())} GPUs of one type) "
            f"has a measured step time for {app.name} at its batch")


class SiaPolicy:
    """The Sia policy over a cluster (module docstring); keeps last round's configurations.

    Parameters
    ----------
    cluster
        GPU types in cluster order.
    sia_params
        :class:`SiaParams` (default ``SiaParams()``), as ``SimConfig.sia_params``.
    on_round
        Called with every round's program input and decision (to record or inspect them).

    Notes
    -----
    Deprecated (still working, with a :class:`DeprecationWarning` naming the new name, for this
    release): ``params=`` (give ``sia_params=``) and reading ``policy.params`` (read
    ``policy.sia_params``).
    """

    def __init__(
        self,
        cluster: Sequence[GpuType],
        sia_params: SiaParams | None = None,
        on_round: Callable[[RoundInput, RoundDecision], None] | None = None,
        *,
        params: SiaParams | None = None,
    ) -> None:
        self._init_sia_params(sia_params, params, stacklevel=5)
        if on_round is not None:
            require_type(on_round, Callable, "on_round", what="a callable (RoundInput, RoundDecision) -> None")
        self.on_round = on_round
        self.configs = enumerate_configs(cluster)
        self.layout = Layout(tuple(self.configs.types))
        self.previous: dict[int, int] = {}  # job index -> configuration (adaptive) or type (rigid)
        # job index -> (request, row); by hand, not lru_cache: dropped when the job leaves (retain),
        # recomputed when its request changes, computed for many jobs in one call (goodput_rows)
        self._rows: dict[int, tuple[RowRequest, np.ndarray]] = {}
        self.stats = RoundStats()
        #: jobs found unplaceable while allocating (never: :meth:`unplaceable_reason` decides up front)
        self.unplaceable: dict[int, str] = {}
        #: GPUs out of service (failed or drained; a bool per position, or None): the round program
        #: counts only the GPUs in service and the placer takes none of the others
        self.out_of_service: np.ndarray | None = None

    def _init_sia_params(self, sia_params: Any, params: Any, stacklevel: int) -> None:
        """:attr:`sia_params` from the constructor's ``sia_params`` or its deprecated ``params``
        (whose warning points ``stacklevel`` frames up: at the constructor's caller)."""
        value, name = renamed_argument(params, sia_params, "params", "sia_params", f"pal_opt.hetero.{type(self).__name__}",
                                       stacklevel=stacklevel, why=SIA_PARAMS_NAME)
        if value is not None:
            require_type(value, SiaParams, name)
        #: Sia's parameters (:class:`SiaParams`)
        self.sia_params: SiaParams = value or SiaParams()

    @property
    def params(self) -> SiaParams:
        """Deprecated: Sia's parameters, :attr:`sia_params`."""
        where = f"pal_opt.hetero.{type(self).__name__}"
        warn_renamed(f"{type(self).__name__}.params", f"{type(self).__name__}.sia_params", where, stacklevel=3,
                     why=SIA_PARAMS_NAME)
        return self.sia_params

    @property
    def types(self) -> tuple[GpuType, ...]:
        return self.configs.types

    def unplaceable_reason(self, job: SimJob) -> str | None:
        """Why no configuration the job's kind allows can ever hold it on this cluster
        (:func:`rigid_problem`, :func:`configuration_problem`), or None."""
        if job.kind is JobKind.RIGID:
            return rigid_problem(job.app, self.types, job.spec.num_replicas, job.spec.batch_size)
        p = self.sia_params
        return configuration_problem(job.app, job.kind, job.spec.num_replicas, job.spec.batch_size, self.configs,
                                     share=p.share_max_replicas or p.project_throughputs)

    def _factor(self, job: SimJob, now: float) -> float:
        age = now - job.submit_time
        penalty = job.app.settings.restart_penalty
        f = reallocation_factor_unchecked(age, job.num_restarts or 0, penalty)
        if job.kind is JobKind.RIGID:
            f = 1.0 if job.attained_service < penalty else max(age - (job.num_restarts or 0) * penalty, 0) / (age + penalty)
        return float(f)

    def _request(self, job: SimJob) -> RowRequest:
        return RowRequest(
            job.app, job.kind, job.spec.num_replicas, job.spec.batch_size, tuple(job.params), job.grad,
            tuple(job.max_profiled(t) for t in range(len(self.types))),
        )

    def retain(self, live: Collection[int]) -> None:
        """Forget the goodput rows kept for jobs whose index is not in ``live`` (finished or
        removed): a scheduler that runs for weeks must not keep a row per job it ever saw."""
        if any(i not in live for i in self._rows):
            self._rows = {i: row for i, row in self._rows.items() if i in live}

    def goodput_matrix(self, jobs: Sequence[SimJob]) -> np.ndarray:
        """The normalised goodput rows of the adaptive jobs (float32), recomputed only for jobs
        whose :class:`RowRequest` changed since they were last scored."""
        p = self.sia_params
        reqs = [self._request(j) for j in jobs]
        todo = [i for i, (j, r) in enumerate(zip(jobs, reqs, strict=True)) if self._rows.get(j.index, (None,))[0] != r]
        fresh = _goodput_rows(self.configs, [reqs[i] for i in todo], p.project_throughputs,
                              p.share_max_replicas or p.project_throughputs)
        for i, row in zip(todo, fresh, strict=True):
            self._rows[jobs[i].index] = (reqs[i], row)
        if not jobs:
            return np.zeros((0, len(self.configs)), dtype=np.float32)
        return np.vstack([self._rows[j.index][1] for j in jobs])

    def adaptive_costs(self, jobs: Sequence[SimJob], now: float) -> np.ndarray:
        """The cost matrix ``A`` of the adaptive jobs (B.3-B.6), float32: every entry but last
        round's configuration times the re-allocation factor, then the fairness power."""
        g = self.goodput_matrix(jobs)
        for i, j in enumerate(jobs):
            prev = self.previous.get(j.index)
            if prev is not None:
                keep = g[i, prev]
                g[i] *= np.float32(self._factor(j, now))
                g[i, prev] = keep
        return fairness_costs_unchecked(g, self.sia_params.p)

    def rigid_costs(self, jobs: Sequence[SimJob], now: float) -> np.ndarray:
        """The cost matrix ``A^R`` of the rigid jobs (one column per type), float32."""
        out = np.zeros((len(jobs), len(self.types)), dtype=np.float32)
        for i, j in enumerate(jobs):
            x = rigid_throughputs(j.app, self.types, j.spec.num_replicas, j.spec.batch_size)
            fits = np.array([j.spec.num_replicas <= t.total_gpus for t in self.types]) & np.isfinite(x)
            row = np.full(len(self.types), FLOOR, dtype=np.float32)
            if fits.any():
                row[fits] = (x[fits] * (j.spec.num_replicas / x[fits].min())).astype(np.float32)
            prev = self.previous.get(j.index)
            if prev is not None:
                keep = row[prev]
                row *= np.float32(self._factor(j, now))
                row[prev] = keep
            row[row <= FLOOR] = FLOOR
            out[i] = row
        return fairness_costs_unchecked(out, self.sia_params.p)

    def _pins(self, jobs: Sequence[SimJob]) -> np.ndarray:
        pins = np.full(len(jobs), -1, dtype=np.int64)
        for i, j in enumerate(jobs):
            if j.rescale_time > 0 and j.index in self.previous:
                pins[i] = self.previous[j.index]
        return pins

    def decide(self, active: Sequence[SimJob], now: float) -> tuple[list[SimJob], list[SimJob], RoundDecision]:
        """Solve the round program for the active jobs: (rigid jobs, adaptive jobs, decision)."""
        rigid = [j for j in active if j.kind is JobKind.RIGID]
        adaptive = [j for j in active if j.kind is not JobKind.RIGID]
        inp = RoundInput(
            self.configs,
            self.adaptive_costs(adaptive, now),
            rigid_costs=self.rigid_costs(rigid, now),
            rigid_gpus=np.array([j.spec.num_replicas for j in rigid], dtype=np.int64),
            pinned_adaptive=self._pins(adaptive),
            pinned_rigid=self._pins(rigid),
            lambda_n=self.sia_params.lambda_n,
            capacity=self.layout.capacity(self.out_of_service),
        )
        decision = solve_round(inp, backend=self.sia_params.backend, time_limit=self.sia_params.time_limit)
        self.stats.add(decision)
        if self.on_round is not None:
            self.on_round(inp, decision)
        return rigid, adaptive, decision

    def optimize(self, active: Sequence[SimJob], now: float) -> dict[int, Allocation]:
        """Allocations of the active jobs for the next round: job index -> (type, node ids)."""
        rigid, adaptive, decision = self.decide(active, now)
        cs = self.configs
        wanted: list[tuple[SimJob, int | None, int]] = []
        for j, c in zip(rigid, decision.rigid.tolist(), strict=True):
            wanted.append((j, None if c < 0 else c, j.spec.num_replicas))
        for j, k in zip(adaptive, decision.adaptive.tolist(), strict=True):
            wanted.append((j, None if k < 0 else int(cs.type_index[k]), 0 if k < 0 else int(cs.num_gpus[k])))
        self.previous = {j.index: c for j, c in zip(rigid, decision.rigid.tolist(), strict=True) if c >= 0}
        self.previous.update({j.index: k for j, k in zip(adaptive, decision.adaptive.tolist(), strict=True) if k >= 0})
        out: dict[int, Allocation] = {j.index: (None, ()) for j, _, _ in wanted}
        per_node = None if self.out_of_service is None else self.layout.in_service(self.out_of_service)[1]
        for t, gt in enumerate(self.types):
            mine = [(j, n) for j, tt, n in wanted if tt == t]
            ids = place_type_unchecked(gt.nodes, gt.gpus_per_node, [n for _, n in mine], None if per_node is None else per_node[t])
            for (j, _), nodes in zip(mine, ids, strict=True):
                out[j.index] = (t, tuple(nodes))
        return out

    def allocate(self, active: Sequence[SimJob], now: float) -> dict[int, tuple[int, ...]]:
        """GPU positions (:class:`pal_opt.hetero.gpus.Layout`) of every active job for the next
        round: :meth:`optimize`'s node ids, each GPU the lowest free slot of its node."""
        alloc = self.optimize(active, now)
        out: dict[int, tuple[int, ...]] = {i: () for i in alloc}
        for t in range(len(self.types)):
            mine = [i for i, (tt, _) in alloc.items() if tt == t]
            for i, gpus in zip(mine, self.layout.gpus_of_nodes(t, [alloc[i][1] for i in mine], self.out_of_service),
                               strict=True):
                out[i] = gpus
        return out

    def shape_of(self, allocation: Allocation) -> tuple[int, ...]:
        """The per-node GPU counts of an allocation, fitted to the type's profiled node limit."""
        t, nodes = allocation
        if t is None:
            return ()
        return fit_shape_unchecked(placement_shape_unchecked(nodes), self.types[t].node_limit)
