"""Deadlines: a solve's time limit as one point in time that every stage consults.

A time limit given to an exact solve bounds the whole solve, not only the solver: binning,
building the program, the LP bound, the MIP, decoding and pricing all run before one
:class:`Deadline` (a ``time.monotonic()`` value).  Each stage asks how much time is left
(:meth:`Deadline.left`), gives its solver what is left minus what must still follow, or gives up
(:class:`~pal_opt.errors.TimeLimitReached`) so that the caller can return the best answer it
already has.  ``pal-opt solve --time-limit T`` starts the clock when the process started
(:func:`process_started`), so that the whole command, imports and file reading included, ends
within about ``T``.

Examples
--------
>>> d = Deadline.after(60.0)
>>> d.limited, 59.0 < d.left() <= 60.0, d.passed()
(True, True, False)
>>> Deadline.none().left(), Deadline.after(None).limited
(inf, False)
>>> Deadline.after(10.0).earliest(Deadline.after(5.0)).left() <= 5.0
True
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from .errors import TimeLimitReached

__all__ = ["Deadline", "FINISH_SECONDS", "process_started"]

#: Seconds a solve under a deadline keeps, beside twice the time pricing its start took, for pricing
#: the answer and writing it (the command's output file): the round program's and the stage
#: program's reserve.
FINISH_SECONDS = 0.05

#: When this module was first imported: the process start where the system does not tell it.
_IMPORTED = time.monotonic()


@dataclass(frozen=True)
class Deadline:
    """A point in ``time.monotonic()`` time by which work must be done (``inf``: none).

    Attributes
    ----------
    at
        The ``time.monotonic()`` value of the deadline.
    """

    at: float = math.inf

    @classmethod
    def none(cls) -> Deadline:
        """No deadline."""
        return cls()

    @classmethod
    def after(cls, seconds: float | None, *, start: float | None = None) -> Deadline:
        """``seconds`` after ``start`` (a ``time.monotonic()`` value, default now); none for None."""
        if seconds is None:
            return cls()
        return cls((time.monotonic() if start is None else start) + float(seconds))

    @property
    def limited(self) -> bool:
        """Whether there is a deadline at all."""
        return math.isfinite(self.at)

    def left(self) -> float:
        """Seconds left (negative once passed; ``inf`` without a deadline)."""
        return self.at - time.monotonic() if self.limited else math.inf

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self.left() <= 0

    def earliest(self, other: Deadline) -> Deadline:
        """The earlier of two deadlines."""
        return self if self.at <= other.at else other

    def sooner(self, seconds: float) -> Deadline:
        """The deadline ``seconds`` earlier (for work that must leave time for what follows)."""
        return Deadline(self.at - seconds) if self.limited else self

    def budget(self, reserve: float = 0.0) -> float | None:
        """Seconds for a stage that must leave ``reserve`` seconds: ``left() - reserve`` (at least
        0), or None without a deadline."""
        return max(self.left() - reserve, 0.0) if self.limited else None

    def check(self, stage: str, need: float = 0.0) -> None:
        """Raise :class:`~pal_opt.errors.TimeLimitReached` if fewer than ``need`` seconds are left
        (``stage`` says what could not be done)."""
        if self.left() < need:
            raise TimeLimitReached(stage, need=need, left=self.left())


def process_started() -> float:
    """The ``time.monotonic()`` value at which this process started.

    On Linux, from the process's start time in ``/proc/self/stat`` (clock ticks since boot) and
    the boot-time clock, so that the interpreter's start and the imports count; elsewhere (or if
    that cannot be read), when :mod:`pal_opt.deadline` was first imported.
    """
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        ticks = int(stat.rsplit(b")", 1)[1].split()[19])  # field 22, after the command name
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        if not 0 <= since_boot < 1e6:
            return _IMPORTED
        return min(time.monotonic() - since_boot, _IMPORTED)
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
