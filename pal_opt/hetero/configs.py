"""Sia's configurations and a job's goodput row over them (SIA_MODEL.md B.1-B.6).

A *configuration* is (GPU type, nodes, GPUs).  Sia offers, per type with g GPUs per node,
1, 2, 4, ... GPUs on one node (powers of two up to g) and then whole nodes (2g, 3g, ... GPUs) up
to 64 GPUs, keeping those with at most min(nodes of the type, its largest profiled node count)
nodes.  On the paper's cluster (aws 6×4, dgx-ext 2×8, rtx 3×8) that is 19 configurations; 3, 5,
6 or 7 GPUs on one node are never offered.

For one job the round program needs a row over all configurations:

1. *valid* configurations: 1 ≤ GPUs ≤ the job's replica cap (B.2);
2. *raw goodput* per valid configuration from the job's goodput function on that type, or
   projected from the first type that has one (× a fixed per-application throughput ratio), or
   nothing (the type is *unknown*) (B.3);
3. *normalised* goodput: the row divided by its smallest useful value over known types, the
   1-GPU entry of each unknown type set to 1, every entry floored at ``FLOOR`` (B.4);
4. the *cost* the program minimises: ``min(round(G^p, 2), 3000)`` after the re-allocation factor
   (B.5, B.6).

Goodput functions come from :func:`scheduler_goodput_fn`, which wraps
:func:`pal_opt.hetero.goodput.optimize_goodput` the way the Sia scheduler calls it (candidate
batches up to the *requested* batch, atomic range of the whole application on that type).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InstanceError, OptionError
from ..options import (
    check_count,
    check_finite,
    is_finite_number,
    number_array,
    require_items,
    require_mapping,
    require_type,
    shown_number,
)
from .goodput import JobKind, StepModel, check_grad, optimize_goodput
from .profiles import APP_TYPES, APP_WHAT, Application

__all__ = [
    "FLOOR",
    "MAX_CONFIG_GPUS",
    "GOODPUT_CLIP",
    "GpuType",
    "PAPER_CLUSTER",
    "Config",
    "ConfigSet",
    "GoodputFn",
    "config_menu",
    "enumerate_configs",
    "max_replicas",
    "valid_configs",
    "scheduler_goodput_fn",
    "throughput_ratio",
    "throughput_table",
    "raw_goodput_row",
    "normalise_row",
    "reallocation_factor",
    "apply_reallocation",
    "fairness_costs",
]

#: Value of an invalid or unknown entry (the artifact's ``ZERO_ALLOC_GAIN``).
FLOOR = 1e-4
#: Largest GPU count a configuration may have (the artifact's simulator cap).
MAX_CONFIG_GPUS = 64
#: Largest cost entry ``round(G^p, 2)`` kept (larger values are clipped).
GOODPUT_CLIP = 3000.0

#: ``(num_nodes, num_gpus) -> goodput`` over arrays of one shape.
GoodputFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class GpuType:
    """One GPU type of a heterogeneous cluster.

    Attributes
    ----------
    name
        Type name as in the profile files (``aws``, ``dgx-ext``, ``rtx``).
    nodes, gpus_per_node
        The type's nodes and GPUs per node.
    max_physical_nodes
        Largest node count profiled on this type (configurations never exceed it); None: ``nodes``.
    """

    name: str
    nodes: int
    gpus_per_node: int
    max_physical_nodes: int | None = None

    def __post_init__(self) -> None:
        # a type of 0 nodes ran a simulation on no GPUs; "4" nodes failed in min() deep inside
        if not isinstance(self.name, str) or not self.name:
            raise OptionError(f"GpuType: name must be a non-empty str (a profiled type such as 'aws'), "
                              f"got {self.name!r:.60}")
        at = f"GpuType {self.name!r}"
        for name in ("nodes", "gpus_per_node", "max_physical_nodes"):
            value = getattr(self, name)
            if value is not None or name != "max_physical_nodes":
                object.__setattr__(self, name, check_count(value, f"{at}: {name}"))

    @property
    def total_gpus(self) -> int:
        """GPUs of the type."""
        return self.nodes * self.gpus_per_node

    @property
    def node_limit(self) -> int:
        """Most nodes one configuration may span."""
        return min(self.nodes, self.max_physical_nodes or self.nodes)


#: The paper's 64-GPU cluster in the artifact's type order (``simulator_config.py``).
PAPER_CLUSTER: tuple[GpuType, ...] = (
    GpuType("aws", 6, 4, 16),
    GpuType("dgx-ext", 2, 8, 2),
    GpuType("rtx", 3, 8, 3),
)


@dataclass(frozen=True)
class Config:
    """One configuration: ``num_gpus`` GPUs of type ``gpu_type`` on ``num_nodes`` nodes."""

    type_index: int
    gpu_type: str
    num_nodes: int
    num_gpus: int

    def placement(self) -> tuple[int, ...]:
        """GPUs per node when the configuration is packed: ``(n,)`` or whole nodes."""
        return (self.num_gpus // self.num_nodes,) * self.num_nodes


@dataclass(frozen=True, eq=False)
class ConfigSet:
    """All configurations of a cluster, types in cluster order, as objects and as columns.

    Attributes
    ----------
    types
        The cluster's GPU types.
    configs
        The configurations; position k is column k of a goodput row.
    type_index, num_nodes, num_gpus
        int64 arrays over the configurations.
    """

    types: tuple[GpuType, ...]
    configs: tuple[Config, ...]
    type_index: np.ndarray
    num_nodes: np.ndarray
    num_gpus: np.ndarray

    def __len__(self) -> int:
        return len(self.configs)

    def of_type(self, i: int) -> np.ndarray:
        """Boolean mask of the configurations of type ``i``."""
        return self.type_index == i

    def index(self, gpu_type: str, num_nodes: int, num_gpus: int) -> int:
        """Position of a configuration (an :class:`OptionError` if it is not offered)."""
        for k, c in enumerate(self.configs):
            if (c.gpu_type, c.num_nodes, c.num_gpus) == (gpu_type, num_nodes, num_gpus):
                return k
        raise OptionError(f"configuration ({gpu_type}, {num_nodes} nodes, {num_gpus} GPUs) is not offered")


#: Where a :class:`ConfigSet` comes from, for the message about an argument that is not one.
CONFIGS_HINT = " (enumerate_configs)"


def require_gpu_types(cluster: Any, arg: str = "cluster") -> tuple[GpuType, ...]:
    """``cluster`` as a tuple of :class:`GpuType`; an :class:`~pal_opt.errors.InputTypeError`
    naming ``arg`` otherwise (a string such as ``"aws:2x4"`` is :func:`~pal_opt.hetero.parse_cluster`'s)."""
    return require_items(cluster, arg, "a list of GpuTypes (build_cluster(parse_cluster('aws:2x4'), apps))", of=GpuType)


def config_menu(gpus_per_node: int, max_gpus: int = MAX_CONFIG_GPUS) -> tuple[tuple[int, int], ...]:
    """(nodes, GPUs) Sia offers on nodes of ``gpus_per_node`` GPUs, before the node limit.

    Powers of two up to ``gpus_per_node`` on one node, then whole nodes up to ``max_gpus``.
    For 4 and 8 GPUs per node this is the artifact's fixed list.

    >>> config_menu(4)[:5], len(config_menu(4)), config_menu(8)[:6]
    (((1, 1), (1, 2), (1, 4), (2, 8), (3, 12)), 18, ((1, 1), (1, 2), (1, 4), (1, 8), (2, 16), (3, 24)))
    """
    check_count(gpus_per_node, "gpus_per_node")
    check_count(max_gpus, "max_gpus")
    single = []
    k = 1
    while k <= gpus_per_node:
        single.append((1, k))
        k *= 2
    if single[-1][1] != gpus_per_node:  # a non-power-of-two node is offered whole too
        single.append((1, gpus_per_node))
    whole = [(m, m * gpus_per_node) for m in range(2, max_gpus // gpus_per_node + 1)]
    return tuple(single + whole)


def enumerate_configs(cluster: Sequence[GpuType] = PAPER_CLUSTER) -> ConfigSet:
    """Every configuration of the cluster, type by type in cluster order (B.1).

    >>> cs = enumerate_configs()
    >>> len(cs), [(c.gpu_type, c.num_nodes, c.num_gpus) for c in cs.configs][5:9]
    (19, [('aws', 4, 16), ('aws', 5, 20), ('aws', 6, 24), ('dgx-ext', 1, 1)])
    """
    cluster = require_gpu_types(cluster)
    names = [t.name for t in cluster]
    if len(set(names)) != len(names):
        raise OptionError(f"GPU type names must be unique, got {names}")
    configs = tuple(
        Config(i, t.name, m, n)
        for i, t in enumerate(cluster)
        for m, n in config_menu(t.gpus_per_node)
        if m <= t.node_limit
    )
    return ConfigSet(
        types=tuple(cluster),
        configs=configs,
        type_index=np.array([c.type_index for c in configs], dtype=np.int64),
        num_nodes=np.array([c.num_nodes for c in configs], dtype=np.int64),
        num_gpus=np.array([c.num_gpus for c in configs], dtype=np.int64),
    )


def max_replicas(
    app: Application,
    kind: JobKind,
    requested: int,
    profiled: Mapping[str, int],
    gpu_types: Sequence[str],
    *,
    share: bool = True,
) -> dict[str, int]:
    """The job's GPU-count cap per type (B.2).

    Adaptive: min(max(2·r_c, 1), 64, ⌊Bmax / b_min(c)⌋) with r_c the largest GPU count the job
    has run with on type c (``profiled``, 0 if never); with ``share`` (the artifact's
    ``--share_max_replicas``, implied by ``--project_throughputs``) every type gets the largest
    cap.  Other kinds: the requested count.

    >>> import types
    >>> app = types.SimpleNamespace(name="toy", max_batch_size=4096,
    ...                             profile=lambda t: types.SimpleNamespace(min_local_bsz=32))
    >>> max_replicas(app, JobKind.ADAPTIVE, 8, {"aws": 4}, ["aws", "rtx"])
    {'aws': 8, 'rtx': 8}
    >>> max_replicas(app, JobKind.ADAPTIVE, 8, {"aws": 4}, ["aws", "rtx"], share=False)
    {'aws': 8, 'rtx': 1}
    """
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    require_type(kind, JobKind, "kind", " (JobKind.ADAPTIVE, JobKind.parse('rigid'))")
    check_count(requested, "requested")
    require_mapping(profiled, "profiled", "a mapping of GPU type names to GPU counts")
    gpu_types = require_items(gpu_types, "gpu_types", "a list of GPU type names", of=str)
    require_type(share, bool, "share")
    return max_replicas_unchecked(app, kind, requested, profiled, gpu_types, share=share)


def max_replicas_unchecked(
    app: Application,
    kind: JobKind,
    requested: int,
    profiled: Mapping[str, int],
    gpu_types: Sequence[str],
    *,
    share: bool = True,
) -> dict[str, int]:
    """:func:`max_replicas` without the check of ``gpu_types``, for the Sia policy's rows, whose
    type names are the cluster's own (not in ``__all__``)."""
    if kind is not JobKind.ADAPTIVE:
        return {t: requested for t in gpu_types}
    caps = {
        t: min(
            max(2 * profiled.get(t, 0), 1),
            MAX_CONFIG_GPUS,
            app.max_batch_size // app.profile(t).min_local_bsz,
        )
        for t in gpu_types
    }
    if share:
        top = max(caps.values())
        caps = {t: top for t in gpu_types}
    return caps


def valid_configs(cs: ConfigSet, caps: Mapping[str, int], min_gpus: int = 1) -> np.ndarray:
    """Boolean mask: ``min_gpus ≤ GPUs ≤ caps[type]`` per configuration."""
    require_type(cs, ConfigSet, "cs", CONFIGS_HINT)
    caps = require_mapping(caps, "caps", "a mapping of GPU type names to GPU counts")
    return valid_configs_unchecked(cs, caps, check_count(min_gpus, "min_gpus", 0))


def valid_configs_unchecked(cs: ConfigSet, caps: Mapping[str, int], min_gpus: int = 1) -> np.ndarray:
    """:func:`valid_configs` without the checks of its arguments (not in ``__all__``)."""
    cap = np.array([caps[cs.types[i].name] for i in cs.type_index], dtype=np.int64)
    return (cs.num_gpus >= min_gpus) & (cs.num_gpus <= cap)


def scheduler_goodput_fn(
    app: Application,
    gpu_type: str,
    step_model: StepModel,
    grad: tuple[float, float],
    kind: JobKind = JobKind.ADAPTIVE,
    requested_batch: int | None = None,
) -> GoodputFn:
    """The goodput of (nodes, GPUs) on one type as the Sia scheduler estimates it (A.7).

    The best over candidate batches from max(B0, b_min·n) to the *requested* batch (Bmax when
    none is given), atomic range [b_min, b_max] of the application on this type; only the
    requested batch when the kind does not tune it.  ``step_model`` is the job's model of this
    type (the artifact's is learned online; :class:`~pal_opt.hetero.goodput.ProfileStepModel`
    gives the measured times).
    """
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    require_type(step_model, Callable, "step_model", " (a StepModel: ProfileStepModel or PerfParams)")
    check_grad(grad)  # read only when the function is called: a bad one failed there, not here
    require_type(kind, JobKind, "kind")
    if requested_batch is not None:
        check_count(requested_batch, "requested_batch")
    prof = app.profile(gpu_type)
    top = requested_batch if requested_batch is not None else app.max_batch_size
    atomic = (prof.min_local_bsz, prof.max_local_bsz)

    def goodput(num_nodes: np.ndarray, num_gpus: np.ndarray) -> np.ndarray:
        g, _, _ = optimize_goodput(
            step_model,
            grad,
            app.init_batch_size,
            num_nodes,
            num_gpus,
            top,
            atomic,
            tune_batch=kind.tunes_batch,
        )
        return g

    return goodput


def throughput_ratio(app: Application, to_type: str, from_type: str) -> float:
    """ρ(c, d) = X(c) / X(d): the fixed factor that projects goodput measured on ``from_type``
    (d) to ``to_type`` (c), X being the 1-GPU throughput of :meth:`TypeProfile.single_gpu_throughput`."""
    require_type(app, APP_TYPES, "app", what=APP_WHAT)
    return throughput_ratio_unchecked(app, to_type, from_type)


def throughput_ratio_unchecked(app: Application, to_type: str, from_type: str) -> float:
    """:func:`throughput_ratio` without the check of ``app`` (not in ``__all__``)."""
    x_to = app.profile(to_type).single_gpu_throughput()
    x_from = app.profile(from_type).single_gpu_throughput()
    if x_to is None or x_from is None:
        raise OptionError(f"{app.name}: no 1-GPU profile on {to_type if x_to is None else from_type}")
    return x_to / x_from


def throughput_table(
    apps: Mapping[str, Application], types: Sequence[str], classes: Mapping[str, str] | None = None
) -> dict[str, dict[str, float]]:
    """The core model's relative throughput table (:attr:`pal_opt.model.Cluster.throughput`):
    ``{class: {type: X(type) / X(types[0])}}``, X being an application's 1-GPU throughput.

    ``classes`` maps each class to its application (default: every application, as its own
    class).

    Raises
    ------
    InstanceError
        An application without a (1-GPU) profile on one of ``types``, naming the file it lacks.
    """
    require_mapping(apps, "apps", "a mapping of application names to Applications (load_applications)")
    types = require_items(types, "types", "a list of GPU type names", of=str)
    pairs = {a: a for a in apps} if classes is None else require_mapping(
        classes, "classes", "a mapping of class names to application names")
    out: dict[str, dict[str, float]] = {}
    for cname, app_name in pairs.items():
        if app_name not in apps:
            raise OptionError(f"class {cname!r}: unknown application {app_name!r} (known: {', '.join(apps)})")
        app = apps[app_name]
        for t in types:
            if t not in app.types or app.profile(t).single_gpu_throughput() is None:
                one = [n for n in app.types if app.profile(n).single_gpu_throughput() is not None]
                what = "no profile" if t not in app.types else "no 1-GPU rows (placement 1)"
                raise InstanceError(f"{what} for GPU type {t!r} (placements-{t}.csv); {app_name} has 1-GPU rows on: "
                                    f"{', '.join(one) or '(none)'}",
                                    source=getattr(app.profile(t), "source", app_name) if t in app.types else app_name)
        out[cname] = {t: throughput_ratio(app, t, types[0]) for t in types}
    return out


def raw_goodput_row(
    cs: ConfigSet,
    valid: np.ndarray,
    goodput_fns: Mapping[str, GoodputFn | None],
    ratio: Callable[[str, str], float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Raw goodput of each configuration for one job, and which types are known (B.3).

    Parameters
    ----------
    cs
        The configurations.
    valid
        Mask from :func:`valid_configs`.
    goodput_fns
        Type name -> the job's goodput function there, or None where it has none.
    ratio
        ``ratio(c, d)`` projects type d's goodput to type c (:func:`throughput_ratio`); None
        turns projection off (types without a function are then unknown).

    Returns
    -------
    row
        float64 over the configurations; ``FLOOR`` where invalid or unknown.
    known
        bool per type: the type's entries are goodput values (own or projected).
    """
    require_type(cs, ConfigSet, "cs", CONFIGS_HINT)
    valid = number_array(valid, "valid", "b")
    require_mapping(goodput_fns, "goodput_fns", "a mapping of GPU type names to goodput functions (or None)")
    if ratio is not None:
        require_type(ratio, Callable, "ratio", what="a callable ratio(to_type, from_type) (throughput_ratio)")
    row = np.full(len(cs), FLOOR)
    known = np.zeros(len(cs.types), dtype=bool)
    source = next((t for t in cs.types if goodput_fns.get(t.name) is not None), None)
    for i, t in enumerate(cs.types):
        sel = cs.of_type(i) & valid
        fn = goodput_fns.get(t.name)
        if not sel.any() or (fn is None and (ratio is None or source is None)):
            continue
        m, n = cs.num_nodes[sel], cs.num_gpus[sel]
        if fn is not None:
            row[sel] = fn(m.astype(np.float64), n.astype(np.float64))
        else:
            assert source is not None and ratio is not None
            src_fn = goodput_fns[source.name]
            assert src_fn is not None
            nodes = np.ceil(n / source.gpus_per_node)
            row[sel] = src_fn(nodes, n.astype(np.float64)) * ratio(t.name, source.name)
        known[i] = True
    return row, known


def normalise_row(
    cs: ConfigSet, row: np.ndarray, known: np.ndarray, *, dtype: Any = np.float32
) -> np.ndarray:
    """Goodput relative to the job's least useful known configuration (B.4).

    Divides by the smallest entry above ``FLOOR`` over known types (1 if none), sets the 1-GPU
    entry of every unknown type to 1, and raises entries ≤ ``FLOOR`` to ``FLOOR``.  The artifact
    keeps this matrix in float32, the default ``dtype``.

    >>> cs = enumerate_configs()
    >>> raw = np.full(len(cs), FLOOR); raw[:3] = [50.0, 90.0, 160.0]   # aws 1, 2, 4 GPUs
    >>> g = normalise_row(cs, raw, np.array([True, False, False]))
    >>> [round(float(v), 6) for v in g[[0, 1, 2, 3, 8, 9]]]   # dgx-ext (1 GPU) is unknown: 1
    [1.0, 1.8, 3.2, 0.0001, 1.0, 0.0001]
    """
    require_type(cs, ConfigSet, "cs", CONFIGS_HINT)
    known = number_array(known, "known", "b")
    row = number_array(row, "row", dtype=dtype)
    if row.shape != (len(cs),):
        raise OptionError(f"row must have one entry per configuration ({len(cs)}), got shape {row.shape}")
    return normalise_row_unchecked(cs, row, known, dtype=dtype)


def normalise_row_unchecked(cs: ConfigSet, row: np.ndarray, known: np.ndarray, *, dtype: Any = np.float32) -> np.ndarray:
    """:func:`normalise_row` without the checks of its arguments, for the Sia policy's rows,
    which are its own arrays (not in ``__all__``)."""
    out = np.asarray(row, dtype=dtype).copy()
    mins = [out[cs.of_type(i)][out[cs.of_type(i)] > FLOOR] for i in range(len(cs.types)) if known[i]]
    mins = [v.min() for v in mins if v.size]
    g_min = float(min(mins)) if mins else 1.0
    out *= out.dtype.type(1.0 / g_min)  # the scale in float64, applied in the row's dtype
    for i in np.flatnonzero(~known):
        out[cs.of_type(int(i)) & (cs.num_gpus == 1)] = 1.0
    out[out <= FLOOR] = FLOOR
    return out


def reallocation_factor(age: float, restarts: int, penalty: float) -> float:
    """f = max(age - restarts·P, 0) / (age + P), and 1 for a job younger than P (B.5).

    >>> reallocation_factor(20, 0, 30), reallocation_factor(570, 2, 30)
    (1, 0.85)
    """
    check_finite(age, "age", -math.inf)
    check_count(restarts, "restarts", 0)
    check_finite(penalty, "penalty")
    return reallocation_factor_unchecked(age, restarts, penalty)


def reallocation_factor_unchecked(age: float, restarts: int, penalty: float) -> float:
    """:func:`reallocation_factor` without the checks of its arguments (not in ``__all__``)."""
    if age < penalty:
        return 1
    return max(age - restarts * penalty, 0) / (age + penalty)


def apply_reallocation(row: np.ndarray, factor: float, previous: int | None) -> np.ndarray:
    """Every entry but the previous configuration's multiplied by ``factor`` (B.5); unchanged
    when the job had no configuration."""
    row = require_type(row, np.ndarray, "row", " (a goodput row)")
    check_finite(factor, "factor")  # checked with no previous configuration too, where it is not read
    if previous is None:
        return row
    check_count(previous, "previous", 0)
    out = row * row.dtype.type(factor)
    out[previous] = row[previous]
    return out


def fairness_costs(goodput: np.ndarray, p: float = -0.5, clip: float = GOODPUT_CLIP) -> np.ndarray:
    """Objective coefficients ``min(round(G^p, 2), clip)`` (B.6), in ``goodput``'s dtype.

    >>> fairness_costs(np.array([1.0, 4.0, 1e-4]))
    array([  1. ,   0.5, 100. ])
    """
    require_type(p, numbers.Real, "p", " (a real number, the fairness power)")
    return fairness_costs_unchecked(number_array(goodput, "goodput"), p, check_finite(clip, "clip", strict=True))


def fairness_costs_unchecked(goodput: np.ndarray, p: float = -0.5, clip: float = GOODPUT_CLIP) -> np.ndarray:
    """:func:`fairness_costs` without the check of ``goodput``, for the Sia policy's own arrays
    (not in ``__all__``; the check of ``p`` stays)."""
    if p == 0 or not is_finite_number(p):  # (math.isfinite raised OverflowError on 10**400)
        raise OptionError(f"the fairness power p must be finite and non-zero, got {shown_number(p)}")
    with np.errstate(divide="ignore"):  # a zero goodput's inf is clipped below, as intended
        a = np.round(np.power(goodput, goodput.dtype.type(p) if goodput.dtype.kind == "f" else p), 2)
    a[a > clip] = clip
    return a
