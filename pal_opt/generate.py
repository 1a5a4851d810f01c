"""Synthetic scheduling rounds: clusters with realistic GPU variability and Sia-Philly queues.

Variability
-----------
Each class's factors (1.0 = the median GPU, higher is slower) follow the published picture of
GPU performance variability in large clusters (PAL, SC'24, and the Longhorn measurements
behind it): about 8% spread on average over the classes, up to 22% for the most sensitive
class, and rare outlier GPUs up to 1.5× slower.

* A GPU has one latent quality shared by its classes (a slow chip is slow for every
  compute-heavy job); each class mixes it with its own noise (correlation
  :data:`CLASS_CORRELATION`) through a Gaussian copula.
* Class *c*'s value is ``(1 + s_c · q^γ) / (1 + s_c · 0.5^γ)`` for a uniform quantile *q*:
  skewed towards fast GPUs with a tail of slow ones, median 1, band width ≈ ``s_c``.
* A GPU is an outlier with probability :data:`OUTLIER_RATE`; its factor becomes at least
  ``1 + u · o_c`` with ``u`` uniform in :data:`OUTLIER_SEVERITY` (so at most 1.5 for classA).

See :data:`SYNTHETIC_VARIABILITY` for ``s_c``, ``γ_c`` and ``o_c``: ResNet-like classA is the
most sensitive, BERT-like classB and classC moderate, PageRank-like classD nearly flat.
Factors are rounded to 4 decimals.  Alternatively, pass ``measurements`` to draw factors from
PAL's measurement files (:func:`pal_opt.io.measurements.sample_factors`).

Queues
------
Jobs are drawn independently from the empirical (GPU count, model) mix of the PAL artifact's
six Sia-Philly traces (:data:`SIA_PHILLY_MIX`, 960 jobs: sizes 1–48 GPUs), restricted to sizes
that fit the cluster's working GPUs; a model's class is :data:`pal_opt.model.MODEL_CLASS`.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

import numpy as np
from scipy.special import ndtr

from .errors import OptionError
from .model import MODEL_CLASS, Cluster, GpuState, Job, RoundInstance, RoundParams, pal_locality
from .options import DEFAULT_ROUND_LENGTH, check_cluster_size, check_count
from .seeds import SeedLike, make_rng

__all__ = [
    "ClassVariability",
    "DrawOptions",
    "SYNTHETIC_VARIABILITY",
    "CLASS_CORRELATION",
    "OUTLIER_RATE",
    "OUTLIER_SEVERITY",
    "SIA_PHILLY_MIX",
    "SIA_APP_OF_CLASS",
    "synthetic_factors",
    "sample_jobs",
    "generate_instance",
    "generate_typed_instance",
]


@dataclass(frozen=True)
class ClassVariability:
    """Synthetic variability of one application class.

    Attributes
    ----------
    spread
        Width of the non-outlier band, ≈ (max − min) / median over a large cluster.
    skew
        Exponent γ on the uniform quantile; > 1 puts most GPUs near the fast end.
    outlier
        How much of a GPU's outlier severity the class feels (1 = fully, 0 = not at all).
    """

    spread: float
    skew: float
    outlier: float


#: Per-class synthetic variability (mean spread ≈ 8%, classA up to 22%, classD ≈ 1%).
SYNTHETIC_VARIABILITY: dict[str, ClassVariability] = {
    "classA": ClassVariability(spread=0.22, skew=1.8, outlier=1.0),  # ResNet-50-like, compute-bound
    "classB": ClassVariability(spread=0.05, skew=1.8, outlier=0.5),  # BERT-like
    "classC": ClassVariability(spread=0.05, skew=1.8, outlier=0.5),  # BERT-like (PAL maps BERT here too)
    "classD": ClassVariability(spread=0.01, skew=1.0, outlier=0.0),  # PageRank-like, memory-bound
}
#: Correlation of a GPU's classes through its shared latent quality.
CLASS_CORRELATION: float = 0.7
#: Probability that a GPU is an outlier.
OUTLIER_RATE: float = 0.005
#: Range of an outlier's severity u: factor ≥ 1 + u · outlier weight.
OUTLIER_SEVERITY: tuple[float, float] = (0.2, 0.5)

#: The Sia application whose 1-GPU throughput per type stands for a PAL class on a typed
#: cluster (``pal-opt generate --cluster ... --profiles DIR``): ResNet-50 on ImageNet for the
#: ResNet-like classA, BERT for classB, CIFAR-10 (a ResNet-18) for the VGG-like classC and NCF,
#: the memory-bound recommender, for the PageRank-like classD.  A pairing by model family, not
#: a measurement.
SIA_APP_OF_CLASS: dict[str, str] = {"classA": "imagenet", "classB": "bert", "classC": "cifar10", "classD": "ncf"}

#: Empirical (GPU count, model) -> number of jobs over the PAL artifact's six Sia-Philly
#: traces (workload-1..6, 160 jobs each).
SIA_PHILLY_MIX: dict[tuple[int, str], int] = {
    (1, "vgg19"): 401,
    (4, "resnet50"): 60,
    (6, "BERT"): 8,
    (6, "DCGAN"): 22,
    (6, "GPT2"): 6,
    (6, "PointNet"): 106,
    (8, "BERT"): 6,
    (8, "DCGAN"): 24,
    (8, "GPT2"): 3,
    (8, "PointNet"): 89,
    (12, "BERT"): 5,
    (12, "DCGAN"): 15,
    (12, "GPT2"): 5,
    (12, "PointNet"): 93,
    (16, "BERT"): 6,
    (16, "GPT2"): 6,
    (16, "PointNet"): 83,
    (24, "resnet50"): 5,
    (32, "resnet50"): 9,
    (48, "resnet50"): 8,
}


def synthetic_factors(
    n_gpus: int,
    rng: SeedLike = None,
    variability: Mapping[str, ClassVariability] | None = None,
    *,
    decimals: int | None = 4,
) -> dict[str, np.ndarray]:
    """Per-class synthetic factors for ``n_gpus`` GPUs (model in the module docstring).

    >>> f = synthetic_factors(1000, 0)
    >>> sorted(f), bool(abs(np.median(f["classA"]) - 1) < 0.01)
    (['classA', 'classB', 'classC', 'classD'], True)
    """
    var = SYNTHETIC_VARIABILITY if variability is None else variability
    gen = make_rng(rng)
    latent = gen.standard_normal(n_gpus)
    rho = CLASS_CORRELATION
    out_mask = gen.random(n_gpus) < OUTLIER_RATE
    severity = gen.uniform(*OUTLIER_SEVERITY, size=n_gpus)
    out: dict[str, np.ndarray] = {}
    for cname, cv in var.items():
        own = gen.standard_normal(n_gpus)
        q = ndtr(rho * latent + math.sqrt(1.0 - rho * rho) * own)
        f = (1.0 + cv.spread * q**cv.skew) / (1.0 + cv.spread * 0.5**cv.skew)
        if cv.outlier > 0:
            f = np.where(out_mask, np.maximum(f, 1.0 + severity * cv.outlier), f)
        if decimals is not None:
            f = np.round(f, decimals)
        out[cname] = f
    return out


def sample_jobs(
    n_jobs: int,
    rng: SeedLike = None,
    *,
    max_demand: int | None = None,
    locality_penalty: float = 1.7,
    mix: Mapping[tuple[int, str], int] | None = None,
) -> list[Job]:
    """Draw a queue of ``n_jobs`` jobs from the (GPU count, model) ``mix`` (default Sia-Philly).

    Job ids are 0..n_jobs-1 in queue order.  Only entries with GPU count ≤ ``max_demand`` are
    drawn from.
    """
    table = SIA_PHILLY_MIX if mix is None else mix
    keys = [k for k in table if max_demand is None or k[0] <= max_demand]
    if n_jobs and not keys:
        raise OptionError(f"no job size of the mix fits {max_demand} GPUs")
    gen = make_rng(rng)
    jobs: list[Job] = []
    if n_jobs == 0:
        return jobs
    w = np.asarray([table[k] for k in keys], dtype=np.float64)
    pick = gen.choice(len(keys), size=n_jobs, p=w / w.sum())
    loc = pal_locality(locality_penalty)
    for i, k in enumerate(pick.tolist()):
        demand, model = keys[k]
        jobs.append(Job(id=i, demand=demand, perfclass=MODEL_CLASS[model], position=i, locality=loc, model=model))
    return jobs


def _mark_busy(state: np.ndarray, server_of: np.ndarray, gpn: int, target: int, gen: np.random.Generator) -> None:
    """Mark ``target`` free GPUs busy in server-local chunks (jobs outside the queue)."""
    n_servers = int(server_of.max()) + 1
    chunk_sizes = np.asarray([1, 2, 4, 8, 16])
    while target > 0:
        free = state == GpuState.FREE
        per_server = np.bincount(server_of[free], minlength=n_servers)
        cand = np.flatnonzero(per_server > 0)
        if cand.size == 0:
            return
        s = int(gen.choice(cand))
        k = int(gen.choice(chunk_sizes[chunk_sizes <= max(gpn, 1)]))
        k = min(k, int(per_server[s]), target)
        pos = np.flatnonzero(free & (server_of == s))[:k]
        state[pos] = GpuState.BUSY
        target -= k


def _place_packed(free: np.ndarray, server_of: np.ndarray, demand: int) -> np.ndarray | None:
    """Best-fit packing on free GPUs: one server if any can hold the job, else fullest servers first."""
    if free.sum() < demand:
        return None
    per_server = np.bincount(server_of[free], minlength=int(server_of.max()) + 1)
    fits = np.flatnonzero(per_server >= demand)
    if fits.size:
        s = int(fits[np.argmin(per_server[fits])])
        return np.flatnonzero(free & (server_of == s))[:demand]
    order = np.argsort(-per_server, kind="stable")
    picked: list[int] = []
    for s in order.tolist():
        if per_server[s] == 0:
            break
        picked.extend(np.flatnonzero(free & (server_of == s))[: demand - len(picked)].tolist())
        if len(picked) == demand:
            break
    return np.asarray(picked, dtype=np.int64)


def generate_instance(
    nodes: int,
    gpus_per_node: int,
    jobs: int,
    racks: int = 0,
    seed: SeedLike = 0,
    locality_penalty: float = 1.7,
    busy_fraction: float = 0.0,
    *,
    failed_fraction: float = 0.0,
    running_fraction: float = 0.0,
    binning: str = "pal-artifact",
    restart_cost: float = 0.0,
    round_length: float = DEFAULT_ROUND_LENGTH,
    measurements: Mapping[str, str | os.PathLike[str]] | None = None,
    name: str | None = None,
) -> RoundInstance:
    """A synthetic round (module docstring for the models behind it).

    Parameters
    ----------
    nodes, gpus_per_node
        ``nodes`` servers of ``gpus_per_node`` GPUs; GPU ids 0..G-1, GPU g on server g // gpus_per_node.
    jobs
        Queue length.
    racks
        0 for a flat cluster; else servers are dealt to ``racks`` racks (``"r0"``, ``"r1"``...)
        in contiguous blocks whose sizes differ by at most one.
    seed
        Seed or Generator; the same seed gives the same round.
    locality_penalty
        PAL's λ (≥ 1); every job gets ``(1, λ, λ)``.
    busy_fraction
        Share of GPUs held by jobs outside the queue, marked busy in server-local chunks.
    failed_fraction
        Share of GPUs out of service, chosen at random.
    running_fraction
        Each queued job is, with this probability, already running (packed on free GPUs,
        best fit) if it fits.
    binning, restart_cost, round_length
        Stored in the round's parameters (:class:`~pal_opt.model.RoundParams`; the restart cost
        in seconds lost per GPU of a moved job, the round length in seconds).
    measurements
        ``{class: measurement file}`` to draw factors from PAL's measurements instead of the
        synthetic model (see :func:`pal_opt.io.measurements.sample_factors`).
    name
        Round name; default ``"synthetic-{nodes}x{gpus_per_node}-j{jobs}-s{seed}"``.

    Returns
    -------
    RoundInstance

    Examples
    --------
    >>> inst = generate_instance(16, 4, 40, seed=1)
    >>> inst.cluster.num_gpus, len(inst.jobs), inst.cluster.num_servers
    (64, 40, 16)
    """
    params = _params(nodes, gpus_per_node, jobs, racks, locality_penalty, binning, (restart_cost, round_length),
                     busy=busy_fraction, failed=failed_fraction, running=running_fraction)
    gen = make_rng(seed)
    server_of = np.arange(nodes * gpus_per_node) // gpus_per_node
    factors, state, queue = _draw(server_of, gpus_per_node, jobs, gen, locality_penalty, measurements,
                                  (busy_fraction, failed_fraction, running_fraction))
    rmap = {s: f"r{s * racks // nodes}" for s in range(nodes)} if racks else None
    cluster = Cluster.from_arrays(np.arange(server_of.size), server_of, factors, state, rmap)
    label = name or f"synthetic-{nodes}x{gpus_per_node}-j{jobs}-s{seed if isinstance(seed, int) else 'rng'}"
    return RoundInstance(cluster=cluster, jobs=tuple(queue), params=params, name=label)


def _draw(server_of: np.ndarray, gpus_per_node: int, jobs: int, gen: np.random.Generator, locality_penalty: float,
          measurements: Mapping[str, str | os.PathLike[str]] | None, fractions: tuple[float, float, float],
          ) -> tuple[dict[str, np.ndarray], np.ndarray, list[Job]]:
    """Factors, states and the queue of a synthetic round on servers ``server_of`` (by GPU)."""
    busy_fraction, failed_fraction, running_fraction = fractions
    g = int(server_of.size)
    if measurements is not None:
        from .io.measurements import sample_factors

        factors = sample_factors(measurements, g, gen)
    else:
        factors = synthetic_factors(g, gen)
    state = _states(g, server_of, gpus_per_node, busy_fraction, failed_fraction, gen)
    working = int((state != GpuState.FAILED).sum())
    queue = sample_jobs(jobs, gen, max_demand=max(working, 1), locality_penalty=locality_penalty)
    if running_fraction > 0 and queue:
        queue = _start_some(queue, state == GpuState.FREE, server_of, running_fraction, gen)
    return factors, state, queue


class DrawOptions(TypedDict, total=False):
    """The keywords :func:`generate_typed_instance` shares with :func:`generate_instance` (same
    meaning and defaults)."""

    failed_fraction: float
    running_fraction: float
    binning: str
    restart_cost: float
    round_length: float
    measurements: Mapping[str, str | os.PathLike[str]] | None
    name: str | None


_DRAW_DEFAULTS: dict[str, Any] = {"failed_fraction": 0.0, "running_fraction": 0.0, "binning": "pal-artifact",
                                  "restart_cost": 0.0, "round_length": DEFAULT_ROUND_LENGTH, "measurements": None,
                                  "name": None}


def generate_typed_instance(
    cluster: str | Sequence[tuple[str, int, int]],
    jobs: int,
    racks: int = 0,
    seed: SeedLike = 0,
    locality_penalty: float = 1.7,
    busy_fraction: float = 0.0,
    *,
    guaranteed_fraction: float = 0.0,
    throughput: Mapping[str, Mapping[str, float]] | None = None,
    **options: Unpack[DrawOptions],
) -> RoundInstance:
    """A synthetic round on a cluster of several GPU types (as :func:`generate_instance` draws it).

    Parameters
    ----------
    cluster
        ``"aws:6x4,rtx:3x8"`` or its parsed form (:func:`pal_opt.gputypes.parse_cluster_spec`):
        per type, servers × GPUs per server; servers are numbered type by type, GPUs in order.
    jobs, racks, seed, locality_penalty, busy_fraction
        As for :func:`generate_instance` (jobs are drawn no larger than the largest type).
    guaranteed_fraction
        Each job is, with this probability, *guaranteed* on one type (drawn in proportion to
        the types' GPUs among those that hold it); the others are *rigid* (any one type).
    throughput
        ``{class: {type: relative throughput}}`` stored in the cluster (default none: 1.0).
    **options
        :class:`DrawOptions`: ``failed_fraction``, ``running_fraction``, ``binning``,
        ``restart_cost``, ``round_length``, ``measurements`` and ``name``, as for
        :func:`generate_instance` (and with its defaults).

    Examples
    --------
    >>> inst = generate_typed_instance("aws:2x4,rtx:1x8", 6, seed=0, guaranteed_fraction=0.5)
    >>> inst.cluster.type_names, inst.cluster.type_counts.tolist(), inst.cluster.num_servers
    (('aws', 'rtx'), [8, 8], 3)
    >>> sorted({j.kind for j in inst.jobs})
    ['guaranteed', 'rigid']
    """
    from .gputypes import parse_cluster_spec

    spec = parse_cluster_spec(cluster) if isinstance(cluster, str) else [(str(t), int(n), int(k)) for t, n, k in cluster]
    nodes = sum(n for _, n, _ in spec)
    gpn = max(k for _, _, k in spec)
    o = {**_DRAW_DEFAULTS, **options}
    failed_fraction, running_fraction = o["failed_fraction"], o["running_fraction"]
    params = _params(nodes, gpn, jobs, racks, locality_penalty, o["binning"], (o["restart_cost"], o["round_length"]),
                     busy=busy_fraction, failed=failed_fraction, running=running_fraction)
    _check_fraction(guaranteed_fraction, "guaranteed_fraction")
    gen = make_rng(seed)
    sizes = np.repeat([k for _, n, k in spec], [n for _, n, _ in spec])
    server_of = np.repeat(np.arange(nodes), sizes)
    types = [t for t, n, k in spec for _ in range(n * k)]
    per_type = {t: n * k for t, n, k in spec}
    factors, state, queue = _draw(server_of, gpn, 0, gen, locality_penalty, o["measurements"],
                                  (busy_fraction, failed_fraction, running_fraction))
    queue = _typed_jobs(jobs, gen, per_type, guaranteed_fraction, locality_penalty)
    if running_fraction > 0 and queue:
        queue = _start_some(queue, state == GpuState.FREE, server_of, running_fraction, gen, types)
    rmap = {s: f"r{s * racks // nodes}" for s in range(nodes)} if racks else None
    cl = Cluster.from_arrays(np.arange(server_of.size), server_of, factors, state, rmap, gpu_types=types,
                             throughput=throughput)
    label = o["name"] or "synthetic-{}-j{}-s{}".format(
        ",".join(f"{t}:{n}x{k}" for t, n, k in spec), jobs, seed if isinstance(seed, int) else "rng")
    return RoundInstance(cluster=cl, jobs=tuple(queue), params=params, name=label)


def _typed_jobs(n_jobs: int, gen: np.random.Generator, per_type: Mapping[str, int], guaranteed: float,
                locality_penalty: float) -> list[Job]:
    """The queue of a typed round: no job larger than the largest type; a share guaranteed."""
    queue = sample_jobs(n_jobs, gen, max_demand=max(per_type.values()), locality_penalty=locality_penalty)
    if guaranteed <= 0 or not queue:
        return queue
    pick = gen.random(len(queue)) < guaranteed
    draws = gen.random(len(queue))
    names = list(per_type)
    out = []
    for j, g, u in zip(queue, pick.tolist(), draws.tolist(), strict=True):
        if g:
            fit = [t for t in names if per_type[t] >= j.demand]
            w = np.cumsum([per_type[t] for t in fit], dtype=np.float64)
            t = fit[int(np.searchsorted(w / w[-1], u, side="right"))] if fit else None
            if t is not None:
                j = replace(j, kind="guaranteed", gpu_type=t)
        out.append(j)
    return out


def _check_fraction(value: Any, label: str) -> None:
    """An :class:`OptionError` naming ``label`` unless ``value`` is a real number in [0, 1] (not a
    bool; an object that is no number failed in the comparison, a ``TypeError``).

    >>> _check_fraction("0.5", "busy_fraction")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: busy_fraction must be between 0 and 1, got '0.5'
    """
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0.0 <= float(value) <= 1.0):
        raise OptionError(f"{label} must be between 0 and 1, got {value!r}")


def _params(nodes: int, gpus_per_node: int, jobs: int, racks: int, locality_penalty: float, binning: str,
            restart: tuple[float, float], *, busy: float, failed: float, running: float) -> RoundParams:
    """The generator's arguments checked, and the round's parameters built (checked by the model)."""
    check_count(nodes, "nodes", 1)
    check_count(gpus_per_node, "gpus_per_node", 1)
    check_count(jobs, "jobs", 0)
    check_count(racks, "racks", 0)
    if racks > nodes:
        raise OptionError(f"racks must not exceed the servers ({nodes}), got {racks}")
    check_cluster_size(nodes * gpus_per_node, "nodes x gpus_per_node")
    for label, v in (("busy_fraction", busy), ("failed_fraction", failed), ("running_fraction", running)):
        _check_fraction(v, label)
    if busy + failed > 1.0:
        raise OptionError(f"busy_fraction + failed_fraction must not exceed 1, got {busy!r} + {failed!r}")
    return RoundParams.from_arguments(locality_penalty=locality_penalty, binning=binning, restart_cost=restart[0],
                                      round_length=restart[1])


def _states(g: int, server_of: np.ndarray, gpus_per_node: int, busy_fraction: float, failed_fraction: float,
            gen: np.random.Generator) -> np.ndarray:
    """GPU states: ``failed_fraction`` failed at random, ``busy_fraction`` busy in server chunks."""
    state = np.zeros(g, dtype=np.int8)
    n_failed = int(round(failed_fraction * g))
    if n_failed:
        state[gen.choice(g, size=n_failed, replace=False)] = GpuState.FAILED
    _mark_busy(state, server_of, gpus_per_node, int(round(busy_fraction * g)), gen)
    return state


def _start_some(queue: list[Job], free: np.ndarray, server_of: np.ndarray, fraction: float,
                gen: np.random.Generator, types: Sequence[str] | None = None) -> list[Job]:
    """Each job, with probability ``fraction``, already running packed on free GPUs (best fit);
    with GPU types, on the GPUs of its type if it is guaranteed, else of the type with most room."""
    run = gen.random(len(queue)) < fraction
    placed: list[Job] = []
    kinds = np.asarray(types) if types is not None else None
    for j, r in zip(queue, run.tolist(), strict=True):
        room = free
        if r and kinds is not None:
            names = [j.gpu_type] if j.gpu_type is not None else list(dict.fromkeys(types or ()))
            best = max(names, key=lambda t: int((free & (kinds == t)).sum()))
            room = free & (kinds == best)
        pos = _place_packed(room, server_of, j.demand) if r else None
        if pos is not None:
            free[pos] = False
            j = replace(j, placement=tuple(int(p) for p in pos))
        placed.append(j)
    return placed
