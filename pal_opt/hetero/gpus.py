"""GPU-level view of a heterogeneous cluster: GPU positions, per-GPU variability, a job's speed.

The Sia simulator works with GPU types, nodes and per-node counts; the comparators (type-blind
PAL and Packed, pal-opt's ``ilp`` with types) choose individual GPUs.  This module gives every
GPU a position (types in cluster order, then nodes, then slots) and, optionally, a slowdown
factor per application class drawn from PAL-format measurement files per (type, class).

Variability (``--variability TYPE:CLASS=FILE``; ``CLASS=FILE`` for every type; ``DIR``, PAL's Longhorn files)
    Every GPU of ``TYPE`` draws one raw factor per class from the file's median-normalised
    per-run ``perf`` values, as PAL's simulator draws (:func:`pal_opt.io.measurements.sample_factors`,
    seeded; classes naming one file share the draw).  A (type, class) without a file is
    nominal (1.0).  The factors the schedulers see are binned per type and class as PAL bins
    them (:func:`pal_opt.binning.bin_values`); the simulator uses the raw factors.
Speed
    A job's progress rate on a GPU set is its rate on that type and shape divided by the
    slowest raw factor of its class among its GPUs (:meth:`Variability.slowdown`).
What placement can win
    :func:`placement_floor` gives, for a gang's per-node GPU counts on each type, the smallest
    slowest-factor any GPUs of that shape could have on the empty cluster.  The simulator
    reports the mean over job-rounds of both the slowdown the jobs ran at and this floor
    (``variability_slowdown`` in :func:`pal_opt.hetero.simulate.summarize`): how much of what variability
    cost a run a placer choosing among GPUs, with the same configurations, could have won back.
Applications and classes
    :data:`APP_CLASS` maps Sia's applications onto PAL's classes: the convolutional networks
    (cifar10, imagenet, yolov3) onto classA (ResNet-like), bert and deepspeech2 onto classB
    (BERT-like).  A CLASS may also be an application name, which then has factors of its own.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import OptionError
from ..options import Binning, check_seed, require_items, require_mapping, require_type, validate_choice
from .configs import GpuType, require_gpu_types

__all__ = ["APP_CLASS", "Layout", "Variability", "parse_variability", "unused_variability", "draw_variability",
           "placement_floor"]

#: Sia application -> PAL class whose measurements it draws (module docstring).
APP_CLASS: dict[str, str] = {
    "cifar10": "classA", "imagenet": "classA", "yolov3": "classA", "bert": "classB", "deepspeech2": "classB",
    "ncf": "classB", "gpt_pmp": "classB",
}


@dataclass(frozen=True)
class Layout:
    """GPU positions of a cluster of types: type-major, then node, then slot.

    Attributes
    ----------
    types
        The GPU types in cluster order.
    type_of, node_of
        Per GPU position: type index, node index within its type.
    first
        Position of each type's first GPU.
    """

    types: tuple[GpuType, ...]
    type_of: np.ndarray = field(init=False)
    node_of: np.ndarray = field(init=False)
    first: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", require_gpu_types(self.types, "types"))
        t = [i for i, gt in enumerate(self.types) for _ in range(gt.total_gpus)]
        n = [k for gt in self.types for k in range(gt.nodes) for _ in range(gt.gpus_per_node)]
        starts = np.cumsum([0] + [gt.total_gpus for gt in self.types])[:-1]
        object.__setattr__(self, "type_of", np.array(t, dtype=np.int64))
        object.__setattr__(self, "node_of", np.array(n, dtype=np.int64))
        object.__setattr__(self, "first", tuple(int(x) for x in starts))

    @property
    def num_gpus(self) -> int:
        return int(self.type_of.size)

    def server_of(self) -> np.ndarray:
        """A cluster-wide server index per GPU (nodes of all types numbered in order)."""
        offsets = np.cumsum([0] + [gt.nodes for gt in self.types])[:-1]
        return np.asarray(offsets)[self.type_of] + self.node_of

    def position(self, type_index: int, node: int, slot: int) -> int:
        return self.first[type_index] + node * self.types[type_index].gpus_per_node + slot

    def gpus_of_nodes(self, type_index: int, node_lists: Sequence[Sequence[int]],
                      out_of_service: np.ndarray | None = None) -> list[tuple[int, ...]]:
        """GPU positions for node-id lists of one type, placed in order, each GPU the lowest free
        slot of its node in service (``out_of_service``: a bool per position; the order of the
        node ids, and so the shape, is kept)."""
        gt = self.types[type_index]
        slots = [[self.position(type_index, n, k) for k in range(gt.gpus_per_node)] for n in range(gt.nodes)]
        if out_of_service is not None:
            slots = [[g for g in row if not out_of_service[g]] for row in slots]
        used = [0] * gt.nodes
        out = []
        for nodes in node_lists:
            gpus = []
            for node in nodes:
                gpus.append(slots[node][used[node]])
                used[node] += 1
            out.append(tuple(gpus))
        return out

    def unavailable(self, out_of_service: np.ndarray | None) -> np.ndarray:
        """A fresh bool mask per position, True on the GPUs out of service (all False for None),
        for a placer to mark the GPUs it takes in."""
        if out_of_service is None:
            return np.zeros(self.num_gpus, dtype=bool)
        return np.array(out_of_service, dtype=bool)

    def capacity(self, out_of_service: np.ndarray | None) -> np.ndarray | None:
        """GPUs in service per type for a round program's ``capacity`` (None: every GPU)."""
        return None if out_of_service is None else self.in_service(out_of_service)[0]

    def in_service(self, out_of_service: np.ndarray | None) -> tuple[np.ndarray, list[list[int]]]:
        """GPUs in service per type (int array), and per type the GPUs in service per node."""
        ok = np.ones(self.num_gpus, dtype=bool) if out_of_service is None else ~np.asarray(out_of_service, dtype=bool)
        per_type = np.bincount(self.type_of[ok], minlength=len(self.types)).astype(np.int64)
        per_node = [np.bincount(self.node_of[ok & (self.type_of == t)], minlength=gt.nodes).astype(int).tolist()
                    for t, gt in enumerate(self.types)]
        return per_type, per_node

    def shape(self, gpus: Sequence[int]) -> tuple[int, ...]:
        """GPUs per node as runs of consecutive GPUs on one (type, node)."""
        keys = [(int(self.type_of[g]), int(self.node_of[g])) for g in gpus]
        shape: list[int] = []
        for i, k in enumerate(keys):
            if i and k == keys[i - 1]:
                shape[-1] += 1
            else:
                shape.append(1)
        return tuple(shape)


@dataclass(frozen=True)
class Variability:
    """Per-GPU factors per class: raw (what the simulator runs at) and binned (what schedulers see).

    Attributes
    ----------
    raw, binned
        ``{class: (G,) float array}``; a class without an entry is nominal everywhere.
    files
        ``{"TYPE:CLASS": file}`` the factors were drawn from.
    """

    raw: Mapping[str, np.ndarray] = field(default_factory=dict)
    binned: Mapping[str, np.ndarray] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def class_of(app: str) -> str:
        return APP_CLASS.get(app, "classB")

    def key(self, app: str) -> str | None:
        """The class whose factors ``app`` uses (its own name first), or None (nominal)."""
        if app in self.raw:
            return app
        c = self.class_of(app)
        return c if c in self.raw else None

    def slowdown(self, app: str, gpus: Sequence[int]) -> float:
        """The slowest raw factor of ``app``'s class among ``gpus`` (1.0 without factors)."""
        k = self.key(app)
        if k is None or not len(gpus):
            return 1.0
        return float(self.raw[k][np.asarray(gpus, dtype=np.int64)].max())

    def levels(self, app: str, num_gpus: int) -> np.ndarray:
        """Binned factor per GPU for ``app`` (ones without factors)."""
        k = self.key(app)
        return np.ones(num_gpus) if k is None else np.asarray(self.binned[k], dtype=np.float64)

    @property
    def active(self) -> bool:
        return bool(self.raw)


#: The classes Sia's applications draw from (:data:`APP_CLASS`): what ``--variability DIR`` gives
#: every type, from PAL's Longhorn files (ResNet's for classA, BERT's for classB).
LONGHORN_CLASSES: tuple[str, ...] = ("classA", "classB")


def _items_of(item: str, names: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(type, class, file)`` of one ``--variability`` item: ``TYPE:CLASS=FILE``, ``CLASS=FILE``
    (every type) or ``DIR`` (every type, :data:`LONGHORN_CLASSES` from PAL's Longhorn files)."""
    head, sep, path = item.partition("=")
    if not sep and item and ":" not in item:  # a directory (one that is not is reported as such)
        from ..io.measurements import longhorn_files

        files = longhorn_files(item, "--variability", classes=LONGHORN_CLASSES)
        return [(t, c, os.fspath(files[c])) for t in names for c in LONGHORN_CLASSES]
    tname, colon, cls = head.partition(":") if ":" in head else ("", "", head)
    if not sep or not cls or not path or (colon and not tname):
        raise OptionError("--variability expects TYPE:CLASS=FILE, CLASS=FILE (every type) or a directory of PAL's "
                          f"Longhorn files for a cluster of GPU types, got {item!r}")
    if not colon and cls in names:
        raise OptionError(f"--variability {item}: {cls!r} is a GPU type; give TYPE:CLASS=FILE (or CLASS=FILE for "
                          "every type)")
    if colon and tname not in names:
        raise OptionError(f"--variability {item}: unknown GPU type {tname!r} (the cluster has {', '.join(names)})")
    return [(t, cls, path) for t in ([tname] if colon else names)]


def parse_variability(items: Sequence[str], types: Sequence[GpuType]) -> dict[tuple[str, str], str]:
    """``{(type, class): file}`` from ``TYPE:CLASS=FILE`` items; ``CLASS=FILE`` gives every type
    the file, and a directory of PAL's Longhorn files (``resnet-`` and ``bert-longhorn-agg.csv``)
    gives every type :data:`LONGHORN_CLASSES` from them, the ``longhorn`` variability of
    ``benchmarks/sia_compare.py``.

    Raises
    ------
    OptionError
        A malformed item, an unknown type, a class no application draws from (neither a class of
        :data:`APP_CLASS` nor an application) or a repeated (type, class).
    InstanceError
        A file that does not exist.
    """
    names = [t.name for t in require_gpu_types(types, "types")]
    items = require_items(items, "items", "a list of TYPE:CLASS=FILE strings", of=str)
    classes = sorted(set(APP_CLASS.values())) + sorted(APP_CLASS)
    out: dict[tuple[str, str], str] = {}
    given: dict[tuple[str, str], str] = {}  # the item that gave each, named in messages as typed
    for item in items:
        for tname, cls, path in _items_of(item, names):
            if cls not in classes:
                raise OptionError(f"--variability {item}: unknown class {cls!r}; no application draws from it "
                                  f"(classes: {', '.join(classes)})")
            if (tname, cls) in out:
                by = "" if given[(tname, cls)] == item else f" (by --variability {given[(tname, cls)]} too)"
                raise OptionError(f"--variability {item}: {tname}:{cls} given twice{by}")
            if not Path(path).is_file():
                from ..io.measurements import not_a_file_error

                raise not_a_file_error(path, f"--variability {item}")
            out[(tname, cls)] = os.fspath(path)
            given[(tname, cls)] = item
    return out


def unused_variability(files: Mapping[tuple[str, str], str], applications: Iterable[str]) -> list[str]:
    """The ``TYPE:CLASS`` items of ``files`` (:func:`parse_variability`) that no job of the
    ``applications`` draws from: an application uses its own name's factors when a file gives
    them (on any type), else its class's (:meth:`Variability.key`).  Such a file is read and
    then changes nothing, which looked like a run with variability."""
    named = {c for _, c in files}
    used = {a if a in named else Variability.class_of(a) for a in applications}
    return [f"{t}:{c}" for t, c in files if c not in used]


def draw_variability(layout: Layout, files: Mapping[tuple[str, str], str], seed: int = 0, binning: str = "pal-artifact") -> Variability:
    """Draw every GPU's raw factor per class (types in cluster order, classes sorted; one seeded
    stream), nominal where a (type, class) has no file; bin per type and class."""
    from ..binning import bin_values
    from ..io.measurements import sample_factors
    from ..seeds import make_rng

    require_type(layout, Layout, "layout", " (Layout(cluster))")
    require_mapping(files, "files", "a mapping of (type, class) to files (parse_variability)")
    check_seed(seed)  # both checked with no files too, where neither is read
    validate_choice(binning, [b.value for b in Binning], "binning mode")
    if not files:
        return Variability()
    classes = sorted({c for _, c in files})
    rng = make_rng(seed)
    raw = {c: np.ones(layout.num_gpus) for c in classes}
    binned = {c: np.ones(layout.num_gpus) for c in classes}
    for t, gt in enumerate(layout.types):
        mine = {c: files[(gt.name, c)] for c in classes if (gt.name, c) in files}
        if not mine:
            continue
        drawn = sample_factors(mine, gt.total_gpus, rng)
        sl = slice(layout.first[t], layout.first[t] + gt.total_gpus)
        for c, v in drawn.items():
            raw[c][sl] = v
            binned[c][sl] = bin_values(v, binning)
    for arr in (*raw.values(), *binned.values()):
        arr.setflags(write=False)
    return Variability(raw, binned, {f"{t}:{c}": f for (t, c), f in files.items()})


def _best_max(rows: np.ndarray, counts: tuple[int, ...]) -> float:
    """The smallest v such that every count (descending) gets a node of its own with at least
    that many GPUs of factor <= v (``rows``: one node's factors a row).  Giving the largest count
    the node with the most such GPUs, and so on down, is feasible whenever any matching is, so
    a threshold is feasible iff the descending counts fit under the descending capacities."""
    need = np.array(sorted(counts, reverse=True))
    if need.size > rows.shape[0] or need.max(initial=0) > rows.shape[1]:
        raise ValueError(f"per-node counts {counts} do not fit {rows.shape[0]} nodes of {rows.shape[1]} GPUs")
    values = np.unique(rows)
    lo, hi = 0, values.size - 1  # the largest factor is always feasible
    while lo < hi:
        mid = (lo + hi) // 2
        caps = np.sort((rows <= values[mid]).sum(axis=1))[::-1][: need.size]
        if np.all(need <= caps):
            hi = mid
        else:
            lo = mid + 1
    return float(values[lo])


def placement_floor(layout: Layout, variability: Variability) -> Callable[[str, Sequence[int]], float]:
    """``floor(app, gpus)``: the smallest slowest raw factor of ``app``'s class over all GPU sets
    with the per-node counts of ``gpus`` on each type (on the empty cluster; 1.0 without
    factors).  No placement with those counts runs faster; the floor ignores the other jobs."""
    require_type(layout, Layout, "layout", " (Layout(cluster))")  # read only when floor is called
    require_type(variability, Variability, "variability", " (parse_variability or draw_variability)")

    @functools.cache
    def best(key: str, type_index: int, counts: tuple[int, ...]) -> float:
        gt = layout.types[type_index]
        lo = layout.first[type_index]
        rows = np.asarray(variability.raw[key][lo : lo + gt.total_gpus]).reshape(gt.nodes, gt.gpus_per_node)
        return _best_max(rows, counts)

    @functools.cache  # the simulator asks for every held allocation every round; most repeat
    def of_key(key: str, gpus: tuple[int, ...]) -> float:
        per_node = Counter((int(layout.type_of[g]), int(layout.node_of[g])) for g in gpus)
        by_type: dict[int, list[int]] = {}
        for (t, _), n in per_node.items():
            by_type.setdefault(t, []).append(n)
        return max(best(key, t, tuple(sorted(c, reverse=True))) for t, c in by_type.items())

    def floor(app: str, gpus: Sequence[int]) -> float:
        key = variability.key(app)
        return 1.0 if key is None or not len(gpus) else of_key(key, tuple(gpus))

    return floor
