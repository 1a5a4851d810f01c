"""Solver backends for the round program: a registry, not if/elif chains.

``available_backends()`` lists the installed ones in preference order (HiGHS, CP-SAT, CBC);
``get_backend(name)`` returns the backend class or raises
:class:`~pal_opt.errors.BackendUnavailableError` naming why and which backends are installed.
"""

from __future__ import annotations

from ...errors import BackendUnavailableError, OptionError
from .base import (
    Backend,
    BackendAbandoned,
    BackendInterrupted,
    BackendSolution,
    SolveOptions,
    SolverStatus,
    run_interruptibly,
)
from .cbc import CbcBackend
from .cpsat import CpSatBackend
from .highs import HighsBackend

__all__ = [
    "Backend",
    "BackendAbandoned",
    "BackendInterrupted",
    "BackendSolution",
    "SolveOptions",
    "SolverStatus",
    "BACKENDS",
    "PREFERENCE",
    "available_backends",
    "get_backend",
    "run_interruptibly",
]

#: name -> backend class.
BACKENDS: dict[str, type[Backend]] = {
    HighsBackend.name: HighsBackend,
    CpSatBackend.name: CpSatBackend,
    CbcBackend.name: CbcBackend,
}

#: Preference order for the default backend.
PREFERENCE: tuple[str, ...] = ("highs", "cpsat", "cbc")


def available_backends() -> list[str]:
    """Names of the installed backends, in preference order.

    >>> set(available_backends()) <= {"highs", "cpsat", "cbc"}
    True
    """
    return [n for n in PREFERENCE if BACKENDS[n].is_available()]


def get_backend(name: str | None = None) -> type[Backend]:
    """The backend class called ``name`` (None: the first available in preference order).

    Raises
    ------
    OptionError
        For an unknown name.
    BackendUnavailableError
        If the backend (or, for None, every backend) cannot be imported; the message gives the
        import error and lists the installed backends.
    """
    if name is None:
        avail = available_backends()
        if not avail:
            why = "; ".join(f"{n}: {BACKENDS[n].import_error()}" for n in PREFERENCE)
            raise BackendUnavailableError(f"no ILP backend is installed ({why})")
        return BACKENDS[avail[0]]
    if not isinstance(name, str) or name not in BACKENDS:
        inst = available_backends()
        raise OptionError(
            f"unknown backend {name!r}; choose one of {', '.join(PREFERENCE)} "
            f"(installed: {', '.join(inst) if inst else 'none'})"
        )
    cls = BACKENDS[name]
    if not cls.is_available():
        inst = available_backends()
        raise BackendUnavailableError(
            f"backend {name!r} is not available ({cls.import_error()}); "
            f"installed: {', '.join(inst) if inst else 'none'}"
        )
    return cls
