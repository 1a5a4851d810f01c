"""The registry of placement methods: greedy policies and integer programs, looked up by name.

Every method is a :class:`Method`: a name, a one-line summary, the :class:`SolveOptions` it
accepts and a ``run(instance, options) -> PlacementResult``.  :func:`pal_opt.solve`, the
:class:`~pal_opt.scheduler.RoundPolicy`, the CLI's choices and ``--help``, the simulator, the
Blox adapter, the benchmarks and the tests all read the names from here.

A new greedy policy is a ``place(instance, factors, *, seed=None) -> GreedyPlacement`` function
registered with :func:`register_method` and :func:`greedy_method`; a new exact method is any
``run`` that returns a priced :class:`~pal_opt.result.PlacementResult`
(:func:`pal_opt.result.priced_result`).

Examples
--------
>>> names = method_names()
>>> names[0], "ilp" in names
('pal', True)
>>> get_method("ilp").exact
True
"""

from __future__ import annotations

import numbers  # numpy integers are registered as numbers.Integral
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import OptionError
from .options import MethodName, SolveOptions, require_items, require_text, require_type
from .registry import Registry

if TYPE_CHECKING:  # the registry itself imports nothing heavy: ``pal-opt --help`` reads it
    from .model import RoundInstance
    from .policies import PolicyFn
    from .result import PlacementResult

__all__ = [
    "Method",
    "MethodRun",
    "METHODS",
    "GREEDY_OPTIONS",
    "EXACT_OPTIONS",
    "greedy_method",
    "register_method",
    "unregister_method",
    "get_method",
    "method_names",
    "greedy_names",
    "default_parts",
]

#: ``run(instance, options) -> PlacementResult``.
MethodRun = Callable[["RoundInstance", SolveOptions], "PlacementResult"]

#: Options of every greedy policy (``admission="backfill"`` skips what does not fit, in the
#: policy's own order, instead of stopping there; ``"prefix"``, the default, stops;
#: ``respect_types=False`` ignores GPU types).
GREEDY_OPTIONS: frozenset[str] = frozenset({"binning", "seed", "admission", "respect_types"})
#: Options of the whole-round integer program (``ilp`` takes ``warm`` and ``canonical`` besides;
#: ``ilp-partitioned`` takes ``parts`` and ``executor``, not ``canonical``, which replaces a proven
#: optimum of the whole round: its parts are solved apart).
EXACT_OPTIONS: frozenset[str] = frozenset(
    {"binning", "backend", "admission", "jobs", "time_limit", "deadline", "gap", "threads", "warm_start",
     "deterministic", "backend_params"}
)


@dataclass(frozen=True)
class Method:
    """A placement method.

    Attributes
    ----------
    name
        Registry name (``--method NAME``).
    run
        ``run(instance, options) -> PlacementResult``.
    summary
        One line for ``--help`` and the docs.
    options
        Names of the :class:`~pal_opt.options.SolveOptions` fields it accepts; giving another
        one is an :class:`~pal_opt.errors.OptionError`.
    exact
        True for integer programs (they report a bound and a gap).
    """

    name: str
    run: MethodRun
    summary: str
    options: frozenset[str] = GREEDY_OPTIONS
    exact: bool = False

    def __post_init__(self) -> None:
        require_text(self.name, "name")  # None, a number: refused at registration, not at a solve
        require_type(self.run, Callable, "run", what="a function run(instance, options) -> PlacementResult")
        require_text(self.summary, "summary")
        object.__setattr__(self, "options", frozenset(require_items(
            self.options, "options", "a set of SolveOptions field names", of=str)))
        require_type(self.exact, bool, "exact")  # any object was taken as truthy

    def validate_options(self, options: SolveOptions) -> None:
        """Raise :class:`OptionError` for options given that do not belong to this method."""
        bad = options.given() - set(self.options)
        if bad:
            raise OptionError(f"option(s) {', '.join(sorted(bad))} do not apply to method {self.name!r}")


@cache
def _resolve(path: str, method: str) -> PolicyFn:
    """``"package.module:function"`` -> the function (imported on first use); an
    :class:`OptionError` naming ``method`` and ``path`` when it cannot be imported."""
    module, _, attr = path.partition(":")
    try:
        place = getattr(import_module(module), attr, None)
    except ImportError as exc:
        raise OptionError(f"method {method!r}: cannot import its policy {path!r}: {exc}") from exc
    if not callable(place):
        raise OptionError(f"method {method!r}: its policy {path!r} names no function of module {module!r}")
    return place  # type: ignore[no-any-return]


def _check_spec(path: str, method: str) -> None:
    """Refuse a policy ``path`` that is not ``"module:function"`` (:func:`greedy_method`)."""
    module, sep, attr = path.partition(":")
    if not (module and sep and attr.isidentifier()):
        raise OptionError(f"method {method!r}: a policy given by name must be 'module:function', got {path!r}")


def _check_importable(path: str, method: str) -> None:
    """Refuse a policy ``path`` whose module cannot be found, at :func:`register_method` (it was a
    ``ModuleNotFoundError`` at the first solve).  The module is looked up, not imported: a
    method's policy is still imported on first use."""
    from importlib.util import find_spec

    module = path.partition(":")[0]
    try:
        found = find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or broken
        found = False
    if not found:
        raise OptionError(f"method {method!r}: cannot import its policy {path!r}: no module named {module!r}")


@dataclass(frozen=True)
class _GreedyRun:
    """A greedy method's run (:func:`greedy_method`): a module-level class rather than a closure,
    so that a :class:`~pal_opt.scheduler.RoundPolicy` of a greedy method pickles (for a process
    pool or a checkpoint) as one of an exact method does."""

    name: str
    place: PolicyFn | str

    def __call__(self, instance: RoundInstance, options: SolveOptions) -> PlacementResult:
        from .admission import unplaceable
        from .binning import binned_factors
        from .result import Status, priced_result

        policy = _resolve(self.place, self.name) if isinstance(self.place, str) else self.place
        mode = options.binning or instance.params.binning
        factors = binned_factors(instance.cluster, mode)
        kw = {"backfill": True} if options.admission == "backfill" else {}
        if not options.respect_types:
            kw["respect_types"] = False
        t0 = time.perf_counter()
        out = policy(instance, factors, seed=options.seed, **kw)
        seconds = time.perf_counter() - t0
        return priced_result(
            instance, out.placements, factors, method=self.name, status=Status.FEASIBLE, admission=out.admission,
            solve_seconds=seconds, jobs_to_terminate_=out.jobs_to_terminate,
            seed=int(options.seed) if isinstance(options.seed, numbers.Integral) else None, info={"binning": mode},
            unplaceable=unplaceable(instance, types=options.respect_types),
        )


def greedy_method(name: str, place: PolicyFn | str, summary: str, *, backfill: bool = True,
                  seeded: bool = True) -> Method:
    """A :class:`Method` running the greedy policy ``place(instance, factors, *, seed=None,
    backfill=False)`` on the round's binned factors, timed and priced like every other method.
    ``place`` may be given as ``"module:function"``, imported on first use.  A policy without the
    ``backfill`` keyword is registered with ``backfill=False`` (it then takes no ``admission``
    option).  ``seeded=False`` declares a policy that draws nothing at random: it then takes no
    ``seed`` option, so a seed given to it is refused instead of ignored.  ``respect_types=False`` reaches the policy as that keyword (only when given), and the
    result's unplaceable jobs are then those of an untyped round (:func:`pal_opt.admission.unplaceable`).

    A ``place`` given as a string that is not ``"module:function"`` is an :class:`OptionError`
    here; one whose module cannot be found, at :func:`register_method`; one that names no function
    of its module, at the first solve (each naming the method and the string)."""

    require_text(name, "name")
    require_type(backfill, bool, "backfill")  # any object was taken as truthy
    require_type(seeded, bool, "seeded")
    if isinstance(place, str):
        _check_spec(place, name)
    else:  # None was taken, and failed at the first solve
        require_type(place, Callable, "place", what="a policy function or a 'module:function' string")
    run = _GreedyRun(name, place)
    options = GREEDY_OPTIONS - ({"admission"} if not backfill else set()) - ({"seed"} if not seeded else set())
    return Method(name, run, summary, frozenset(options))


def _ilp(instance: RoundInstance, options: SolveOptions) -> PlacementResult:
    from .ilp import solve_ilp

    kw = _exact_kwargs(options)
    res = solve_ilp(instance, warm=options.warm, canonical=options.canonical, **kw)
    res.info.setdefault("binning", kw["binning"] or instance.params.binning)
    return res


def _ilp_partitioned(instance: RoundInstance, options: SolveOptions) -> PlacementResult:
    from .ilp import solve_partitioned

    kw = _exact_kwargs(options)
    k = options.parts or default_parts(instance)
    res = solve_partitioned(instance, k, executor=options.executor, **kw)
    res.method = str(MethodName.ILP_PARTITIONED)
    res.info.setdefault("binning", kw["binning"] or instance.params.binning)
    return res


def _ilp_preempt(instance: RoundInstance, options: SolveOptions) -> PlacementResult:
    from .ilp.preempt import solve_preempt

    kw = {name: getattr(options, name) for name in ("binning", "backend", "time_limit", "deadline", "gap", "threads",
                                                     "warm_start", "deterministic", "canonical")}
    return solve_preempt(instance, backend_params=dict(options.backend_params), **kw)


#: Options of the preemptive round program (it chooses the jobs itself: no admission, no job set).
PREEMPT_OPTIONS: frozenset[str] = frozenset(
    {"binning", "backend", "time_limit", "deadline", "gap", "threads", "warm_start", "deterministic", "backend_params",
     "canonical"})


#: GPUs per part that :func:`default_parts` aims at.
GPUS_PER_PART = 1024


def default_parts(instance: RoundInstance) -> int:
    """Parts of a partitioned solve when none are asked for: one per ~1,024 GPUs, at least 2.

    >>> from pal_opt.generate import generate_instance
    >>> default_parts(generate_instance(512, 8, 100, seed=0))
    4
    """
    return max(2, round(instance.cluster.num_gpus / GPUS_PER_PART))


def _exact_kwargs(options: SolveOptions) -> dict[str, Any]:
    kw: dict[str, Any] = {
        name: getattr(options, name)
        for name in ("binning", "backend", "admission", "time_limit", "deadline", "gap", "threads", "warm_start",
                     "deterministic")
    }
    kw["jobs"] = list(options.jobs) if options.jobs is not None else None
    if options.backend_params:
        kw["backend_params"] = dict(options.backend_params)
    return kw


#: The greedy policies that draw at random (the others take no ``seed``).
_SEEDED = frozenset({MethodName.RANDOM})

_GREEDY: Mapping[str, tuple[str, str]] = {
    MethodName.PAL: ("pal_opt.policies.pal:place", "PAL: variability x locality walk, as the authors' artifact (greedy)"),
    MethodName.PMFIRST: ("pal_opt.policies.pmfirst:place", "PM-First: fastest GPUs first (greedy)"),
    MethodName.PACKED: ("pal_opt.policies.packed:place", "consolidated placement, running jobs freed (greedy)"),
    MethodName.PACKED_STICKY: ("pal_opt.policies.packed:place_sticky",
                               "consolidated placement, running jobs kept (greedy)"),
    MethodName.RANDOM: ("pal_opt.policies.random:place", "uniform random GPUs, seeded (greedy)"),
}

#: name -> :class:`Method`, in the order ``--help`` lists them.
METHODS: Registry[Method] = Registry("method", {
    **{str(n): greedy_method(str(n), fn, s, seeded=n in _SEEDED) for n, (fn, s) in _GREEDY.items()},
    MethodName.ILP: Method(str(MethodName.ILP), _ilp, "the round's exact integer program, with a proven gap",
                           EXACT_OPTIONS | {"warm", "canonical"}, exact=True),
    MethodName.ILP_PARTITIONED: Method(
        str(MethodName.ILP_PARTITIONED), _ilp_partitioned,
        "the round split into parts of the same make-up, solved in parallel, with a whole-round bound",
        EXACT_OPTIONS | {"parts", "executor"}, exact=True),
    MethodName.PREEMPT_GREEDY: greedy_method(
        str(MethodName.PREEMPT_GREEDY), "pal_opt.policies.preempt:place",
        "priorities: evict the lowest priority, most recently started first; PAL's placement (greedy)",
        backfill=False, seeded=False),
    MethodName.ILP_PREEMPT: Method(
        str(MethodName.ILP_PREEMPT), _ilp_preempt,
        "priorities: the round program chooses the jobs to preempt and the placement together",
        PREEMPT_OPTIONS, exact=True),
}.items())


def register_method(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to the registry: :func:`pal_opt.solve`, the CLI and the simulator accept
    its name from now on.

    Raises
    ------
    OptionError
        If a method of that name exists and ``replace`` is False, or it declares an option
        :class:`~pal_opt.options.SolveOptions` does not have.
    """
    if not isinstance(method, Method):
        raise OptionError(f"expected a Method, got {method!r}")
    if isinstance(method.run, _GreedyRun) and isinstance(method.run.place, str):
        _check_importable(method.run.place, method.name)
    unknown = set(method.options) - set(SolveOptions.names())
    if unknown:
        raise OptionError(f"method {method.name!r} declares unknown options {sorted(unknown)}")
    return METHODS.register(method.name, method, replace=replace)


def unregister_method(name: str) -> None:
    """Remove a method (a no-op for an unknown name)."""
    METHODS.unregister(name)


def get_method(name: Any) -> Method:
    """The method registered as ``name``."""
    return METHODS.get_item(name)


def method_names() -> tuple[str, ...]:
    """Registered method names, in registry order (the default, ``pal``, first)."""
    return METHODS.names()


def greedy_names() -> tuple[str, ...]:
    """Names of the registered methods that are not exact."""
    return tuple(n for n, m in METHODS.items() if not m.exact)
