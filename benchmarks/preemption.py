"""Preemption by priority: the joint round program (ilp-preempt) against the greedy comparator.

Runs for about 4 min on the machine of the committed page (its own total: 228 s); ``--quick`` runs
the 16x4 workload-1 case only.

Two-priority workloads derived deterministically from the PAL artifact's Sia-Philly traces
(``../shared/data/pal-artifact/traces/workload-*.csv``): a seeded 25 % of the jobs get
priority 1, the rest 0, written as a trace with a ``priority`` column and read back by
:func:`pal_opt.io.traces.read_trace`.  For the 64 × 8 cluster the arrivals are scaled up: 8
copies of the trace, each job's submit time jittered by a seeded uniform draw in [0, 360) s, so
the 512 GPUs are as contended as 64 GPUs are by one copy.

Both methods run in the simulator (FIFO within a priority, 360 s rounds, restart cost 30 s per
GPU moved or resumed, the artifact's Longhorn variability draw): ``preempt-greedy`` (evict the
lowest priority, most recently started first, Kueue's minimal set; PAL's placement) and
``ilp-preempt`` (victims and placement chosen by one program per round, HiGHS, a per-round time
limit).  Reported per cluster and trace: preempted GPU-hours (weighted by 1 + priority and not),
preemptions, average and p99 JCT per priority class, and the average JCT of all jobs.

Usage::

    nice -n 10 python benchmarks/preemption.py [--time-limit 2] [--update]

Writes ``preemption.md`` and ``preemption.csv`` to ``benchmarks/results/`` with ``--update``,
else to the scratch directory (:mod:`benchmarks._results`).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

#: the page's figure(s), embedded at its end with what each shows
FIGURE = "\n\n![preempted GPU-hours weighted by 1 + priority: whole runs, and the greedy's preempting rounds re-solved](preemption.png)\n"


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    cpu_model,
    nonnegative_seconds,
    output_dir,
    partial_run,
    positive_seconds,
    produced_by,
    run_time,
    write_rows_csv,
)

from pal_opt.cost.preemption import preempted_gpu_hours  # noqa: E402
from pal_opt.io.traces import read_trace  # noqa: E402
from pal_opt.simulate.engine import SimConfig, build_cluster, parse_cluster, simulate  # noqa: E402
from pal_opt.solve import solve  # noqa: E402

TRACES = ROOT.parent / "shared" / "data" / "pal-artifact" / "traces"
VARIABILITY = ROOT.parent / "shared" / "data" / "pal-artifact" / "variability" / "longhorn"
METHODS = ("preempt-greedy", "ilp-preempt")
#: (cluster, trace, copies)
CASES = (("16x4", "workload-1", 1), ("16x4", "workload-3", 1), ("64x8", "workload-1", 8))


def derive_trace(src: Path, dst: Path, *, copies: int, share: float, seed: int) -> None:
    """``src`` with a ``priority`` column (a seeded ``share`` of the jobs get 1), in ``copies``
    copies whose submit times are jittered by a seeded uniform draw in [0, 360) s (copy 0 too when
    there are several; one copy is left as it is)."""
    rows = list(csv.DictReader(src.open(encoding="utf-8")))
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for c in range(copies):
        high = rng.random(len(rows)) < share
        jitter = rng.uniform(0.0, 360.0, len(rows)) if copies > 1 else np.zeros(len(rows))
        for r, h, j in zip(rows, high, jitter, strict=True):
            out.append({**r, "job_id": f"{c}-{r['job_id']}" if copies > 1 else r["job_id"],
                        "submit_time": f"{float(r['submit_time']) + j:.3f}", "priority": int(h)})
    with dst.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=[*rows[0].keys(), "priority"])
        w.writeheader()
        w.writerows(out)


def run_case(cluster: str, trace: str, copies: int, args: argparse.Namespace,
             work: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Both methods over the whole trace, then the joint program on the greedy's preempting rounds."""
    path = work / f"{trace}-x{copies}-prio.csv"
    derive_trace(TRACES / f"{trace}.csv", path, copies=copies, share=args.share, seed=args.seed)
    jobs = read_trace(path)
    spec = parse_cluster(cluster)
    cl, _ = build_cluster(spec, {c: VARIABILITY / f for c, f in
                                 (("classA", "resnet-longhorn-agg.csv"), ("classB", "bert-longhorn-agg.csv"),
                                  ("classC", "pagerank-longhorn-agg.csv"))}, seed=args.seed)
    rows = []
    met: list[tuple[Any, Any]] = []
    for method in METHODS:
        cfg = SimConfig(policy=method, restart_cost=args.restart_cost, seed=args.seed,
                        time_limit=args.time_limit if method == "ilp-preempt" else None,
                        backend="highs" if method == "ilp-preempt" else None)
        t0 = time.perf_counter()
        keep = _PreemptingRounds(met) if method == "preempt-greedy" else None
        res = simulate(jobs, cl, cfg, source=str(path), validate=args.validate, on_round=keep)
        wall = time.perf_counter() - t0
        s = res.summary
        row = {"cluster": cluster, "trace": trace, "copies": copies, "jobs": len(jobs), "method": method,
               "preempted_gpu_hours_weighted": s["preempted_gpu_hours_weighted"],
               "preempted_gpu_hours": s["preempted_gpu_hours"], "preemptions": s["preemptions"],
               "avg_jct": s["avg_jct"], "fallbacks": s["fallbacks"], "wall_seconds": wall}
        for p, fig in s["by_priority"].items():
            row[f"avg_jct_p{p}"] = fig["avg_jct"]
            row[f"p99_jct_p{p}"] = fig["p99_jct"]
            row[f"jobs_p{p}"] = fig["n_jobs"]
        rows.append(row)
        if keep is not None:
            row["rounds_preempting"] = keep.count
        print(f"{cluster} {trace} x{copies} {method}: weighted {row['preempted_gpu_hours_weighted']:.1f} GPU-h, "
              f"high avg JCT {row.get('avg_jct_p1', float('nan')):.0f} s, {wall:.0f} s", file=sys.stderr)
    same = same_rounds(met[:args.same_rounds], args.time_limit)
    for r in same:
        r.update(cluster=cluster, trace=trace, copies=copies)
    return rows, same


class _PreemptingRounds:
    """Keeps the rounds in which the greedy comparator preempted a running job, with its answer."""

    def __init__(self, into: list[tuple[Any, Any]]) -> None:
        self.into = into
        self.count = 0

    def __call__(self, inst: Any, res: Any) -> None:
        if _preempted(inst, res)[0] > 0:
            self.count += 1
            self.into.append((inst, res))


def _preempted(inst: Any, res: Any) -> tuple[float, float]:
    """(weighted, unweighted) GPU-hours of the round lost by the running jobs ``res`` leaves out."""
    out = [preempted_gpu_hours(j, inst.params.round_length) for j in inst.jobs
           if j.placement is not None and j.id not in res.placements]
    return sum(w for _, w in out), sum(u for u, _ in out)


def same_rounds(met: list[tuple[Any, Any]], time_limit: float) -> list[dict[str, Any]]:
    """The joint program on the very rounds where the greedy preempted: both answers priced alike."""
    rows = []
    for inst, greedy in met:
        joint = solve(inst, "ilp-preempt", backend="highs", time_limit=time_limit)
        (gw, gu), (jw, ju) = _preempted(inst, greedy), _preempted(inst, joint)
        rows.append({"round": inst.name, "greedy_weighted": gw, "joint_weighted": jw, "greedy_gpu_hours": gu,
                     "joint_gpu_hours": ju, "greedy_objective": greedy.objective, "joint_objective": joint.objective,
                     "joint_status": joint.status.value,
                     "high_placed_greedy": sum(1 for j in inst.jobs if j.priority > 0 and j.id in greedy.placements),
                     "high_placed_joint": sum(1 for j in inst.jobs if j.priority > 0 and j.id in joint.placements)})
    return rows


def machine() -> list[str]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    cpu = cpu_model(platform.processor() or platform.machine())
    return [f"- CPU: {cpu}, {os.cpu_count()} logical cores (shared); load average {load[0]:.1f}",
            f"- Python {platform.python_version()}, {platform.system()} {platform.release()}"]


def to_markdown(rows: list[dict[str, Any]], args: argparse.Namespace, seconds: float, command: str) -> str:
    head = ["# Preemption by priority: joint program vs greedy comparator", "", f"{command}.", "",
            f"Two-priority traces derived from the PAL artifact's workloads (seed {args.seed}: "
            f"{args.share:.0%} of the jobs at priority 1), FIFO within a priority, 360 s rounds, restart cost "
            f"{args.restart_cost:g} s per GPU, ilp-preempt with HiGHS and a {args.time_limit:g} s limit per round. "
            "Preempted GPU-hours: each preemption counts the job's GPUs × the round (0.1 h); weighted by "
            "1 + priority. JCT in seconds. A round of ilp-preempt that reaches the limit keeps the best "
            "placement found by then, so a case whose rounds reach it (64x8 here) can give other figures on "
            "another run or machine; the greedy and the 16x4 cases repeat exactly.", "",
            "| cluster | trace | jobs | method | preempted GPU-h (weighted) | preempted GPU-h | preemptions | "
            "avg JCT p1 | p99 JCT p1 | avg JCT p0 | avg JCT all | wall s |",
            "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    body = []
    for r in rows:
        body.append(f"| {r['cluster']} | {r['trace']} ×{r['copies']} | {r['jobs']} | {r['method']} | "
                    f"{r['preempted_gpu_hours_weighted']:.1f} | {r['preempted_gpu_hours']:.1f} | {r['preemptions']} | "
                    f"{_f(r.get('avg_jct_p1'))} | {_f(r.get('p99_jct_p1'))} | {_f(r.get('avg_jct_p0'))} | "
                    f"{_f(r['avg_jct'])} | {r['wall_seconds']:.0f} |")
    ratios = ["", "Ratios ilp-preempt / preempt-greedy (same session):", ""]
    for k in range(0, len(rows) - 1, 2):
        g, p = rows[k], rows[k + 1]
        ratios.append(f"- {g['cluster']} {g['trace']} ×{g['copies']}: weighted preempted GPU-h "
                      f"{_ratio(p['preempted_gpu_hours_weighted'], g['preempted_gpu_hours_weighted'])}, "
                      f"avg JCT of priority 1 {_ratio(p.get('avg_jct_p1'), g.get('avg_jct_p1'))}, "
                      f"avg JCT of priority 0 {_ratio(p.get('avg_jct_p0'), g.get('avg_jct_p0'))}")
    tail = ["", f"Whole run: {seconds:.0f} s.", "", "Machine:", "", *machine(), ""]
    return "\n".join([*head, *body, *ratios, *tail])


def same_markdown(same: list[dict[str, Any]]) -> str:
    """The same-round table: per case, the greedy's preempting rounds re-solved by the joint program."""
    lines = ["", "## On the same rounds", "",
             "The rounds in which preempt-greedy preempted a running job (up to the first "
             "`--same-rounds` per case), each re-solved by ilp-preempt: the preempted GPU-hours of the round "
             "that each answer costs, and the round's whole cost (preemption, restart, variability and "
             "locality; the program starts from the greedy's victims, so it is never above).", "",
             "| cluster | trace | rounds | weighted GPU-h greedy | weighted GPU-h joint | rounds joint < greedy | "
             "rounds joint > greedy | objective joint ≤ greedy | high-priority jobs placed greedy / joint |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    cases = list(dict.fromkeys((r["cluster"], r["trace"], r["copies"]) for r in same))
    for c in cases:
        rs = [r for r in same if (r["cluster"], r["trace"], r["copies"]) == c]
        gw, jw = sum(r["greedy_weighted"] for r in rs), sum(r["joint_weighted"] for r in rs)
        less = sum(r["joint_weighted"] < r["greedy_weighted"] - 1e-9 for r in rs)
        more = sum(r["joint_weighted"] > r["greedy_weighted"] + 1e-9 for r in rs)
        le = sum(r["joint_objective"] <= r["greedy_objective"] + 1e-6 for r in rs)
        hg, hj = sum(r["high_placed_greedy"] for r in rs), sum(r["high_placed_joint"] for r in rs)
        lines.append(f"| {c[0]} | {c[1]} ×{c[2]} | {len(rs)} | {gw:.1f} | {jw:.1f} | {less} | {more} | "
                     f"{le}/{len(rs)} | {hg} / {hj} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], same: list[dict[str, Any]], path: Path) -> None:
    """Weighted preempted GPU-hours per case and method (whole runs), and the same-round totals."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("preemption: matplotlib missing (pip install 'pal-opt[plot]'): no plot", file=sys.stderr)
        return
    cases = list(dict.fromkeys((r["cluster"], r["trace"], r["copies"]) for r in rows))
    labels = [f"{c[0]}\n{c[1]} ×{c[2]}" for c in cases]
    x = np.arange(len(cases))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for k, method in enumerate(METHODS):
        whole = [next(r["preempted_gpu_hours_weighted"] for r in rows
                      if (r["cluster"], r["trace"], r["copies"]) == c and r["method"] == method) for c in cases]
        key = "greedy_weighted" if method == "preempt-greedy" else "joint_weighted"
        rounds = [sum(r[key] for r in same if (r["cluster"], r["trace"], r["copies"]) == c) for c in cases]
        axes[0].bar(x + (k - 0.5) * 0.38, whole, 0.38, label=method)
        axes[1].bar(x + (k - 0.5) * 0.38, rounds, 0.38, label=method)
    axes[0].set_title("whole runs (trajectories differ)")
    axes[1].set_title("the greedy's preempting rounds, re-solved")
    for ax in axes:
        ax.set_xticks(x, labels)
        ax.set_ylabel("preempted GPU-hours, weighted by 1 + priority")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _f(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--time-limit", type=float, default=2.0, help="ilp-preempt's limit per round (default 2 s)")
    ap.add_argument("--share", type=float, default=0.25, help="share of jobs at priority 1 (default 0.25)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the priorities, the submit-time jitter and the variability draw (default 0)")
    ap.add_argument("--restart-cost", type=float, default=30.0,
                    help="seconds lost per GPU moved or resumed (default 30)")
    ap.add_argument("--quick", action="store_true", help="the 16x4 workload-1 case only")
    ap.add_argument("--same-rounds", type=int, default=40,
                    help="re-solve up to this many of the greedy's preempting rounds per case (default 40)")
    ap.add_argument("--validate", action="store_true", help="check every round's answer (slower)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    positive_seconds(ap, args, "time_limit")
    if not 0 <= args.share <= 1:
        ap.error(f"--share {args.share:g}: a share between 0 and 1 expected")
    at_least(ap, args, 0, "seed")
    nonnegative_seconds(ap, args, "restart_cost")
    at_least(ap, args, 0, "same_rounds")
    if not TRACES.is_dir():
        print(f"preemption: {TRACES} not found (the shared data)", file=sys.stderr)
        return 2
    out = output_dir(args, "preemption", partial=partial_run(ap, args, "quick"))
    cases = CASES[:1] if args.quick else CASES
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    same: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pal_opt_preempt_bench_") as tmp:
        for cluster, trace, copies in cases:
            r, s = run_case(cluster, trace, copies, args, Path(tmp))
            rows += r
            same += s
    seconds = time.perf_counter() - t0
    write_rows_csv(out / "preemption.csv", rows)
    (out / "preemption.md").write_text(to_markdown(rows, args, seconds, produced_by(__file__, argv)) + same_markdown(same)
                                       + FIGURE, encoding="utf-8")
    plot(rows, same, out / "preemption.png")
    print(f"wrote {out / 'preemption.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
