"""A scheduler's round loop bounded by work, not time: are two runs the same, round by round?

Runs for about 30 min on the machine of the committed page (the page does not say: 9 loops of 25
rounds, whose median and longest round times on the page give at least 24 min; one round per loop
takes 12-286 s); ``--backends``, ``--rounds`` and ``--no-loaded`` run less.

The loop: ``racked_rounds.py``'s (32 servers x 8 GPUs in 4 racks, Poisson(3) arrivals a round,
every 40th job a two-stage pipeline, a failure or recovery now and then, ``restart_cost=30`` s of a
360 s round, seed ``--seed``), driven by ``RoundPolicy("ilp", backend=B, time_limit=NET,
backend_params=RECIPE[B])``: the jobs run between rounds on the policy's own answers, so a round
that differs changes every later one.  ``RECIPE`` is the README's work bound (HiGHS
``mip_max_nodes``, CP-SAT ``max_deterministic_time``, CBC ``maxNodes``); ``NET`` (``--net``) the
time limit meant as a safety net that no round reaches.

Per backend the loop runs twice, one run after the other, and once more (``--loaded``) beside
busy loops (one per core, at this process's niceness) that take about half the CPU from it.
Reported per backend: the rounds, how many placed every job identically in both runs (and in the
loaded run), the first round where they part, the rounds of each run that reached the safety net
(a message or solver status that says "time limit", or a round within 5 % of ``NET``), and the
median and largest round time.  Every answer passes :func:`pal_opt.check`.

Usage::

    nice python benchmarks/reproducible_loop.py [--update | --out-dir DIR] [--rounds 25] [--net 300]
        [--backends highs,cpsat,cbc] [--no-loaded] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    check_values,
    output_dir,
    partial_run,
    positive_seconds,
    produced_by,
    run_time,
    split_list,
    wrote,
)
from racked_rounds import run_loop  # noqa: E402
from suite import machine  # noqa: E402

#: The README's work bounds, one per backend.
RECIPE: dict[str, dict[str, Any]] = {"highs": {"mip_max_nodes": 200}, "cpsat": {"max_deterministic_time": 1.0},
                                     "cbc": {"maxNodes": 200}}
ROUNDS, NET = 25, 300.0


def reached_net(res: Any, wall: float, net: float) -> bool:
    """Whether a round's solve reached the time limit (its message or the statuses of its
    solves say so, or it took at least 95 % of the limit)."""
    said = " ".join(str(x) for x in (res.message, res.info.get("solver_status"), res.info.get("gang_view")))
    return "time limit" in said.lower() or wall >= 0.95 * net


def one_run(backend: str, rounds: int, seed: int, net: float, label: str) -> list[dict[str, Any]]:
    """One loop: per round the placements, the status, the wall time and the safety-net flag."""
    import pal_opt

    policy = pal_opt.RoundPolicy("ilp", backend=backend, time_limit=net, backend_params=RECIPE[backend])
    out: list[dict[str, Any]] = []
    t = time.perf_counter()
    for r, (inst, res) in enumerate(run_loop(seed, rounds, policy)):
        wall = time.perf_counter() - t
        if pal_opt.check(inst, res):
            raise SystemExit(f"reproducible_loop: an invalid answer ({backend}, round {r}): {pal_opt.check(inst, res)}")
        out.append({"placements": dict(sorted(res.placements.items())), "status": res.status.value, "wall": wall,
                    "net": reached_net(res, wall, net)})
        print(f"[{time.strftime('%H:%M:%S')}] {backend} {label} round {r}: {wall:.2f} s, {res.status.value}"
              f"{', SAFETY NET' if out[-1]['net'] else ''}", file=sys.stderr, flush=True)
        t = time.perf_counter()
    return out


@contextmanager
def loaded() -> Iterator[int]:
    """Busy loops, one per core, at this process's niceness, for the ``with`` block."""
    n = os.cpu_count() or 1
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]
    try:
        yield n
    finally:
        for p in procs:
            p.kill()
            p.wait()


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[int, int | None]:
    """Rounds placed identically, and the first round where the runs part (None: none)."""
    same = [x["placements"] == y["placements"] for x, y in zip(a, b, strict=True)]
    return sum(same), next((r for r, s in enumerate(same) if not s), None)


def row(backend: str, runs: dict[str, list[dict[str, Any]]]) -> str:
    first, second = runs["run 1"], runs["run 2"]
    same, parted = compare(first, second)
    cells = [backend, str(len(first)), str(same), "none" if parted is None else str(parted)]
    if "loaded" in runs:
        same_l, parted_l = compare(first, runs["loaded"])
        cells += [str(same_l), "none" if parted_l is None else str(parted_l)]
    else:
        cells += ["", ""]
    for name in ("run 1", "run 2", "loaded"):
        got = runs.get(name)
        cells.append("" if got is None else str(sum(x["net"] for x in got)))
    for name in ("run 1", "run 2", "loaded"):
        got = runs.get(name)
        cells.append("" if got is None else
                     f"{statistics.median(x['wall'] for x in got):.2f} / {max(x['wall'] for x in got):.1f}")
    statuses = sorted({x["status"] for got in runs.values() for x in got})
    return "| " + " | ".join([*cells, "/".join(statuses)]) + " |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds of each run (default {ROUNDS})")
    ap.add_argument("--net", type=float, default=NET, help=f"the time limit per round, in s (default {NET:g})")
    ap.add_argument("--seed", type=int, default=0, help="the loop's seed (default 0)")
    ap.add_argument("--backends", default="highs,cpsat,cbc", help="comma-separated (default highs,cpsat,cbc)")
    ap.add_argument("--no-loaded", action="store_true", help="skip the run beside busy loops")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    backends = split_list(ap, "--backends", args.backends, str, "comma-separated backend names")
    check_values(ap, "--backends", backends, lambda b: b in RECIPE, ", ".join(RECIPE))
    at_least(ap, args, 1, "rounds")
    positive_seconds(ap, args, "net")
    at_least(ap, args, 0, "seed")
    partial = partial_run(ap, args, "rounds", "net", "seed", "no_loaded", also={"--backends": backends != list(RECIPE)})
    out_dir = output_dir(args, "reproducible_loop", partial=partial)
    header = produced_by(__file__, argv)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for backend in backends:
        runs = results.setdefault(backend, {})
        for label in ("run 1", "run 2"):
            runs[label] = one_run(backend, args.rounds, args.seed, args.net, label)
        if not args.no_loaded:
            with loaded():
                runs["loaded"] = one_run(backend, args.rounds, args.seed, args.net, "loaded")
        page(out_dir, results, args, header)  # after each backend: a run cut short keeps what it measured
    return 0


def page(out_dir: Path, results: dict[str, dict[str, list[dict[str, Any]]]], args: argparse.Namespace,
         header: str) -> None:
    """Write the results page (``header``: :func:`produced_by`'s line)."""
    lines = ["# A round loop bounded by work: two runs, round by round", "",
             f"{header}.", "", "Machine:", "", *machine(), "",
             f"The loop of the module docstring: 256 GPUs (32 servers x 8 in 4 racks), loop seed {args.seed} "
             "(arrivals, demands, models, run lengths, failures and the GPUs' factors all drawn from "
             f"`numpy.random.default_rng({args.seed})`), {args.rounds} rounds, "
             f"`RoundPolicy(\"ilp\", backend=B, time_limit={args.net:g}, backend_params=RECIPE[B])` placing every "
             "round and the jobs running on its answers; the backends' own seeds are pal-opt's (0).  RECIPE: "
             + ", ".join(f"{b} `{p}`" for b, p in RECIPE.items()) + ".  *run 1*, *run 2*: the same loop twice, one "
             "after the other, in one process; *loaded*: a third run beside "
             f"{os.cpu_count()} busy loops (`python -c 'while 1: pass'`, one per core, at this process's niceness).  "
             "*same*: rounds whose placements (every job's GPUs, in order) equal run 1's; *parts at*: the first "
             "round that differs.  *net*: rounds that reached the time limit (the message or a solve's status "
             "says \"time limit\", or the round took 95 % of it).  *round s*: median / largest wall time of a "
             "round (`policy.place`, the solve and its checks).", "",
             "| backend | rounds | same (run 2) | parts at | same (loaded) | parts at (loaded) | net run 1 | "
             "net run 2 | net loaded | round s run 1 | round s run 2 | round s loaded | statuses |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [row(b, runs) for b, runs in results.items()]
    path = out_dir / "reproducible_loop.md"
    path.write_text("\n".join([*lines, ""]), encoding="utf-8")
    wrote("reproducible_loop", path)


if __name__ == "__main__":
    raise SystemExit(main())
