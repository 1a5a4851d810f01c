"""Ctrl-C and time limits: what stopping a solver cleanly costs, and how fast it is.

Runs for about 2 min on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.2-4.2: 108 s); ``--quick`` is a smoke run.

Three parts, all on the real solvers, in one process:

A. **Overhead of being interruptible.**  Every backend's solve runs in a helper thread, and
   HiGHS each MIP in a child process of pal-opt's server (a crash does not end pal-opt) with
   highspy's user-interrupt callbacks on.  On the 20 paper-cluster rounds of
   ``ilp_paper_cluster.py`` (16 × 4, 40 jobs) and on ``instances/mid-32x8.json``, each round is
   solved to proven optimality by the backend as shipped and by a plain variant (the solver
   called directly in the calling thread, HiGHS in this process without callbacks), interleaved round by round
   with the order alternating, and the medians compared.
B. **Time to stop.**  A ``KeyboardInterrupt`` (``_thread.interrupt_main``, what SIGINT does) is
   sent 0.5, 1, 2 and 4 s after a backend's solve starts on ``racked-64x8`` and ``large-256x8``
   (60 s limit); reported: seconds from the interrupt to :class:`pal_opt.SolveInterrupted`,
   what was kept (the solver's incumbent or the start placement) and its gap.
C. **CBC's time limit.**  On ``large-256x8`` with limits of 0.001, 0.5, 2 and 5 s: seconds inside
   CBC for pal-opt's own CBC call (wall-clock deadline) and for PuLP's ``PULP_CBC_CMD`` call on
   the same model and options (CBC's ``-sec`` alone).

Usage::

    python benchmarks/interrupts.py [--quick] [--update | --out-dir DIR]

Writes ``interrupts.md``; it replaces the committed one in ``benchmarks/results/`` only with
``--update``, which a ``--quick`` run refuses (see ``benchmarks/_results.py``).
"""

from __future__ import annotations

import _thread
import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import (  # noqa: E402
    add_output_arguments,
    output_dir,
    partial_run,
    produced_by,
    progress_bar,
    run_time,
    write_page,
)
from ilp_paper_cluster import machine, measurements, paper_round  # noqa: E402

from pal_opt.binning import binned_factors  # noqa: E402
from pal_opt.errors import SolveInterrupted  # noqa: E402
from pal_opt.ilp import build_formulation  # noqa: E402
from pal_opt.ilp.backends import BACKENDS, SolveOptions  # noqa: E402
from pal_opt.ilp.backends.cpsat import CpSatBackend  # noqa: E402
from pal_opt.ilp.backends.highs import HighsBackend  # noqa: E402
from pal_opt.ilp.backends.highs_run import load_model  # noqa: E402
from pal_opt.ilp.solve import resolve_admission  # noqa: E402
from pal_opt.io import load_instance  # noqa: E402
from pal_opt.solve import solve  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"


class PlainHighs(HighsBackend):
    """HiGHS called directly in this process: no child process, no helper thread, no interrupt
    callbacks (the comparator)."""

    def _execute(self, model: Any, options: SolveOptions) -> tuple[Any, bool]:
        if model.isolated:  # the shipped backend hands the arrays to a child; here they load in-process
            load_model(model.h, model.arrays, model.start, integer=True)
        return self._run_here(model), False


class PlainCpSat(CpSatBackend):
    """CP-SAT called directly in this thread (the comparator)."""

    def _execute(self, model: Any, options: SolveOptions) -> tuple[Any, bool]:
        return self._run(model), False


def _form(inst):  # type: ignore[no-untyped-def]
    admitted, _ = resolve_admission(inst, None, None)
    return build_formulation(inst, admitted, factors=binned_factors(inst.cluster, inst.params.binning))


def _no_tick() -> None:
    pass


#: Part A's sizes: the paper rounds are each solved 3 times, mid-32x8 5 times, per backend.
PAPER_REPS, MID_REPS, PART_A_BACKENDS = 3, 5, 2


def runs(rounds: int, delays: list[float], limits: list[float]) -> int:
    """The runs of :func:`part_a`, :func:`part_b` and :func:`part_c` (a pair, shipped and plain, is one)."""
    return PART_A_BACKENDS * (rounds * PAPER_REPS + MID_REPS) + 2 * len(BACKENDS) * len(delays) + len(limits)


def part_a(rounds: int, tick: Callable[[], None] = _no_tick) -> list[str]:
    meas = measurements()
    forms = [(f"paper s{s}", _form(paper_round(s, meas))) for s in range(rounds)]
    mid = _form(load_instance(INSTANCES / "mid-32x8.json"))
    opts = SolveOptions()
    variants = {
        "highs": (lambda f: HighsBackend().solve(f, opts), lambda f: PlainHighs().solve(f, opts)),
        "cpsat": (lambda f: BACKENDS["cpsat"]().solve(f, opts), lambda f: PlainCpSat().solve(f, opts)),
    }
    lines = ["## A. Overhead of being interruptible (solve to proven optimality)", "",
             "| Backend | Rounds | Median, as shipped | Median, plain | Ratio | Same objective |",
             "|---|---|---|---|---|---|"]
    for name, (shipped, plain) in variants.items():
        for label, group, reps in ((f"paper 16×4 ({rounds} rounds ×{PAPER_REPS})", forms, PAPER_REPS),
                                   (f"mid-32x8 (×{MID_REPS})", [("mid", mid)] * MID_REPS, 1)):
            a, b, same = [], [], True
            for rep in range(reps):
                for k, (_, f) in enumerate(group):
                    order = (shipped, plain) if (k + rep) % 2 == 0 else (plain, shipped)
                    out = {}
                    for fn in order:
                        sol = fn(f)
                        out[fn] = sol
                        (a if fn is shipped else b).append(sol.seconds)
                    same &= abs(out[shipped].objective - out[plain].objective) <= 1e-6 * max(1.0, abs(out[plain].objective))
                    tick()
            ma, mb = statistics.median(a), statistics.median(b)
            lines.append(f"| {name} | {label} | {ma * 1000:.1f} ms | {mb * 1000:.1f} ms | {ma / mb:.2f} | {same} |")
    return lines


def _interrupt_after(backend: str, delay: float) -> tuple[dict[str, Any], Any]:
    """Patch the backend so that ``delay`` s after its first solve call of the measurement (the
    LP bound's, or the MIP's) one interrupt is sent; ``sent["timer"]`` is cancelled by the caller,
    so that a solve that finished first does not get it later, in the next measurement."""
    cls = BACKENDS[backend]
    orig = cls.solve
    sent: dict[str, Any] = {}

    def fire() -> None:
        sent["at"] = time.monotonic()
        _thread.interrupt_main()

    def patched(self, *a, **k):  # type: ignore[no-untyped-def]
        if "timer" not in sent:
            sent["timer"] = threading.Timer(delay, fire)
            sent["timer"].start()
        return orig(self, *a, **k)

    cls.solve = patched  # type: ignore[method-assign]
    return sent, orig


def handle_sigint() -> bool:
    """Put Python's SIGINT handler back if the process started with SIGINT ignored (``cmd &`` from a
    non-interactive shell does that): ``_thread.interrupt_main`` then does nothing, so no Ctrl-C
    reached a solve and every case of part B ran to its end ("finished first").  True if it did."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True


def part_b(delays: list[float], tick: Callable[[], None] = _no_tick) -> list[str]:
    lines = ["## B. Time to stop after Ctrl-C (60 s limit)", "",
             "| Instance | Backend | Interrupt after | Stopped in | Kept | Status | Gap |", "|---|---|---|---|---|---|---|"]
    for inst_name in ("racked-64x8", "large-256x8"):
        inst = load_instance(INSTANCES / f"{inst_name}.json")
        for backend in BACKENDS:
            for delay in delays:
                sent, orig = _interrupt_after(backend, delay)
                try:
                    res = solve(inst, "ilp", backend=backend, time_limit=60)
                    lines.append(f"| {inst_name} | {backend} | {delay:g} s | finished first | — | {res.status.value} | — |")
                    continue
                except SolveInterrupted as exc:
                    stopped = time.monotonic() - sent["at"]
                    r = exc.result
                finally:
                    BACKENDS[backend].solve = orig  # type: ignore[method-assign]
                    tick()  # the run is over, also when the solve finished first (continue)
                    if "timer" in sent:
                        sent["timer"].cancel()
                kept = r.info.get("incumbent", "start") if r is not None else "nothing"
                gap = f"{100 * r.gap:.2f}%" if r is not None and r.gap is not None else "—"
                lines.append(f"| {inst_name} | {backend} | {delay:g} s | {stopped:.2f} s | {kept} | "
                             f"{r.status.value if r else '—'} | {gap} |")
                time.sleep(0.2)  # let a Timer thread that fired late finish
    return lines


def part_c(limits: list[float], tick: Callable[[], None] = _no_tick) -> list[str]:
    import pulp

    inst = load_instance(INSTANCES / "large-256x8.json")
    form = _form(inst)
    cbc = BACKENDS["cbc"]
    lines = ["## C. CBC and its time limit on large-256x8 (no warm start)", "",
             "| Limit | pal-opt's CBC call: inside CBC | status | PuLP's PULP_CBC_CMD call: inside CBC | status |",
             "|---|---|---|---|---|"]
    for limit in limits:
        sol = cbc().solve(form, SolveOptions(time_limit=limit))
        prob = cbc()._translate(form, None).prob
        with tempfile.TemporaryDirectory() as d:
            cmd = pulp.PULP_CBC_CMD(msg=False, gapRel=0, gapAbs=1e-9, timeLimit=limit, options=["preprocess on"],
                                    logPath=os.path.join(d, "log"))
            t = time.perf_counter()
            prob.solve(cmd)
            pulp_s = time.perf_counter() - t
        lines.append(f"| {limit:g} s | {sol.seconds:.2f} s | {sol.status.value} | {pulp_s:.2f} s (incl. MPS writing) | "
                     f"{pulp.LpStatus[prob.status]} |")
        tick()
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--quick", action="store_true", help="fewer rounds, delays and limits (a smoke run)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    out = output_dir(args, "interrupts", partial=partial_run(ap, args, "quick")) / "interrupts.md"
    rounds = 4 if args.quick else 20
    delays = [1.0] if args.quick else [0.5, 1.0, 2.0, 4.0]
    limits = [0.001] if args.quick else [0.001, 0.5, 2.0, 5.0]
    if handle_sigint():
        print("interrupts: SIGINT was ignored (started in the background?); Python's handler restored", file=sys.stderr)
    head = ["# Interrupts and time limits", "", f"{produced_by(__file__, argv)}.", "", *machine(), ""]
    with progress_bar(runs(rounds, delays, limits), "interrupts", "run") as bar:  # on a terminal only
        step = lambda: bar.update(1)  # noqa: E731
        body = [*part_a(rounds, step), "", *part_b(delays, step), "", *part_c(limits, step), ""]
    text = "\n".join([*head, *body])
    write_page("interrupts", out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
