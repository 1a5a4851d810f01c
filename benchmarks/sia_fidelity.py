"""Sia fidelity: newtrace-7 under ``pal-opt simulate-sia --policy sia`` against the authors' simulator.

Runs for about 9 min on the machine of the committed page (the page does not say: in
``sia_fidelity.json`` the six whole-trace commands took 428 s and the 2,048-GPU solves 72 s, besides
recording the rounds, under load 3.4); ``--no-run`` writes the page and plot from the committed json, ``--no-scale``
and ``--variants`` run less.

Runs the command the issue names on the paper's cluster (``aws:6x4,rtx:3x8,dgx-ext:2x8``, 60 s
rounds) for the adaptive workload and its strong-scaling variant (every job ``scale-gpus``, as the
artifact's ``utils/categorize_jobs.py`` writes it), and compares JCTs, makespan, utilisation,
restarts and the per-application averages with ``../shared/reference/sia/newtrace-7-sia*.json``
(tolerances: average JCT ±15 %, p99 ±25 %).  Then times Sia-style rounds at 2,048 GPUs (three
types): 32 real newtrace-7 rounds (recorded from a simulation of the trace's first jobs) side by
side on a cluster 32 times the paper's, solved to optimality by every backend, with the
decomposition of :mod:`pal_opt.hetero.bounds` and as one MIP.  Both workloads are also run on
CP-SAT and CBC (``--tie-backends``): every round is proven optimal on each, but they return
different optima where a round ties, and the table shows how far the whole-trace figures move.

Writes ``sia_fidelity.{md,json}``; they replace the committed ones in ``benchmarks/results/`` only
with ``--update``, which a partial run (``--variants`` other than both, ``--no-scale``) refuses
(see ``benchmarks/_results.py``), and ``sia_fidelity.png``: the authors' JCTs beside ours, whole
trace and per application.  ``--no-run`` runs nothing and writes the page and plot again from the
committed ``sia_fidelity.json``.  Usage::

    PYTHONPATH=$PWD python benchmarks/sia_fidelity.py [--update | --out-dir DIR] [--variants adaptive,scale-gpus]
        [--no-scale] [--mip-time-limit 60] [--tie-backends cpsat,cbc]
    PYTHONPATH=$PWD python benchmarks/sia_fidelity.py --no-run [--update]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _results import (
    RESULTS,
    add_output_arguments,
    at_least,
    check_backends,
    check_values,
    command_line,
    output_dir,
    package_versions,
    partial_run,
    positive_seconds,
    run_time,
    source_commit,
    split_list,
    wrote,
)
from sia_compare import CLUSTER, DATA, HOUR, ROOT, SHARED

REFERENCE = SHARED / "reference" / "sia"
VARIANTS = ("adaptive", "scale-gpus")
TOLERANCE = {"avg_jct": 0.15, "p99_jct": 0.25}
#: Backends the traces also run on by default (``--tie-backends``); any other choice is a partial run.
TIE_BACKENDS = "cpsat,cbc"


def shown_command(cmd: list[str], out: Path) -> str:
    """``cmd`` (``python -m pal_opt.cli ...``) as a reader types it: ``pal-opt ...``, the output
    file ``RESULT.json`` (the placeholder of ``--help``) and the shared data under ``../shared`` (the page gave this machine's
    absolute path, ``/tmp/shared/...``, which a checkout elsewhere does not have)."""
    return " ".join(["pal-opt", *cmd[3:]]).replace(str(out), "RESULT.json").replace(str(SHARED), "../shared")


def run_variant(variant: str, trace: Path, backend: str | None = None) -> dict[str, Any]:
    """``pal-opt simulate-sia`` in a subprocess (the default backend unless ``backend``): its result
    document, wall and CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, "-m", "pal_opt.cli", "simulate-sia", str(trace), "--trace-format", "sia",
               "--cluster", CLUSTER, "--profiles", str(DATA / "profiles"), "--policy", "sia", "--round", "60",
               "--out", str(out), "--quiet"]
        if variant != "adaptive":
            cmd += ["--category", variant]
        if backend is not None:
            cmd += ["--backend", backend]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        doc = json.loads(out.read_text())
    doc.pop("jobs", None)
    doc.pop("round_log", None)  # per-round GPU use, 2 x 85 kB a run: the page draws from the figures only
    doc["trace"] = str(doc["trace"]).replace(str(SHARED), "../shared")  # as the command names it
    doc["command"] = shown_command(cmd, out)
    doc["command_wall_seconds"] = wall
    doc["command_cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return doc


def compare(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Figures side by side (hours where the reference gives hours) and relative differences."""
    rows = {}
    for key in ("avg_jct", "p50_jct", "p99_jct", "max_jct", "makespan"):
        mine = ours[key] / HOUR
        theirs = ref[f"{key}_hours"]
        rows[key] = {"ours": mine, "reference": theirs, "rel": mine / theirs - 1}
    for key in ("utilisation", "avg_gpus_in_use", "avg_restarts_per_job"):
        rows[key] = {"ours": ours[key], "reference": ref[key], "rel": ours[key] / ref[key] - 1}
    apps = {}
    for app, theirs in ref["avg_jct_hours_by_app"].items():
        mine = ours["avg_jct_by_app"].get(app)
        apps[app] = {"ours": None if mine is None else mine / HOUR, "reference": theirs,
                     "rel": None if mine is None else mine / HOUR / theirs - 1, "n_jobs": ref["n_jobs_by_app"][app]}
    types = {t: {"ours": ours["avg_gpus_in_use_by_type"].get(t), "reference": v}
             for t, v in ref["avg_gpus_in_use_by_type"].items()}
    passed = {k: abs(rows[k]["rel"]) <= tol for k, tol in TOLERANCE.items()}
    return {"figures": rows, "by_app": apps, "gpus_by_type": types, "within_tolerance": passed}


def record_rounds(jobs: int) -> list[Any]:
    """Round program inputs of a simulation of the first ``jobs`` jobs of newtrace-7."""
    from pal_opt.hetero.profiles import load_applications
    from pal_opt.hetero.simulate import build_cluster, parse_cluster, simulate_sia
    from pal_opt.hetero.workload import read_workload, workload_from_frame

    wl = read_workload(DATA / "workloads" / "newtrace-7.csv")
    wl = workload_from_frame(wl.frame().iloc[:jobs].copy(), source="newtrace-7")
    apps = load_applications(DATA / "profiles", wl.applications())
    cluster = build_cluster(parse_cluster(CLUSTER), apps)
    rounds: list[Any] = []
    simulate_sia(wl, apps, cluster, on_round=lambda inp, _: rounds.append(inp))
    return rounds


def tiled_round(rounds: list[Any], pick: list[int], scale: int) -> Any:
    """The picked rounds side by side on a cluster ``scale`` times as large (same node limits)."""
    from pal_opt.hetero.configs import GpuType, enumerate_configs
    from pal_opt.hetero.round import RoundInput

    small = rounds[pick[0]].configs
    big = enumerate_configs(tuple(GpuType(t.name, t.nodes * scale, t.gpus_per_node, t.max_physical_nodes)
                                  for t in small.types))
    where = np.array([big.index(c.gpu_type, c.num_nodes, c.num_gpus) for c in small.configs])
    costs = np.full((sum(rounds[i].num_adaptive for i in pick), len(big)), 100.0, dtype=np.float32)
    pins = np.full(costs.shape[0], -1, dtype=np.int64)
    row = 0
    for i in pick:
        inp = rounds[i]
        n = inp.num_adaptive
        costs[row:row + n, where] = inp.adaptive_costs
        pa, _ = inp.pins()
        pins[row:row + n] = np.where(pa >= 0, where[np.maximum(pa, 0)], -1)
        row += n
    return RoundInput(big, costs, pinned_adaptive=pins)


def time_rounds(instances: list[Any], mip_time_limit: float) -> list[dict[str, Any]]:
    """Every instance on every backend, decomposed and as one MIP: wall and CPU seconds."""
    from pal_opt.hetero.round import build_round_program, solve_round
    from pal_opt.ilp.backends import available_backends

    out = []
    for k, inp in enumerate(instances):
        entry: dict[str, Any] = {"jobs": inp.num_adaptive, "columns": build_round_program(inp).num_vars, "runs": []}
        for backend in available_backends():
            for decompose in (True, False):
                c0, t0 = time.process_time(), time.perf_counter()
                d = solve_round(inp, backend=backend, decompose=decompose,
                                time_limit=None if decompose else mip_time_limit)
                entry["runs"].append({"backend": backend, "decompose": decompose, "solved_by": d.backend,
                                      "status": d.status, "objective": d.objective,
                                      "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0})
                print(f"round {k}: {backend} decompose={decompose}: {d.status} {d.objective:.2f} "
                      f"by {d.backend} in {entry['runs'][-1]['wall']:.2f} s", file=sys.stderr)
        out.append(entry)
    return out


def scale_experiment(args: argparse.Namespace) -> dict[str, Any]:
    rounds = record_rounds(args.record_jobs)
    busy = sorted(range(len(rounds)), key=lambda i: (-rounds[i].num_adaptive, i))
    picks = [busy[k::args.instances][:32] for k in range(args.instances)]
    instances = [tiled_round(rounds, sorted(p), 32) for p in picks]
    return {"recorded_rounds": len(rounds), "record_jobs": args.record_jobs, "scale": 32,
            "gpus": sum(t.total_gpus for t in instances[0].configs.types),
            "types": ", ".join(f"{t.name} {t.nodes}×{t.gpus_per_node}" for t in instances[0].configs.types),
            "instances": time_rounds(instances, args.mip_time_limit)}


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "–" if v is None else format(v, spec)


def _variant_markdown(name: str, doc: dict[str, Any], cmp: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    f = cmp["figures"]
    ok = cmp["within_tolerance"]
    lines = [f"## newtrace-7, {name}", "",
             f"`{doc['command']}`", "",
             f"{doc['n_completed']}/{doc['n_jobs']} jobs completed in {doc['rounds']} rounds; "
             f"wall {doc['command_wall_seconds']:.0f} s (CPU {doc['command_cpu_seconds']:.0f} s) for the whole "
             f"command; the authors' simulator: {ref['wall_seconds']:.0f} s. Round programs: "
             f"{doc['solve_seconds_total']:.0f} s in total, {doc['rounds_not_optimal']} not proven optimal.", "",
             "| figure | pal-opt | authors | difference | tolerance |", "|---|---|---|---|---|"]
    labels = {"avg_jct": "average JCT (h)", "p50_jct": "median JCT (h)", "p99_jct": "p99 JCT (h)",
              "max_jct": "max JCT (h)", "makespan": "makespan (h)", "utilisation": "utilisation",
              "avg_gpus_in_use": "GPUs in use (mean)", "avg_restarts_per_job": "restarts per job"}
    for key, label in labels.items():
        tol = TOLERANCE.get(key)
        verdict = "" if tol is None else f"±{tol:.0%}: {'met' if ok[key] else '**missed**'}"
        lines.append(f"| {label} | {f[key]['ours']:.3f} | {f[key]['reference']:.3f} | {f[key]['rel']:+.1%} | {verdict} |")
    lines += ["", "| application | jobs | pal-opt avg JCT (h) | authors (h) | difference |", "|---|---|---|---|---|"]
    for app, a in cmp["by_app"].items():
        rel = "–" if a["rel"] is None else f"{a['rel']:+.1%}"
        lines.append(f"| {app} | {a['n_jobs']} | {_fmt(a['ours'], '.3f')} | {a['reference']:.3f} | {rel} |")
    lines += ["", "| GPU type | pal-opt GPUs in use | authors |", "|---|---|---|"]
    for t, g in cmp["gpus_by_type"].items():
        lines.append(f"| {t} | {_fmt(g['ours'])} | {g['reference']:.2f} |")
    return [*lines, ""]


def _scale_markdown(scale: dict[str, Any]) -> list[str]:
    lines = ["## Sia-style rounds at 2,048 GPUs", "",
             f"Each instance puts 32 different rounds recorded from a simulation of newtrace-7's first "
             f"{scale['record_jobs']} jobs ({scale['recorded_rounds']} rounds; the busiest first, dealt out to the "
             f"instances) side by side on the paper's cluster scaled {scale['scale']}× ({scale['gpus']:,} GPUs: "
             f"{scale.get('types', 'aws 192×4, dgx-ext 64×8, rtx 96×8')}), pins included. `decomposed` is `solve_round`'s default "
             "(LP, Lagrangian knapsack bounds and repairs; the backend only on the core when the bound is not met); "
             "`one MIP` hands the whole program to the backend. Wall seconds (CPU seconds of this process: CBC "
             "runs as a child process, so its CPU time is not in them); every run is proven optimal unless "
             "marked.", "",
             "| instance | jobs | columns | backend | decomposed (solved by) | one MIP |", "|---|---|---|---|---|---|"]
    for k, inst in enumerate(scale["instances"]):
        by = {(r["backend"], r["decompose"]): r for r in inst["runs"]}
        for backend in dict.fromkeys(r["backend"] for r in inst["runs"]):
            d, m = by[(backend, True)], by[(backend, False)]
            dmark, mark = ("" if r["status"] == "optimal" else f" **{r['status']}**" for r in (d, m))
            lines.append(f"| {k} | {inst['jobs']} | {inst['columns']:,} | {backend} | {d['wall']:.2f} ({d['cpu']:.2f}) "
                         f"{d['solved_by']}{dmark} | {m['wall']:.2f} ({m['cpu']:.2f}){mark} |")
    dec = [r for inst in scale["instances"] for r in inst["runs"] if r["decompose"]]
    walls = [r["wall"] for r in dec]
    n_opt = sum(r["status"] == "optimal" for r in dec)
    which = "every run optimal" if n_opt == len(dec) else f"{n_opt} of {len(dec)} runs optimal"
    lines += ["", f"Decomposed: {which}, wall {min(walls):.2f}-{max(walls):.2f} s "
              f"(median {float(np.median(walls)):.2f} s).", ""]
    return lines


def _ties_markdown(result: dict[str, Any]) -> list[str]:
    """Every variant on every backend: how far whole-trace figures move with the optimum a solver
    picks among a round's ties."""
    lines = ["## The same traces on every backend", "",
             "Sia's round program often has several optimal allocations; each backend returns one of "
             "them, the trajectories part, and the whole-trace figures move with them although every "
             "round is proven optimal.  Solver versions: " + result["meta"].get("solvers", "?") + ".", "",
             "| file | backend | avg JCT (h) | vs authors | p50 (h) | p99 (h) | vs authors | makespan (h) | "
             "restarts/job | within tolerance |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in result["variants"].items():
        runs = {"highs (default)": v["ours"], **v.get("backends", {})}
        for backend, doc in runs.items():
            cmp = compare(doc, v["reference_figures"])
            f = cmp["figures"]
            ok = "yes" if all(cmp["within_tolerance"].values()) else "no"
            lines.append(f"| {name} | {backend} | {f['avg_jct']['ours']:.3f} | {f['avg_jct']['rel']:+.1%} | "
                         f"{f['p50_jct']['ours']:.3f} | {f['p99_jct']['ours']:.2f} | {f['p99_jct']['rel']:+.1%} | "
                         f"{f['makespan']['ours']:.1f} | {doc['avg_restarts_per_job']:.2f} | {ok} |")
    lines.append("")
    return lines


#: The whole-trace figures of the plot, before the per-application averages.
PLOTTED = ("avg_jct", "p50_jct", "p99_jct")


def _hours(doc: dict[str, Any], apps: list[str]) -> list[float]:
    """A run's :data:`PLOTTED` figures and its average JCT of each of ``apps``, in hours (NaN where
    an application has none)."""
    by_app = doc.get("avg_jct_by_app") or {}
    return ([doc[k] / HOUR for k in PLOTTED]
            + [by_app[a] / HOUR if by_app.get(a) is not None else float("nan") for a in apps])


def plot(result: dict[str, Any], path: Path) -> None:
    """One panel per workload file: the authors' whole-trace and per-application JCTs beside
    pal-opt's (HiGHS, the page's runs), the other backends' runs as markers (the spread of ties),
    each bar labelled with its difference from the authors'."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = result["variants"]
    fig, axes = plt.subplots(1, len(variants), figsize=(6.5 * len(variants), 4.6), squeeze=False)
    for ax, (name, v) in zip(axes[0], variants.items(), strict=True):
        ref = v["reference_figures"]
        apps = list(v["comparison"]["by_app"])
        labels = ["average", "median", "p99", *apps]
        theirs = [ref[f"{k}_hours"] for k in PLOTTED] + [ref["avg_jct_hours_by_app"][a] for a in apps]
        ours = _hours(v["ours"], apps)
        x = np.arange(len(labels))
        ax.bar(x - 0.2, theirs, 0.4, color="0.65", label="authors' simulator")
        ax.bar(x + 0.2, ours, 0.4, color="C0", label="pal-opt (HiGHS)")
        for k, (backend, doc) in enumerate(v.get("backends", {}).items()):
            ax.plot(x + 0.2, _hours(doc, apps), "ovs^"[k % 4], color=f"C{k + 1}", ms=5, mfc="none", ls="",
                    label=f"pal-opt ({backend})")
        for xi, o, t in zip(x, ours, theirs, strict=True):
            if np.isfinite(o) and t:
                ax.annotate(f"{o / t - 1:+.1%}", (xi + 0.2, o), textcoords="offset points", xytext=(0, 3),
                            ha="center", fontsize=7)
        ax.axvline(2.5, color="k", lw=0.5)
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("JCT (h); per application: average")
        ax.set_title(f"newtrace-7, {name} (tolerance: average ±{TOLERANCE['avg_jct']:.0%}, "
                     f"p99 ±{TOLERANCE['p99_jct']:.0%})", fontsize="medium")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def write_markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = ["# Sia fidelity: newtrace-7 against the authors' simulator", "",
             f"Produced by `{meta['command']}` on {meta['date']}"
             f"{' at commit ' + meta['commit'] if 'commit' in meta else ''} ({meta['python']}, {meta['machine']}, "
             f"{meta['cpus']} CPUs, load average {meta['load']}: a machine shared with other work, so wall "
             f"times are upper bounds).  Packages: {meta.get('packages', 'not recorded')}.", "",
             "Reference: `../shared/reference/sia/newtrace-7-sia*.json`, the artifact's `multi_simulator.py` "
             "(commit aaf7a0de) with p = −0.5, λn = 1.1, λa = 0.01, 60 s rounds, CBC. Both simulators are "
             "deterministic but take different optima where the round program ties, so single jobs differ; "
             "the figures below are the whole-trace ones the issue checks.", "",
             "![the authors' JCTs beside pal-opt's, whole trace and per application](sia_fidelity.png)", ""]
    for name, v in result["variants"].items():
        lines += _variant_markdown(name, v["ours"], v["comparison"], v["reference"])
    if any(v.get("backends") for v in result["variants"].values()):
        lines += _ties_markdown(result)
    if result.get("scale"):
        lines += _scale_markdown(result["scale"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated Sia variants to replay, among {','.join(VARIANTS)} (default: both)")
    ap.add_argument("--no-scale", action="store_true", help="skip the 2,048-GPU round timings")
    ap.add_argument("--instances", type=int, default=4, help="2,048-GPU instances (default 4)")
    ap.add_argument("--record-jobs", type=int, default=320, help="newtrace-7 jobs simulated to record rounds")
    ap.add_argument("--mip-time-limit", type=float, default=60.0, help="seconds for the one-MIP runs")
    ap.add_argument("--tie-backends", default=TIE_BACKENDS,
                    help="backends the traces are also run on, to show what the choice among tied optima "
                         "moves (default cpsat,cbc; empty for none)")
    ap.add_argument("--no-run", action="store_true",
                    help="run nothing: write the page and its plot again from the committed sia_fidelity.json")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    if args.no_run:
        committed = RESULTS / "sia_fidelity.json"
        write_page(json.loads(committed.read_text()), output_dir(args, "sia_fidelity"))
        return 0
    variants = split_list(ap, "--variants", args.variants, str, "comma-separated variant names")
    check_values(ap, "--variants", variants, lambda v: v in VARIANTS, f"choose among {', '.join(VARIANTS)}")
    tie_backends = [b for b in args.tie_backends.split(",") if b]
    check_backends(ap, "--tie-backends", tie_backends)
    at_least(ap, args, 1, "instances", "record_jobs")
    positive_seconds(ap, args, "mip_time_limit")
    if not DATA.is_dir() or not REFERENCE.is_dir():
        print(f"sia_fidelity: skipped: shared data not found at {SHARED}", file=sys.stderr)
        return 0
    partial = partial_run(ap, args, "no_scale", "tie_backends", also={"--variants": set(variants) != set(VARIANTS)})
    out = output_dir(args, "sia_fidelity", partial=partial)
    trace = DATA / "workloads" / "newtrace-7.csv"
    result: dict[str, Any] = {"variants": {}}
    for variant in variants:
        ref = json.loads((REFERENCE / f"newtrace-7-sia{'' if variant == 'adaptive' else '-' + variant}.json").read_text())
        print(f"sia_fidelity: newtrace-7 {variant} ...", file=sys.stderr)
        ours = run_variant(variant, trace)
        others = {}
        for backend in tie_backends:
            print(f"sia_fidelity: newtrace-7 {variant} on {backend} ...", file=sys.stderr)
            others[backend] = run_variant(variant, trace, backend)
        figures = {k: ref[k] for k in ref if k.endswith("_hours") or k in (
            "utilisation", "avg_gpus_in_use", "avg_restarts_per_job", "avg_jct_hours_by_app", "n_jobs_by_app",
            "avg_gpus_in_use_by_type")}
        result["variants"][variant] = {"ours": ours, "reference": {k: ref[k] for k in ("wall_seconds", "command")},
                                       "reference_figures": figures, "backends": others,
                                       "comparison": compare(ours, ref)}
    sys.path.insert(0, str(ROOT))
    if not args.no_scale:
        result["scale"] = scale_experiment(args)
    from pal_opt.ilp.backends import available_backends, get_backend

    result["meta"] = {"date": time.strftime("%Y-%m-%d"), "command": command_line(__file__, argv),
                      "commit": source_commit(), "python": f"Python {platform.python_version()}",
                      "solvers": ", ".join(f"{b} {get_backend(b).version()}" for b in available_backends()),
                      "packages": package_versions(),
                      "machine": f"{platform.machine()}, {platform.system()}", "cpus": os.cpu_count(),
                      "load": ", ".join(f"{x:.1f}" for x in os.getloadavg())}
    (out / "sia_fidelity.json").write_text(json.dumps(result, indent=1) + "\n")
    write_page(result, out)
    return 0


def write_page(result: dict[str, Any], out: Path) -> None:
    """The page and its plot from ``result`` (a run's, or the committed ``sia_fidelity.json``)."""
    md_path, png_path = out / "sia_fidelity.md", out / "sia_fidelity.png"
    plot(result, png_path)
    md_path.write_text(write_markdown(result) + "\n")
    wrote("sia_fidelity", md_path, out / "sia_fidelity.json", png_path)


if __name__ == "__main__":
    sys.exit(main())
