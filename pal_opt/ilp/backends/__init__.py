"""Solver backends for integer programs: a registry, not if/elif chains.

``available_backends()`` lists the installed ones in preference order (HiGHS, CP-SAT, CBC, then
any other registered backend in registration order); ``get_backend(name)`` returns the backend
class or raises :class:`~pal_opt.errors.BackendUnavailableError` naming why and which backends
are installed.  A new backend is a :class:`Backend` subclass (see :mod:`.base` for the hooks)
added with :func:`register_backend`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ...errors import BackendUnavailableError, OptionError
from ...options import check_flag, require_type
from .base import (
    Backend,
    BackendAbandoned,
    BackendInterrupted,
    BackendSolution,
    SolveOptions,
    SolverStatus,
    ThreadedBackend,
    run_interruptibly,
)
from .cbc import CbcBackend
from .cpsat import CpSatBackend
from .highs import HighsBackend

__all__ = [
    "Backend",
    "ThreadedBackend",
    "BackendAbandoned",
    "BackendInterrupted",
    "BackendSolution",
    "SolveOptions",
    "SolverStatus",
    "BACKENDS",
    "PREFERENCE",
    "available_backends",
    "backend_names",
    "get_backend",
    "check_backend_params",
    "register_backend",
    "unregister_backend",
    "run_interruptibly",
]

#: name -> backend class.
BACKENDS: dict[str, type[Backend]] = {}

#: Preference order for the default backend (registered backends not named here come after).
PREFERENCE: tuple[str, ...] = ("highs", "cpsat", "cbc")


def register_backend(cls: type[Backend], *, replace: bool = False) -> type[Backend]:
    """Add a backend class to the registry under its ``name`` class attribute.

    Returns the class, so this can decorate a class definition.

    Raises
    ------
    OptionError
        If ``cls`` is not a concrete :class:`Backend` subclass with a non-empty string ``name``,
        or another class is registered under that name and ``replace`` is False.

    Examples
    --------
    >>> from pal_opt.ilp.backends.highs import HighsBackend
    >>> class Copy(HighsBackend):
    ...     name = "highs-copy"
    >>> register_backend(Copy) is Copy, "highs-copy" in BACKENDS
    (True, True)
    >>> unregister_backend("highs-copy") is Copy, "highs-copy" in BACKENDS
    (True, False)
    """
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise OptionError(f"a backend must be a subclass of Backend, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise OptionError(f"backend class {cls.__qualname__} has no name (a non-empty str class attribute)")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise OptionError(f"backend class {cls.__qualname__} does not implement {missing}")
    require_type(replace, bool, "replace")  # any object was taken as truthy
    old = BACKENDS.get(name)
    if old is not None and old is not cls and not replace:
        raise OptionError(f"a backend named {name!r} is already registered ({old.__qualname__}); pass replace=True")
    BACKENDS[name] = cls
    return cls


def unregister_backend(name: str) -> type[Backend]:
    """Remove the backend registered as ``name`` and return its class (:class:`OptionError` if none)."""
    if name not in BACKENDS:
        raise OptionError(f"no backend named {name!r} is registered")
    return BACKENDS.pop(name)


def backend_names() -> list[str]:
    """Registered names, in preference order (installed or not).

    >>> backend_names()[:3]
    ['highs', 'cpsat', 'cbc']
    """
    return [n for n in PREFERENCE if n in BACKENDS] + [n for n in BACKENDS if n not in PREFERENCE]


def available_backends() -> list[str]:
    """Names of the installed backends, in preference order.

    >>> set(available_backends()) <= {"highs", "cpsat", "cbc"}
    True
    """
    return [n for n in backend_names() if BACKENDS[n].is_available()]


def get_backend(name: str | None = None, *, probe: bool = True) -> type[Backend]:
    """The backend class called ``name`` (None: the first available in preference order, probed
    in that order until one imports).

    With ``probe=False`` a named backend is only looked for (:meth:`Backend.is_installed`, which
    imports nothing), so that a caller short of time imports the solver only when it uses it.

    Raises
    ------
    OptionError
        For an unknown name.
    BackendUnavailableError
        If the backend (or, for None, every backend) cannot be imported; the message gives the
        import error and lists the installed backends.
    """
    check_flag(probe, "probe")  # any object was a truthy flag
    if name is None:  # probe in preference order, stopping at the first installed (a probe imports a solver)
        first = next((BACKENDS[n] for n in backend_names() if BACKENDS[n].is_available()), None)
        if first is None:
            why = "; ".join(f"{n}: {BACKENDS[n].import_error()}" for n in backend_names())
            raise BackendUnavailableError(f"no ILP backend is installed ({why})")
        return first
    if not isinstance(name, str) or name not in BACKENDS:
        inst = available_backends()
        raise OptionError(
            f"unknown backend {name!r}; choose one of {', '.join(backend_names())} "
            f"(installed: {', '.join(inst) if inst else 'none'})"
        )
    cls = BACKENDS[name]
    if not probe and cls.is_installed():
        return cls
    if not cls.is_available():
        inst = available_backends()
        raise BackendUnavailableError(
            f"backend {name!r} is not available ({cls.import_error()}); "
            f"installed: {', '.join(inst) if inst else 'none'}"
        )
    return cls


register_backend(HighsBackend)
register_backend(CpSatBackend)
register_backend(CbcBackend)


def check_backend_params(backend: str | None, params: Mapping[str, Any]) -> None:
    """Refuse, before any work, a parameter of ``params`` that the backend called ``backend``
    (None: the first installed, :func:`get_backend`) would refuse when it solves: the
    :class:`~pal_opt.errors.OptionError` of :meth:`Backend.check_params`.  Nothing is imported
    without parameters."""
    if params:
        get_backend(backend)().check_params(params)
