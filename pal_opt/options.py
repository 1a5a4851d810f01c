"""The names and options every method shares, in one place.

* String enums for the built-in names: :class:`Binning`, :class:`Admission`, :class:`MethodName`
  and :class:`BackendName`.  Methods and backends are looked up in registries
  (:mod:`pal_opt.methods`, :mod:`pal_opt.ilp.backends`), so a name registered at run time is as
  good as a built-in one; the enums only name what ships.
* :class:`SolveOptions`: everything a method may be told, validated once, here.  Only
  :mod:`pal_opt.cli` maps command-line flags onto it; the API builds it from keyword arguments
  (:func:`pal_opt.solve`).

Examples
--------
>>> SolveOptions(time_limit=5, gap=0.01).time_limit
5.0
>>> SolveOptions(gap=-1)
Traceback (most recent call last):
...
pal_opt.errors.OptionError: gap must be a finite number >= 0, got -1
"""

from __future__ import annotations

import enum
import functools
import logging
import math
import numbers  # numpy's scalars are registered as numbers.Real/Integral
import os
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import InputTypeError, OptionError, with_article

__all__ = [
    "options_from",
    "Binning",
    "Admission",
    "MethodName",
    "BackendName",
    "DEFAULT_ILP_TIME_LIMIT",
    "DEFAULT_ROUND_LENGTH",
    "ROUND_PARAMETERS",
    "MAX_CLUSTER_GPUS",
    "MAX_SIMULATED_SECONDS",
    "check_cluster_size",
    "check_seed",
    "check_count",
    "check_finite",
    "check_seconds",
    "check_time_limit",
    "file_path",
    "figure_format",
    "require_text",
    "require_type",
    "check_callbacks",
    "check_flag",
    "require_mapping",
    "require_items",
    "number_array",
    "SolveOptions",
    "validate_choice",
]

#: Time limit (s) of an exact round solve when none is given and a limit is needed (the
#: simulator and the Blox adapter run rounds back to back).  ``pal-opt solve`` and
#: :func:`pal_opt.solve` run without a limit unless given one.
DEFAULT_ILP_TIME_LIMIT: float = 10.0

#: Seconds per scheduling round when none is given: PAL's (and the Blox simulator's) 360 s.  The
#: restart cost (seconds lost per GPU of a moved job) is priced as a share of it
#: (:func:`pal_opt.cost.restart.restart_cost_units`).
DEFAULT_ROUND_LENGTH: float = 360.0
#: The round parameters (:class:`pal_opt.model.RoundArguments`, ``binning`` aside, which is both)
#: that a caller may mistake for solve options: :meth:`SolveOptions.from_kwargs` names where
#: they go instead of listing every option.
ROUND_PARAMETERS: tuple[str, ...] = ("locality_penalty", "restart_cost", "round_length")

#: The largest cluster a command builds from a size on its command line (``--cluster``,
#: ``--nodes`` × ``--gpus-per-node``): 16× the 65,536 GPUs the benchmarks measure.  A typo of a
#: few digits more would otherwise try to allocate terabytes before saying anything.
MAX_CLUSTER_GPUS: int = 1 << 20

#: The longest round and run a simulator takes (``--round``, ``--max-hours``; ``round_length``,
#: ``max_time``), in seconds: about 31.7 million years.  Its clock and its sums of job times stay
#: finite and exact to the second (a round of 1e308 s summed job times to ``inf``, with numpy's
#: overflow warning; ``--max-hours 1e308`` was ``inf`` seconds).
MAX_SIMULATED_SECONDS: float = 1e15


#: The most solver threads an option may ask for: HiGHS starts every thread asked for, so a typo
#: such as ``--threads 5000`` turned a 4-GPU round's 0.2 s into 20 s (100,000: 216 GB of virtual
#: memory); no machine pal-opt runs on has more cores than this.
MAX_THREADS: int = 1024


#: Cuts long integers in messages (:func:`shown_number`).
_NUMBER_REPR = reprlib.Repr()
_NUMBER_REPR.maxlong = 40


def check_cluster_size(gpus: int, what: str) -> None:
    """Raise :class:`OptionError` if a cluster of ``gpus`` GPUs exceeds :data:`MAX_CLUSTER_GPUS`.

    >>> check_cluster_size(2048, "--cluster")
    """
    if gpus > MAX_CLUSTER_GPUS:
        raise OptionError(f"{what}: {gpus:,} GPUs; pal-opt builds clusters of at most {MAX_CLUSTER_GPUS:,}")


class Binning(enum.StrEnum):
    """How measured variability becomes factor levels (:mod:`pal_opt.binning`)."""

    PAL_ARTIFACT = "pal-artifact"  #: what the PAL authors' code computes (default)
    SILHOUETTE = "silhouette"  #: K chosen by silhouette score, as the paper intends
    NONE = "none"  #: the raw measurements


class Admission(enum.StrEnum):
    """Which queued jobs an exact method must place (:mod:`pal_opt.admission`)."""

    PREFIX = "prefix"  #: the longest queue prefix that fits the free GPUs
    BACKFILL = "backfill"  #: queue order, skipping what does not fit


class MethodName(enum.StrEnum):
    """The methods that ship (the registry may hold more)."""

    PAL = "pal"
    PMFIRST = "pmfirst"
    PACKED = "packed"
    PACKED_STICKY = "packed-sticky"
    RANDOM = "random"
    ILP = "ilp"
    ILP_PARTITIONED = "ilp-partitioned"
    PREEMPT_GREEDY = "preempt-greedy"
    ILP_PREEMPT = "ilp-preempt"


class BackendName(enum.StrEnum):
    """The solver backends that ship, in order of preference (the registry may hold more)."""

    HIGHS = "highs"
    CPSAT = "cpsat"
    CBC = "cbc"


def validate_choice(value: Any, choices: Iterable[str], what: str) -> str:
    """``value`` as a plain string if it is one of ``choices``, else :class:`OptionError`.

    >>> validate_choice("none", [b.value for b in Binning], "binning mode")
    'none'
    >>> validate_choice("k", ["a", "b"], "binning mode")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: unknown binning mode 'k'; choose one of a, b
    """
    names = [str(c) for c in choices]
    if isinstance(value, str) and str(value) in names:
        return str(value)
    raise OptionError(f"unknown {what} {value!r}; choose one of {', '.join(names)}")


def check_count(value: Any, what: str, minimum: int = 1) -> int:
    """``value`` as a Python int if it is an integer >= ``minimum`` (numpy's integers too: counts
    often come from a data frame; a bool is not a count), else :class:`OptionError` naming ``what``.

    >>> check_count(-1, "nodes")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: nodes must be an integer >= 1, got -1
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise OptionError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def shown_number(value: Any) -> str:
    """``value`` as a message shows it: its repr cut at 60 characters, an integer of more digits
    as its first and last digits around ``...`` (``reprlib``), so that ``10**400`` does not read
    as a 60-digit number.

    >>> shown_number(2.5), shown_number(10**60)
    ('2.5', '100000000000000000...0000000000000000000')
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return _NUMBER_REPR.repr(value)
    return f"{value!r:.60}"


def is_finite_number(value: Any) -> bool:
    """True if ``value`` is a real number (numpy's too; not a bool) that a float holds and that is
    finite: the one test behind the checks of times, limits and costs below.  An integer past a
    float's range (``10**400``, which JSON and Python read) is not one: ``math.isfinite`` raised
    ``OverflowError`` on it, a traceback where the checks give one line.

    >>> is_finite_number(2.5), is_finite_number(float("nan")), is_finite_number(10**400), is_finite_number(True)
    (True, False, False, False)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_finite(value: Any, what: str, minimum: float = 0.0, *, strict: bool = False) -> float:
    """``value`` as a float if it is a finite real number >= ``minimum`` (> with ``strict``;
    numpy's too, not a bool), else :class:`OptionError` naming ``what``.

    >>> check_finite(float("nan"), "submit_time")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: submit_time must be a finite number >= 0, got nan
    >>> check_finite(-1, "round_length", strict=True)
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: round_length must be a finite number > 0, got -1
    """
    if not is_finite_number(value) or value < minimum or (strict and value == minimum):
        raise OptionError(f"{what} must be a finite number {'>' if strict else '>='} {minimum:g}, got {shown_number(value)}")
    return float(value)


def check_seconds(value: Any, what: str, *, allow_zero: bool = False,
                  maximum: float = MAX_SIMULATED_SECONDS) -> float:
    """``value`` as a float if it is a number of seconds: a finite real number > 0 (>= 0 with
    ``allow_zero``) and at most ``maximum`` (numpy's too; not a bool: ``True`` is not 1 s), else
    :class:`OptionError` naming ``what``.  The one test of a simulator's times (round length,
    run length, restart cost, Gavel's round), so that both simulators refuse the same values in
    the same words.

    >>> check_seconds(True, "round_length")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: round_length must be a number of seconds > 0 and at most 1e+15, got True
    >>> check_seconds(float("inf"), "restart_cost", allow_zero=True)
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: restart_cost must be a number of seconds >= 0 and at most 1e+15, got inf
    """
    if not is_finite_number(value) or value < 0 or (value == 0 and not allow_zero) or value > maximum:
        raise OptionError(f"{what} must be a number of seconds {'>=' if allow_zero else '>'} 0 and at most "
                          f"{maximum:g}, got {shown_number(value)}")
    return float(value)


def check_time_limit(value: Any, what: str = "time_limit") -> float | None:
    """None, or ``value`` as a float if it is a finite real number > 0 (numpy's too, not a bool),
    else :class:`OptionError` naming ``what``: the one test of a solver's time limit given as an
    argument (:class:`SolveOptions` has its own, with its own words).

    >>> check_time_limit("5")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: time_limit must be a positive number of seconds or None, got '5'
    """
    if value is None:
        return None
    if not is_finite_number(value) or value <= 0:
        raise OptionError(f"{what} must be a positive number of seconds or None, got {shown_number(value)}")
    return float(value)


def figure_format(path: str, what: str = "path", *, default: str | None = None) -> str:
    """The figure format of ``path``'s suffix (``default`` for a name without one, if given), or an
    :class:`~pal_opt.errors.OptionError` before any drawing: matplotlib (the ``[plot]`` extra)
    missing, a suffix it cannot write, or a ``.pgf`` without the TeX program it runs.  ``what``
    names the argument or flag (``--plot``) in the message.

    >>> figure_format("jct.svg"), figure_format("jct", default="png")
    ('svg', 'png')
    """
    try:
        import matplotlib  # noqa: F401  (first: a cached backend module must not hide its absence)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError as exc:
        raise OptionError(f"{what} needs matplotlib, which cannot be imported ({exc}); "
                          "install it with pip install 'pal-opt[plot]'") from None
    formats = FigureCanvasAgg.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lstrip(".").lower() or (default or "")
    if ext not in formats:
        raise OptionError(f"{what} {path}: the file name must end in one of "
                          f"{', '.join('.' + f for f in sorted(formats))}")
    if ext == "pgf":  # drawn through a TeX process: a missing one failed only after the work
        import shutil

        tex = str(matplotlib.rcParams["pgf.texsystem"])
        if shutil.which(tex) is None:
            raise OptionError(f"{what} {path}: a .pgf figure needs {tex} (matplotlib's pgf.texsystem), "
                              "which is not on PATH; install it or choose another format, such as .pdf")
    return ext


def file_path(path: Any, arg: str = "path") -> str:
    """``path`` as a str, checked where a file path enters the public API: an
    :class:`~pal_opt.errors.InputTypeError` naming the argument ``arg`` unless it is a str or an
    :class:`os.PathLike` of one (``None``, a number, a list, bytes failed deep inside; an int or a
    bool was even taken by ``open`` as a file descriptor, and ``True`` closed standard output).

    >>> import pathlib
    >>> file_path(pathlib.Path("a") / "b.json")
    'a/b.json'
    >>> file_path(None, "gpus_path")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: gpus_path: must be a file path (a str or os.PathLike), got NoneType None
    """
    if isinstance(path, str | os.PathLike):
        name = os.fspath(path)
        if isinstance(name, str):
            return name
    raise InputTypeError(f"must be a file path (a str or os.PathLike), got {type(path).__name__} {path!r:.60}",
                         path=arg)


def require_text(text: Any, arg: str = "text") -> str:
    """``text`` if it is a str, else an :class:`~pal_opt.errors.InputTypeError` naming the
    argument ``arg`` (a parser given ``None``, bytes or a number failed deep inside, on ``.split``).

    >>> require_text(b"a=1")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: text: must be a str, got bytes b'a=1'
    """
    if not isinstance(text, str):
        raise InputTypeError(f"must be a str, got {type(text).__name__} {text!r:.60}", path=arg)
    return text


def _given(value: Any) -> str:
    """What an argument was, for a message: its type and its start."""
    return f"{type(value).__name__} {value!r:.60}"


def require_type(value: Any, cls: Any, arg: str, hint: str = "", *, what: str | None = None) -> Any:
    """``value`` if it is an instance of ``cls`` (a class, an ABC such as ``Callable``, or a tuple of them), else an
    :class:`~pal_opt.errors.InputTypeError` naming the argument ``arg`` and what was given (a
    ``None`` or a wrong object failed deep inside, ``'NoneType' object has no attribute ...``);
    ``hint`` says where such an object comes from; ``what`` replaces the class's name and the
    hint (for a protocol, which names no class a user knows).

    >>> require_type(None, int, "epoch", " (an epoch number)")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: epoch: must be an int (an epoch number), got NoneType None
    """
    if isinstance(value, cls):
        return value
    if what is None:
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        what = with_article(names) + hint
    raise InputTypeError(f"must be {what}, got {_given(value)}", path=arg)


def check_callbacks(**functions: Any) -> None:
    """Each of ``functions`` (an argument's name: the value given) None or callable, else an
    :class:`~pal_opt.errors.InputTypeError` naming the first that is not: the functions a
    simulator calls later, each round if at all (both simulators' ``progress`` and
    ``on_round``), checked where they enter (``progress=5`` raised ``TypeError`` after the first
    round).

    >>> check_callbacks(progress=print, on_round=None)
    >>> check_callbacks(progress=None, on_round=5)
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: on_round: must be a function or None, got int 5
    """
    for name, fn in functions.items():
        if fn is not None:
            require_type(fn, Callable, name, what="a function or None")


def check_flag(value: Any, what: str) -> bool:
    """``value`` if it is True or False (not 1, None or another object a truthy test would take as
    a flag), else an :class:`OptionError` naming ``what``.

    >>> check_flag(True, "probe")
    True
    >>> check_flag(1, "probe")
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: probe must be True or False, got 1
    """
    if not isinstance(value, bool):
        raise OptionError(f"{what} must be True or False, got {value!r:.60}")
    return value


def require_mapping(value: Any, arg: str, what: str = "a mapping") -> Mapping[Any, Any]:
    """``value`` if it is a :class:`~collections.abc.Mapping`, else an
    :class:`~pal_opt.errors.InputTypeError` naming ``arg`` (``what``: the mapping it must be).

    >>> require_mapping([], "apps", "a mapping of application names to applications")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: apps: must be a mapping of application names to applications, got list []
    """
    if not isinstance(value, Mapping):
        raise InputTypeError(f"must be {what}, got {_given(value)}", path=arg)
    return value


def require_items(value: Any, arg: str, what: str = "a list", of: type | tuple[type, ...] | None = None) -> tuple[Any, ...]:
    """``value`` as a tuple if it is an iterable of items (not a str, bytes or mapping; each an
    instance of ``of`` if given), else an :class:`~pal_opt.errors.InputTypeError` naming ``arg``
    (``what``: what it must be).  Iterators are consumed.

    >>> require_items("aws:2x4", "cluster", "a list of GPU types")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: cluster: must be a list of GPU types, got str 'aws:2x4'
    """
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InputTypeError(f"must be {what}, got {_given(value)}", path=arg)
    items = tuple(value)
    if of is not None:
        for i, item in enumerate(items):
            if not isinstance(item, of):
                raise InputTypeError(f"must be {what}, got {_given(item)} at index {i}", path=arg)
    return items


def number_array(value: Any, arg: str, kinds: str = "iuf", dtype: Any = None) -> Any:
    """``value`` as a numpy array if it holds numbers (numpy dtype kinds ``kinds``: ``"iuf"``
    integers and floats, ``"b"`` booleans), else an :class:`~pal_opt.errors.InputTypeError`
    naming ``arg`` (``None`` or a string became a 0-d object or text array and failed deep inside).
    With ``dtype``: ``numpy.asarray(value, dtype)`` (what converts is taken, as numpy takes it;
    ``kinds`` is not read), the error if it does not convert or is a string or None.  Without,
    an integer a float cannot hold (``10**400``) is named as too large, where ``kinds`` has ``f``,
    and integers past int64 that a float holds (``10**20``, kept by numpy as objects) are floats.

    >>> number_array([1, 2.5], "row").tolist()
    [1.0, 2.5]
    >>> number_array("x", "row")
    Traceback (most recent call last):
    ...
    pal_opt.errors.InputTypeError: row: must be numbers (an array or a sequence), got str 'x'
    """
    import numpy as np

    if dtype is not None:
        try:
            if value is not None and not isinstance(value, str | bytes):  # (None would be nan)
                return np.asarray(value, dtype=dtype)
        except OverflowError:  # an integer past the type's range (10**400 for float64): was a traceback
            raise InputTypeError(f"must be numbers that {np.dtype(dtype).name} holds, got {_given(value)}",
                                 path=arg) from None
        except (TypeError, ValueError):
            pass
        raise InputTypeError(f"must be numbers (an array or a sequence), got {_given(value)}", path=arg)
    try:
        array = None if isinstance(value, str | bytes) else np.asarray(value)
    except ValueError:  # ragged
        array = None
    if array is None or array.dtype.kind not in kinds:
        if array is not None and array.dtype.kind == "O" and "f" in kinds:
            _refuse_a_number_past_floats(array, arg)
            if array.size and all(isinstance(x, numbers.Real) for x in array.flat):
                return array.astype(float)  # integers past int64 that a float holds (10**20)
        noun = "booleans" if kinds == "b" else "numbers"
        raise InputTypeError(f"must be {noun} (an array or a sequence), got {_given(value)}", path=arg)
    return array


def _refuse_a_number_past_floats(array: Any, arg: str) -> None:
    """The error of :func:`number_array` for the first integer of an object ``array`` that a float
    cannot hold (``10**400``, which Python and JSON read; numpy keeps such a list as objects):
    it is a number, too large, which "must be numbers" did not say."""
    import numpy as np

    for k, x in enumerate(array.flat):
        if isinstance(x, numbers.Integral) and not isinstance(x, bool) and not is_finite_number(x):
            at = k if array.ndim == 1 else tuple(int(i) for i in np.unravel_index(k, array.shape))
            raise InputTypeError(f"{shown_number(x)} at index {at} is too large to be a float", path=arg)


def check_seed(seed: Any) -> None:
    """Raise :class:`OptionError` unless ``seed`` is None, an integer >= 0 or a
    ``numpy.random.Generator`` (what :func:`pal_opt.seeds.make_rng` takes).

    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: seed must be an integer >= 0, a numpy.random.Generator or None, got -1
    """
    if seed is None:
        return
    import numpy as np

    if isinstance(seed, np.random.Generator) or (_is_int(seed) and not isinstance(seed, bool) and seed >= 0):
        return
    raise OptionError(f"seed must be an integer >= 0, a numpy.random.Generator or None, got {seed!r}")


def _positive_number(name: str, v: Any, *, allow_zero: bool = False) -> float | None:
    if v is None:
        return None
    if not is_finite_number(v) or v < 0 or (v == 0 and not allow_zero):
        what = "a finite number >= 0" if allow_zero else "a positive number of seconds"
        raise OptionError(f"{name} must be {what}, got {shown_number(v)}")
    return float(v)


def backend_value_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as one solver parameter's value, or None: it must be a number,
    True/False or a string (what every backend's parameters take), and a number must be finite.
    A NaN or an infinity reached the solver (HiGHS and CBC took ``mip_rel_gap=NaN``) and the
    result's ``info.backend_params``, which then was not JSON: ``pal-opt check`` refused the
    placement file ``solve`` had written.

    An integer is one of 64 bits at most (the widest any backend's parameters take): one past
    a float's range (``--backend-param x=`` and 400 digits) raised ``OverflowError`` here.

    >>> backend_value_problem(float("nan")), backend_value_problem([1]), backend_value_problem("off")
    ('must be a finite number', 'must be a number, True/False or a string', None)
    >>> backend_value_problem(10**400), backend_value_problem(2**63 - 1)
    ('must be an integer of at most 64 bits', None)
    """
    if isinstance(value, (bool, str)):
        return None
    if isinstance(value, numbers.Integral):
        return None if -(2**63) <= int(value) < 2**63 else "must be an integer of at most 64 bits"
    if not isinstance(value, numbers.Real):
        return "must be a number, True/False or a string"
    return None if is_finite_number(value) else "must be a finite number"


def _check_backend_params(params: Any) -> None:
    if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
        raise OptionError(f"backend_params must map option names to values, got {params!r}")
    for key, value in params.items():
        problem = backend_value_problem(value)
        if problem:
            raise OptionError(f"backend_params[{key!r}] {problem}, got {value!r:.60}")


@functools.cache
def _warn_large_gap(gap: float) -> None:
    """Once per value and process (options are copied every round of a simulation)."""
    logging.getLogger("pal_opt.options").warning(
        "gap %g is a fraction: %g %%, which almost any placement meets (a gap of 1 %% is 0.01)", gap, 100 * gap)


@dataclass(frozen=True)
class SolveOptions:
    """Options of one solve.  Each method declares which of them apply to it
    (:attr:`pal_opt.methods.Method.options`); giving one that does not is an error.

    Attributes
    ----------
    binning
        Binning mode; None means the round's own (``instance.params.binning``).
    seed
        Seed of randomised methods: an int, a ``numpy.random.Generator`` or None.
    backend
        Solver backend name; None means the first installed, in the registry's order.
    admission
        ``"prefix"`` or ``"backfill"``; None means the method's default.
    jobs
        Place exactly these job ids instead of following an admission rule.
    time_limit
        Wall-clock seconds for the whole solve (binning, building, solving, decoding, pricing),
        counted from the call; None for no limit.  When the time runs out the solve returns its
        best answer so far, at worst the greedy placement of the admitted jobs.
    deadline
        A ``time.monotonic()`` value by which the solve must return (:mod:`pal_opt.deadline`),
        or None; with ``time_limit`` too, the earlier of the two applies.  ``pal-opt solve
        --time-limit T`` sets it to T seconds after the process started.
    gap
        Relative gap target on the geometric-mean slowdown, or None for proven optimality.
    threads
        Solver threads, or None for the backend's default.
    warm_start
        Start the solver from the best greedy placement.
    deterministic
        Same input and options give the same answer.
    backend_params
        Passed straight to the solver by name (HiGHS options, CP-SAT parameters, CBC flags).
    parts
        Number of parts of a partitioned solve (None: chosen from the round's size).
    executor
        Where the parts of a partitioned solve run: None (a local process pool), ``"serial"``,
        or a Dask scheduler address such as ``"tcp://host:8786"`` (:mod:`pal_opt.parallel`).
    respect_types
        Greedy methods: offer each job only GPUs of its usable GPU types (default); False
        places as if the cluster had one type (the "ignoring types" comparator).
    canonical
        ``"ilp"``, ``"ilp-preempt"``: replace a proven optimum (``ilp-preempt``: its program's,
        before the backfill) by its canonical representative (:mod:`pal_opt.ilp.canonical`), the
        same placement whichever backend proved it, at the same cost; ``info["canonical"]`` says
        what was done (``"changed"``, ``"already canonical"``, or ``"kept: ..."`` and why, e.g.
        out of time).  Off by default: the solver's own optimum, as the
        committed simulations were run (``docs/determinism.md``).
    warm
        ``"ilp"``: a :class:`pal_opt.WarmStart` carried from round to round (the last round's
        LP basis and placement, :mod:`pal_opt.ilp.warm`), or None.
    """

    binning: str | None = None
    seed: Any = None
    backend: str | None = None
    admission: str | None = None
    jobs: Sequence[Any] | None = None  # any iterable of ids; kept as a tuple
    time_limit: float | None = None
    deadline: float | None = None
    gap: float | None = None
    threads: int | None = None
    warm_start: bool = True
    deterministic: bool = True
    backend_params: Mapping[str, Any] = field(default_factory=dict)
    parts: int | None = None
    executor: str | None = None
    respect_types: bool = True
    canonical: bool = False
    warm: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.binning is not None:
            object.__setattr__(self, "binning", validate_choice(self.binning, list(Binning), "binning mode"))
        if self.admission is not None:
            object.__setattr__(self, "admission", validate_choice(
                self.admission, list(Admission), "admission (or pass jobs=)"))
        check_seed(self.seed)
        object.__setattr__(self, "time_limit", _positive_number("time_limit", self.time_limit))
        if self.deadline is not None and not is_finite_number(self.deadline):
            raise OptionError(f"deadline must be a time.monotonic() value, got {shown_number(self.deadline)}")
        if self.deadline is not None:
            object.__setattr__(self, "deadline", float(self.deadline))
        object.__setattr__(self, "gap", _positive_number("gap", self.gap, allow_zero=True))
        if self.gap is not None and self.gap >= 1:  # a percentage given as a fraction's number
            _warn_large_gap(self.gap)
        for name in ("threads", "parts"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not _is_int(v) or v < 1):
                raise OptionError(f"{name} must be a positive integer, got {v!r}")
            if v is not None:
                object.__setattr__(self, name, int(v))
        if self.threads is not None and self.threads > MAX_THREADS:  # HiGHS starts them all: 5000 took 20 s
            raise OptionError(f"threads must be at most {MAX_THREADS} (this machine has {os.cpu_count()} CPUs), "
                              f"got {self.threads!r}")
        for name in ("warm_start", "deterministic", "respect_types", "canonical"):
            if not isinstance(getattr(self, name), bool):
                hint = ("; a WarmStart carried between rounds goes in warm="
                        if name == "warm_start" and type(getattr(self, name)).__name__ == "WarmStart" else "")
                raise OptionError(f"{name} must be True or False, got {getattr(self, name)!r}{hint}")
        _check_backend_params(self.backend_params)
        if self.executor is not None and (not isinstance(self.executor, str) or not self.executor.strip()):
            raise OptionError(f"executor must be 'serial' or a Dask scheduler address such as "
                              f"'tcp://host:8786', got {self.executor!r}")
        if self.backend is not None and not isinstance(self.backend, str):
            raise OptionError(f"backend must be a backend name, got {self.backend!r}")
        if self.jobs is not None:
            object.__setattr__(self, "jobs", _job_list(self.jobs))
        if self.jobs is not None and self.admission is not None:
            raise OptionError("give either admission= or jobs=, not both")

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> SolveOptions:
        """Options from keyword arguments; an unknown name is an :class:`OptionError`.

        >>> SolveOptions.from_kwargs(time_limt=3)
        Traceback (most recent call last):
        ...
        pal_opt.errors.OptionError: unknown option(s) time_limt; known: binning, seed, backend, admission, jobs, time_limit, deadline, gap, threads, warm_start, deterministic, backend_params, parts, executor, respect_types, canonical, warm
        """
        unknown = set(kwargs) - set(cls.names())
        misplaced = sorted(unknown & set(ROUND_PARAMETERS))
        if misplaced:  # README: make_instance(..., restart_cost=10, round_length=60)
            what = ", ".join(misplaced)
            it, verb = ("it", "is a round parameter, not a solve option") if len(misplaced) == 1 else (
                "them", "are round parameters, not solve options")
            raise OptionError(f"{what} {verb}: give {it} to pal_opt.make_instance(..., "
                              f"{'=..., '.join(misplaced)}=...) (or an instance file's params)")
        if unknown:
            raise OptionError(f"unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(cls.names())}")
        return cls(**kwargs)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option name, in declaration order."""
        return tuple(f.name for f in fields(cls))

    def given(self) -> set[str]:
        """Names of the options that differ from their defaults."""
        default = SolveOptions()
        return {n for n in self.names() if getattr(self, n) is not getattr(default, n)
                and getattr(self, n) != getattr(default, n)}


def _is_int(v: Any) -> bool:
    try:
        import numpy as np

        return isinstance(v, (int, np.integer))
    except ImportError:  # pragma: no cover - numpy is a dependency
        return isinstance(v, int)


def _job_list(jobs: Any) -> tuple[Any, ...]:
    if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
        raise OptionError(f"jobs must be a sequence of job ids, got {type(jobs).__name__}")
    out = []
    for jid in jobs:
        if _is_int(jid) and not isinstance(jid, bool):
            jid = int(jid)
        if not isinstance(jid, (int, str)) or isinstance(jid, bool):
            raise OptionError(f"job id {jid!r} is not an int or str")
        out.append(jid)
    return tuple(out)


def options_from(options: Any, kwargs: dict[str, Any]) -> SolveOptions:
    """``options`` itself, or the :class:`SolveOptions` of ``kwargs``: one way or the other,
    never half of each (the rule of :func:`pal_opt.solve`, :class:`pal_opt.RoundPolicy` and
    :func:`pal_opt.repair`).  ``kwargs`` whose value is None count as not given.

    >>> options_from({"time_limit": 5}, {})
    Traceback (most recent call last):
    ...
    pal_opt.errors.OptionError: options= must be a SolveOptions (or give its fields as keyword arguments: time_limit=...), got dict
    """
    if options is None:
        return SolveOptions.from_kwargs(**kwargs)
    given = {k: v for k, v in kwargs.items() if v is not None}
    if not isinstance(options, SolveOptions):
        hint = ", ".join(f"{k}=..." for k in options) if isinstance(options, dict) else "time_limit=..., gap=..."
        raise OptionError(f"options= must be a SolveOptions (or give its fields as keyword arguments: {hint}), "
                          f"got {type(options).__name__}")
    if given:
        raise InputTypeError(f"give either options= or keyword options ({', '.join(sorted(given))}), not both",
                             path="options")
    return options
