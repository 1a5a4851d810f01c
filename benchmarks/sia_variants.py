"""ilp's modes and the variability draw on whole newTrace runs: what each design gains over ``sia``.

Runs for about 16 min on the machine of the committed page (the page does not say: the 16 runs kept
in ``sia_variants_runs.json`` took 1,853 s, two at a time); an interrupted grid resumes,
``--no-run`` writes the page from the kept runs, ``--traces`` and ``--seeds`` run fewer.

``benchmarks/sia_compare.py`` runs every policy on newtrace-1…7 with one draw of per-GPU factors
(Longhorn, seed 0) and the default ``ilp`` (anchored).  This benchmark asks two questions that
table leaves open, on whole traces (default newtrace-3 and newtrace-7, the paper's cluster
``aws:6x4,rtx:3x8,dgx-ext:2x8``, 60 s rounds, the same simulator in process):

* **Design.** ``--ilp-mode levels`` (stage 1 sees variability levels, so type and count follow the
  fast GPUs) against the anchored default and ``sia``, with restarts per job and the mean slowdown
  each run ran at beside its placement floor (:func:`pal_opt.hetero.gpus.placement_floor`).
* **Draw.** ``sia`` and anchored ``ilp`` on further draws of the factors (seeds 1 and 2 besides 0):
  whether the gain depends on which GPUs happen to be slow.  *Needed* is the mean slowdown at
  which ``ilp`` would be 10 % below ``sia`` if JCT scaled with it from sia's run without
  variability (as in ``sia_compare``).

Writes ``sia_variants.{md,png}`` and keeps every finished run in ``sia_variants_runs.json`` in the
output directory, so an interrupted grid resumes.  Results replace the committed ones only with
``--update`` (``benchmarks/_results.py``).  At most two worker processes, each single-threaded.
Usage::

    PYTHONPATH=$PWD nice -n 10 python benchmarks/sia_variants.py [--update | --out-dir DIR]
        [--traces 3,7] [--seeds 0,1,2] [--workers 2] [--no-run]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from _results import (
    kept_runs,
    output_dir,
    partial_run,
    produced_by,
    run_time,
    runs_provenance,
    source_commit,
)
from sia_compare import (
    HOUR,
    add_run_arguments,
    fingerprint,
    run_and_keep,
    run_meta,
    run_one,
    shared_data_missing,
)

#: (policy, --ilp-mode) of every design compared on draw 0; ``sia`` and ``anchored`` also run on
#: the other draws.
DESIGNS = (("sia", None), ("ilp", "anchored"), ("ilp", "levels"))
ON_EVERY_DRAW = (("sia", None), ("ilp", "anchored"))


#: The page's figure, embedded at its end.
FIGURE = "\n![ilp against sia with Longhorn variability per trace, variant and draw, against the 0.9 target](sia_variants.png)\n"


def _name(policy: str, mode: str | None) -> str:
    return policy if mode is None else f"ilp {mode}"


def _key(trace: int, policy: str, mode: str | None, variability: str, seed: int) -> str:
    return f"{trace}/{_name(policy, mode)}/{variability}/{seed}"


def _tasks(traces: list[int], seeds: list[int]) -> list[tuple[int, str, str, int, str | None]]:
    """(trace, policy, variability, seed, mode) of every run of the grid."""
    out: list[tuple[int, str, str, int, str | None]] = []
    for t in traces:
        out.append((t, "sia", "none", 0, None))
        out += [(t, p, "longhorn", 0, m) for p, m in DESIGNS]
        out += [(t, p, "longhorn", s, m) for s in seeds if s != 0 for p, m in ON_EVERY_DRAW]
    return out


def _run(trace: int, policy: str, variability: str, seed: int, mode: str | None) -> dict[str, Any]:
    r = run_one(trace, policy, variability, seed=seed, ilp_mode=mode)
    return {**r, "seed": seed, "design": _name(policy, mode)}


def _slow(r: dict[str, Any] | None, key: str) -> str:
    v = (r or {}).get("variability_slowdown") or {}
    return "-" if v.get(key) is None else f"{v[key]:.3f}"


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    return None if a is None or b is None else a["avg_jct"] / b["avg_jct"]


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _design_table(runs: dict[str, dict[str, Any]], traces: list[int]) -> list[str]:
    lines = ["## Designs (Longhorn, draw 0)", "",
             "| trace | policy | avg JCT h | p99 h | restarts per job | ran at | floor | / sia | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in traces:
        sia = runs.get(_key(t, "sia", None, "longhorn", 0))
        for p, m in DESIGNS:
            r = runs.get(_key(t, p, m, "longhorn", 0))
            if r is None:
                continue
            lines.append(f"| newtrace-{t} | {_name(p, m)} | {r['avg_jct'] / HOUR:.4f} | {r['p99_jct'] / HOUR:.2f} | "
                         f"{r['avg_restarts_per_job']:.2f} | {_slow(r, 'mean')} | {_slow(r, 'placement_floor')} | "
                         f"{_fmt(_ratio(r, sia))} | {r['wall_seconds']:.0f} |")
    return [*lines, ""]


def _draw_rows(runs: dict[str, dict[str, Any]], traces: list[int], seeds: list[int]) -> list[dict[str, Any]]:
    rows = []
    for t in traces:
        base = runs.get(_key(t, "sia", None, "none", 0))
        for s in seeds:
            sia, ilp = runs.get(_key(t, "sia", None, "longhorn", s)), runs.get(_key(t, "ilp", "anchored", "longhorn", s))
            if sia is None or ilp is None:
                continue
            cost = _ratio(sia, base)
            # the slowdown ilp would need for 0.9 × sia, JCT scaling with it from sia without variability
            needed = None if cost is None else 0.9 * cost
            rows.append({"trace": t, "seed": s, "sia": sia, "ilp": ilp, "cost": cost, "needed": needed,
                         "ratio": _ratio(ilp, sia)})
    return rows


def _draw_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["## Draws (Longhorn, sia and anchored ilp)", "",
             "| trace | draw | sia h | ilp h | ilp / sia | variability costs sia | sia ran at | ilp ran at | "
             "ilp floor | needed for 10 % |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| newtrace-{r['trace']} | {r['seed']} | {r['sia']['avg_jct'] / HOUR:.4f} | "
                     f"{r['ilp']['avg_jct'] / HOUR:.4f} | {_fmt(r['ratio'])} | "
                     f"{'-' if r['cost'] is None else format(r['cost'] - 1, '+.1%')} | "
                     f"{_slow(r['sia'], 'mean')} | {_slow(r['ilp'], 'mean')} | {_slow(r['ilp'], 'placement_floor')} | "
                     f"{_fmt(r['needed'])} |")
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        below = sum(1 for r in rows if r["needed"] is not None
                    and r["needed"] < (r["ilp"].get("variability_slowdown") or {}).get("placement_floor", 0))
        lines += ["", f"ilp / sia over these {len(ratios)} runs: {min(ratios):.3f}–{max(ratios):.3f}, geometric "
                  f"mean {gm:.3f} (the issue asks for ≤ 0.900).  The slowdown a 10 % cut needs is below "
                  f"ilp's own placement floor on {below} of {len(rows)}."]
    return [*lines, ""]


def write_markdown(runs: dict[str, dict[str, Any]], traces: list[int], seeds: list[int], meta: dict[str, Any]) -> str:
    lines = ["# ilp's designs and the variability draw, whole newTrace runs", "",
             f"{meta['command']} on {meta['date']} ({meta['python']}, {meta['machine']}; {meta.get('packages', '')}; "
             f"{meta['cpus']} CPUs, load average {meta['load']}: a machine shared with other work, so wall "
             "times are upper bounds; two runs at a time, each single-threaded).", "",
             "Cluster `aws:6x4,rtx:3x8,dgx-ext:2x8`, 60 s rounds; every type draws classA from PAL's Longhorn "
             "ResNet runs and classB from its BERT runs (`draw` = the seed), binned as PAL bins them. "
             "*ran at*: mean over job-rounds of the slowest raw factor of each job's GPUs; *floor*: the best "
             "any GPUs with the same per-node counts could have had on the empty cluster "
             "(`pal_opt.hetero.gpus.placement_floor`). Every run is deterministic.", ""]
    lines += _design_table(runs, traces)
    lines += _draw_table(_draw_rows(runs, traces, seeds))
    lines += ["", runs_provenance(runs.values())]
    return "\n".join(lines)


def plot(runs: dict[str, dict[str, Any]], traces: list[int], seeds: list[int], path: Path) -> bool:
    """ilp / sia per trace: each design on draw 0, anchored on every draw; the 0.9 target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    drawn = False
    for i, t in enumerate(traces):
        sia0 = runs.get(_key(t, "sia", None, "longhorn", 0))
        for k, (p, m) in enumerate(d for d in DESIGNS if d[0] != "sia"):
            r = _ratio(runs.get(_key(t, p, m, "longhorn", 0)), sia0)
            if r is not None:
                ax.scatter(i + 0.15 * k, r, marker="os"[k % 2], color=f"C{k}", label=f"{_name(p, m)}, draw 0" if i == 0 else None)
                drawn = True
        for s in seeds:
            if s == 0:
                continue
            r = _ratio(runs.get(_key(t, "ilp", "anchored", "longhorn", s)), runs.get(_key(t, "sia", None, "longhorn", s)))
            if r is not None:
                ax.scatter(i - 0.15, r, marker="x", color="C0", label="ilp anchored, other draws" if i == 0 and s == seeds[-1] else None)
    if not drawn:
        plt.close(fig)
        return False
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(0.9, color="C3", ls="--", lw=1, label="the issue's target (0.9)")
    ax.set_xticks(range(len(traces)), [f"newtrace-{t}" for t in traces])
    ax.set_ylabel("average JCT, ilp / sia")
    ax.set_ylim(0.85, 1.03)
    ax.set_title("ilp against sia with Longhorn variability, whole traces")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--traces", default="3,7", help="newTrace numbers (default 3,7)")
    ap.add_argument("--seeds", default="0,1,2", help="draws of the factors (default 0,1,2; 0 always runs)")
    add_run_arguments(ap)
    args = ap.parse_args(argv)
    if shared_data_missing("sia_variants"):
        return 0
    try:
        traces = [int(t) for t in args.traces.split(",") if t]
        seeds = sorted({0, *(int(s) for s in args.seeds.split(",") if s)})
    except ValueError:
        ap.error(f"--traces {args.traces} --seeds {args.seeds}: comma-separated integers expected")
    if not traces or any(not 1 <= t <= 7 for t in traces) or any(s < 0 for s in seeds):
        ap.error(f"--traces {args.traces}: newTrace workloads are numbered 1-7 (and seeds are >= 0)")
    out = output_dir(args, "sia_variants", partial=partial_run(ap, args, "traces", "seeds"))
    cache = out / "sia_variants_runs.json"
    fp, commit = fingerprint(__file__), source_commit()  # (this script, sia_compare's run_one and their data)
    runs = kept_runs(cache, None if args.no_run else fp, "sia_variants")
    grid = {} if args.no_run else {_key(t, p, m, v, s): (t, p, v, s, m) for t, p, v, s, m in _tasks(traces, seeds)}
    todo = {key: task for key, task in grid.items() if key not in runs}
    failed = run_and_keep(_run, todo, runs, (cache, fp, commit), args.workers, "sia_variants",
                          lambda n, key, r: f"[{n}/{len(todo)}] {key}: avg JCT {r['avg_jct'] / HOUR:.4f} h "
                                            f"({r['wall_seconds']:.0f} s)")
    (out / "sia_variants.md").write_text(write_markdown(runs, traces, seeds, {**run_meta(), "command": produced_by(__file__, argv, date=False, commit=False)}) + "\n" + FIGURE)
    plot(runs, traces, seeds, out / "sia_variants.png")
    print(f"sia_variants: wrote {out}/sia_variants.{{md,png}}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
