"""Sia, pal-opt's ``ilp`` with types, PAL and Packed (type-blind) and Gavel-like on the newTrace workloads.

Runs for about 35 min on the machine of the committed page (the page does not say: the 70 runs kept
in ``sia_compare_runs.json`` took 4,014 s, two at a time, the longest 321 s); an interrupted grid
resumes, ``--no-run`` writes the page from the kept runs, ``--traces``, ``--policies`` and
``--variability`` run fewer.

Every policy runs on the same simulator of GPU types (``pal-opt simulate --trace-format sia``,
in process: :func:`pal_opt.hetero.simulate.simulate_sia`) on the paper's cluster
(``aws:6x4,rtx:3x8,dgx-ext:2x8``, 60 s rounds), without variability (every GPU of a type
nominal) and with per-GPU variability: every type draws classA from PAL's Longhorn ResNet runs
and classB from its BERT runs (seed 0), binned as PAL bins them; ``sia`` ignores the factors (the
published policy), ``ilp`` and ``pal`` see the binned ones, ``packed`` and ``gavel`` ignore them
(``gavel``: max-min fair type shares by throughput, rigid jobs, its own 360 s rounds,
:mod:`pal_opt.hetero.gavel`).

Writes ``sia_compare.{md,csv,png}`` (and ``sia_compare_slowdown.png``: with variability, the mean
slowdown each run ran at against its placement floor, :func:`pal_opt.hetero.gpus.placement_floor`)
beside the paper's Table 3 (newTrace: Sia 0.7 h, Pollux 1.5 h,
Gavel 11.3 h average JCT); each finished run is also kept in ``sia_compare_runs.json`` in the output
directory so that an interrupted grid resumes.  Results replace the committed ones only with
``--update`` (``benchmarks/_results.py``).  At most two worker processes, each single-threaded.
Usage::

    PYTHONPATH=$PWD nice -n 10 python benchmarks/sia_compare.py [--update | --out-dir DIR]
        [--traces 1,2,...,7] [--policies sia,ilp,pal,packed,gavel] [--variability none,longhorn] [--workers 2]
        [--no-run]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from _results import (
    add_output_arguments,
    code_fingerprint,
    kept_runs,
    output_dir,
    package_versions,
    produced_by,
    run_time,
    runs_provenance,
    source_commit,
    stamped,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data" / "sia-artifact"
LONGHORN = SHARED / "data" / "pal-artifact" / "variability" / "longhorn"
#: The shared data a run reads (:func:`run_one`): the newTrace workloads, the applications'
#: profiles and PAL's Longhorn measurements; their digests are part of :func:`fingerprint`.
INPUTS = (DATA / "workloads", DATA / "profiles", LONGHORN)
CLUSTER = "aws:6x4,rtx:3x8,dgx-ext:2x8"
POLICIES = ("sia", "ilp", "pal", "packed", "gavel")
VARIABILITY = ("none", "longhorn")
#: The paper's Table 3, newTrace, average JCT in hours (a mean over ten traces).
PAPER = {"Sia": 0.7, "Pollux": 1.5, "Gavel": 11.3}
#: The policies' names in the tables, and their colours in the plots (colour-blind safe pairs)
SHOWN = {"pal": "PAL", "packed": "Packed", "gavel": "Gavel-like"}
COLOURS = {"sia": "tab:blue", "ilp": "tab:orange", "pal": "tab:purple", "packed": "tab:brown", "gavel": "tab:grey"}
HOUR = 3600.0


def fingerprint(*scripts: str) -> str:
    """The fingerprint runs of :func:`run_one` are kept under (``_results.code_fingerprint``):
    pal_opt, the packages, this script (its cluster, policies, seed and :func:`run_one`), the
    calling ``scripts`` (a benchmark built on this one passes its ``__file__``) and :data:`INPUTS`."""
    return code_fingerprint(scripts=[*scripts, __file__], data=INPUTS)


def _files(cluster: Any, variability: str) -> dict[tuple[str, str], str]:
    from pal_opt.io.measurements import PAL_CLASS_FILES

    if variability == "none":
        return {}
    return {(t.name, c): str(LONGHORN / PAL_CLASS_FILES[c]) for t in cluster for c in ("classA", "classB")}


def run_one(trace: int, policy: str, variability: str, seed: int = 0, ilp_mode: str | None = None) -> dict[str, Any]:
    """One simulation in this process (a worker): its summary without per-job rows.

    ``seed`` draws the per-GPU factors; ``ilp_mode`` is ``--ilp-mode`` (``ilp`` only).
    """
    sys.path.insert(0, str(ROOT))
    from threadpoolctl import threadpool_limits

    from pal_opt.hetero.cli import ilp_mode_config
    from pal_opt.hetero.gpus import Layout, draw_variability
    from pal_opt.hetero.profiles import load_applications
    from pal_opt.hetero.simulate import SimConfig, build_cluster, parse_cluster, simulate_sia
    from pal_opt.hetero.workload import read_workload

    workload = read_workload(DATA / "workloads" / f"newtrace-{trace}.csv")
    apps = load_applications(DATA / "profiles", workload.applications())
    cluster = build_cluster(parse_cluster(CLUSTER), apps)
    var = draw_variability(Layout(cluster), _files(cluster, variability), seed=seed)
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        cfg = SimConfig(policy=policy, variability=var, **ilp_mode_config(ilp_mode, policy))
        result = simulate_sia(workload, apps, cluster, cfg)
    summary = result.summary()
    keep = ("n_jobs", "n_completed", "avg_jct", "p50_jct", "p99_jct", "makespan", "utilisation",
            "avg_restarts_per_job", "solve_seconds_total", "variability_slowdown")
    return {"trace": trace, "policy": policy, "variability": variability, **{k: summary[k] for k in keep},
            "wall_seconds": time.perf_counter() - t0}


def run_meta() -> dict[str, Any]:
    """Date, Python, machine, CPUs, load average and package versions, for a results file's header."""
    return {"date": time.strftime("%Y-%m-%d"), "python": f"Python {platform.python_version()}",
            "machine": f"{platform.machine()}, {platform.system()}", "cpus": os.cpu_count(),
            "load": ", ".join(f"{x:.1f}" for x in os.getloadavg()), "packages": package_versions()}


def _key(r: dict[str, Any]) -> str:
    return f"{r['trace']}/{r['policy']}/{r['variability']}"


def _h(v: float | None) -> str:
    return "-" if v is None else f"{v / HOUR:.2f}"


def _table(runs: dict[str, dict[str, Any]], traces: list[int], variability: str) -> list[str]:
    lines = [f"### Average JCT (h), {'no variability' if variability == 'none' else 'Longhorn variability'}", "",
             "| trace | sia | ilp | PAL | Packed | Gavel-like | ilp / sia |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in traces:
        row = [runs.get(f"{t}/{p}/{variability}") for p in POLICIES]
        ratio = f"{row[1]['avg_jct'] / row[0]['avg_jct']:.3f}" if row[0] and row[1] else "-"
        lines.append(f"| newtrace-{t} | " + " | ".join(_h(r["avg_jct"]) if r else "not run" for r in row) + f" | {ratio} |")
    return lines


def _targets(runs: dict[str, dict[str, Any]], traces: list[int]) -> list[str]:
    """The issue's two targets on the traces run: ilp never worse than sia without variability,
    and at least 10 % lower average JCT with variability."""
    import math

    lines = ["### The issue's targets (ilp against sia, average JCT)", ""]
    for v, want in (("none", "never worse (ratio <= 1)"), ("longhorn", ">= 10 % lower (ratio <= 0.9)")):
        ratios = {t: runs[f"{t}/ilp/{v}"]["avg_jct"] / runs[f"{t}/sia/{v}"]["avg_jct"] for t in traces
                  if f"{t}/ilp/{v}" in runs and f"{t}/sia/{v}" in runs}
        if not ratios:
            lines.append(f"- {v}: no trace with both runs.")
            continue
        limit = 1.0 if v == "none" else 0.9
        met = [t for t, r in ratios.items() if r <= limit]
        gm = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
        lines.append(f"- {'no variability' if v == 'none' else 'Longhorn variability'}, target {want}: "
                     f"met on {len(met)} of {len(ratios)} traces run (ratios "
                     + ", ".join(f"newtrace-{t} {r:.3f}" for t, r in ratios.items()) + f"; geometric mean {gm:.3f}).")
    for t in traces:
        a, b = runs.get(f"{t}/sia/none"), runs.get(f"{t}/sia/longhorn")
        if a and b:
            lines.append(f"- What variability costs sia on newtrace-{t}: {a['avg_jct'] / HOUR:.2f} h -> "
                         f"{b['avg_jct'] / HOUR:.2f} h ({b['avg_jct'] / a['avg_jct'] - 1:+.1%}).")
    return lines


def _needed(runs: dict[str, dict[str, Any]], t: int) -> float | None:
    """The mean slowdown at which ``ilp`` would be 10 % below ``sia`` on newtrace-``t``, if JCT
    scales with it from sia's no-variability run (None without that run)."""
    a, n = runs.get(f"{t}/sia/longhorn"), runs.get(f"{t}/sia/none")
    return 0.9 * a["avg_jct"] / n["avg_jct"] if a and n else None


def _slowdowns(runs: dict[str, dict[str, Any]], traces: list[int]) -> list[str]:
    """Where the variability goes: the slowdown the jobs ran at, its placement floor, and the
    slowdown a 10 % cut would take (sia's JCT scales with its mean slowdown: 1.0 gives its JCT
    without variability)."""
    lines = ["### Where the variability goes (Longhorn)", "",
             "Mean over job-rounds (a job holding GPUs for a round counts once: what its JCT feels) of the slowest "
             "raw factor of each job's GPUs (what it ran at), and of its "
             "*placement floor*: the best slowest factor any GPUs with the same per-node counts could have on the "
             "empty cluster (`pal_opt.hetero.gpus.placement_floor`; it ignores the other jobs, so it bounds every "
             "placement of those configurations from below).  *Needed*: the mean slowdown at which `ilp` would be 10 % below "
             "`sia`, if JCT scales with it from sia's no-variability run (0.9 × sia with / sia without).", "",
             "| trace | sia: ran at | sia: floor | ilp: ran at | ilp: floor | needed for 10 % |",
             "| --- | --- | --- | --- | --- | --- |"]
    for t in traces:
        a, b, need = runs.get(f"{t}/sia/longhorn"), runs.get(f"{t}/ilp/longhorn"), _needed(runs, t)
        if not (a and b and a.get("variability_slowdown") and b.get("variability_slowdown")):
            continue
        sa, sb = a["variability_slowdown"], b["variability_slowdown"]
        lines.append(f"| newtrace-{t} | {sa['mean']:.3f} | {sa['placement_floor']:.3f} | "
                     f"{sb['mean']:.3f} | {sb['placement_floor']:.3f} | {'-' if need is None else f'{need:.3f}'} |")
    return lines


def _gavel(runs: dict[str, dict[str, Any]], traces: list[int]) -> list[str]:
    """The Gavel-like policy against sia on the traces run, beside the paper's Gavel/Sia ratio."""
    lines = ["### Gavel-like against sia (average JCT)", "",
             f"Paper's Table 3 (newTrace, mean of ten traces): Gavel {PAPER['Gavel']} h, Sia {PAPER['Sia']} h, "
             f"ratio {PAPER['Gavel'] / PAPER['Sia']:.1f}.  Ours: rigid jobs (requested count and batch), "
             "max-min fair type shares by throughput, Gavel's priority mechanism on 360 s rounds, no placement "
             "(`pal_opt/hetero/gavel.py`).", ""]
    for v in VARIABILITY:
        for t in traces:
            g, a = runs.get(f"{t}/gavel/{v}"), runs.get(f"{t}/sia/{v}")
            if g and a:
                lines.append(f"- newtrace-{t}, {'no variability' if v == 'none' else 'Longhorn variability'}: "
                             f"gavel {g['avg_jct'] / HOUR:.2f} h, sia {a['avg_jct'] / HOUR:.2f} h, ratio "
                             f"{g['avg_jct'] / a['avg_jct']:.1f} (gavel p50 {g['p50_jct'] / HOUR:.2f} h, "
                             f"p99 {g['p99_jct'] / HOUR:.1f} h, makespan {g['makespan'] / HOUR:.1f} h).")
    return lines


def write_markdown(runs: dict[str, dict[str, Any]], traces: list[int], meta: dict[str, Any]) -> str:
    out = ["# Sia, ilp with types, PAL, Packed and Gavel-like on newTrace (heterogeneous 64-GPU cluster)", "",
           f"{meta['command']} on {meta['date']} ({meta['python']}, {meta['machine']}, "
           f"{meta['cpus']} CPUs shared with other work, load average {meta['load']}).  "
           f"Packages: {meta.get('packages', 'not recorded')}.", "",
           "Paper's Table 3, newTrace (mean of ten traces, the authors' testbed simulator): "
           + ", ".join(f"{k} {v} h" for k, v in PAPER.items()) + " average JCT.", "",
           "`ilp`: Sia's program and Sia's placer as `sia` runs them, then pal-opt's round program re-places "
           "the jobs from Sia's GPUs, leaving them only for a strictly better placement with the same GPUs per node "
           "(`formulations/sia_ilp_types.md` §3.1).  Every run is deterministic; finished runs are kept in "
           "`sia_compare_runs.json` with a fingerprint of pal_opt's code, the packages, this script and the shared data "
           "it reads, and a later "
           "invocation re-uses only the runs of the same fingerprint.  " + runs_provenance(runs.values()), ""]
    for v in VARIABILITY:
        out += _table(runs, traces, v) + [""]
    out += _targets(runs, traces) + ["", "![average JCT per policy, and ilp / sia against the 0.9 target](sia_compare.png)", ""]
    out += _slowdowns(runs, traces) + ["", "![slowdowns](sia_compare_slowdown.png)", ""]
    out += _gavel(runs, traces) + [""]
    out += ["### Every run", "", "| trace | variability | policy | done | avg JCT (h) | p50 (h) | p99 (h) | makespan (h) | "
            "restarts/job | utilisation | wall (s) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(runs.values(), key=lambda r: (r["trace"], r["variability"], POLICIES.index(r["policy"]))):
        out.append(f"| newtrace-{r['trace']} | {r['variability']} | {r['policy']} | {r['n_completed']}/{r['n_jobs']} | "
                   f"{_h(r['avg_jct'])} | {_h(r['p50_jct'])} | {_h(r['p99_jct'])} | {_h(r['makespan'])} | "
                   f"{r['avg_restarts_per_job']:.2f} | {r['utilisation']:.3f} | {r['wall_seconds']:.0f} |")
    missing = [f"newtrace-{t}/{p}/{v}" for t in range(1, 8) for v in VARIABILITY for p in POLICIES
               if f"{t}/{p}/{v}" not in runs]
    out += ["", "Not run: " + (", ".join(missing) if missing else "nothing") + "."]
    return "\n".join(out)


def write_csv(runs: dict[str, dict[str, Any]], path: Path) -> None:
    import pandas as pd

    pd.json_normalize(sorted(runs.values(), key=_key)).to_csv(path, index=False)


def plot(runs: dict[str, dict[str, Any]], traces: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), gridspec_kw={"width_ratios": [1, 1, 0.8]})
    axes[1].sharey(axes[0])  # the two JCT panels on one scale
    for ax, v in zip(axes[:2], VARIABILITY, strict=True):
        width = 0.8 / len(POLICIES)
        for i, p in enumerate(POLICIES):
            ys = [runs[f"{t}/{p}/{v}"]["avg_jct"] / HOUR if f"{t}/{p}/{v}" in runs else 0.0 for t in traces]
            ax.bar([k + (i - (len(POLICIES) - 1) / 2) * width for k in range(len(traces))], ys, width,
                   label=SHOWN.get(p, p), color=COLOURS.get(p))
        ax.axhline(PAPER["Sia"], color="k", ls="--", lw=0.8, label="paper: Sia 0.7 h")
        ax.set_xticks(range(len(traces)), [f"nt-{t}" for t in traces])
        ax.set_yscale("log")
        ax.set_title(("no variability" if v == "none" else "Longhorn variability") + ": average JCT (log)")
    axes[0].set_ylabel("average JCT (h)")
    # the comparison, which the log-scale bars cannot show: ilp / sia per trace
    ratio = axes[2]
    for v, marker, colour in (("none", "o", "tab:grey"), ("longhorn", "s", COLOURS["ilp"])):
        pts = [(k, runs[f"{t}/ilp/{v}"]["avg_jct"] / runs[f"{t}/sia/{v}"]["avg_jct"]) for k, t in enumerate(traces)
               if f"{t}/ilp/{v}" in runs and f"{t}/sia/{v}" in runs]
        ratio.plot([k for k, _ in pts], [r for _, r in pts], marker, color=colour, ms=7,
                   label="ilp / sia, " + ("no variability" if v == "none" else "Longhorn"))
    ratio.axhline(1.0, color="k", lw=0.8)
    ratio.axhline(0.9, color="tab:red", ls="--", lw=1.0, label="target with variability: 0.9")
    ratio.set_ylim(0.85, 1.03)
    ratio.set_xticks(range(len(traces)), [f"nt-{t}" for t in traces])
    ratio.set_ylabel("average JCT, ilp / sia")
    ratio.set_title("ilp against sia (lower is better)")
    ratio.grid(True, axis="y", alpha=0.3)
    ratio.legend(fontsize=7, loc="lower right")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels))  # below, clear of the bars
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)


def plot_slowdowns(runs: dict[str, dict[str, Any]], traces: list[int], path: Path) -> bool:
    """The Longhorn runs' mean slowdown and placement floor per trace, beside the slowdown a 10 %
    cut would take (:func:`_slowdowns`).  False (no file) when no trace has both runs."""
    rows = [(t, runs[f"{t}/sia/longhorn"], runs[f"{t}/ilp/longhorn"], _needed(runs, t)) for t in traces
            if runs.get(f"{t}/sia/longhorn", {}).get("variability_slowdown")
            and runs.get(f"{t}/ilp/longhorn", {}).get("variability_slowdown")]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.6))
    x = list(range(len(rows)))
    for pol, k, off, color in (("sia", 1, -0.12, "tab:blue"), ("ilp", 2, 0.12, "tab:orange")):
        ran = [r[k]["variability_slowdown"]["mean"] for r in rows]
        fl = [r[k]["variability_slowdown"]["placement_floor"] for r in rows]
        ax.vlines([i + off for i in x], fl, ran, color=color, lw=2)
        ax.plot([i + off for i in x], ran, "o", color=color, label=f"{pol}: ran at")
        ax.plot([i + off for i in x], fl, "_", ms=14, mew=2, color=color, label=f"{pol}: placement floor")
    need = [(i, r[3]) for i, r in zip(x, rows, strict=True) if r[3] is not None]
    ax.plot([i for i, _ in need], [v for _, v in need], "x", color="tab:red", ms=9, mew=2,
            label="needed for ilp 10 % below sia")
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    ax.set_xticks(x, [f"nt-{r[0]}" for r in rows])
    ax.set_ylabel("mean slowest factor over job-rounds")
    ax.set_title("Longhorn variability: what the jobs ran at, what placement could reach")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=3)  # below, clear of the points
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def newtrace_numbers(ap: argparse.ArgumentParser, text: str) -> list[int]:
    """``--traces`` (``"1,2,7"``) as newTrace workload numbers, at least one and each from 1 to 7;
    otherwise a one-line usage error (``ap.error``) before any work."""
    try:
        traces = [int(t) for t in text.split(",") if t]
    except ValueError:
        ap.error(f"--traces {text}: comma-separated trace numbers 1-7 expected")
    if not traces or any(not 1 <= t <= 7 for t in traces):
        ap.error(f"--traces {text}: newTrace workloads are numbered 1-7")
    return traces


def add_run_arguments(ap: argparse.ArgumentParser) -> None:
    """``--workers`` and ``--no-run``, and ``--update`` and ``--out-dir`` (this script's and
    ``sia_variants``'s)."""
    ap.add_argument("--workers", type=int, default=2, help="worker processes (at most 2)")
    ap.add_argument("--no-run", action="store_true",
                    help="run nothing: rewrite the tables and the plot from the runs kept in the output directory")
    add_output_arguments(ap)


def shared_data_missing(name: str) -> bool:
    """Whether the shared data of :func:`run_one` is absent, said on stderr as ``<name>: skipped``
    (the benchmark then ends with exit 0)."""
    if DATA.is_dir() and LONGHORN.is_dir():
        return False
    print(f"{name}: skipped: shared data not found at {SHARED}", file=sys.stderr)
    return True


def run_and_keep(run: Callable[..., dict[str, Any]], todo: dict[str, tuple[Any, ...]], runs: dict[str, Any],
                 store: tuple[Path, str, str], workers: int, name: str,
                 line: Callable[[int, str, dict[str, Any]], str]) -> dict[str, str]:
    """``run(*args)`` for each ``{key: args}`` of ``todo`` in at most two worker processes.  Each
    finished run is kept in ``runs`` under its key, stamped with the fingerprint and the commit of
    ``store`` (the runs' file, fingerprint, commit), the file written again at once, and named on
    stderr (``<name>: `` and ``line(n, key, run)``, n counting finished runs); one that failed is
    named there and left out: ``{key: "<error type>: <message>"}`` of those."""
    cache, fp, commit = store
    failed: dict[str, str] = {}
    with ProcessPoolExecutor(max_workers=max(1, min(workers, 2))) as pool:
        futures = {pool.submit(run, *args): key for key, args in todo.items()}
        for n, f in enumerate(as_completed(futures), 1):
            key = futures[f]
            try:
                r = f.result()
            except Exception as exc:  # one failed simulation must not lose the others
                print(f"{name}: {key}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                failed[key] = f"{type(exc).__name__}: {exc}"
                continue
            runs[key] = stamped(r, fp, commit)
            cache.write_text(json.dumps(runs, indent=1) + "\n")
            print(f"{name}: {line(n, key, r)}", file=sys.stderr)
    return failed


def _checked_options(ap: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[int], list[str], list[str]]:
    """The traces, policies and variability settings asked for, each checked (one line, exit 2)."""
    traces = newtrace_numbers(ap, args.traces)
    policies = [p for p in args.policies.split(",") if p]
    variability = [v for v in args.variability.split(",") if v]
    for flag, given, known in (("--policies", policies, POLICIES), ("--variability", variability, VARIABILITY)):
        unknown = [x for x in given if x not in known]
        if unknown or not given:
            ap.error(f"{flag}: {', '.join(unknown) or 'nothing given'}; choose among {', '.join(known)}")
    return traces, policies, variability


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--traces", default="1,2,3,4,5,6,7", help="newTrace workloads to run, comma-separated (default 1-7)")
    ap.add_argument("--policies", default=",".join(POLICIES), help=f"policies (default {','.join(POLICIES)})")
    ap.add_argument("--variability", default=",".join(VARIABILITY),
                    help=f"without and with Longhorn variability (default {','.join(VARIABILITY)})")
    add_run_arguments(ap)
    args = ap.parse_args(argv)
    if shared_data_missing("sia_compare"):
        return 0
    traces, policies, variability = _checked_options(ap, args)
    partial = None if (traces, policies, variability) == (list(range(1, 8)), list(POLICIES), list(VARIABILITY)) \
        else "--traces/--policies/--variability subset"
    out = output_dir(args, "sia_compare", partial=partial)
    cache = out / "sia_compare_runs.json"
    fail_path = out / "sia_compare_failed.json"
    fp, commit = fingerprint(), source_commit()
    runs = kept_runs(cache, None if args.no_run else fp, "sia_compare")
    todo = {f"{t}/{p}/{v}": (t, p, v) for t in traces for v in variability for p in policies
            if f"{t}/{p}/{v}" not in runs and not args.no_run}
    # this invocation's failures (an earlier one's were of other code, or ran again)
    failed = run_and_keep(run_one, todo, runs, (cache, fp, commit), args.workers, "sia_compare",
                          lambda _, key, r: f"{key}: avg JCT {_h(r['avg_jct'])} h ({r['wall_seconds']:.0f} s)")
    if failed:
        fail_path.write_text(json.dumps(failed, indent=1) + "\n")
    elif fail_path.is_file() and todo:  # every run tried this time finished (--no-run tries none)
        fail_path.unlink()
    if not runs:
        print(f"sia_compare: no finished run to write a page from (in {cache})", file=sys.stderr)
        return 1
    meta = {**run_meta(), "command": produced_by(__file__, argv, date=False, commit=False)}
    done = sorted({r["trace"] for r in runs.values()})
    md = write_markdown(runs, done, meta)
    if failed:
        md += "\n\nFailed: " + "; ".join(f"{k}: {v}" for k, v in sorted(failed.items())) + "\n"
    (out / "sia_compare.md").write_text(md + "\n")
    write_csv(runs, out / "sia_compare.csv")
    plot(runs, done, out / "sia_compare.png")
    plot_slowdowns(runs, done, out / "sia_compare_slowdown.png")
    print(f"sia_compare: wrote {out}/sia_compare.{{md,csv,png}}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
