"""``--time-limit T`` bounds the whole ``pal-opt`` process; greedy PAL up to 65,536 GPUs (issue 15).

Rounds: :func:`pal_opt.generate.generate_instance`, 8 GPUs per server, 0.29 queued jobs per GPU,
λ = 1.7, factors drawn from the Longhorn measurements in ``../shared`` (synthetic Longhorn-like
factors when absent), seed 0, at 512, 2,048, 8,192, 32,768 and 65,536 GPUs, written to a
temporary directory as instance files.

1. **Time limit.**  Whole processes ``pal-opt solve INSTANCE --method ilp --backend B
   --time-limit T -o OUT`` for every installed backend and every T in ``--limits`` (default 3, 5
   and 10 s), timed from outside (wall clock from spawn to exit).  Reported: wall − T (target
   ≤ 0.5 s), the status, the stage the time limit stopped (``info["time_limit_reached"]``), the
   bound and gap known, the peak resident memory of the process (GNU ``time``), and that the
   written placement passes :func:`pal_opt.check.check`.
2. **Greedy PAL.**  In process: ``load_instance``, the binning (k-means, once per cluster), the
   policy call alone (``place(instance, factors)`` on binned factors, after one cold call) and
   ``solve(instance, "pal")`` on a freshly loaded round (binning and pricing included).  Whole
   process: ``pal-opt solve INSTANCE --method pal -o OUT``, with its CPU seconds and peak
   memory.  Each a median of ``--repeats`` (5).  Targets at 65,536 GPUs: ≤ 1 s in process, ≤ 3 s
   whole process.  ``--greedy-only`` runs this part alone (at 2,048-65,536 GPUs unless
   ``--sizes``) and writes ``time_limit_greedy.md``/``.json``, leaving part 1's results alone.
   With ``--baseline-commit`` it times the baseline's whole greedy processes as often.
3. **Baseline** (``--baseline-commit C``): the same whole-process greedy runs, and HiGHS with
   ``--time-limit 5`` up to 8,192 GPUs, on the code of commit C (``git archive`` into a temporary
   directory).

Processes run with ``nice -n 10`` when ``--nice`` is given, as the machine may be shared.  The
package's bytecode is compiled first (``compileall``), as an installed package has it.

Usage::

    python benchmarks/time_limit.py [--update | --out-dir DIR] [--sizes 512,2048,...]
        [--limits 3,5,10] [--repeats 5] [--baseline-commit 73b6cc1] [--nice] [--greedy-only]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import add_output_arguments, output_dir  # noqa: E402
from suite import machine, measurements  # noqa: E402

JOBS_PER_GPU = 0.29
MiB = 2**20
#: The issue's targets.
SLACK = 0.5
GREEDY_IN_PROCESS = 1.0
GREEDY_WHOLE = 3.0


def _instances(sizes: list[int], where: Path) -> dict[int, Path]:
    from pal_opt.generate import generate_instance
    from pal_opt.io import save_instance

    out = {}
    for g in sizes:
        nodes = g // 8
        path = where / f"scale-{nodes}x8.json"
        inst = generate_instance(nodes, 8, round(g * JOBS_PER_GPU), seed=0, locality_penalty=1.7,
                                 measurements=measurements(), name=f"scale-{nodes}x8-j{round(g * JOBS_PER_GPU)}-s0")
        save_instance(inst, path)
        out[g] = path
    return out


def _run(cmd: list[str], env: dict[str, str], timeout: float, nice: bool, cwd: Path) -> dict[str, Any]:
    """One process: wall seconds (spawn to exit), exit code, peak RSS (bytes), CPU seconds (user
    + system), stdout, stderr.  It runs in ``cwd`` (not this checkout: ``python -m`` puts the
    working directory first on ``sys.path``, ahead of ``PYTHONPATH``).

    Peak and CPU come from GNU ``time`` (``%M``, ``%U``, ``%S``) when installed: the kernel's
    high-water mark survives ``exec``, so a process forked from this (large) one would report this
    one's memory.
    """
    gnu_time = Path("/usr/bin/time")
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "rss"
        full = ["nice", "-n", "10", *cmd] if nice else cmd
        if gnu_time.exists():
            full = [str(gnu_time), "-f", "%M %U %S", "-o", str(rss_file), *full]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(full, capture_output=True, env=env, timeout=timeout, cwd=cwd)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = -9, exc.stdout or b"", exc.stderr or b""
        wall = time.monotonic() - t0
        try:
            kib, user, system = rss_file.read_text().split()[-3:]
            peak, cpu = int(kib) * 1024, float(user) + float(system)
        except (OSError, ValueError):
            peak, cpu = 0, None
    return {"wall": wall, "code": code, "peak_rss": peak, "cpu": cpu, "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"), "timed_out": code == -9}


def _env(source: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(source)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _cli(source: Path) -> list[str]:
    return [sys.executable, "-m", "pal_opt.cli"]


def ilp_runs(paths: dict[int, Path], backends: list[str], limits: list[float], source: Path, work: Path,
             nice: bool, progress: Any) -> list[dict[str, Any]]:
    from pal_opt.check import check
    from pal_opt.io import load_instance

    rows = []
    for g, path in paths.items():
        inst = None
        for b in backends:
            for t in limits:
                out = work / f"ilp-{g}-{b}-{t:g}.json"
                out.unlink(missing_ok=True)
                r = _run([*_cli(source), "solve", str(path), "--method", "ilp", "--backend", b, "--time-limit",
                          f"{t:g}", "-o", str(out), "--quiet"], _env(source), t + 300, nice, work)
                doc = json.loads(out.read_text()) if out.exists() else None
                if doc is not None:
                    inst = inst or load_instance(path)
                    valid = not check(inst, doc)
                else:
                    valid = False
                info = (doc or {}).get("info", {})
                rows.append({
                    "gpus": g, "backend": b, "limit": t, "wall": r["wall"], "over": r["wall"] - t, "code": r["code"],
                    "cpu": r["cpu"],
                    "peak_rss": r["peak_rss"], "valid": valid, "status": (doc or {}).get("status"),
                    "stage": info.get("time_limit_reached"), "gap": (doc or {}).get("gap"),
                    "bound": (doc or {}).get("bound"), "objective": (doc or {}).get("objective"),
                    "source": info.get("start_source"), "incumbent": info.get("incumbent"),
                    "vars": info.get("num_vars"), "stderr": r["stderr"].strip()[-300:],
                })
                progress(f"{g} {b} T={t:g}: {r['wall']:.2f} s")
    return rows


def _median_time(f: Any, repeats: int, before: Any = None) -> tuple[float, float]:
    """Median wall and median CPU seconds (this process) of ``f()`` over ``repeats`` calls
    (``before()`` runs untimed before each)."""
    wall, cpu = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def greedy_in_process(paths: dict[int, Path], progress: Any, repeats: int = 5) -> list[dict[str, Any]]:
    """Per size: ``load_instance``, the binning, the policy call (cold, then the median of warm
    calls) and ``solve(instance, "pal")`` on a freshly loaded round with no binning cached (binning
    and pricing included), each the median of ``repeats``."""
    rows = []
    for g, path in paths.items():
        rows.append({"gpus": g, **_greedy_in_process_one(path, repeats)})
        progress(f"{g} greedy in process: policy {rows[-1]['policy']:.3f} s, solve {rows[-1]['solve']:.3f} s")
    return rows


def _greedy_in_process_one(path: Path, repeats: int) -> dict[str, Any]:
    from pal_opt import solve
    from pal_opt.binning import binned_factors, forget_binnings
    from pal_opt.io import load_instance
    from pal_opt.policies import get_policy

    fresh: list[Any] = []

    def reload() -> None:
        forget_binnings()
        fresh[:] = [load_instance(path)]

    load_s = _median_time(lambda: load_instance(path), repeats)
    solve_s = _median_time(lambda: fresh.append(solve(fresh[0], "pal")), repeats, reload)
    placed = fresh[-1].jobs_placed
    bin_s = _median_time(lambda: binned_factors(fresh[0].cluster), repeats, reload)
    inst = fresh[0]
    f = binned_factors(inst.cluster)
    place = get_policy("pal")
    t0 = time.perf_counter()
    place(inst, f)
    cold = time.perf_counter() - t0
    policy_s = _median_time(lambda: place(inst, f), repeats)
    return {"jobs": len(inst.jobs), "placed": placed, "load": load_s[0], "solve": solve_s[0], "binning": bin_s[0],
            "policy_cold": cold, "policy": policy_s[0], "load_cpu": load_s[1], "solve_cpu": solve_s[1],
            "binning_cpu": bin_s[1], "policy_cpu": policy_s[1],
            "levels": {c: int(len(set(v.tolist()))) for c, v in f.items()}}


def greedy_whole(paths: dict[int, Path], source: Path, work: Path, nice: bool, repeats: int,
                 progress: Any) -> list[dict[str, Any]]:
    rows = []
    for g, path in paths.items():
        runs = []
        for _ in range(repeats):
            out = work / f"pal-{g}.json"
            runs.append(_run([*_cli(source), "solve", str(path), "--method", "pal", "-o", str(out), "--quiet"],
                             _env(source), 600, nice, work))
        ok = all(r["code"] == 0 for r in runs)
        cpus = [r["cpu"] for r in runs if r["cpu"] is not None]
        rows.append({"gpus": g, "wall": statistics.median(r["wall"] for r in runs),
                     "walls": [r["wall"] for r in runs], "cpu": statistics.median(cpus) if cpus else None,
                     "peak_rss": max(r["peak_rss"] for r in runs), "ok": ok})
        progress(f"{g} greedy whole process: {rows[-1]['wall']:.2f} s")
    return rows


def _baseline_tree(commit: str, where: Path) -> Path:
    tree = where / f"baseline-{commit}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "pal_opt"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    compileall.compile_dir(str(tree / "pal_opt"), quiet=1)
    return tree


# ----------------------------------------------------------------------------- report
def _f(x: Any, spec: str = ".2f") -> str:
    return "–" if x is None else f"{x:{spec}}"


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.2f} %"


def report(rows: list[dict[str, Any]], gin: list[dict[str, Any]], gwhole: list[dict[str, Any]],
           base: dict[str, Any] | None, head: list[str], repeats: int = 5) -> list[str]:
    lines = ilp_report(rows, head) if rows else list(head)
    lines += greedy_report(gin, gwhole, repeats, "## 2. Greedy PAL" if rows else "## Greedy PAL")
    if base is not None:
        lines += [f"## {'3. ' if rows else ''}Baseline: commit {base['commit']}", "",
                  "| GPUs | greedy whole process s | its CPU s | ILP HiGHS `--time-limit 5` wall s | its CPU s | its status |",
                  "|---:|---:|---:|---:|---:|---|"]
        ilp = {r["gpus"]: r for r in base["ilp"]}
        for r in base["greedy"]:
            i = ilp.get(r["gpus"])
            lines.append(f"| {r['gpus']:,} | {r['wall']:.2f} | {_f(r['cpu'])} | {_f(i['wall']) if i else '–'} | "
                         f"{_f(i['cpu']) if i else '–'} | "
                         f"{(i['status'] or ('killed' if i['code'] else '–')) if i else 'not run'} |")
        lines.append("")
    return lines


def ilp_report(rows: list[dict[str, Any]], head: list[str]) -> list[str]:
    lines = [*head, "## 1. `pal-opt solve --method ilp --time-limit T` (whole process)", "",
             f"Target: wall ≤ T + {SLACK:g} s at every size; always a valid placement and the best bound known.", "",
             "| GPUs | backend | T s | wall s | wall − T s | CPU s | status | stopped at | gap | program vars | "
             "answer | valid | peak RSS MiB |",
             "|---:|---|---:|---:|---:|---:|---|---|---:|---:|---|---|---:|"]
    for r in rows:
        answer = r["incumbent"] or (f"start ({r['source']})" if r["source"] else "–")
        lines.append(
            f"| {r['gpus']:,} | {r['backend']} | {r['limit']:g} | {r['wall']:.2f} | {r['over']:+.2f} | {_f(r['cpu'])} | "
            f"{r['status']} | "
            f"{r['stage'] or '–'} | {_pct(r['gap'])} | {r['vars'] or '–'} | {answer} | "
            f"{'yes' if r['valid'] else 'NO'} | {r['peak_rss'] / MiB:.0f} |")
    worst = max(rows, key=lambda r: r["over"]) if rows else None
    met = sum(1 for r in rows if r["over"] <= SLACK)
    lines += ["", f"Within T + {SLACK:g} s: {met} of {len(rows)} runs"
              + (f"; worst {worst['over']:+.2f} s ({worst['gpus']:,} GPUs, {worst['backend']}, T = {worst['limit']:g})."
                 if worst else "."), ""]
    t3 = [r for r in rows if r["gpus"] == 32768 and r["limit"] == 3]
    if t3:
        lines += ["32,768 GPUs, `--time-limit 3` (target ≤ 3.5 s): "
                  + ", ".join(f"{r['backend']} {r['wall']:.2f} s" for r in t3) + ".", ""]
    return lines


def greedy_report(gin: list[dict[str, Any]], gwhole: list[dict[str, Any]], repeats: int, title: str) -> list[str]:
    lines = [title, "",
              f"Targets at 65,536 GPUs: ≤ {GREEDY_IN_PROCESS:g} s in process, ≤ {GREEDY_WHOLE:g} s whole process.", "",
              f"Medians of {repeats}.  *policy*: `place(instance, factors)` on binned factors (after one cold call); "
              "*solve*: `solve(instance, \"pal\")` on a freshly loaded round, binning and pricing included; "
              "*whole process*: `pal-opt solve INSTANCE --method pal -o OUT`, spawn to exit.  Wall seconds, "
              "and in parentheses CPU seconds (the work done, whatever the machine's load).", "",
              "| GPUs | jobs | placed | load s | binning s | policy s | policy cold s | `solve(..., \"pal\")` s | "
              "whole process s | whole-process peak RSS MiB | levels (classA/B/C/D) |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    whole = {r["gpus"]: r for r in gwhole}
    for r in gin:
        w = whole.get(r["gpus"], {})
        lv = "/".join(str(v) for v in r["levels"].values())
        wc = [f"{r[k]:.3f} ({r[k + '_cpu']:.3f})" for k in ("load", "binning", "policy")]
        lines.append(f"| {r['gpus']:,} | {r['jobs']:,} | {r['placed']:,} | {' | '.join(wc)} | {r['policy_cold']:.3f} | "
                     f"{r['solve']:.3f} ({r['solve_cpu']:.3f}) | {_f(w.get('wall'))} ({_f(w.get('cpu'))}) | "
                     f"{_f(w.get('peak_rss', 0) / MiB, '.0f')} | {lv} |")
    lines.append("")
    return lines


def plot(rows: list[dict[str, Any]], gwhole: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    for (b, t), marker in zip(sorted({(r["backend"], r["limit"]) for r in rows}), "os^vD<>ph*", strict=False):
        pts = sorted((r["gpus"], r["wall"]) for r in rows if r["backend"] == b and r["limit"] == t)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=f"{b}, T = {t:g} s")
    for t in sorted({r["limit"] for r in rows}):
        ax.axhline(t + SLACK, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("wall s (whole process)")
    ax.set_title("pal-opt solve --method ilp --time-limit T\n(dotted: T + 0.5 s)")
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    pts = sorted((r["gpus"], r["wall"]) for r in gwhole)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="greedy PAL, whole process")
    ax.axhline(GREEDY_WHOLE, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("wall s")
    ax.set_title("pal-opt solve --method pal (dotted: 3 s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=None, help="GPU counts (default 512,2048,8192,32768,65536; with "
                    "--greedy-only 2048,8192,32768,65536)")
    ap.add_argument("--limits", default="3,5,10")
    ap.add_argument("--backends", default=None, help="comma-separated (default: every installed backend)")
    ap.add_argument("--repeats", type=int, default=5, help="greedy runs per size, in process and whole process")
    ap.add_argument("--greedy-only", action="store_true",
                    help="only part 2, greedy PAL; writes time_limit_greedy.md/.json (the ILP results stay)")
    ap.add_argument("--baseline-commit", default=None)
    ap.add_argument("--nice", action="store_true", help="run the measured processes under nice -n 10")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    out_dir = output_dir(args, "time_limit")
    name = "time_limit_greedy" if args.greedy_only else "time_limit"
    import pal_opt
    from pal_opt.ilp import available_backends

    compileall.compile_dir(str(Path(pal_opt.__path__[0])), quiet=1)
    source = Path(pal_opt.__path__[0]).parent
    sizes = [int(x) for x in (args.sizes or ("2048,8192,32768,65536" if args.greedy_only
                                             else "512,2048,8192,32768,65536")).split(",")]
    limits = [float(x) for x in args.limits.split(",")]
    backends = args.backends.split(",") if args.backends else list(available_backends())

    def progress(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    head = ["# Greedy PAL at scale" if args.greedy_only else "# Time limit and greedy PAL at scale", "",
            "Machine:", "", *machine(), "",
            f"Rounds: generated, 8 GPUs per server, {JOBS_PER_GPU} jobs per GPU, λ = 1.7, seed 0; factors: "
            + ("Longhorn measurements (../shared)." if measurements() else "synthetic Longhorn-like (../shared absent)."),
            "Processes" + (" ran under `nice -n 10`" if args.nice else " ran at the benchmark's priority")
            + "; the machine was shared with other work (load averages at the start above and at the end below), "
            "so wall times include waiting for a core: *CPU s* (user + system, GNU `time`) is the work done.", ""]
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pal_opt_time_limit_") as tmp:
        work = Path(tmp)
        paths = _instances(sizes, work)
        progress("instances written")
        gin = greedy_in_process(paths, progress, args.repeats)
        gwhole = greedy_whole(paths, source, work, args.nice, args.repeats, progress)
        rows = [] if args.greedy_only else ilp_runs(paths, backends, limits, source, work, args.nice, progress)
        base = None
        if args.baseline_commit:
            tree = _baseline_tree(args.baseline_commit, work)
            bg = greedy_whole(paths, tree, work, args.nice, args.repeats if args.greedy_only else 1, progress)
            bi = [] if args.greedy_only else ilp_runs({g: p for g, p in paths.items() if g <= 8192}, ["highs"], [5.0],
                                                      tree, work, args.nice, progress)
            base = {"commit": args.baseline_commit, "greedy": bg, "ilp": bi}
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = report(rows, gin, gwhole, base, head, args.repeats)
    lines += [f"Run time {time.monotonic() - t_start:.0f} s; load average at the end: {load}.", "",
              "Command: `python benchmarks/time_limit.py " + " ".join(argv if argv is not None else sys.argv[1:]) + "`", ""]
    (out_dir / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    (out_dir / f"{name}.json").write_text(json.dumps({"ilp": rows, "greedy_in_process": gin,
                                                          "greedy_whole": gwhole, "baseline": base}, indent=1),
                                             encoding="utf-8")
    if rows:
        plot(rows, gwhole, out_dir / "time_limit.png")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
