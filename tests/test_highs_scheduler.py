"""HiGHS's task scheduler is one static object per process: it is reset only when no other
``Highs.run()`` is under way (:class:`pal_opt.ilp.backends.highs._Runs`).  MIPs run in a child process
(:mod:`pal_opt.ilp.backends.highs_child`), LP relaxations and ``PAL_OPT_HIGHS_IN_PROCESS=1`` runs here.

Resetting it under a running solve frees what that solve uses (a segmentation fault in the other
thread).  Two runs overlap when a scheduler solves rounds in worker threads, or when a solver that
overran its deadline was abandoned and still runs while the next round is solved.  Here the
solver's ``run()`` is a stand-in that blocks on an event, and the reset is recorded: whether a
real HiGHS would crash is a matter of timing, which no test can hold.
"""

from __future__ import annotations

import threading

import pytest

highspy = pytest.importorskip("highspy")

from pal_opt.ilp.backends import highs as highs_backend  # noqa: E402


class _BlockingHighs:
    """A ``Highs`` whose ``run()`` returns once ``release`` is set, recording who was running."""

    def __init__(self, release: threading.Event, started: threading.Event) -> None:
        self.release, self.started = release, started

    def run(self) -> str:
        self.started.set()
        assert self.release.wait(30)
        return "ok"


def test_the_scheduler_is_reset_only_by_the_last_run_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    resets: list[int] = []
    monkeypatch.setattr(highspy.Highs, "resetGlobalScheduler",
                        staticmethod(lambda blocking: resets.append(highs_backend._RUNS.active)))
    long_release, long_started = threading.Event(), threading.Event()
    short_release, short_started = threading.Event(), threading.Event()
    long_solver = _BlockingHighs(long_release, long_started)
    short_solver = _BlockingHighs(short_release, short_started)
    out: dict[str, str] = {}
    long_run = threading.Thread(target=lambda: out.setdefault("long", highs_backend._run_counted(long_solver)))
    long_run.start()
    assert long_started.wait(30)
    short_run = threading.Thread(target=lambda: out.setdefault("short", highs_backend._run_counted(short_solver)))
    short_run.start()
    assert short_started.wait(30)
    short_release.set()  # the short solve ends while the long one still runs: no reset under it
    short_run.join(30)
    assert out == {"short": "ok"} and resets == []
    long_release.set()  # the last run ends: now the scheduler is reset, with no run under way
    long_run.join(30)
    assert out == {"short": "ok", "long": "ok"} and resets == [0]
    assert highs_backend._RUNS.active == 0


def test_a_run_that_raises_still_counts_itself_out(monkeypatch: pytest.MonkeyPatch) -> None:
    resets: list[int] = []
    monkeypatch.setattr(highspy.Highs, "resetGlobalScheduler", staticmethod(lambda blocking: resets.append(1)))

    class _Failing:
        def run(self) -> None:
            raise RuntimeError("solver failed")

    with pytest.raises(RuntimeError, match="solver failed"):
        highs_backend._run_counted(_Failing())
    assert resets == [1] and highs_backend._RUNS.active == 0
