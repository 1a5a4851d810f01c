"""The stage program at scale: its size, its build, and time-limited solves of rounds with pipelines.

Runs for about 3 min on the machine of the committed page, about 5.5 min with ``--baseline`` as it
was run (the page does not say: its json's per-process walls are 158 s for this code and 162 s for
the baseline); ``--sizes`` and ``--limits`` run fewer.

Rounds as in ``benchmarks/pipeline_placement.py`` (about half the GPUs in PipeDream pipelines of
vgg16 and gnmt and Sia's gpt_pmp, the rest gangs of the Sia-Philly models, the queue filling the
cluster), on clusters of 8-GPU servers whose factors are PAL's Longhorn measurements (seed 0),
at 256 to 2,048 GPUs.  Each (code, size) runs in its own process, so that its peak memory is its
own.  Per round:

* the stage program's build alone (``build_stage_round``): seconds, columns, rows, matrix entries,
  and the process's peak memory;
* ``solve_ilp(time_limit=T)`` for each T (HiGHS): wall seconds from the call, the status, the stage
  where time ran out, the pairs of servers whose stage program was solved (and how many improved
  the placement: since 2026-12-07 a round of at least ``SEARCH_MIN_GPUS`` free GPUs gets the
  search on pairs of servers, :mod:`pal_opt.ilp.stagesearch`, instead of the whole stage program;
  the groups of a multi-server job's servers too, since the same day, and the neighbourhoods of a
  multi-server job no group holds later that day), the round cost against
  PAL's placement with the stages mapped best (``start_placement``: the fallback until
  2026-11-27), lower is better, and the gap to the answer's bound.

``--server-gpus 2`` or ``4`` lays the same rounds out on smaller servers, where the 8-GPU
pipelines lie on several servers; ``--server-gpus 16 --pipeline-gpus 16 24`` on 16-GPU servers
with vgg16 and gnmt pipelines of 16 and 24 GPUs, which lie on two or three servers holding more
than 32 free GPUs, or ``--pipeline-gpus 16 48``, whose 48-GPU pipelines (more than 32 GPUs) have
neighbourhoods since the fifteenth session (partial runs: they do not replace the committed page).
``--partitioned-only`` leaves Sia's gpt_pmp pipelines (4 and 8 GPUs) out of the queue, so that with
``--pipeline-gpus 40`` every pipeline has more than 32 GPUs.

``--idle-fraction F`` (default 0: the queue fills the cluster) drops queued gangs, in an order drawn
from a stream of their own (``IDLE_SEED``), each while the GPUs dropped stay within F of the
cluster's, so that about that fraction of the GPUs is idle (the pipelines stay; the round's other
draws are those of the full round): the rounds where a neighbourhood may open idle GPUs of a server
outside its job's (``OUTSIDE_SERVER``).  Partial runs too.

``--baseline DIR`` runs the same rounds with the package found in DIR too (a checkout of an
earlier commit, e.g. ``git worktree add /tmp/old 8bdeb72``), in the same session: the
comparator.  Needs ``../shared`` (PAL's Longhorn measurements, the PipeDream profiles).

    python benchmarks/stage_scale.py --update --baseline /tmp/old

``stage_scale.png`` draws the two tables against the size; ``--plot-only`` draws it again from the
committed ``stage_scale.json`` and runs nothing (the page is left as it is).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import (  # noqa: E402
    RESULTS,
    add_output_arguments,
    add_plot_only_argument,
    check_values,
    load_average,
    output_dir,
    package_versions,
    partial_run,
    plot_only,
    produced_by,
    run_time,
    wrote,
)

ROOT = Path(__file__).resolve().parents[1]
SIZES = (256, 512, 1024, 2048)
LIMITS = (10.0, 30.0)
#: The baseline's sizes by default: the build of 8bdeb72 and earlier at 2,048 GPUs was killed for
#: memory on this machine (see the page); ``--baseline-sizes`` runs others.
BASELINE_SIZES = (256, 512, 1024)
WORKER_TIMEOUT = 900
#: The seed of the stream that draws the gangs ``--idle-fraction`` drops (its own: the round's
#: draws, from seed 0, are those of the full round).
IDLE_SEED = 1


def leave_idle(inst: Any, fraction: float) -> Any:
    """``inst`` with gangs dropped from its queue, in an order drawn from a stream of their own
    (``numpy.random.default_rng(IDLE_SEED)``), each while the GPUs dropped stay within ``fraction``
    of the cluster's (rounded down): that many GPUs, or a few fewer, left idle.  The queue's order
    is kept (positions renumbered); ``fraction`` 0 returns ``inst`` itself, with no draw."""
    if fraction == 0:
        return inst
    from dataclasses import replace

    import numpy as np

    left = math.floor(fraction * inst.cluster.num_gpus)
    gangs = [k for k, job in enumerate(inst.jobs) if job.pipeline is None]
    dropped = set()
    for k in np.random.default_rng(IDLE_SEED).permutation(len(gangs)).tolist():
        if inst.jobs[gangs[k]].demand <= left:
            dropped.add(gangs[k])
            left -= inst.jobs[gangs[k]].demand
    kept = [job for k, job in enumerate(inst.jobs) if k not in dropped]
    return replace(inst, jobs=tuple(replace(job, position=i) for i, job in enumerate(kept)))


def make_instance(gpus: int, shared: Path, server_gpus: int = 8, pipeline_gpus: tuple[int, ...] = (4, 8),
                  idle_fraction: float = 0.0, partitioned_only: bool = False) -> Any:
    """The round of ``gpus`` GPUs (module docstring; ``--idle-fraction``: :func:`leave_idle`;
    ``--partitioned-only``: no gpt_pmp pipelines)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from pipeline_placement import make_round, pipelines

    from pal_opt.generate import generate_instance
    from pal_opt.io.measurements import longhorn_paths

    paths = longhorn_paths(shared / "data" / "pal-artifact" / "variability" / "longhorn")
    cluster = generate_instance(gpus // server_gpus, server_gpus, 1, seed=0, measurements=paths).cluster
    kinds = [k for k in pipelines(shared, pipeline_gpus) if not (partitioned_only and k[0].startswith("gpt_pmp"))]
    inst, _ = make_round(cluster, kinds, np.random.default_rng(0), f"stage-{gpus}")
    return leave_idle(inst, idle_fraction)


def worker(gpus: int, limits: list[float], shared: Path, server_gpus: int = 8,
           pipeline_gpus: tuple[int, ...] = (4, 8), idle_fraction: float = 0.0,
           partitioned_only: bool = False) -> dict[str, Any]:
    """One size's figures, in this process (``--worker``)."""
    import resource

    from pal_opt.cost import evaluate
    from pal_opt.ilp import solve_ilp
    from pal_opt.ilp.solve import prepare_round
    from pal_opt.ilp.stageround import build_stage_round, start_placement

    inst = make_instance(gpus, shared, server_gpus, pipeline_gpus, idle_fraction, partitioned_only)
    setup = prepare_round(inst, None, None, None, None, probe=False)
    pal = start_placement(inst, setup.admitted, setup.factors)
    import pal_opt

    out: dict[str, Any] = {"package": str(Path(pal_opt.__file__).parent), "gpus": gpus, "jobs": len(inst.jobs),
                           "idle": gpus - sum(j.demand for j in inst.jobs),
                           "pipelines": sum(j.pipeline is not None for j in inst.jobs),
                           "demand": sum(inst.jobs[i].demand for i in setup.admitted),
                           "pal_cost": evaluate(inst, pal, setup.factors).cost if pal else None, "solves": []}
    for limit in limits:
        t = time.perf_counter()
        res = solve_ilp(inst, time_limit=limit, backend="highs")
        out["solves"].append({"limit": limit, "wall": time.perf_counter() - t, "status": res.status.value,
                              "cost": res.objective, "bound": res.bound, "gap": res.gap,
                              "reached": res.info.get("time_limit_reached"),
                              "start": res.info.get("start"), "gang_view": res.info.get("gang_view"),
                              "search": res.info.get("stage_search")})
    t = time.perf_counter()
    sr = build_stage_round(inst, setup.admitted, setup.factors)
    out.update(build=time.perf_counter() - t, cols=sr.program.num_vars, rows=sr.program.num_rows,
               nnz=int(sr.program.A.nnz), peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def run_one(code: Path, gpus: int, limits: list[float], shared: Path, server_gpus: int = 8,
            pipeline_gpus: tuple[int, ...] = (4, 8), idle_fraction: float = 0.0,
            partitioned_only: bool = False) -> dict[str, Any]:
    """``worker`` in a new process importing pal_opt from ``code``."""
    env = dict(os.environ, PYTHONPATH=str(code))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(gpus), "--shared", str(shared),
           "--server-gpus", str(server_gpus), "--pipeline-gpus", *map(str, pipeline_gpus), "--limits", *map(str, limits),
           "--idle-fraction", repr(idle_fraction)] + (["--partitioned-only"] if partitioned_only else [])
    t = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return {"gpus": gpus, "error": f"timed out after {WORKER_TIMEOUT} s"}
    wall = time.perf_counter() - t
    if done.returncode != 0:
        return {"gpus": gpus, "error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["process_wall"] = wall
    return row


#: The page's figure (:func:`plot`), after the two tables.
FIGURE = "stage_scale.png"
FIGURE_LINK = (f"![the stage program's entries, build time and peak memory, and the speed-up over PAL of each "
               f"time limit's answer, against the GPUs, per code]({FIGURE})")


def plot(rows: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """The two tables against the cluster size, one line per code (``now``, the baseline): the
    program's matrix entries, its build seconds, the worker's peak memory, and the speed-up of
    each time limit's answer over PAL's placement (a line per T); log axes of GPUs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("matrix entries", lambda r: r["nnz"]), ("build s", lambda r: r["build"]),
              ("peak resident MiB", lambda r: r["peak_mib"])]
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(17, 4))
    sizes = sorted({r["gpus"] for runs in rows.values() for r in runs})
    for c, (code, runs) in enumerate(rows.items()):
        ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["gpus"])
        style = dict(color=f"C{c}", marker="os^"[c % 3], ls="-" if code == "now" else "--", lw=1.2)
        for ax, (_, value) in zip(axes, panels, strict=False):
            ax.plot([r["gpus"] for r in ok], [value(r) for r in ok], label=code, **style)
        for t, limit in enumerate(sorted({s["limit"] for r in ok for s in r.get("solves", [])})):
            pts = [(r["gpus"], math.exp((r["pal_cost"] - s["cost"]) / r["demand"]))
                   for r in ok for s in r.get("solves", []) if s["limit"] == limit]
            axes[-1].plot([g for g, _ in pts], [v for _, v in pts], label=f"{code}, T = {limit:g} s",
                          **{**style, "marker": "ox"[t % 2], "mfc": "none" if t else style["color"]})
    labels = [label for label, _ in panels] + ["speed-up over PAL's placement"]
    for ax, label in zip(axes, labels, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [f"{g:,}" for g in sizes])
        ax.minorticks_off()
        ax.set_xlabel("GPUs")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[:-1]:
        ax.set_yscale("log")
    fig.suptitle("The stage program on rounds with pipelines: its size and build, and solve_ilp(time_limit=T) "
                 "against PAL (HiGHS)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def page(rows: dict[str, list[dict[str, Any]]], header: str, started: str, ended: str, skipped: bool,
         server_gpus: int = 8, pipeline_gpus: tuple[int, ...] = (4, 8), idle_fraction: float = 0.0,
         partitioned_only: bool = False) -> str:
    lines = ["# The stage program at scale (rounds with pipeline jobs)", "",
             f"{header} on {time.strftime('%Y-%m-%d')} "
             f"(Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs shared with other "
             f"work; {package_versions()}).", "",
             f"Load average at the start {started}, at the end {ended}.  Rounds and settings: the script's docstring"
             + ("" if server_gpus == 8 else f", on servers of {server_gpus} GPUs (`--server-gpus`)")
             + ("" if pipeline_gpus == (4, 8) else
                f", vgg16 and gnmt pipelines on {' and '.join(map(str, pipeline_gpus))} GPUs (`--pipeline-gpus`)")
             + (", no gpt_pmp pipelines (`--partitioned-only`)" if partitioned_only else "")
             + ("" if idle_fraction == 0 else
                f", gangs dropped to leave {100 * idle_fraction:g} % of the GPUs idle (`--idle-fraction`)")
             + ". "
             "`now` is this commit's code; `before` the baseline given with `--baseline` (the commit named "
             "below), run in the same session.", "",
             "## The program and its build", "",
             "| code | GPUs | jobs (pipelines) | columns | rows | entries | build s | peak MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for code, runs in rows.items():
        for r in runs:
            if "error" in r:
                lines.append(f"| {code} | {r['gpus']:,} | | | | | {r['error']} | |")
                continue
            idle = f", {r['idle']} GPUs idle" if r.get("idle") else ""
            lines.append(f"| {code} | {r['gpus']:,} | {r['jobs']} ({r['pipelines']}){idle} | {r['cols']:,} | {r['rows']:,} | "
                         f"{r['nnz']:,} | {r['build']:.2f} | {r['peak_mib']:,.0f} |")
    lines += ["", "## `solve_ilp(time_limit=T)`, HiGHS", "",
              "Round cost (lower is better; the sum over jobs of d ln(pace × locality penalty), d the job's GPUs) "
              "against PAL's placement with the stages mapped best (the fallback until 2026-11-27); *speed-up*: "
              "exp((PAL's cost − cost) / Σ d), the geometric-mean speed per GPU against PAL's placement.  "
              "*wall*: from the call to the answer, in the worker process.  *pairs*: pairs of servers whose "
              "stage program was solved (+ groups: a multi-server job's servers and one more; + n: "
              "neighbourhoods of a multi-server job no group holds; improved), when "
              "the round got the search on pairs of servers (`pal_opt.ilp.stagesearch`) instead of the whole "
              "stage program.  *gap*: the answer's relative gap to its bound (the search's: each job alone "
              "on the free GPUs, weak; none: no bound).",
              "", "| code | GPUs | T s | wall s | status | stage out of time | start | pairs | cost | gap | PAL's cost "
              "| speed-up |",
              "|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|"]
    for code, runs in rows.items():
        for r in runs:
            for s in r.get("solves", []):
                found = s.get("search")
                groups = f" + {found['groups']}" if found and found.get("groups") else ""
                near = f" + {found['neighbourhoods']} n" if found and found.get("neighbourhoods") else ""
                pairs = f"{found['pairs']}{groups}{near} ({found['improved']})" if found else ""
                gap = "" if s.get("gap") is None else f"{100 * s['gap']:.2f} %"
                lines.append(f"| {code} | {r['gpus']:,} | {s['limit']:.0f} | {s['wall']:.2f} | {s['status']} | "
                             f"{s['reached'] or ''} | {s['start'] or ''} | {pairs} | {s['cost']:.2f} | {gap} | "
                             f"{r['pal_cost']:.2f} | "
                             f"{math.exp((r['pal_cost'] - s['cost']) / r['demand']):.3f} |")
    lines += ["", FIGURE_LINK]
    lines += ["", (f"The baseline is not run at {max(SIZES):,} GPUs (`--baseline-sizes`): the build of 8bdeb72 "
                   "and earlier there (before it could solve) ran for more than two minutes in trial runs on this "
                   "machine and was killed by the system (exit 137); its matrix grows with stage columns × modes "
                   "(21.6 million entries at 1,024 GPUs).  " if skipped else "")
              + "*peak MiB*: the worker process's peak resident memory, its solves included.  The build figures "
              "are the whole round's stage program, which `solve_ilp` solves without a time limit (and, under "
              "one, on rounds of fewer than `SEARCH_MIN_GPUS` free GPUs); under a time limit the search on "
              "pairs of servers builds only each pair's program."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--limits", type=float, nargs="+", default=list(LIMITS),
                    help="time limits T (s) (default " + " ".join(f"{t:g}" for t in LIMITS) + ")")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                    help="GPUs, multiples of 8 (default " + " ".join(map(str, SIZES)) + ")")
    ap.add_argument("--server-gpus", type=int, default=8,
                    help="GPUs per server (default 8; 2 or 4 put the 8-GPU pipelines on several servers)")
    ap.add_argument("--pipeline-gpus", type=int, nargs="+", default=[4, 8],
                    help="the GPUs vgg16 and gnmt pipelines are partitioned on (default 4 8; 16 24 with "
                         "--server-gpus 16 puts them on several servers holding more than 32 free GPUs)")
    ap.add_argument("--idle-fraction", type=float, default=0.0, metavar="F",
                    help="leave about this fraction of the GPUs idle (0 <= F < 1) by dropping queued gangs in an "
                         f"order drawn from a stream of their own (seed {IDLE_SEED}); default 0: the queue fills "
                         "the cluster, the rounds of the committed page")
    ap.add_argument("--partitioned-only", action="store_true",
                    help="pipelines only vgg16 and gnmt on --pipeline-gpus (no gpt_pmp of 4 and 8 GPUs): with "
                         "--pipeline-gpus 40 every pipeline has more than 32 GPUs")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared",
                    help="the shared data directory (default ../shared)")
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier commit to compare with")
    ap.add_argument("--baseline-sizes", type=int, nargs="+", default=list(BASELINE_SIZES),
                    help="the sizes the baseline runs, among --sizes (default "
                         + " ".join(map(str, BASELINE_SIZES)) + ": older baselines are killed at 2,048)")
    add_plot_only_argument(ap, FIGURE, "stage_scale.json")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    if args.plot_only:
        drawn = plot_only(ap, args, "stage_scale", FIGURE,
                          lambda path: plot(json.loads((RESULTS / "stage_scale.json").read_text(encoding="utf-8")), path))
        wrote("stage_scale", drawn)
        return 0
    check_values(ap, "--limits", args.limits, lambda t: math.isfinite(t) and t > 0, "time limits are seconds > 0")
    check_values(ap, "--sizes", args.sizes, lambda g: g >= 8 and g % 8 == 0, "GPU counts are positive multiples of 8")
    check_values(ap, "--server-gpus", [args.server_gpus], lambda n: n in (1, 2, 4, 8, 16),
                 "GPUs per server are 1, 2, 4, 8 or 16")
    check_values(ap, "--pipeline-gpus", args.pipeline_gpus, lambda n: 2 <= n <= 64, "pipelines have 2 to 64 GPUs")
    check_values(ap, "--idle-fraction", [args.idle_fraction], lambda f: 0 <= f < 1, "the fraction is >= 0 and < 1")
    layout = (args.server_gpus, tuple(args.pipeline_gpus), args.idle_fraction, args.partitioned_only)
    check_values(ap, "--baseline-sizes", args.baseline_sizes, lambda g: g >= 8 and g % 8 == 0,
                 "GPU counts are positive multiples of 8")
    if args.worker:
        print(json.dumps(worker(args.worker, args.limits, args.shared, *layout)))
        return 0
    if args.baseline is not None and not (args.baseline / "pal_opt").is_dir():
        ap.error(f"--baseline {args.baseline}: not a checkout of pal-opt (no pal_opt/ in it)")
    if not (args.shared / "data" / "pipedream-profiles").is_dir():
        print(f"stage_scale: {args.shared}/data/pipedream-profiles not found (give --shared)", file=sys.stderr)
        return 2
    partial = partial_run(ap, args, "sizes", "limits", "server_gpus", "pipeline_gpus", "idle_fraction",
                          "partitioned_only")
    out = output_dir(args, "stage_scale", partial=partial)  # checked before any work
    started = load_average(" ")
    codes = {"now": ROOT}
    if args.baseline:
        rev = subprocess.run(["git", "-C", str(args.baseline), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        codes[f"before ({rev})"] = args.baseline
    rows: dict[str, list[dict[str, Any]]] = {}
    for code, path in codes.items():
        sizes = args.sizes if code == "now" else [g for g in args.sizes if g in args.baseline_sizes]
        for gpus in sizes:
            print(f"{code}: {gpus} GPUs ...", file=sys.stderr, flush=True)
            rows.setdefault(code, []).append(run_one(path, gpus, args.limits, args.shared, *layout))
    ended = load_average(" ")
    text = page(rows, produced_by(__file__, argv, date=False), started, ended, max(args.sizes) not in args.baseline_sizes,
                *layout)
    (out / "stage_scale.md").write_text(text, encoding="utf-8")
    (out / "stage_scale.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    plot(rows, out / FIGURE)
    print(text)
    wrote("stage_scale", out / "stage_scale.md", out / "stage_scale.json", out / FIGURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
