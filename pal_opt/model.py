"""The data model: clusters on a networkx graph, jobs, and one scheduling round.

A :class:`Cluster` keeps two views of the same facts:

* a **networkx graph** (``cluster.graph``): a root vertex ``("cluster",)``, optional rack
  vertices ``("rack", r)``, server vertices ``("server", s)`` and GPU vertices ``("gpu", g)``,
  with edges from parent to child.  GPU vertices carry ``factors`` (per class) and ``state``,
  and on a typed cluster ``type`` (the GPU type's name); the graph's own attributes
  (``graph.graph``) hold ``throughput``, the classes' relative throughputs per GPU type
  (:attr:`Cluster.throughput`), when the cluster has any;
* **flat numpy arrays** indexed by GPU position ``0..G-1``, which every policy, the cost model
  and the integer programs use.  Work that grows with the cluster is vectorised over them.

GPU ids, server ids, rack ids and job ids are the input's own; positions are internal.
"""

from __future__ import annotations

import enum
import itertools
import math
import numbers
import operator
import unicodedata
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, TypeVar

import numpy as np

from .errors import InputTypeError, InstanceError, OptionError, counted
from .options import DEFAULT_ROUND_LENGTH, is_finite_number, number_array, require_items, shown_number

if TYPE_CHECKING:  # networkx is imported where a graph is built (it costs ~0.1 s at start-up)
    import networkx as nx

__all__ = [
    "JobId",
    "FACTOR_RANGE",
    "require_instance",
    "usable_types",
    "check_job_types",
    "placement_type_error",
    "RoundArguments",
    "GpuState",
    "Level",
    "LEVEL_NAMES",
    "PAL_CLASSES",
    "MODEL_CLASS",
    "MODEL_ITER_TIME",
    "Cluster",
    "repeated_device",
    "non_integer_at",
    "is_id_collection",
    "checked_gpu_ids",
    "require_gpu_ids",
    "Job",
    "MAX_PRIORITY",
    "Pipeline",
    "keeps_placement",
    "RoundParams",
    "RoundInstance",
    "pal_locality",
    "JOB_KINDS",
    "FIXED_COUNT_KINDS",
]

JobId = int | str
T = TypeVar("T")
_MISSING = object()

#: PAL's four application classes, in the order PAL sorts its queue by.
PAL_CLASSES: tuple[str, ...] = ("classA", "classB", "classC", "classD")

#: The PAL artifact's model -> class map (Sia-Philly job mix).
MODEL_CLASS: dict[str, str] = {
    "resnet50": "classA",
    "GPT2": "classB",
    "DCGAN": "classB",
    "BERT": "classB",
    "vgg19": "classC",
    "PointNet": "classD",
}

#: Seconds per training iteration on a median GPU, per the PAL artifact.
MODEL_ITER_TIME: dict[str, float] = {
    "resnet50": 0.1754,
    "GPT2": 3.5714,
    "DCGAN": 0.0469,
    "BERT": 0.179,
    "vgg19": 0.3006,
    "PointNet": 0.28125,
}


class GpuState(enum.IntEnum):
    """State of a GPU at the start of a round."""

    FREE = 0  #: free, or held by a queued (running) job that this round may move
    BUSY = 1  #: held by a job outside the queue
    FAILED = 2  #: out of service


class Level(enum.IntEnum):
    """Topology level spanned by a set of GPUs: the lowest vertex containing all of them."""

    SERVER = 0
    RACK = 1
    CLUSTER = 2


LEVEL_NAMES: tuple[str, ...] = ("server", "rack", "cluster")

#: Job kinds, as in Sia: *rigid* (count fixed, type free), *strong-scaling* (count and type
#: free, batch fixed), *guaranteed* (count and type fixed), *adaptive* (the batch is chosen too).
JOB_KINDS: tuple[str, ...] = ("rigid", "strong-scaling", "guaranteed", "adaptive")
#: The kinds whose GPU count is their demand.
FIXED_COUNT_KINDS: tuple[str, ...] = ("rigid", "guaranteed")


def pal_locality(lam: float) -> tuple[float, float, float]:
    """PAL's single crossing penalty λ as per-level penalties ``(server, rack, cluster)``; λ is
    checked as a round's ``locality_penalty`` is (a finite number from 1 to 1e6).

    >>> pal_locality(1.7)
    (1.0, 1.7, 1.7)
    >>> pal_locality(float("nan"))
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: locality_penalty: must be a finite number >= 1, got nan
    """
    lam = _finite_at_least(lam, 1.0, "locality_penalty", high=FACTOR_RANGE[1])  # NaN, -1, 0.5 were taken
    return (1.0, lam, lam)


def _as_1d(a: Any, dtype: Any, name: str) -> np.ndarray:
    arr = number_array(a, name, dtype=dtype)
    if arr.ndim != 1:
        raise InstanceError(f"must be one-dimensional, got shape {arr.shape}", path=name)
    return _frozen(arr)


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only; a writeable one (it may be the caller's own, which
    ``np.asarray`` hands back as it is) is copied first, so that the caller's stays writeable."""
    if arr.flags.writeable:
        arr = arr.copy()
        arr.setflags(write=False)
    return arr


def _first_position(items: Iterable[Any]) -> tuple[dict[Any, int], np.ndarray]:
    """Position of each distinct item in order of first appearance, and each item's position
    (dict operations over the whole column, not a ``setdefault`` per item: 65,536 in 3 ms, not 15)."""
    items = list(items)
    pos: dict[Any, int] = dict.fromkeys(items, 0)  # numbered below
    for k, x in enumerate(pos):
        pos[x] = k
    return pos, np.fromiter(map(pos.__getitem__, items), dtype=np.int64, count=len(items))


#: The one type of the common column of GPU ids: :func:`non_integer_at` asks no more of it.
_PLAIN_INT = frozenset({int})


def _integer_type(t: type) -> bool:
    """Whether values of type ``t`` are integers: Python's ``int`` (and its subclasses, such as
    :class:`GpuState`) or a numpy integer, but not ``bool`` (``True`` is not GPU 1)."""
    return issubclass(t, (int, np.integer)) and not issubclass(t, bool)


def non_integer_at(values: Sequence[Any] | np.ndarray) -> int | None:
    """The index of the first of ``values`` that is not an integer (a Python ``int`` or a numpy
    integer; ``bool``, floats, integral ones too, and strings are not), or None if all are.

    Judged by the values' types, once per distinct type (a column of 65,536 ids in about 1 ms;
    an integer array by its dtype, at once), so that ``1.5``, ``True`` and ``"0"`` are never read
    as GPUs 1, 1 and 0 by an ``int()``.

    >>> non_integer_at([0, 3, np.int32(2)]), non_integer_at([0, 1.5]), non_integer_at([True]), non_integer_at(["0"])
    (None, 1, 0, 0)
    >>> non_integer_at(np.arange(4)), non_integer_at(np.array([0.0, 2.0])), non_integer_at(np.array([], dtype=bool))
    (None, 0, None)
    """
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "iu":
            return None
        if values.dtype.kind != "O":  # bools, floats, strings: not one is an integer
            return 0 if values.size else None
        values = values.ravel().tolist()
    types = set(map(type, values))
    if types <= _PLAIN_INT or all(map(_integer_type, types)):
        return None
    return next(k for k, v in enumerate(values) if not _integer_type(type(v)))


def is_id_collection(values: Any) -> bool:
    """Whether ``values`` can be a collection of GPU ids: an iterable that is not a string,
    bytes or a mapping (``"01"`` would iterate as ids ``"0"`` and ``"1"``, a dict as its keys;
    ``3`` for ``[3]`` is not iterable).  Whether its items are ids is :func:`require_gpu_ids`'s
    question.

    >>> is_id_collection([3]), is_id_collection(range(2)), is_id_collection(3), is_id_collection("01")
    (True, True, False, False)
    """
    return isinstance(values, Iterable) and not isinstance(values, str | bytes | Mapping)


def checked_gpu_ids(gpus: Any, known: Container[int], what: str, of: str, *,
                    not_ids: Callable[[Any], str] | None = None, not_integer: Callable[[Any], str] | None = None,
                    not_known: Callable[[Any], str] | None = None) -> list[int]:
    """The GPU ids a caller gave ``what`` (``gpus``), as ints in the given order, each one of
    ``known`` (a cluster's ``position``, or ``range(num_gpus)`` for positions), or an
    :class:`~pal_opt.errors.OptionError` at the first that is not: ``gpus`` not a collection of
    ids (:func:`is_id_collection`; ``{what} takes an iterable of GPU ids, got {gpus!r}``), an item
    not an integer (Python's or numpy's, not ``bool``) or not in ``known`` (``{what}: {g!r} is not
    a GPU id of {of}``).  ``not_ids``, ``not_integer`` and ``not_known`` word those cases
    otherwise (the value or the item given; ``not_integer`` falls back on ``not_known``).  The
    check of ``RoundPolicy.restore``, ``TypedScheduler.fail`` and ``restore`` and
    :func:`pal_opt.inforce.failed_gpus`.

    >>> checked_gpu_ids([2, np.int64(0)], range(4), "fail", "this cluster (0..3)")
    [2, 0]
    >>> checked_gpu_ids([2, True], range(4), "fail", "this cluster (0..3)")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: fail: True is not a GPU id of this cluster (0..3)
    """
    if not is_id_collection(gpus):
        raise OptionError(not_ids(gpus) if not_ids else f"{what} takes an iterable of GPU ids, got {gpus!r}")
    ids = list(gpus)
    for g in ids:
        integer = _integer_type(type(g))
        if integer and int(g) in known:
            continue
        if not integer and not_integer is not None:
            raise OptionError(not_integer(g))
        raise OptionError(not_known(g) if not_known else f"{what}: {g!r} is not a GPU id of {of}")
    return [int(g) for g in ids]


def require_gpu_ids(values: Sequence[Any] | np.ndarray, path: str) -> None:
    """An :class:`InstanceError` at ``path[k]`` quoting the first of ``values`` that is not a
    GPU id's type (:func:`non_integer_at`); nothing if all are integers (whether they are GPUs
    of a cluster is the caller's question).

    >>> require_gpu_ids([4, 1.5], "placements.a")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: placements.a[1]: must be a GPU id (integer), got 1.5
    """
    k = non_integer_at(values)
    if k is not None:
        v = values.ravel()[k].item() if isinstance(values, np.ndarray) else values[k]
        raise InstanceError(f"must be a GPU id (integer), got {v!r}", path=f"{path}[{k}]")


def _gpu_id_column(gpu_ids: Any) -> np.ndarray:
    """The GPU ids given to :meth:`Cluster.from_arrays` as an array; a list is judged value by
    value first (numpy reads ``[0, True]`` as the integers 0 and 1)."""
    if isinstance(gpu_ids, np.ndarray):
        return gpu_ids
    ids = list(gpu_ids)
    k = non_integer_at(ids)
    if k is not None:
        raise InstanceError(f"GPU ids must be integers, got {ids[k]!r} at index {k}", path="gpus[].id")
    return np.asarray(ids)


def _has_booleans(values: Any) -> bool:
    """Whether ``values`` (a per-GPU column) holds a ``bool``: numpy reads ``[0, True]`` as the
    integers 0 and 1, so a list is judged by its values' types (once per distinct type)."""
    if isinstance(values, np.ndarray):
        return values.dtype.kind == "b"
    return isinstance(values, list | tuple) and any(issubclass(t, bool | np.bool_) for t in set(map(type, values)))


def _state_column(state: Any) -> np.ndarray:
    """GPU states as an array, booleans refused: ``True`` is not BUSY (a mask of failed GPUs
    given as the states would mark them busy; ``np.where(mask, GpuState.FAILED, GpuState.FREE)``
    is one)."""
    if _has_booleans(state):
        raise InstanceError("GPU states must be 0 (free), 1 (busy) or 2 (failed), not booleans", path="gpus[].state")
    return np.asarray(state)


def _not_integers(ids: np.ndarray) -> str:
    """What an array of GPU ids that is not of integers holds, for its error: the first value
    that is not an integral number, else its dtype (``np.array([0.0, 2.0])``) or, for Python
    ints in an object array, that some are beyond 64 bits."""
    if ids.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            odd = np.flatnonzero(~np.isfinite(ids) | (ids != np.floor(ids)))
        return f", got {ids[odd[0]].item()!r} at index {odd[0]}" if odd.size else f", got an array of {ids.dtype}"
    if ids.dtype.kind != "O":
        return f", got an array of {ids.dtype}"
    k = non_integer_at(ids)
    if k is None:
        return " of 64 bits"
    return f", got {ids[k]!r} at index {k}"


def _validate_gpu_ids(ids: np.ndarray) -> None:
    if ids.ndim != 1:
        raise InstanceError("GPU ids must be integers", path="gpus[].id")
    if ids.size and ids.dtype.kind not in "iu":  # bools, floats (2.0 too), strings, integers beyond 64 bits
        raise InstanceError(f"GPU ids must be integers{_not_integers(ids)}", path="gpus[].id")
    if ids.size == 0:
        raise InstanceError("the cluster has no GPUs", path="gpus")
    if ids.min() < 0:  # as the instance file's ids: non-negative
        raise InstanceError(f"GPU ids must be non-negative, got {int(ids.min())}", path="gpus[].id")
    uniq, counts = np.unique(ids, return_counts=True)
    if uniq.size != ids.size:
        raise InstanceError(f"duplicate GPU id {int(uniq[np.argmax(counts > 1)])}", path="gpus[].id")


#: The largest id magnitude an instance file holds (JSON Schema ``ident``: a 64-bit integer).
_MAX_ID = 2**63 - 1
#: The largest demand or allowed count an instance file holds (JSON Schema: a 64-bit integer).
_MAX_COUNT = 2**63 - 1


def plain_text(s: str) -> bool:
    """Whether ``s`` holds no control character (tab and line breaks included), lone surrogate or
    non-character (U+FFFE, U+FFFF): what every export can write (a TSV cell, XML text).  Other
    Unicode is fine: letters of any script, no-break spaces, zero-width joiners, marks.

    >>> plain_text("می\u200cخواهم"), plain_text("job\xa01"), plain_text("a\x01b"), plain_text(chr(0xD800))
    (True, True, False, False)
    """
    if s.isprintable():  # the common case, in C
        return True
    return not any(unicodedata.category(c) in ("Cc", "Cs") or c in "\ufffe\uffff" for c in s)


def _plain_id(x: Any, path: str) -> int | str:
    """A server or rack id as the instance file holds it: an integer of 64 bits or a non-empty
    string (numpy's integers and strings made Python's); anything else is an error at ``path``."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and -_MAX_ID <= x <= _MAX_ID:
        return int(x)
    if isinstance(x, str) and x:
        if not plain_text(x):  # a control character or a lone surrogate broke every export (TSV, XML)
            raise InstanceError(f"must be text without a control character (tab, line break), lone surrogate or "
                                f"non-character, got {x!r}", path=path)
        return str(x)
    raise InstanceError(f"must be an integer or a non-empty string (an integer of 64 bits), got {x!r}", path=path)


def _plain_ids(ids: Sequence[Any], path: str) -> list[int | str]:
    """:func:`_plain_id` of each of ``ids``; errors name ``path`` with the index."""
    if set(map(type, ids)) <= {int, str} and all(  # each distinct id once: a server's id recurs per GPU
            x and plain_text(x) if type(x) is str else -_MAX_ID <= x <= _MAX_ID for x in set(ids)):
        return list(ids)
    return [_plain_id(x, path.format(k)) for k, x in enumerate(ids)]


#: The range a per-GPU slowdown factor may take: measured GPUs differ by tens of percent (outliers
#: 1.5x); a factor a million times off is a unit error, and beyond about 1e15 the binning's
#: arithmetic overflows.
FACTOR_RANGE: tuple[float, float] = (1e-6, 1e6)


class _GpuFactorError(InstanceError):
    """A bad factor of one GPU (``factor of GPU 3 must ...`` at ``factors.<class>``), knowing the
    GPU, so that :meth:`Cluster.from_graph` can say it of the GPU's vertex."""

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None,
                 gpu: int | None = None) -> None:
        super().__init__(message, source=source, path=path)
        self.gpu = gpu


def _factor_column(cname: Any, values: Any, ids: np.ndarray) -> np.ndarray:
    """One class's factors as float64: numbers only (a text such as ``"1.0"`` or a bool, which
    numpy would convert without a word, is an error naming the GPU, as is an integer past a
    float's range, ``10**400``, which NaN's error names: the conversion's ``OverflowError`` was
    "malformed cluster data")."""
    arr = np.asarray(values)
    # a list is read as given: numpy turns [1.0, True] into floats and [1.0, "1.0"] into texts
    given = values if not isinstance(values, np.ndarray) and arr.ndim == 1 else None
    if arr.dtype.kind in "iuf" and (given is None or _plain_numbers(given)):
        return arr.astype(np.float64, copy=False)
    flat = list(given) if given is not None else arr.ravel().tolist()
    for i, x in enumerate(flat):
        if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
            raise _factor_error(cname, i, ids, arr.shape, f"must be a number, got {x!r}")
        if isinstance(x, numbers.Integral) and not is_finite_number(x):
            raise _factor_error(cname, i, ids, arr.shape, f"must be finite and positive, got {shown_number(x)}")
    return np.asarray(flat, dtype=np.float64).reshape(arr.shape)


def _factor_error(cname: Any, i: int, ids: np.ndarray, shape: tuple[int, ...], what: str) -> InstanceError:
    """The error for entry ``i`` of class ``cname``'s factors: naming its GPU when the factors
    lie one per GPU id (``shape`` is ``ids``'), else the entry."""
    if shape != ids.shape:
        return InstanceError(f"factor of entry {i} {what}", path=f"factors.{cname}")
    return _GpuFactorError(f"factor of GPU {int(ids[i])} {what}", path=f"factors.{cname}", gpu=int(ids[i]))


def _plain_numbers(values: Iterable[Any]) -> bool:
    """Every value a real number and none a bool, judged by the values' types: a few types for a
    column of any length (an ``isinstance`` per value took 25 times as long on NumPy scalars)."""
    return all(issubclass(t, numbers.Real) and not issubclass(t, bool | np.bool_) for t in set(map(type, values)))


def _validate_factors(factors: Mapping[str, np.ndarray], ids: np.ndarray) -> None:
    if not factors:
        raise InstanceError("no application class has factors", path="factors")
    for cname, arr in factors.items():
        if not isinstance(cname, str) or not cname or not plain_text(cname):
            raise InstanceError(f"class name must be a non-empty string without a control character, got {cname!r}",
                                path="factors")
        if arr.shape != ids.shape:
            raise InstanceError(f"expected {ids.size} factors, got shape {arr.shape}", path=f"factors.{cname}")
        bad = ~np.isfinite(arr) | (arr <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise _GpuFactorError(f"factor of GPU {int(ids[i])} must be finite and positive, got {float(arr[i])!r}",
                                  path=f"factors.{cname}", gpu=int(ids[i]))
        bad = (arr < FACTOR_RANGE[0]) | (arr > FACTOR_RANGE[1])
        if bad.any():  # far outside, the binning's arithmetic overflows (NaN or negative levels)
            i = int(np.argmax(bad))
            raise _GpuFactorError(f"factor of GPU {int(ids[i])} must be in {FACTOR_RANGE[0]:g}..{FACTOR_RANGE[1]:g} "
                                  f"(a slowdown relative to a typical GPU), got {float(arr[i])!r}",
                                  path=f"factors.{cname}", gpu=int(ids[i]))


def _validate_types(names: Any, type_of: np.ndarray, n: int) -> None:
    """GPU type names (distinct, non-empty strings) and each GPU's type position (every type used)."""
    if not isinstance(names, tuple) or not all(isinstance(t, str) and t for t in names):
        raise InstanceError(f"GPU type names must be non-empty strings, got {names!r}", path="gpus[].type")
    bad = next((t for t in names if not plain_text(t)), None)
    if bad is not None:
        raise InstanceError(f"GPU type names must be text without a control character (tab, line break), lone "
                            f"surrogate or non-character, got {bad!r}", path="gpus[].type")
    if len(set(names)) != len(names):
        raise InstanceError(f"GPU type names must be distinct, got {list(names)!r}", path="gpus[].type")
    if type_of.shape != (n,):
        raise InstanceError(f"expected one GPU type per GPU, got shape {type_of.shape}", path="gpus[].type")
    if not names:
        return
    if n and (type_of.min() < 0 or type_of.max() >= len(names)):
        raise InstanceError("GPU type positions out of range", path="gpus[].type")
    unused = np.flatnonzero(np.bincount(type_of, minlength=len(names)) == 0)
    if unused.size:
        raise InstanceError(f"GPU type {names[int(unused[0])]!r} has no GPUs", path="gpus[].type")


def _validate_throughput(table: Any, names: tuple[str, ...], classes: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``{class: {type: relative throughput}}``: known classes and types, finite positive values."""
    if not isinstance(table, Mapping):
        raise InstanceError(f"must map classes to {{type: throughput}}, got {table!r}", path="throughput")
    out: dict[str, dict[str, float]] = {}
    for cname, row in table.items():
        if cname not in classes:
            raise InstanceError(f"class {cname!r} has no GPU factors (known: {', '.join(classes)})",
                                path=f"throughput.{cname}")
        if not isinstance(row, Mapping):
            raise InstanceError(f"must map GPU types to throughputs, got {row!r}", path=f"throughput.{cname}")
        for t, v in row.items():
            if t not in names:
                known = ", ".join(names) if names else "none: the cluster has no GPU types"
                raise InstanceError(f"unknown GPU type {t!r} (known: {known})", path=f"throughput.{cname}.{t}")
            _finite_at_least(v, 0.0, f"throughput.{cname}.{t}", strict=True)
        out[str(cname)] = {str(t): float(v) for t, v in row.items()}
    return out


def _type_columns(gpu_types: Sequence[str] | None, n: int) -> tuple[tuple[str, ...], np.ndarray]:
    """Per-GPU type names as (type names in order of first appearance, each GPU's position)."""
    if gpu_types is None:
        return (), np.zeros(n, dtype=np.int64)
    names = list(gpu_types)
    if len(names) != n:
        raise InstanceError(f"one GPU type per GPU expected, got {len(names)} for {n} GPUs", path="gpus[].type")
    bad = next((t for t in names if not isinstance(t, str) or not t), None)
    if bad is not None:
        raise InstanceError(f"GPU type names must be non-empty strings, got {bad!r}", path="gpus[].type")
    pos, codes = _first_position(names)
    return tuple(pos), codes


def repeated_device(server: Sequence[Any] | np.ndarray, devices: Sequence[int] | np.ndarray) -> tuple[int, int] | None:
    """``(i, j)``: the first GPU ``i`` (by position) whose device number an earlier GPU ``j`` of the
    same server has; None when every server's device numbers are distinct.  ``server``: each
    GPU's server (ids or positions); ``devices``: integers.  The readers name ``i`` and ``j`` in
    their own terms (an instance file's index, a GraphML vertex, a CSV line).

    >>> repeated_device(["a", "a", "b", "a"], [0, 1, 0, 1])
    (3, 1)
    """
    srv = server if isinstance(server, np.ndarray) and np.issubdtype(server.dtype, np.integer) \
        else _first_position(server)[1]
    dev = np.asarray(devices, dtype=np.int64)
    order = np.lexsort((np.arange(dev.size), dev, srv))
    s, d = srv[order], dev[order]
    again = np.flatnonzero((s[1:] == s[:-1]) & (d[1:] == d[:-1])) + 1
    if again.size == 0:
        return None
    i = int(order[again].min())
    return i, int(np.flatnonzero((srv == srv[i]) & (dev == dev[i]))[0])


def _device_column(devices: Sequence[int] | np.ndarray, gpu_ids: np.ndarray) -> np.ndarray:
    """The device numbers given to :meth:`Cluster.from_arrays` as an array; a ``bool`` in a list
    is an error (numpy reads ``[0, True]`` as the integers 0 and 1; True is not device 1)."""
    if _has_booleans(devices) and not isinstance(devices, np.ndarray):  # an array of bools: the constructor's
        i = next(i for i, d in enumerate(devices) if isinstance(d, bool | np.bool_))
        gpu = f" (GPU {gpu_ids[i].item()!r})" if i < gpu_ids.size else ""
        raise InstanceError(f"device numbers must be integers >= 0, got {devices[i]!r}{gpu}", path="gpus[].device")
    return np.asarray(devices)


def _validate_devices(devices: Any, gpu_ids: np.ndarray, server_of: np.ndarray,
                      server_ids: tuple[Any, ...]) -> np.ndarray:
    """Per-GPU device numbers: integers >= 0 (integral floats, as pandas reads a column, too), one
    per GPU, distinct on each server."""
    arr = np.asarray(devices)
    if arr.shape != gpu_ids.shape:
        raise InstanceError(f"one device number per GPU expected, got shape {arr.shape} for {gpu_ids.size} GPUs",
                            path="gpus[].device")
    if np.issubdtype(arr.dtype, np.integer):
        bad = arr < 0
    elif np.issubdtype(arr.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr < 0) | (arr != np.floor(arr)) | (arr > 2**63 - 1)
    else:  # bools, strings, objects: none is a device number
        bad = np.ones(arr.shape, dtype=bool)
    if bad.any():
        i = int(np.argmax(bad))
        raise InstanceError(f"device numbers must be integers >= 0, got {arr[i].item()!r} (GPU {int(gpu_ids[i])})",
                            path="gpus[].device")
    out = _as_1d(arr.astype(np.int64), np.int64, "gpus[].device")
    again = repeated_device(server_of, out)
    if again is not None:
        i, j = again
        raise InstanceError(f"GPUs {int(gpu_ids[j])} and {int(gpu_ids[i])} of server {server_ids[server_of[i]]!r} "
                            f"have the same device number {int(out[i])}", path="gpus[].device")
    return out


def _validate_topology(server_of: np.ndarray, n_servers: int, rack_of_server: np.ndarray, n_racks: int) -> None:
    if server_of.size and (server_of.min() < 0 or server_of.max() >= n_servers):
        raise InstanceError("server positions out of range", path="gpus[].server")
    if rack_of_server.shape != (n_servers,):
        raise InstanceError(f"expected one rack per server, got shape {rack_of_server.shape}", path="racks")
    if n_racks == 0 and rack_of_server.size and (rack_of_server != -1).any():
        raise InstanceError("a flat cluster has no racks", path="racks")
    if n_racks and rack_of_server.size and (rack_of_server.min() < 0 or rack_of_server.max() >= n_racks):
        raise InstanceError("every server of a racked cluster needs a rack", path="racks")


@dataclass(frozen=True, eq=False)
class Cluster:
    """A GPU cluster: GPUs under servers, servers optionally under racks.

    Build it with :meth:`from_arrays`, :meth:`from_graph` or :meth:`uniform`; the fields are
    checked once, here, and made read-only.

    Attributes
    ----------
    gpu_ids : ndarray of int64, shape (G,)
        The input's GPU ids, unique.
    server_of : ndarray of int64, shape (G,)
        Position of each GPU's server in ``server_ids``.
    server_ids : tuple
        The input's server ids.
    rack_of_server : ndarray of int64, shape (S,)
        Position of each server's rack in ``rack_ids``; all ``-1`` for a flat cluster.
    rack_ids : tuple
        The input's rack ids; empty for a flat cluster.
    factors : mapping str -> ndarray of float64, shape (G,)
        Measured slowdown factor per application class (1.0 = the median GPU, higher is slower).
    state : ndarray of int8, shape (G,)
        :class:`GpuState` per GPU.
    type_names : tuple of str
        The GPU types (``"aws"``, ``"rtx"``...), in order of first appearance; empty for an
        untyped cluster (one anonymous type, the default).
    type_of : ndarray of int64, shape (G,)
        Position of each GPU's type in ``type_names`` (all 0 on an untyped cluster).
    throughput : mapping str -> mapping str -> float
        Relative throughput of an application class on a GPU type, ``{class: {type: value}}``
        (higher is faster).  A class without a row runs at 1.0 on every type; a row without a
        type means the class has no profile there and cannot use it.  A job's speed on a GPU
        set is its throughput on the set's type divided by the slowest factor among its GPUs:
        the binned factors are divided by it (:func:`pal_opt.binning.binned_factors`).
    devices : ndarray of int64, shape (G,), or None
        Each GPU's device number on its server (the ``N`` of ``/dev/nvidiaN``, what
        ``CUDA_VISIBLE_DEVICES`` names under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), when the input
        gives them (Blox's ``Local_GPU_ID``, ``gres.conf`` ``File=/dev/nvidia...``, the instance
        file's ``cluster.gpus.device``); distinct on each server.  None when it does not (GPU
        counts, a Kubernetes node list: :mod:`pal_opt.topology.kubernetes`): the exports then
        number a server's GPUs by rank (:func:`pal_opt.topology.placement.local_indices`).
    """

    gpu_ids: np.ndarray
    server_of: np.ndarray
    server_ids: tuple[Any, ...]
    rack_of_server: np.ndarray
    rack_ids: tuple[Any, ...]
    factors: Mapping[str, np.ndarray]
    state: np.ndarray
    type_names: tuple[str, ...] = ()
    type_of: np.ndarray = None  # type: ignore[assignment]  # None: untyped; made an array in __post_init__
    throughput: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    devices: np.ndarray | None = None
    # not an init field: dataclasses.replace gives the new cluster an empty cache, never this one's.
    # A dict, not functools: per cluster and key with a validity check (:meth:`memo`), gone with the cluster
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


    def __post_init__(self) -> None:
        ids = np.asarray(self.gpu_ids)
        _validate_gpu_ids(ids)
        if not isinstance(self.factors, Mapping):
            raise InstanceError(f"must map class names to per-GPU factors, got {type(self.factors).__name__}",
                                path="factors")
        fac = {c: _factor_column(c, v, ids) for c, v in self.factors.items()}
        _validate_factors(fac, ids)
        st = _state_column(self.state)
        if st.shape != ids.shape or (st.size and not np.isin(st, (0, 1, 2)).all()):
            raise InstanceError("GPU states must be 0 (free), 1 (busy) or 2 (failed)", path="gpus[].state")
        server_of = _as_1d(self.server_of, np.int64, "gpus[].server")
        if server_of.shape != ids.shape:
            raise InstanceError("one server per GPU expected", path="gpus[].server")
        rack_of = _as_1d(self.rack_of_server, np.int64, "servers")
        set_ = object.__setattr__
        set_(self, "server_ids", tuple(_plain_ids(require_items(self.server_ids, "server_ids", "a list of server ids"),
                                                  "server_ids[{}]")))
        set_(self, "rack_ids", tuple(_plain_ids(require_items(self.rack_ids, "rack_ids", "a list of rack ids"),
                                                "rack_ids[{}]")))
        _validate_topology(server_of, len(self.server_ids), rack_of, len(self.rack_ids))
        fac = {c: _frozen(a) for c, a in fac.items()}
        set_(self, "gpu_ids", _as_1d(ids, np.int64, "gpus[].id"))
        set_(self, "server_of", server_of)
        set_(self, "rack_of_server", rack_of)
        set_(self, "factors", fac)
        set_(self, "state", _as_1d(st, np.int8, "gpus[].state"))
        names = tuple(self.type_names) if isinstance(self.type_names, (tuple, list)) else self.type_names
        type_of = np.zeros(ids.size, dtype=np.int64) if self.type_of is None else np.asarray(self.type_of)
        if type_of.size and not np.issubdtype(type_of.dtype, np.integer):
            raise InstanceError("GPU type positions must be integers", path="gpus[].type")
        _validate_types(names, type_of, ids.size)
        set_(self, "type_names", names)
        set_(self, "type_of", _as_1d(type_of, np.int64, "gpus[].type"))
        set_(self, "throughput", _validate_throughput(self.throughput, names, fac))
        if self.devices is not None:
            set_(self, "devices", _validate_devices(self.devices, self.gpu_ids, server_of, self.server_ids))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without :meth:`memo`'s data: derived, computed again where it is needed (some
        of it is keyed by ``id()``, meaningless in another process, and some is held by
        ``functools.lru_cache`` builders, which do not pickle)."""
        return {**self.__dict__, "_cache": {}}

    def memo(self, key: Any, compute: Callable[[], T], valid: Callable[[T], bool] | None = None) -> T:
        """``compute()``, computed once per cluster and ``key``, for derived data such as binned
        factors and the policies' indexes (the cluster itself is immutable).  A kept value that
        ``valid`` rejects is computed again."""
        hit = self._cache.get(key, _MISSING)
        if hit is _MISSING or (valid is not None and not valid(hit)):
            hit = self._cache[key] = compute()
        return hit  # type: ignore[no-any-return]

    def memoized(self, key: Any) -> Any:
        """What :meth:`memo` keeps for ``key``, or None if it keeps nothing (never computes)."""
        return self._cache.get(key)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_arrays(
        cls,
        gpu_ids: Sequence[int] | np.ndarray,
        server: Sequence[Any] | np.ndarray,
        factors: Mapping[str, Sequence[float] | np.ndarray],
        state: Sequence[int] | np.ndarray | None = None,
        rack_of_server: Mapping[Any, Any] | None = None,
        *,
        source: str | None = None,
        gpu_types: Sequence[str] | None = None,
        throughput: Mapping[str, Mapping[str, float]] | None = None,
        devices: Sequence[int] | np.ndarray | None = None,
    ) -> Cluster:
        """Build a cluster from per-GPU columns.

        Parameters
        ----------
        gpu_ids
            GPU ids (integers, unique): Python ints or numpy integers; ``True``, ``2.0`` or
            ``"0"`` is an error (:func:`non_integer_at`).
        server
            Each GPU's server id: an integer of 64 bits or a non-empty string, as in the instance
            file (numpy's become Python's); servers keep the order of first appearance.
        factors
            ``{class: per-GPU factors}``; finite and positive.
        state
            Per-GPU :class:`GpuState` values; all free when omitted.
        rack_of_server
            ``{server id: rack id}`` for a racked cluster (rack ids as server ids); ``None`` for
            a flat one.
        source
            File name used in error messages.
        gpu_types
            Each GPU's type name; ``None`` for an untyped cluster (one type).
        throughput
            ``{class: {type: relative throughput}}`` (see the class docstring); default none.
        devices
            Each GPU's device number on its server (:attr:`devices`); ``None`` when unknown.

        Examples
        --------
        >>> c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.1, 0.9, 1.0]})
        >>> c.num_gpus, c.num_servers, c.span_level([0, 1]).name, c.span_level([1, 2]).name
        (4, 2, 'SERVER', 'CLUSTER')
        >>> t = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types=["a", "a", "b", "b"])
        >>> t.type_names, t.type_of.tolist(), t.type_counts.tolist()
        (('a', 'b'), [0, 0, 1, 1], [2, 2])
        """
        try:
            ids = _gpu_id_column(gpu_ids)
            servers = _plain_ids(server.tolist() if isinstance(server, np.ndarray) else list(server), "gpus[{}].server")
            if len(servers) != ids.size:
                raise InstanceError("one server per GPU expected", path="gpus[].server")
            server_pos, server_of = _first_position(servers)
            rack_ids: tuple[Any, ...] = ()
            rack_of = np.full(len(server_pos), -1, dtype=np.int64)
            if rack_of_server is not None:
                missing = [s for s in server_pos if s not in rack_of_server]
                if missing:
                    raise InstanceError(f"server {missing[0]!r} has no rack", path="racks")
                rack_pos, rack_of = _first_position(_plain_id(rack_of_server[s], f"racks.{s}") for s in server_pos)
                rack_ids = tuple(rack_pos)
            fac: Any = dict(factors) if isinstance(factors, Mapping) else factors  # numbers only: __post_init__
            st = np.zeros(ids.size, dtype=np.int8) if state is None else _state_column(state)
            names, type_of = _type_columns(gpu_types, ids.size)
            return cls(ids, server_of, tuple(server_pos), rack_of, rack_ids, fac, st, names, type_of,
                       dict(throughput or {}), None if devices is None else _device_column(devices, ids))
        except InstanceError as exc:
            raise exc.with_source(source) if source else exc from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise InstanceError(f"malformed cluster data: {exc}", source=source) from None

    @classmethod
    def uniform(
        cls,
        nodes: int,
        gpus_per_node: int,
        factors: Mapping[str, Sequence[float] | np.ndarray],
        state: Sequence[int] | np.ndarray | None = None,
        racks: int = 0,
    ) -> Cluster:
        """``nodes`` servers of ``gpus_per_node`` GPUs; GPU g on server g // gpus_per_node.

        With ``racks > 0`` servers are dealt to racks in contiguous blocks.
        """
        for name, value, least in (("nodes", nodes, 1), ("gpus_per_node", gpus_per_node, 1), ("racks", racks, 0)):
            if not _is_int(value) or value < least:
                raise InstanceError(f"must be an integer >= {least}, got {value!r}", path=name)
        g = nodes * gpus_per_node
        server = np.arange(g) // gpus_per_node
        rmap = None
        if racks:
            per = math.ceil(nodes / racks)
            rmap = {s: s // per for s in range(nodes)}
        return cls.from_arrays(np.arange(g), server, factors, state, rmap)

    @classmethod
    def from_graph(cls, graph: nx.Graph, *, source: str | None = None) -> Cluster:
        """Build a cluster from a graph of the shape described in the module docstring.

        GPU vertices are ``("gpu", id)`` with attributes ``factors`` (dict), optional
        ``state`` (:class:`GpuState`, int or name), optional ``type`` (the GPU type's name;
        on every GPU or on none) and optional ``device`` (its device number on its server,
        :attr:`devices`; on every GPU or on none); each has exactly one server parent; servers have zero or one
        rack parent (all or none).  The GPU types' throughputs, ``{class: {type: value}}``, are
        the graph attribute ``graph.graph["throughput"]`` (optional; see the class docstring).

        A ``networkx.DiGraph`` (or ``MultiDiGraph``) has its edges from parent to child.  An
        undirected ``networkx.Graph`` (or ``MultiGraph``) reads the same with the vertices'
        kinds saying which end is the parent: a GPU's server is the ``("server", s)`` vertex it is
        joined to, a server's rack the ``("rack", r)`` vertex it is joined to.
        """
        import networkx as nx  # loaded already when a graph is passed

        if not isinstance(graph, nx.Graph):
            hint = " (a Cluster is one already)" if isinstance(graph, Cluster) else ""
            raise InstanceError(f"must be a networkx graph (DiGraph, or Graph with the vertices' kinds as the "
                                f"hierarchy), got {type(graph).__name__}{hint}", source=source, path="graph")
        gpus, attrs = _graph_gpus(graph, source)
        if not gpus:
            raise InstanceError("graph has no ('gpu', id) vertices", source=source, path="graph")
        types: list[Any] = [a.get("type") for a in attrs]
        if any(t is not None for t in types) and any(t is None for t in types):
            raise InstanceError("either every GPU has a type or none does", source=source, path="graph")
        devices: list[Any] = [a.get("device") for a in attrs]
        if any(d is not None for d in devices) and any(d is None for d in devices):
            raise InstanceError("either every GPU has a device number or none does", source=source, path="graph")
        server, facs, states, racks = _graph_columns(graph, gpus, attrs, source)
        try:
            return cls.from_arrays([n[1] for n in gpus], server, facs, states, racks, source=source,
                                   gpu_types=types if types[0] is not None else None,
                                   throughput=graph.graph.get("throughput"),
                                   devices=devices if devices[0] is not None else None)
        except _GpuFactorError as exc:  # a GPU's factor: named by its vertex, as the graph's other errors
            vertex = next(n for n in gpus if int(n[1]) == exc.gpu)  # the cluster's GPUs are the graph's
            raise InstanceError(exc.message, source=source, path=f"graph.{vertex}.{exc.path}") from None

    # ----------------------------------------------------------------- derived views
    @property
    def num_gpus(self) -> int:
        return int(self.gpu_ids.size)

    @property
    def num_servers(self) -> int:
        return len(self.server_ids)

    @property
    def racked(self) -> bool:
        return bool(self.rack_ids)

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(self.factors)

    @property
    def typed(self) -> bool:
        """True if the GPUs carry type names (else the cluster has one anonymous type)."""
        return bool(self.type_names)

    @property
    def num_types(self) -> int:
        """Number of GPU types (1 on an untyped cluster)."""
        return max(1, len(self.type_names))

    @cached_property
    def type_counts(self) -> np.ndarray:
        """GPUs per type (all states), indexed like ``type_names``."""
        return np.bincount(self.type_of, minlength=self.num_types)

    @cached_property
    def type_index(self) -> dict[str, int]:
        """GPU type name -> position in ``type_names``."""
        return {t: k for k, t in enumerate(self.type_names)}

    def gpu_type_names(self) -> list[str] | None:
        """Each GPU's type name, or None on an untyped cluster."""
        return [self.type_names[k] for k in self.type_of.tolist()] if self.typed else None

    def speed(self, perfclass: str) -> np.ndarray | None:
        """Per GPU, the relative throughput of ``perfclass`` on the GPU's type (1.0 where the
        class has no row; 1.0 also on a type its row leaves out, which it cannot use); None when
        the class has no row at all."""
        row = self.throughput.get(perfclass)
        if row is None:
            return None
        per_type = np.asarray([row.get(t, 1.0) for t in self.type_names], dtype=np.float64)
        return per_type[self.type_of]

    @cached_property
    def rack_of(self) -> np.ndarray:
        """Rack position per GPU (``-1`` everywhere in a flat cluster)."""
        return self.rack_of_server[self.server_of]

    @cached_property
    def server_sizes(self) -> np.ndarray:
        """Number of GPUs per server (all states)."""
        return np.bincount(self.server_of, minlength=self.num_servers)

    @cached_property
    def position(self) -> dict[int, int]:
        """GPU id -> position."""
        return {int(g): i for i, g in enumerate(self.gpu_ids.tolist())}

    @property
    def free_mask(self) -> np.ndarray:
        return self.state == GpuState.FREE

    def positions(self, gpu_ids: Iterable[int]) -> np.ndarray:
        """Positions of the given GPU ids (``KeyError`` for an unknown id).

        Raises
        ------
        InstanceError
            At ``gpu_ids[k]`` for an id that is not an integer (:func:`non_integer_at`):
            ``1.5``, ``True``, ``"0"`` and ``2.0`` are not read as GPUs 1, 1, 0 and 2.
        """
        if isinstance(gpu_ids, np.ndarray) and gpu_ids.dtype.kind in "iu":
            ids: Sequence[Any] = gpu_ids.tolist()  # Python ints: dict look-ups without numpy scalars
        else:
            ids = gpu_ids if isinstance(gpu_ids, list | tuple) else list(gpu_ids)
            if not _PLAIN_INT.issuperset(map(type, ids)):  # the common case, in C; else judged type by type
                require_gpu_ids(ids, "gpu_ids")
        return np.fromiter(map(self.position.__getitem__, ids), dtype=np.int64, count=len(ids))

    def span_level(self, gpu_ids: Iterable[int]) -> Level:
        """Topology level spanned by GPUs given by id."""
        return self.span_level_pos(self.positions(gpu_ids))

    def span_level_pos(self, pos: np.ndarray) -> Level:
        """Topology level spanned by GPUs given by position."""
        srv = self.server_of[pos]
        if srv.size == 0 or (srv == srv[0]).all():
            return Level.SERVER
        if self.racked:
            rk = self.rack_of_server[srv]
            if (rk == rk[0]).all():
                return Level.RACK
        return Level.CLUSTER

    def with_state(self, state: np.ndarray) -> Cluster:
        """A copy with another state vector (factors and topology shared), checked as the
        constructor checks one: a state that is not 0, 1 or 2 (``0.5``, ``300``) is an error, not
        cast to int8 (``0.5`` and ``1e10`` became 0, free; ``300`` an ``OverflowError``), and so
        are booleans (a mask of failed GPUs marked them busy)."""
        try:  # the constructor checks the values, then keeps them as int8 (a copy: the caller's stays its own)
            return replace(self, state=_state_column(state))
        except InstanceError as exc:  # the state is the one new field
            raise InstanceError(f"{exc.message}, one per GPU ({self.num_gpus}), got {state!r}"[:200],
                                path="state") from None

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The cluster as a networkx graph (built on first use)."""
        import networkx as nx

        gr = nx.DiGraph()
        if self.throughput:
            gr.graph["throughput"] = {c: dict(row) for c, row in self.throughput.items()}
        root = ("cluster",)
        gr.add_node(root, kind="cluster")
        for r in self.rack_ids:
            gr.add_node(("rack", r), kind="rack")
            gr.add_edge(root, ("rack", r))
        for s_pos, s in enumerate(self.server_ids):
            gr.add_node(("server", s), kind="server")
            parent = ("rack", self.rack_ids[self.rack_of_server[s_pos]]) if self.racked else root
            gr.add_edge(parent, ("server", s))
        classes = list(self.factors)
        fac = np.column_stack([self.factors[c] for c in classes])
        types = self.gpu_type_names()
        for i, gid in enumerate(self.gpu_ids.tolist()):
            node = ("gpu", gid)
            gr.add_node(
                node,
                kind="gpu",
                factors=dict(zip(classes, fac[i].tolist(), strict=True)),
                state=GpuState(int(self.state[i])),
            )
            if types is not None:
                gr.nodes[node]["type"] = types[i]
            if self.devices is not None:
                gr.nodes[node]["device"] = int(self.devices[i])
            gr.add_edge(("server", self.server_ids[self.server_of[i]]), node)
        return gr


def _is_vertex(node: Any, kind: str) -> bool:
    """Whether ``node`` is a ``(kind, id)`` vertex of a cluster graph."""
    return isinstance(node, tuple) and len(node) == 2 and node[0] == kind


def _graph_gpus(graph: nx.Graph, source: str | None) -> tuple[list[tuple[str, int]], list[Mapping[str, Any]]]:
    """The graph's ``("gpu", id)`` vertices in order of id, and their attributes; an id that is
    not an integer is an error naming it (ids of several types cannot even be sorted).  The ids
    are judged by their types and sorted by numpy when they fit in 64 bits (a check and a sort
    keyed by ``int()`` per vertex took 35 ms of 65,536); no pair per vertex is made (so many new
    tuples could set off the collector over the whole graph, 0.15 s)."""
    node_attrs = dict(graph.nodes(data=True))
    gpus = [n for n in node_attrs if isinstance(n, tuple) and n and n[0] == "gpu"]
    bad_shape = bool(set(map(len, gpus)) - {2})
    ids = [] if bad_shape else [n[1] for n in gpus]
    if bad_shape or set(map(type, ids)) - {int}:
        for n in gpus:
            if len(n) != 2 or not _is_int(n[1]):
                raise InstanceError("a GPU vertex must be ('gpu', id) with an integer id", source=source,
                                    path=f"graph.{n}")
        ids = [int(i) for i in ids]
    try:
        key = np.asarray(ids, dtype=np.int64)
    except OverflowError:  # an id beyond 64 bits (from_arrays refuses it)
        gpus.sort(key=lambda n: int(n[1]))
    else:
        if not (key[1:] > key[:-1]).all():  # ids are distinct: any sort gives the one order
            gpus = [gpus[i] for i in np.argsort(key, kind="stable").tolist()]
    return gpus, list(map(node_attrs.__getitem__, gpus))


def _graph_parents(graph: nx.Graph) -> tuple[dict[Any, Any], set[Any], dict[Any, Any], set[Any]]:
    """Each vertex's server parent and rack parent (the first found, as networkx's predecessors
    name it), and the vertices with more than one of either, from one pass over the
    predecessor lists: asking networkx for each GPU's predecessors took about as long as the
    rest of :meth:`Cluster.from_graph` together (65,536 GPUs).  ``graph.pred`` names each
    predecessor once, as ``predecessors()`` does, on a ``MultiDiGraph`` too (whose ``in_edges``
    are triples, one per parallel edge).  On an undirected graph a vertex's neighbours stand for
    its predecessors (:func:`_links`): a GPU's server neighbour is its server, a server's rack
    neighbour its rack; what else this finds (a rack's server neighbours) is never read."""
    server_of: dict[Any, Any] = {}
    rack_of: dict[Any, Any] = {}
    two_servers: set[Any] = set()
    two_racks: set[Any] = set()
    for v, preds in _links(graph).items():
        for u in preds:
            if isinstance(u, tuple) and len(u) == 2 and u[0] in ("server", "rack"):
                parent_of, twice = (server_of, two_servers) if u[0] == "server" else (rack_of, two_racks)
                if parent_of.setdefault(v, u) is not u:
                    twice.add(v)
    return server_of, two_servers, rack_of, two_racks


def _graph_columns(graph: nx.Graph, gpus: list[Any], attrs: list[Mapping[str, Any]], source: str | None
                   ) -> tuple[list[Any], dict[Any, list[Any]], np.ndarray, dict[Any, Any] | None]:
    """The GPUs' server ids, factors by class (as given), states and, on a racked graph, each
    server's rack id, column by column: a loop over the GPUs checking each in turn took 25 s on
    65,536 GPUs (each class's column was made anew for every GPU).  The first GPU that fails a
    check is checked again alone (:func:`_gpu_vertex_error`) for the error that loop gave."""
    server_of, two_servers, rack_of, two_racks = _graph_parents(graph)
    # map() of methods, not comprehensions: each column of 65,536 in a few ms
    srv: list[Any] = list(map(server_of.get, gpus))
    raw = list(map(operator.methodcaller("get", "factors", {}), attrs))
    states = _state_codes(list(map(operator.methodcaller("get", "state", GpuState.FREE), attrs)))
    bad = states < 0
    if None in srv or two_servers and not two_servers.isdisjoint(gpus):
        bad |= np.fromiter((s is None or n in two_servers for n, s in zip(gpus, srv, strict=True)), bool, len(gpus))
    kinds = set(map(type, raw))
    if not all(issubclass(t, Mapping) for t in kinds):  # judged by type: a few per column
        bad |= np.fromiter((not isinstance(f, Mapping) for f in raw), bool, len(gpus))
    if two_racks and not two_racks.isdisjoint(srv):
        bad |= np.fromiter((s in two_racks for s in srv), bool, len(gpus))
    if bad.any():
        _gpu_vertex_error(graph, gpus[int(np.argmax(bad))], source)
    classes = dict.fromkeys(itertools.chain.from_iterable(raw))  # in order of first appearance
    if kinds == {dict}:  # dict.get mapped over the column: a third of the time of a comprehension
        facs = {c: list(map(dict.get, raw, itertools.repeat(c))) for c in classes}
    else:
        facs = {c: [f.get(c) for f in raw] for c in classes}
    for c, column in facs.items():
        if None in column:
            raise InstanceError(f"has no factor for class {c!r}, which other GPUs have (every GPU needs one "
                                "per class)", source=source, path=f"graph.{gpus[column.index(None)]}.factors")
    server = [s[1] for s in srv]
    racks = {s[1]: rack_of[s][1] for s in dict.fromkeys(srv) if s in rack_of}
    if racks and len(racks) != len(set(server)):
        raise InstanceError("either every server hangs under a rack or none does", source=source, path="graph")
    return server, facs, states, racks or None


def _links(graph: nx.Graph) -> Mapping[Any, Iterable[Any]]:
    """Each vertex's possible parents: its predecessors in a directed graph, its neighbours in an
    undirected one (where the vertices' kinds say which is the parent)."""
    return graph.pred if graph.is_directed() else graph.adj  # type: ignore[attr-defined, no-any-return]


def _gpu_vertex_error(graph: nx.Graph, n: Any, source: str | None) -> NoReturn:
    """The first error of GPU vertex ``n``, checked in the order a GPU always was: one server
    parent, factors a mapping, a state, at most one rack above its server."""
    links = _links(graph)
    parents = [p for p in links[n] if _is_vertex(p, "server")]
    if len(parents) != 1:
        raise InstanceError("GPU must hang under exactly one server", source=source, path=f"graph.{n}")
    attrs = graph.nodes[n]
    _graph_factors(attrs.get("factors", {}), n, source)
    _graph_state(attrs.get("state", GpuState.FREE), n, source)
    if len([p for p in links[parents[0]] if _is_vertex(p, "rack")]) > 1:
        raise InstanceError("server must hang under at most one rack", source=source, path=f"graph.{parents[0]}")
    raise AssertionError(f"GPU vertex {n!r} was found wrong but passes every check")


def _graph_factors(factors: Any, vertex: Any, source: str | None) -> Mapping[Any, Any]:
    """A GPU vertex's ``factors`` attribute, ``{class: factor}``."""
    if not isinstance(factors, Mapping):
        raise InstanceError(f"must map class names to factors, got {factors!r}", source=source,
                            path=f"graph.{vertex}.factors")
    return factors


_STATE_NAMES = {name: int(state) for name, state in GpuState.__members__.items()}


def _state_code(state: Any) -> int:
    """A GPU vertex's ``state`` attribute (a :class:`GpuState`, its value or its name) as an int; -1 if it is none."""
    if isinstance(state, str):
        return _STATE_NAMES.get(state.upper(), -1)
    return int(state) if _is_int(state) and int(state) in _STATE_NAMES.values() else -1


def _state_codes(states: list[Any]) -> np.ndarray:
    """:func:`_state_code` of each of ``states``: at once when they are all GpuState members or
    plain ints (a cluster's own graph), else once per distinct type and value."""
    if set(map(type, states)) <= {GpuState, int}:
        try:
            codes = np.fromiter(states, dtype=np.int64, count=len(states))
        except OverflowError:  # an int beyond 64 bits: no state
            pass
        else:
            return np.where(np.isin(codes, list(_STATE_NAMES.values())), codes, -1)
    seen: dict[tuple[type, Any], int] = {}
    out = []
    for v in states:
        try:
            code = seen.get((type(v), v))
            if code is None:
                code = seen[(type(v), v)] = _state_code(v)
        except TypeError:  # unhashable: never a state
            code = _state_code(v)
        out.append(code)
    return np.asarray(out, dtype=np.int64)


def _graph_state(state: Any, vertex: Any, source: str | None) -> int:
    """A GPU vertex's ``state`` attribute (a :class:`GpuState`, its value or its name) as an int."""
    code = _state_code(state)
    if code < 0:
        raise InstanceError(f"must be free, busy or failed (a GpuState, 0, 1 or 2), got {state!r}", source=source,
                            path=f"graph.{vertex}.state")
    return code


def _is_int(v: Any) -> bool:
    return _integer_type(type(v))


def _finite_at_least(v: Any, low: float, path: str, *, strict: bool = False, high: float | None = None) -> float:
    # is_finite_number: an integer past a float's range (10**400) is refused as NaN is (math.isfinite
    # raised OverflowError on it, a traceback)
    if not is_finite_number(v) or v < low or (strict and v == low):
        rel = ">" if strict else ">="
        raise InstanceError(f"must be a finite number {rel} {low:g}, got {shown_number(v)}", path=path)
    if high is not None and v > high:
        raise InstanceError(f"must be at most {high:g} (a slowdown multiplier), got {v!r}", path=path)
    return float(v)


@dataclass(frozen=True)
class Pipeline:
    """The stages of a pipeline-parallel job, each replicated data-parallel on some of its GPUs.

    A job with a pipeline lists its GPUs stage by stage: the first ``replicas[0]`` run stage 0,
    the next ``replicas[1]`` stage 1, and so on.  It runs at the pace of its slowest stage: stage
    ``k`` takes ``stage_times[k]`` times the largest factor among its own GPUs
    (:meth:`effective_factor`), where a gang runs at its slowest GPU overall.

    Attributes
    ----------
    stage_times
        Per stage, its time per sample with all its replicas on GPUs of factor 1 (any unit common
        to the stages: only their ratios matter), e.g. ``pal-opt partition``'s stage times.
    replicas
        Per stage, how many GPUs run it; they add up to the job's demand.

    Examples
    --------
    >>> p = Pipeline((0.010, 0.006), (2, 1))
    >>> p.slices()
    [(0, 2), (2, 3)]
    >>> p.effective_factor([1.0, 1.5])  # stage 1 has slack: 0.006 x 1.5 < 0.010
    1.0
    >>> Pipeline((1.0,), (0,))
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: pipeline.replicas[0]: must be a positive integer, got 0
    """

    #: (a list is accepted too; it is kept as a tuple)
    stage_times: Sequence[float]
    replicas: Sequence[int]

    def __post_init__(self) -> None:
        times = tuple(self.stage_times) if isinstance(self.stage_times, (tuple, list)) else ()
        reps = tuple(self.replicas) if isinstance(self.replicas, (tuple, list)) else ()
        if not times:
            raise InstanceError(f"must be a non-empty list of stage times, got {self.stage_times!r}",
                                path="pipeline.stage_times")
        if len(reps) != len(times):
            raise InstanceError(f"must give one count per stage ({len(times)}), got {list(reps) or self.replicas!r}",
                                path="pipeline.replicas")
        times = tuple(_finite_at_least(t, 0.0, f"pipeline.stage_times[{k}]") for k, t in enumerate(times))
        if max(times) <= 0:
            raise InstanceError("at least one stage must take time, got all zeros", path="pipeline.stage_times")
        for k, r in enumerate(reps):
            if not _is_int(r) or r < 1:
                raise InstanceError(f"must be a positive integer, got {r!r}", path=f"pipeline.replicas[{k}]")
        object.__setattr__(self, "stage_times", times)
        object.__setattr__(self, "replicas", tuple(int(r) for r in reps))

    @property
    def gpus(self) -> int:
        """GPUs the pipeline needs: the sum of its replicas."""
        return sum(self.replicas)

    def slices(self) -> list[tuple[int, int]]:
        """Per stage, ``(start, stop)`` of its GPUs in the job's GPU list."""
        stops = list(itertools.accumulate(self.replicas))
        return list(zip([0, *stops[:-1]], stops, strict=True))

    def effective_factor(self, stage_factors: Sequence[float]) -> float:
        """The job's slowdown factor when stage ``k``'s slowest GPU has factor ``stage_factors[k]``:
        ``max_k(stage_times[k] * stage_factors[k]) / max_k(stage_times[k])``.  At most the
        largest factor, and equal to it when the slowest GPU runs a slowest stage."""
        return max(t * f for t, f in zip(self.stage_times, stage_factors, strict=True)) / max(self.stage_times)


#: The largest job priority (Kueue's priorities are of this order; the preemption cost weighs a
#: job by ``1 + priority``).
MAX_PRIORITY = 1_000_000


@dataclass(frozen=True)
class Job:
    """A gang-scheduled training job in the queue.

    Attributes
    ----------
    id
        The input's job id: an integer of 64 bits or a non-empty string, as in the instance file.
    demand
        GPUs needed, all or none: a positive integer of 64 bits, as in the instance file (a job
        needing more GPUs than the cluster has is unplaceable, not an error).
    perfclass
        Application class; selects the GPU factors that apply.
    position
        0-based position in the queue.
    locality
        Slowdown multiplier per topology level ``(server, rack, cluster)``: finite, positive and
        non-decreasing (spanning more of the cluster is never faster), as in the instance file.
    placement
        GPU ids the job holds now if it is running, else ``None``: ``demand`` of them, or one of
        ``allowed_counts``; a pipeline job's exactly ``demand``, read stage by stage
        (:meth:`Pipeline.slices`).
    model
        Model name from the trace, if known.
    kind
        One of :data:`JOB_KINDS` (Sia's kinds; default ``"rigid"``: count fixed, type free).
    gpu_type
        The one GPU type the job may use; required for a *guaranteed* job.
    allowed_types
        The GPU types the job may use (``None``: any); not with ``gpu_type``.
    allowed_counts
        GPU counts the job may run on, ascending; ``demand`` is one of them (``None``: just
        ``demand``).  Only *strong-scaling* and *adaptive* jobs may give several.
    mix_types
        Whether one gang may hold GPUs of several types (default False: one type per job).
    pipeline
        The job's pipeline stages (:class:`Pipeline`), or ``None`` for a gang.
    priority
        Integer priority, 0 to :data:`MAX_PRIORITY` (default 0; higher is more important).  With
        the preemptive methods (admission ``"preempt"``) a running job may be preempted for
        waiting jobs of a higher priority, never for one of its own or a lower one.
    started
        When the running job last (re)started, in seconds on any clock (``None``: unknown); the
        greedy preemption comparator evicts the most recently started first.

    Examples
    --------
    >>> Job(7, 2, "classA").running
    False
    >>> Job(7, 0, "classA")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: jobs[0].demand: must be a positive integer, got 0
    >>> Job(7, 2, "classA", kind="guaranteed")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: jobs[0].gpu_type: a guaranteed job needs its GPU type
    >>> Job(7, 4, "classA", kind="strong-scaling", allowed_counts=(1, 2, 4)).counts
    (1, 2, 4)
    >>> Job(7, 2, "classA", priority=-1)
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: jobs[0].priority: must be an integer in 0..1000000, got -1
    """

    id: JobId
    demand: int
    perfclass: str
    position: int = 0
    locality: tuple[float, float, float] = (1.0, 1.7, 1.7)
    placement: tuple[int, ...] | None = None
    model: str | None = None
    kind: str = "rigid"
    gpu_type: str | None = None
    allowed_types: tuple[str, ...] | None = None
    allowed_counts: tuple[int, ...] | None = None
    mix_types: bool = False
    pipeline: Pipeline | None = None
    priority: int = 0
    started: float | None = None

    def __post_init__(self) -> None:
        if self._canonical():
            return
        at = f"jobs[{self.position}]" if _is_int(self.position) else "jobs[?]"
        jid = _plain_id(self.id, f"{at}.id")  # what a file holds: 1 and "1" are one id (RoundInstance)
        if not _is_int(self.position) or self.position < 0:
            raise InstanceError(f"must be an integer >= 0, got {self.position!r}", path=f"{at}.position")
        if not _is_int(self.demand) or self.demand < 1:
            raise InstanceError(f"must be a positive integer, got {self.demand!r}", path=f"{at}.demand")
        if self.demand > _MAX_COUNT:
            raise InstanceError(f"must be a positive integer that fits in 64 bits, got {self.demand!r}",
                                path=f"{at}.demand")
        if not isinstance(self.perfclass, str) or not self.perfclass:
            raise InstanceError(f"must be a non-empty string, got {self.perfclass!r}", path=f"{at}.class")
        if self.model is not None and not isinstance(self.model, str):
            raise InstanceError(f"must be a string, got {self.model!r}", path=f"{at}.model")
        loc = tuple(self.locality) if isinstance(self.locality, (tuple, list)) else ()
        if len(loc) != 3:
            raise InstanceError(f"must be [server, rack, cluster] penalties, got {self.locality!r}",
                                path=f"{at}.locality")
        loc = tuple(_finite_at_least(x, 0.0, f"{at}.locality[{k}]", strict=True, high=FACTOR_RANGE[1])
                    for k, x in enumerate(loc))
        if not loc[0] <= loc[1] <= loc[2]:  # spanning more of the cluster is never faster
            raise InstanceError(f"penalties must not decrease from server to rack to cluster, got {list(loc)}",
                                path=f"{at}.locality")
        set_ = object.__setattr__
        set_(self, "id", jid)
        set_(self, "demand", int(self.demand))
        set_(self, "position", int(self.position))
        set_(self, "locality", loc)
        _check_type_fields(self, at)
        _check_priority_fields(self, at)
        if self.placement is not None:
            if isinstance(self.placement, str | bytes) or not isinstance(self.placement, Iterable):
                raise InstanceError(f"must be a sequence of GPU ids, got {self.placement!r}", path=f"{at}.placement")
            pl = tuple(self.placement)
            if non_integer_at(pl) is not None:
                raise InstanceError(f"GPU ids must be integers, got {list(pl)!r}", path=f"{at}.placement")
            if len(set(pl)) != len(pl) or len(pl) not in self.counts:
                want = f"demand={self.demand}" if len(self.counts) == 1 else f"one of {list(self.counts)}"
                raise InstanceError(f"a running job must hold exactly {want} distinct GPUs, "
                                    f"got {list(pl)!r}", path=f"{at}.placement")
            set_(self, "placement", tuple(int(g) for g in pl))
        if self.pipeline is not None:
            if not isinstance(self.pipeline, Pipeline):
                raise InstanceError(f"must be a Pipeline, got {self.pipeline!r}", path=f"{at}.pipeline")
            if self.pipeline.gpus != self.demand:
                raise InstanceError(f"must add up to demand={self.demand}, got {list(self.pipeline.replicas)} "
                                    f"(sum {self.pipeline.gpus})", path=f"{at}.pipeline.replicas")
            if self.placement is not None and len(self.placement) != self.demand:
                raise InstanceError(f"a running pipeline job holds its stages' GPUs, exactly demand={self.demand}, "
                                    f"got {list(self.placement)!r}", path=f"{at}.placement")

    def _canonical(self) -> bool:
        """Valid and already in the types the checks below would convert to (the common case,
        checked quickly: a 65,536-GPU round has 19,000 jobs)."""
        loc = self.locality
        return (
            type(self.demand) is int and 1 <= self.demand <= _MAX_COUNT and type(self.position) is int
            and self.position >= 0
            and (type(self.id) is str and self.id != "" and plain_text(self.id)
                 or type(self.id) is int and -_MAX_ID <= self.id <= _MAX_ID)
            and type(self.perfclass) is str and self.perfclass != ""
            and (self.model is None or type(self.model) is str) and self.placement is None
            and type(loc) is tuple and len(loc) == 3
            and all(type(x) is float and 0.0 < x < math.inf for x in loc) and loc[0] <= loc[1] <= loc[2]
            and self.kind == "rigid" and self.gpu_type is None and self.allowed_types is None
            and self.allowed_counts is None and self.mix_types is False and self.pipeline is None
            and self.priority == 0 and type(self.priority) is int and self.started is None
        )

    @property
    def running(self) -> bool:
        return self.placement is not None

    @property
    def counts(self) -> tuple[int, ...]:
        """The GPU counts the job may run on (``(demand,)`` unless it allows others)."""
        return self.allowed_counts or (self.demand,)

    @property
    def type_choice(self) -> tuple[str, ...] | None:
        """The GPU types the job may use, or None for any."""
        return (self.gpu_type,) if self.gpu_type is not None else self.allowed_types

    @property
    def constrains_types(self) -> bool:
        """True if the job names GPU types it is restricted to."""
        return self.type_choice is not None


def keeps_placement(job: Job, gpus: Sequence[int] | None, held: Sequence[int] | None = None) -> bool:
    """Whether ``job`` placed on ``gpus`` keeps what it runs on (``held``, default
    ``job.placement``), so that it goes on running and need not restart.

    A gang keeps its placement when it gets the same *set* of GPUs, in any order.  A pipeline
    (:class:`Pipeline`), whose GPUs are read stage by stage (:meth:`Pipeline.slices`), keeps it
    only when every stage gets the same set of GPUs as before: the replicas of one stage may be
    listed in any order, but a GPU that changes stage (stages swapped on the same GPUs, say)
    re-maps the job, which is a move.  Every decision "did this running job keep its GPUs?" --
    the result's ``jobs_to_terminate``, the cost terms' ``moved`` charge, the checker's rules,
    the simulator's restarts, the integer programs' keep variables -- is made here.

    Returns False when the job holds nothing or ``gpus`` is None (not placed).

    Examples
    --------
    >>> p = Job("p", 3, "classA", placement=(0, 1, 2), pipeline=Pipeline((2.0, 1.0), (2, 1)))
    >>> keeps_placement(p, (1, 0, 2)), keeps_placement(p, (2, 1, 0))  # replicas swapped; stages re-mapped
    (True, False)
    >>> keeps_placement(Job("g", 3, "classA", placement=(0, 1, 2)), (2, 1, 0))
    True
    """
    if held is None:
        held = job.placement
    if held is None or gpus is None:
        return False
    pipe = job.pipeline
    if pipe is None or len(gpus) != pipe.gpus or len(held) != pipe.gpus:
        return {int(g) for g in gpus} == {int(g) for g in held}
    return all({int(g) for g in gpus[a:b]} == {int(g) for g in held[a:b]} for a, b in pipe.slices())


def _check_priority_fields(job: Job, at: str) -> None:
    """Check and normalise a job's priority and start time (errors name the field)."""
    if not _is_int(job.priority) or not 0 <= job.priority <= MAX_PRIORITY:
        raise InstanceError(f"must be an integer in 0..{MAX_PRIORITY}, got {job.priority!r}", path=f"{at}.priority")
    object.__setattr__(job, "priority", int(job.priority))
    if job.started is not None:
        object.__setattr__(job, "started", _finite_at_least(job.started, 0.0, f"{at}.started"))


def _check_type_fields(job: Job, at: str) -> None:
    """Check and normalise a job's kind, GPU types, counts and mixing (errors name the field)."""
    set_ = object.__setattr__
    if not isinstance(job.kind, str) or job.kind not in JOB_KINDS:
        raise InstanceError(f"must be one of {', '.join(JOB_KINDS)}, got {job.kind!r}", path=f"{at}.kind")
    set_(job, "kind", str(job.kind))
    if job.gpu_type is not None and (not isinstance(job.gpu_type, str) or not job.gpu_type):
        raise InstanceError(f"must be a non-empty string, got {job.gpu_type!r}", path=f"{at}.gpu_type")
    if job.kind == "guaranteed" and job.gpu_type is None:
        raise InstanceError("a guaranteed job needs its GPU type", path=f"{at}.gpu_type")
    if job.allowed_types is not None:
        types = tuple(job.allowed_types) if isinstance(job.allowed_types, (tuple, list)) else ()
        if not types or not all(isinstance(t, str) and t for t in types) or len(set(types)) != len(types):
            raise InstanceError(f"must be a non-empty list of distinct GPU type names, got {job.allowed_types!r}",
                                path=f"{at}.allowed_types")
        if job.gpu_type is not None:
            raise InstanceError("give gpu_type (one type) or allowed_types, not both", path=f"{at}.allowed_types")
        set_(job, "allowed_types", types)
    if not isinstance(job.mix_types, (bool, np.bool_)):
        raise InstanceError(f"must be true or false, got {job.mix_types!r}", path=f"{at}.mix_types")
    set_(job, "mix_types", bool(job.mix_types))
    if job.mix_types and job.gpu_type is not None:
        raise InstanceError("a job on one GPU type (gpu_type) cannot mix types", path=f"{at}.mix_types")
    if job.allowed_counts is None:
        return
    counts = tuple(job.allowed_counts) if isinstance(job.allowed_counts, (tuple, list)) else ()
    if not counts or not all(_is_int(c) and 1 <= c <= _MAX_COUNT for c in counts) or len(set(counts)) != len(counts):
        raise InstanceError(f"must be a non-empty list of distinct positive integers, got {job.allowed_counts!r}",
                            path=f"{at}.allowed_counts")
    counts = tuple(sorted(int(c) for c in counts))
    if job.demand not in counts:
        raise InstanceError(f"must include the demand ({job.demand}), got {list(counts)}", path=f"{at}.allowed_counts")
    if job.kind in FIXED_COUNT_KINDS and counts != (job.demand,):
        raise InstanceError(f"a {job.kind} job runs on exactly demand={counted(job.demand, 'GPU')}, got {list(counts)}",
                            path=f"{at}.allowed_counts")
    set_(job, "allowed_counts", counts)


class RoundArguments(TypedDict, total=False):
    """The round parameters that a function building a round takes as keywords (each as in
    :class:`RoundParams`; a bad one is an :class:`~pal_opt.errors.OptionError` naming it):
    ``locality_penalty`` (PAL's λ, ≥ 1), ``binning``, ``restart_cost`` (seconds of work a moved
    running job loses per GPU) and ``round_length`` (seconds)."""

    locality_penalty: float
    binning: str
    restart_cost: float
    round_length: float


@dataclass(frozen=True)
class RoundParams:
    """Round-level parameters, checked here once.

    Attributes
    ----------
    locality_penalty
        PAL's λ (>= 1), the default penalty for a gang crossing servers; jobs carry their own
        per-level penalties.
    binning
        Variability binning mode: ``"pal-artifact"`` (default), ``"silhouette"`` or ``"none"``.
    restart_cost
        Seconds of work a running job loses on each of its GPUs when it is moved (GPU-seconds
        per GPU moved; ≥ 0); 0 reproduces PAL's non-sticky rounds.  The round program charges
        ``−ln(1 − restart_cost / round_length)`` per GPU of the job
        (:func:`pal_opt.cost.restart.restart_cost_units`, the one conversion).
    round_length
        Seconds per round (> 0; default 360, PAL's round): the time the restart loss is a
        share of.
    costs
        Parameters of further cost terms, ``{term name: {parameter: value}}``
        (:mod:`pal_opt.cost`); the terms check their own.

    Examples
    --------
    >>> RoundParams(binning="kmeans")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: params.binning: must be one of pal-artifact, silhouette, none, got 'kmeans'
    """

    locality_penalty: float = 1.7
    binning: str = "pal-artifact"
    restart_cost: float = 0.0
    costs: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    round_length: float = DEFAULT_ROUND_LENGTH

    @classmethod
    def from_arguments(cls, **kwargs: Any) -> RoundParams:
        """Parameters from a function's or a command's arguments: a bad value is an
        :class:`~pal_opt.errors.OptionError` naming the argument, not a file's field.

        >>> RoundParams.from_arguments(locality_penalty=0.5)
        Traceback (most recent call last):
        ...
        pal_opt.errors.OptionError: locality_penalty must be a finite number >= 1, got 0.5
        """
        from .errors import OptionError

        known = [f.name for f in fields(cls)]
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            raise OptionError(f"unknown round parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
        try:
            return cls(**kwargs)
        except InstanceError as exc:
            name = (exc.path or "").removeprefix("params.")
            raise OptionError(f"{name} {exc.message}" if name else exc.message) from None

    def __post_init__(self) -> None:
        from .options import Binning

        set_ = object.__setattr__
        set_(self, "locality_penalty", _finite_at_least(self.locality_penalty, 1.0, "params.locality_penalty",
                                                        high=FACTOR_RANGE[1]))
        set_(self, "restart_cost", _finite_at_least(self.restart_cost, 0.0, "params.restart_cost"))
        set_(self, "round_length", _finite_at_least(self.round_length, 0.0, "params.round_length", strict=True))
        if self.restart_cost >= self.round_length:  # the simulator's rule too (SimConfig)
            raise InstanceError(f"must be below the round length ({self.restart_cost:g} s ≥ {self.round_length:g} s): "
                                "a move would lose the whole round", path="params.restart_cost")
        modes = [b.value for b in Binning]
        if not isinstance(self.binning, str) or self.binning not in modes:
            raise InstanceError(f"must be one of {', '.join(modes)}, got {self.binning!r}", path="params.binning")
        set_(self, "binning", str(self.binning))
        if not isinstance(self.costs, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in self.costs.items()
        ):
            raise InstanceError(f"must map cost term names to parameter objects, got {self.costs!r}",
                                path="params.costs")
        set_(self, "costs", {k: dict(v) for k, v in self.costs.items()})


@dataclass(frozen=True)
class RoundInstance:
    """One scheduling round: a cluster, a queue of jobs (in queue order) and parameters.

    The jobs are checked against the cluster here, once: ids are unique, also when compared as
    text (``1`` and ``"1"`` would be one key of a file's or a result's JSON object), every class
    has factors, every GPU type a job names (``gpu_type``, ``allowed_types``) is one of the
    cluster's, and a running job's GPUs exist, are held by no other job and are of its usable
    types, one type unless it mixes types (:func:`check_job_types`, the instance file's check).
    (They may have failed or been taken since, state ``FAILED`` or ``BUSY``: such a job must
    move.  The instance file accepts the same.)  A job whose named types exist but can never hold
    its demand is not an error: the round reports it unplaceable
    (:func:`pal_opt.gputypes.type_problem`).

    Examples
    --------
    >>> c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb")
    >>> RoundInstance(c, (Job(1, 2, "classA", allowed_types=("a", "v100")),))
    Traceback (most recent call last):
    ...
    pal_opt.errors.InstanceError: jobs[0].allowed_types[1]: unknown GPU type 'v100' (cluster types: a, b)
    """

    cluster: Cluster
    jobs: tuple[Job, ...]
    params: RoundParams = RoundParams()
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, Cluster):
            raise InstanceError(f"must be a Cluster, got {type(self.cluster).__name__}", path="cluster")
        if not isinstance(self.params, RoundParams):
            raise InstanceError(f"must be a RoundParams, got {type(self.params).__name__}", path="params")
        if not isinstance(self.name, str):
            raise InstanceError(f"must be a string, got {self.name!r}", path="name")
        if isinstance(self.jobs, (str, bytes, Mapping)) or not isinstance(self.jobs, Iterable):
            raise InstanceError(f"must be a sequence of Job objects in queue order, got {type(self.jobs).__name__}",
                                path="jobs")
        object.__setattr__(self, "jobs", tuple(self.jobs))
        seen: dict[str, int] = {}
        held: dict[int, int] = {}
        position = self.cluster.position
        for i, j in enumerate(self.jobs):
            if not isinstance(j, Job):
                raise InstanceError(f"expected a Job, got {type(j).__name__}", path=f"jobs[{i}]")
            first = seen.setdefault(str(j.id), i)
            if first != i:
                same = "" if self.jobs[first].id == j.id else " as text"
                raise InstanceError(f"duplicate job id {j.id!r} (same as jobs[{first}].id{same})", path=f"jobs[{i}].id")
            if j.perfclass not in self.cluster.factors:
                raise InstanceError(
                    f"class {j.perfclass!r} has no GPU factors (known: {', '.join(self.cluster.factors)})",
                    path=f"jobs[{i}].perfclass",
                )
            for g in j.placement or ():
                if g not in position:
                    raise InstanceError(f"unknown GPU {g}", path=f"jobs[{i}].placement")
                if held.setdefault(g, i) != i:
                    raise InstanceError(f"GPU {g} is also held by jobs[{held[g]}]", path=f"jobs[{i}].placement")
            if j.type_choice is not None or j.placement is not None and self.cluster.typed:
                check_job_types(self.cluster, j, f"jobs[{i}]")

    @property
    def job_by_id(self) -> dict[JobId, Job]:
        return self._job_index

    @cached_property
    def _job_index(self) -> dict[JobId, Job]:
        return {j.id: j for j in self.jobs}

    @cached_property
    def _free_count(self) -> int:
        return int(self.cluster.free_mask.sum())

    @property
    def free_gpus(self) -> int:
        """GPUs free this round (running queued jobs' GPUs count as free)."""
        return self._free_count


def usable_types(cluster: Cluster, job: Job) -> tuple[int, ...]:
    """Positions (in ``cluster.type_names`` order) of the types ``job`` may use: the types it
    names (any, if it names none) that the cluster has and that its class has a throughput for
    (a class without a throughput row runs on every type).  (Re-exported by
    :mod:`pal_opt.gputypes`.)

    >>> c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb",
    ...                         throughput={"classA": {"a": 1.0}})
    >>> usable_types(c, Job(1, 2, "classA")), usable_types(c, Job(2, 2, "classA", gpu_type="b"))
    ((0,), ())
    """
    names = job.type_choice
    if names is None:
        codes = list(range(cluster.num_types))
    else:
        index = cluster.type_index
        codes = sorted(index[t] for t in names if t in index)
    row = cluster.throughput.get(job.perfclass)
    if row is not None:
        codes = [k for k in codes if cluster.type_names[k] in row]
    return tuple(codes)


def check_job_types(cluster: Cluster, job: Job, at: str, *,
                    no_types: str = "the cluster has no GPU types") -> None:
    """Check ``job`` against ``cluster``'s GPU types, the one check behind
    :class:`RoundInstance` and the instance file (:mod:`pal_opt.io.instance`).

    Every GPU type the job names (``gpu_type``, ``allowed_types``) must be one of the cluster's,
    and a running job must hold GPUs of its usable types only (:func:`usable_types`), of one type
    unless it mixes types: it cannot be running anywhere else.  (A GPU that failed or was taken
    under it is another matter: the job must move.)  A job whose types exist but cannot hold it
    is no error (:func:`pal_opt.gputypes.type_problem`).  ``job.placement``'s GPUs must be
    GPUs of the cluster.

    Raises
    ------
    InstanceError
        Naming ``{at}.gpu_type``, ``{at}.allowed_types[k]``, ``{at}.placement[k]`` or
        ``{at}.placement``; ``no_types`` says why an untyped cluster has none.
    """
    have = ", ".join(cluster.type_names) or f"none: {no_types}"
    if job.gpu_type is not None and job.gpu_type not in cluster.type_index:
        raise InstanceError(f"unknown GPU type {job.gpu_type!r} (cluster types: {have})", path=f"{at}.gpu_type")
    for k, t in enumerate(job.allowed_types or ()):
        if t not in cluster.type_index:
            raise InstanceError(f"unknown GPU type {t!r} (cluster types: {have})", path=f"{at}.allowed_types[{k}]")
    error = placement_type_error(cluster, job, at)
    if error is not None:
        raise error


def placement_type_error(cluster: Cluster, job: Job, at: str = "job") -> InstanceError | None:
    """The error :func:`check_job_types` raises for ``job.placement`` (GPUs of ``cluster``),
    or None when the job is not running, the cluster is untyped, or it holds GPUs of its usable
    types (:func:`usable_types`), of one type unless it mixes types.  (What a scheduler asks
    before it keeps a job where it ran: :class:`pal_opt.RoundPolicy`.)"""
    if not job.placement or not cluster.typed:  # (a type named on an untyped cluster is unknown)
        return None
    type_of, position = cluster.memo("type-list", cluster.type_of.tolist), cluster.position
    kinds = [type_of[position[g]] for g in job.placement]
    use = usable_types(cluster, job)
    names = cluster.type_names
    for k, (g, t) in enumerate(zip(job.placement, kinds, strict=True)):
        if t not in use:
            may = ", ".join(repr(names[u]) for u in use) or "none"
            what = f"its GPU type: {may}" if len(use) == 1 else f"its GPU types: {may}"
            return InstanceError(f"GPU {g} is of type {names[t]!r}, which the job may not use ({what})",
                                 path=f"{at}.placement[{k}]")
    if len(set(kinds)) > 1 and not job.mix_types:
        held = ", ".join(repr(names[t]) for t in sorted(set(kinds)))
        return InstanceError(f"GPUs of types {held}, but the job does not mix types (mix_types)",
                             path=f"{at}.placement")
    return None


def require_instance(instance: Any) -> None:
    """Raise :class:`~pal_opt.errors.InputTypeError` (a :class:`TypeError` too) unless
    ``instance`` is a :class:`RoundInstance` (a clear message where a ``None`` or a dict would
    fail deep inside a method).

    >>> require_instance(None)
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: instance: expected a RoundInstance (pal_opt.make_instance or pal_opt.load_instance), got NoneType
    """
    if not isinstance(instance, RoundInstance):
        raise InputTypeError(f"expected a RoundInstance (pal_opt.make_instance or pal_opt.load_instance), "
                             f"got {type(instance).__name__}", path="instance")
