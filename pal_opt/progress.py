"""Progress of long work: the library reports it, whoever asked shows it (or not).

Library code never prints.  As long work advances it calls :func:`report` with what it knows
(``report(stage="solving", incumbent=3.21, bound=3.19)``), which does nothing unless a caller
installed a *reporter* with :func:`reporting` (the ``pal-opt`` command does, for a solve on a
terminal).  A reporter is any callable taking the fields as a dict; it is called in the thread
that reports, so it should be quick and must not raise.

Reporters are held in a :class:`contextvars.ContextVar`: one installed in a thread is seen by
the work that thread does and by nothing else (solves running in other threads or processes,
e.g. the parts of a partitioned solve on a process pool, report to no one).

Fields
------
Every field is optional; a reporter keeps the latest value of each.

``stage``
    What is being done, in words ("building the program", "solving").
``backend``
    The solver at work.
``seconds``
    Seconds the solver has run (reported by the backends' waiting loops every
    :data:`~pal_opt.ilp.backends.base.POLL_SECONDS`, whether or not the solver says anything).
``incumbent``, ``bound``
    Objective of the best placement found so far and a lower bound on the optimum, in program
    units (Σ demand × ln slowdown), once known.
``gap``
    Relative gap of the geometric-mean slowdown (:func:`pal_opt.cost.relative_gap`).
``stopping``
    True once a Ctrl-C asked the solver to stop and pal-opt waits for it.
``parts_done``, ``parts``
    A partitioned solve (:func:`pal_opt.ilp.partition.solve_partitioned`): parts solved so far,
    of how many.

Examples
--------
>>> seen = []
>>> report(stage="ignored")  # no reporter: nothing happens
>>> with reporting(seen.append):
...     report(stage="solving", incumbent=3.5)
>>> seen
[{'stage': 'solving', 'incumbent': 3.5}]
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Reporter", "report", "active", "reporting", "adapted"]

#: What :func:`reporting` installs: called with the fields of each :func:`report`.
Reporter = Callable[[dict[str, Any]], None]

_reporter: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("pal_opt_progress", default=None)


def report(**fields: Any) -> None:
    """Hand ``fields`` to the current reporter; a no-op when there is none."""
    reporter = _reporter.get()
    if reporter is not None:
        reporter(fields)


def active() -> bool:
    """Whether anyone listens (work that is costly only to report can be skipped otherwise)."""
    return _reporter.get() is not None


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send what is reported inside the block to ``reporter`` (None: to no one)."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


@contextmanager
def adapted(adapt: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[None]:
    """Inside the block, pass every report through ``adapt`` before the current reporter gets it
    (e.g. to add the gap, which needs what only the caller knows).  Does nothing when no one
    listens."""
    outer = _reporter.get()
    if outer is None:
        yield
        return
    token = _reporter.set(lambda fields: outer(adapt(fields)))
    try:
        yield
    finally:
        _reporter.reset(token)
