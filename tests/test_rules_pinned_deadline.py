"""Rules of :mod:`pal_opt.deadline` that a mutation audit (eighteenth session) found unpinned:
each test fails on the one-rule change its docstring names."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from pal_opt import deadline
from pal_opt.deadline import Deadline, process_started

REPO = Path(__file__).resolve().parent.parent
LINUX = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc/self/stat (Linux)")


def test_a_deadline_after_a_given_start_counts_from_it() -> None:
    """``start`` is where the seconds count from (``pal-opt solve --time-limit`` gives the
    process's start); ignoring it counted from now."""
    assert Deadline.after(5.0, start=100.0) == Deadline(105.0)
    assert Deadline.after(None, start=100.0) == Deadline.none()


def test_a_passed_deadline_leaves_a_budget_of_zero_not_a_negative_one() -> None:
    """``budget`` is at least 0 (a solver's time limit); without the floor it was negative."""
    late = Deadline(time.monotonic() - 5.0)
    assert late.budget() == 0.0 and late.budget(1.0) == 0.0


@LINUX
def test_the_process_start_is_before_the_module_import() -> None:
    """A process that sleeps 0.5 s before importing :mod:`pal_opt.deadline` started at least that
    long before the import, and not long before (the start is read from ``/proc/self/stat``'s 22nd
    field in clock ticks).  Taking the later of the two, the field after it, or ticks as
    milliseconds gave the import time or a start minutes earlier."""
    code = (
        "import time; time.sleep(0.5); import pal_opt.deadline as d; print(d._IMPORTED - d.process_started())"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    assert 0.45 <= float(out.stdout) < 60.0, out.stdout


@LINUX
def test_a_start_that_cannot_be_right_is_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process "started" more than 10^6 s ago by the boot-time clock, or "after" the module's
    import by the monotonic one (two clocks that disagree), is taken to have started at the import:
    without the bound, or without the ``min``, the start was 10^6 s back or after the import."""
    real = deadline.time
    far = types.SimpleNamespace(
        monotonic=real.monotonic,
        CLOCK_BOOTTIME=real.CLOCK_BOOTTIME,
        clock_gettime=lambda clock: real.clock_gettime(clock) + 2e6,
    )
    monkeypatch.setattr(deadline, "time", far)
    assert process_started() == deadline._IMPORTED
    ahead = types.SimpleNamespace(
        monotonic=lambda: real.monotonic() + 1e6,
        CLOCK_BOOTTIME=real.CLOCK_BOOTTIME,
        clock_gettime=real.clock_gettime,
    )
    monkeypatch.setattr(deadline, "time", ahead)
    assert process_started() == deadline._IMPORTED
