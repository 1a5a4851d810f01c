"""Preemption on clusters with GPU types: ilp-preempt against preempt-greedy on contended typed rounds.

Runs for about 7 min on the machine of the committed page (its own total: 410 s); ``--quick`` runs 3
rounds of sia-64 only.

Rounds
------
Each round is drawn by the project's generator, :func:`pal_opt.generate.generate_typed_instance`
(what ``pal-opt generate --cluster ... --guaranteed-fraction 0.2 --profiles DIR --failed-fraction
0.03`` draws, plus running jobs), on two clusters of Sia's three types:

* ``sia-64``: ``aws:6x4,rtx:3x8,dgx-ext:2x8`` (Sia's cluster shape, 64 GPUs), 30 queued jobs;
* ``x8-512``: ``aws:48x4,rtx:24x8,dgx-ext:16x8`` (the same ×8, 512 GPUs), 240 queued jobs;

with seeds ``0..--rounds-1`` (default 20 per size).  Generator settings: the Sia-Philly job mix
(no job larger than the largest type), 20 % of the jobs guaranteed on one type, 3 % of the GPUs
failed, each job running with probability 0.75 where it fits (packed on the type with the most
room, or its guaranteed type; this fills 85-97 % of the GPUs), factors drawn from PAL's Longhorn
measurements (synthetic Longhorn-like factors when ``../shared`` is absent), each class's
relative throughput per type from the Sia profiles (``../shared/data/sia-artifact/profiles``,
:data:`pal_opt.generate.SIA_APP_OF_CLASS`; 1.0 on every type, types only constraining, when
they are absent), restart cost 30 s per GPU of a 360 s round, λ = 1.7.

The generator has no priorities, so the round is then made contended by one seeded pass
(``numpy.random.default_rng([seed, 1])``, :func:`contend`):

* every running job gets priority 0 (1 with probability 0.2: only a waiting job of priority 2
  may preempt it) and a start time uniform in [0, 3600) s (the greedy evicts the most recently
  started first); a running job that is not guaranteed may, with probability
  0.3, use its own type and one other (``allowed_types``), so the program may move it there;
* waiting jobs, in queue order, get priority 1 (2 with probability 0.25) while their demands sum
  to at most 30 % of the GPUs (a job that would pass it is skipped, later smaller ones still
  count); the others stay waiting at priority 0 (backfill only);
* a waiting job that is not guaranteed is, with probability 0.3, restricted to two random types
  (``allowed_types``), else with probability 0.1 may mix types in one gang (``mix_types``).

Methods
-------
``preempt-greedy`` and ``ilp-preempt`` (HiGHS on every size; CP-SAT and CBC too on ``sia-64``,
to show that the backends reach the same program optimum, ``info["program_objective"]``) with
``--time-limit`` (default 20 s) per round; wall time is the whole :func:`pal_opt.solve` call.
Each answer is checked by :func:`pal_opt.check.check`; on ``sia-64`` the greedy and HiGHS are run
a second time and must give the same placement and victims.

Per round and method: *weighted preempted GPUs* (Σ demand × (1 + priority) over the running jobs
left out: the preemption cost term's GPU count), *preemptions* (running jobs left out),
*high-priority jobs placed* (waiting jobs of priority ≥ 1 started), the round cost
(``objective``), the status and proven gap, the wall time and the check.  A running job the
greedy preempts and the program places on another type than it ran on counts as *moved to
another type*.

Usage::

    nice -n 10 python benchmarks/preemption_types.py [--rounds 20] [--time-limit 20] [--quick] [--update]

Writes ``preemption_types.md``, ``preemption_types.csv`` (one row per round and method) and
``preemption_types.png`` to ``benchmarks/results/`` with ``--update``, else to the scratch
directory (:mod:`benchmarks._results`).  ``--quick``: 3 rounds of ``sia-64`` only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

#: the page's figure(s), embedded at its end with what each shows
FIGURE = "\n\n![per round, preempted GPUs x (1 + priority): ilp-preempt against preempt-greedy](preemption_types.png)\n"


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    output_dir,
    partial_run,
    positive_seconds,
    produced_by,
    run_time,
    write_rows_csv,
    wrote,
)
from suite import machine, measurements  # noqa: E402

from pal_opt.model import GpuState, RoundInstance  # noqa: E402

PROFILES = ROOT.parent / "shared" / "data" / "sia-artifact" / "profiles"
#: (label, cluster, queued jobs, backends of ilp-preempt)
SIZES: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("sia-64", "aws:6x4,rtx:3x8,dgx-ext:2x8", 30, ("highs", "cpsat", "cbc")),
    ("x8-512", "aws:48x4,rtx:24x8,dgx-ext:16x8", 240, ("highs",)),
)
GREEDY = "preempt-greedy"
GUARANTEED, FAILED, RUNNING, RESTART = 0.2, 0.03, 0.75, 30.0
HIGH_SHARE, P2_SHARE, RUN_P1, RUN_TWO_TYPES, WAIT_TWO_TYPES, WAIT_MIX = 0.3, 0.25, 0.2, 0.3, 0.3, 0.1


def throughput(cluster: str) -> dict[str, dict[str, float]] | None:
    """PAL's classes' relative throughput per type from the Sia profiles (None if absent)."""
    if not PROFILES.is_dir():
        return None
    from pal_opt.generate import SIA_APP_OF_CLASS
    from pal_opt.gputypes import parse_cluster_spec
    from pal_opt.hetero import load_applications, throughput_table

    apps = load_applications(PROFILES, sorted(set(SIA_APP_OF_CLASS.values())))
    return throughput_table(apps, [t for t, _, _ in parse_cluster_spec(cluster)], SIA_APP_OF_CLASS)


def make_round(cluster: str, jobs: int, seed: int, table: dict[str, dict[str, float]] | None) -> RoundInstance:
    """The generator's round (module docstring), then :func:`contend`."""
    from pal_opt.generate import generate_typed_instance

    inst = generate_typed_instance(cluster, jobs, seed=seed, guaranteed_fraction=GUARANTEED, throughput=table,
                                   measurements=measurements(), failed_fraction=FAILED, running_fraction=RUNNING,
                                   restart_cost=RESTART)
    return contend(inst, seed)


def contend(inst: RoundInstance, seed: int) -> RoundInstance:
    """Priorities, start times, allowed types and mixing (module docstring), seeded by ``[seed, 1]``."""
    rng = np.random.default_rng([seed, 1])
    cl = inst.cluster
    names = list(cl.type_names)
    budget = HIGH_SHARE * cl.num_gpus
    out = []
    for j in inst.jobs:
        kw: dict[str, Any] = {}
        if j.placement is not None:
            own = names[int(cl.type_of[cl.positions(j.placement)[0]])]
            kw.update(priority=int(rng.random() < RUN_P1), started=float(rng.uniform(0.0, 3600.0)))
            if j.gpu_type is None and rng.random() < RUN_TWO_TYPES:
                other = [t for t in names if t != own]
                kw["allowed_types"] = tuple(sorted((own, other[int(rng.integers(len(other)))])))
        else:
            high = j.demand <= budget
            budget -= j.demand if high else 0
            p2 = rng.random() < P2_SHARE
            kw["priority"] = (2 if p2 else 1) if high else 0
            if j.gpu_type is None:
                u = rng.random()
                if u < WAIT_TWO_TYPES:
                    kw["allowed_types"] = tuple(sorted(rng.choice(names, 2, replace=False).tolist()))
                elif u < WAIT_TWO_TYPES + WAIT_MIX:
                    kw["mix_types"] = True
        out.append(replace(j, **kw))
    return replace(inst, jobs=tuple(out))


def _types_of(inst: RoundInstance, gpus: Sequence[int]) -> frozenset[str]:
    cl = inst.cluster
    return frozenset(cl.type_names[int(k)] for k in cl.type_of[cl.positions(gpus)])


def measure(inst: RoundInstance, method: str, backend: str | None, time_limit: float) -> tuple[dict[str, Any], Any]:
    """One method on one round: the figures of the module docstring, and the result."""
    from pal_opt.check import check
    from pal_opt.solve import solve

    kw: dict[str, Any] = {} if backend is None else {"backend": backend, "time_limit": time_limit}
    t0 = time.perf_counter()
    res = solve(inst, method, **kw)
    wall = time.perf_counter() - t0
    left = [j for j in inst.jobs if j.placement is not None and j.id not in res.placements]
    moved = [j.id for j in inst.jobs if j.placement is not None and j.id in res.placements
             and _types_of(inst, res.placements[j.id]) != _types_of(inst, j.placement)]
    info = res.info
    row = {"method": method if backend is None else f"{method}/{backend}",
           "weighted_preempted_gpus": sum(j.demand * (1 + j.priority) for j in left), "preemptions": len(left),
           "preempted_gpus": sum(j.demand for j in left),
           "high_placed": sum(1 for j in inst.jobs if j.placement is None and j.priority > 0 and j.id in res.placements),
           "objective": res.objective, "status": str(res.status), "gap": res.gap, "wall_seconds": wall,
           "check_ok": not check(inst, res), "moved_type": len(moved),
           "program_objective": info.get("program_objective"), "solver_status": info.get("solver_status"),
           "start_objective": info.get("start_objective"), "backfilled": len(info.get("backfilled", []))}
    return row, res


def run_round(label: str, cluster: str, jobs: int, seed: int, backends: Sequence[str],
              args: argparse.Namespace, table: dict[str, dict[str, float]] | None) -> list[dict[str, Any]]:
    """Every method on one round; on the rounds with several backends, the greedy and HiGHS twice."""
    inst = make_round(cluster, jobs, seed, table)
    cl = inst.cluster
    base = {"size": label, "cluster": cluster, "gpus": cl.num_gpus, "seed": seed,
            "failed": int((cl.state == GpuState.FAILED).sum()), "held": sum(j.demand for j in inst.jobs if j.placement is not None),
            "held_p1": sum(j.demand for j in inst.jobs if j.placement is not None and j.priority > 0),
            "waiting_high": sum(1 for j in inst.jobs if j.placement is None and j.priority > 0),
            "waiting_high_demand": sum(j.demand for j in inst.jobs if j.placement is None and j.priority > 0)}
    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    for method, backend in ((GREEDY, None), *(("ilp-preempt", b) for b in backends)):
        row, res = measure(inst, method, backend, args.time_limit)
        if len(backends) > 1 and backend in (None, "highs"):
            again = measure(inst, method, backend, args.time_limit)[1]
            row["repeats"] = (again.placements == res.placements and again.jobs_to_terminate == res.jobs_to_terminate)
        results[row["method"]] = res
        rows.append({**base, **row})
    greedy = results[GREEDY]
    for row in rows[1:]:
        res = results[row["method"]]
        row["moved_where_greedy_preempted"] = sum(
            1 for j in inst.jobs if j.placement is not None and j.id not in greedy.placements
            and j.id in res.placements and _types_of(inst, res.placements[j.id]) != _types_of(inst, j.placement))
    for row in rows:
        print(f"{label} seed {seed} {row['method']}: weighted {row['weighted_preempted_gpus']}, "
              f"{row['preemptions']} preempted, objective {row['objective']:.2f}, {row['status']}, "
              f"{row['wall_seconds']:.2f} s, check {'ok' if row['check_ok'] else 'FAILED'}", file=sys.stderr)
    return rows


# ---------------------------------------------------------------- report
def _med(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def _ratio_median(pairs: Sequence[tuple[float, float]]) -> str:
    """Median of the per-round ratios a / b over the rounds where b > 0 (and how many)."""
    r = [a / b for a, b in pairs if b > 0]
    return f"{_med(r):.3f} ({len(r)})" if r else "—"


def _gap(xs: Sequence[float | None]) -> str:
    g = [x for x in xs if x is not None]
    if not g:
        return "—"
    return f"{100 * _med(g):.2f} % / {100 * max(g):.2f} % ({len(g)})"


def summary_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| size | method | rounds | weighted preempted GPUs median (total) | preemptions median (total) | "
             "high-priority jobs placed (total) | objective median | status | proven gap median / max "
             "(rounds reported) | wall s median / max | check passes | repeats |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for size in dict.fromkeys(r["size"] for r in rows):
        for method in dict.fromkeys(r["method"] for r in rows if r["size"] == size):
            rs = [r for r in rows if r["size"] == size and r["method"] == method]
            w = [r["weighted_preempted_gpus"] for r in rs]
            p = [r["preemptions"] for r in rs]
            t = [r["wall_seconds"] for r in rs]
            status = ", ".join(f"{s} {n}" for s, n in sorted(_count(r["status"] for r in rs).items()))
            rep = [r["repeats"] for r in rs if "repeats" in r]
            lines.append(
                f"| {size} | {method} | {len(rs)} | {_med(w):g} ({sum(w)}) | {_med(p):g} ({sum(p)}) | "
                f"{sum(r['high_placed'] for r in rs)} | {_med([r['objective'] for r in rs]):.1f} | {status} | "
                f"{_gap([r['gap'] for r in rs]) if method != GREEDY else '—'} | {_med(t):.2f} / {max(t):.2f} | "
                f"{sum(r['check_ok'] for r in rs)}/{len(rs)} | {f'{sum(rep)}/{len(rep)}' if rep else '—'} |")
    return lines


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def ratio_table(rows: list[dict[str, Any]]) -> list[str]:
    """ilp-preempt/highs against the greedy, round by round."""
    lines = ["| size | weighted preempted GPUs | preemptions | high-priority jobs placed | objective | "
             "wall (ratio of medians) | rounds program < / = / > greedy (weighted preempted GPUs) | "
             "objective program ≤ greedy | rounds the program moved a job to another type where the greedy "
             "preempted it (jobs) |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for size in dict.fromkeys(r["size"] for r in rows):
        g = {r["seed"]: r for r in rows if r["size"] == size and r["method"] == GREEDY}
        p = {r["seed"]: r for r in rows if r["size"] == size and r["method"] == "ilp-preempt/highs"}
        pairs = [(p[s], g[s]) for s in g if s in p]

        def per(key: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]] = pairs) -> str:
            return _ratio_median([(a[key], b[key]) for a, b in pairs])

        less = sum(a["weighted_preempted_gpus"] < b["weighted_preempted_gpus"] for a, b in pairs)
        more = sum(a["weighted_preempted_gpus"] > b["weighted_preempted_gpus"] for a, b in pairs)
        le = sum(a["objective"] <= b["objective"] + 1e-6 for a, b in pairs)
        moved = [a["moved_where_greedy_preempted"] for a, _ in pairs]
        wall = _med([a["wall_seconds"] for a, _ in pairs]) / _med([b["wall_seconds"] for _, b in pairs])
        lines.append(f"| {size} | {per('weighted_preempted_gpus')} | {per('preemptions')} | {per('high_placed')} | "
                     f"{per('objective')} | {wall:.0f}× | {less} / {len(pairs) - less - more} / {more} | "
                     f"{le}/{len(pairs)} | {sum(m > 0 for m in moved)} ({sum(moved)}) |")
    return lines


def backend_table(rows: list[dict[str, Any]]) -> list[str]:
    """The program optimum per backend on the rounds solved by several."""
    lines = ["| size | backends | rounds | all optimal | max difference of the program optimum | "
             "rounds with the same final objective |", "|---|---|---:|---:|---:|---:|"]
    for size in dict.fromkeys(r["size"] for r in rows):
        rs = [r for r in rows if r["size"] == size and r["method"] != GREEDY]
        methods = list(dict.fromkeys(r["method"] for r in rs))
        if len(methods) < 2:
            continue
        seeds = sorted({r["seed"] for r in rs})
        diffs, same, optimal = [], 0, 0
        for s in seeds:
            by = [r for r in rs if r["seed"] == s]
            prog = [r["program_objective"] for r in by if r["program_objective"] is not None]
            optimal += all(r["solver_status"] in (None, "optimal") for r in by)
            if prog:
                diffs.append(max(prog) - min(prog))
            same += max(r["objective"] for r in by) - min(r["objective"] for r in by) <= 1e-6
        lines.append(f"| {size} | {', '.join(m.split('/')[1] for m in methods)} | {len(seeds)} | {optimal} | "
                     f"{max(diffs) if diffs else 0.0:.2e} | {same} |")
    return lines


def round_facts(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for size in dict.fromkeys(r["size"] for r in rows):
        rs = [r for r in rows if r["size"] == size and r["method"] == GREEDY]
        lines.append(f"- {size} (`{rs[0]['cluster']}`, {rs[0]['gpus']} GPUs): held by running jobs "
                     f"{_med([r['held'] for r in rs]):g} GPUs (median; {min(r['held'] for r in rs)}–"
                     f"{max(r['held'] for r in rs)}), of which by priority 1 {_med([r['held_p1'] for r in rs]):g} "
                     f"(median), {rs[0]['failed']} failed; waiting jobs of priority ≥ 1 "
                     f"{_med([r['waiting_high'] for r in rs]):g} needing {_med([r['waiting_high_demand'] for r in rs]):g} "
                     "GPUs (medians)")
    return lines


def to_markdown(rows: list[dict[str, Any]], args: argparse.Namespace, seconds: float, command: str,
                host: list[str], table: dict[str, dict[str, float]] | None) -> str:
    src = "Longhorn measurements (../shared)" if measurements() else "synthetic Longhorn-like factors"
    tput = "Sia profiles (1-GPU throughput ratios)" if table else "1.0 on every type (profiles absent)"
    head = ["# Preemption on clusters with GPU types: ilp-preempt vs preempt-greedy", "", f"{command}.", "",
            "Machine:", "", *host, "",
            f"Seeded typed rounds from `pal_opt.generate.generate_typed_instance` (seeds 0–{args.rounds - 1} per "
            f"size; 20 % guaranteed, 3 % of GPUs failed, jobs running with probability 0.75), factors: {src}; "
            f"throughput: {tput}; restart 30 s of a 360 s round; then made contended: running jobs at priority 0, 20 % at 1 "
            "(30 % of the unguaranteed ones may also use one other type), waiting jobs up to 30 % of the GPUs at "
            "priority 1 or 2 (30 % of the unguaranteed ones restricted to two types, 10 % mixing types), the other "
            "waiting jobs at priority 0 (module docstring of `benchmarks/preemption_types.py`).  ilp-preempt with "
            f"a {args.time_limit:g} s limit per round; wall time is the whole `pal_opt.solve` call.", "",
            *round_facts(rows), "",
            "*weighted preempted GPUs*: Σ demand × (1 + priority) over the running jobs left out (the preemption "
            "cost term's GPUs; × 10 in the round cost).  *objective*: the round cost (preemption, restart, "
            "variability, locality, type throughput).  *proven gap*: reported when nothing was backfilled after "
            "the program.  *repeats*: a second run gave the same placement and victims.", "",
            "## Per method", "", *summary_table(rows), "",
            "## ilp-preempt (HiGHS) / preempt-greedy, round by round (same session)", "",
            "Medians of the per-round ratios over the rounds where the greedy's figure is above 0 (how many in "
            "brackets); wall: ratio of the median wall times.", "", *ratio_table(rows), ""]
    tail = ["## Backends on the same rounds", "",
            "`info[\"program_objective\"]`: the program's optimum; the final objective adds the backfill of the "
            "GPUs left, which may differ between optima that leave different types free "
            "(`formulations/preemption.md` §3).", "", *backend_table(rows), "",
            f"Whole run: {seconds:.0f} s.", ""]
    return "\n".join([*head, *tail])


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Per round: weighted preempted GPUs of the greedy (x) against the program's (y), one panel per size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("preemption_types: matplotlib missing (pip install 'pal-opt[plot]'): no plot", file=sys.stderr)
        return
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.6), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        g = {r["seed"]: r["weighted_preempted_gpus"] for r in rows if r["size"] == size and r["method"] == GREEDY}
        p = {r["seed"]: r["weighted_preempted_gpus"] for r in rows
             if r["size"] == size and r["method"] == "ilp-preempt/highs"}
        seeds = [s for s in g if s in p]
        x, y = [g[s] for s in seeds], [p[s] for s in seeds]
        lo, hi = (min([*x, *y]), max([*x, *y])) if seeds else (0, 1)
        pad = 0.06 * max(hi - lo, 1)
        lo, hi = max(lo - pad, 0), hi + pad
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="equal")
        points = Counter(zip(x, y, strict=True))  # rounds with equal figures drawn once, sized by their count
        ax.scatter([a for a, _ in points], [b for _, b in points], s=[28 * n for n in points.values()], alpha=0.6,
                   label=f"{len(seeds)} rounds (larger: several)")
        for (a, b), n in points.items():
            if n > 1:
                ax.annotate(f"×{n}", (a, b), xytext=(6, 4), textcoords="offset points", fontsize=8)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(f"{size} ({rows[[r['size'] for r in rows].index(size)]['gpus']} GPUs)")
        ax.set_xlabel("preempt-greedy: preempted GPUs × (1 + priority)")
        ax.set_ylabel("ilp-preempt (HiGHS): preempted GPUs × (1 + priority)")
        for handle in ax.legend(loc="upper left").legend_handles:  # the legend's marker at one round's size
            if hasattr(handle, "set_sizes"):
                handle.set_sizes([28])
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--rounds", type=int, default=20, help="seeds 0..N-1 per size (default 20)")
    ap.add_argument("--time-limit", type=float, default=20.0, help="ilp-preempt's limit per round (default 20 s)")
    ap.add_argument("--quick", action="store_true", help="3 rounds of sia-64 only")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "rounds")
    positive_seconds(ap, args, "time_limit")
    out = output_dir(args, "preemption_types", partial=partial_run(ap, args, "quick"))
    sizes = SIZES[:1] if args.quick else SIZES
    if args.quick:
        args.rounds = min(args.rounds, 3)
    if not PROFILES.is_dir():
        print(f"preemption_types: {PROFILES} not found: every type runs at throughput 1.0", file=sys.stderr)
    host = machine()  # before the runs: its load average is the one at the start
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    table = throughput(SIZES[0][1])
    for label, cluster, jobs, backends in sizes:
        for seed in range(args.rounds):
            rows += run_round(label, cluster, jobs, seed, backends, args, table)
    seconds = time.perf_counter() - t0
    write_rows_csv(out / "preemption_types.csv", rows)
    text = to_markdown(rows, args, seconds, produced_by(__file__, argv), host, table)
    (out / "preemption_types.md").write_text(text + FIGURE, encoding="utf-8")
    plot(rows, out / "preemption_types.png")
    print(text)
    wrote("preemption_types", out / "preemption_types.md", out / "preemption_types.csv", out / "preemption_types.png")
    bad = [r for r in rows if not r["check_ok"] or r.get("repeats") is False]
    if bad:
        print(f"preemption_types: {len(bad)} answers failed the check or did not repeat", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
