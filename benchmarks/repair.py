"""Failure repair at 2,048 GPUs: ``pal-opt repair`` as a whole process, per backend.

Runs for about 3.5 min on the machine of the committed page with its command (``--repeats 5
--time-limit 3 --optimum-limit 30``; the page does not say: estimated from its per-command medians,
6 runs each, and its three optimum runs, 42 s); at the defaults (``--time-limit 10 --optimum-limit
600``) up to about 17 min, the migration runs that end at the limit and a seed not proven in 600 s.

For each seed: ``generate_instance(256, 8, 600, seed)`` (256 servers × 8 GPUs, a queue of 600
Sia-Philly jobs), placed first by ``solve(..., "ilp", backend="highs", gap=0.005)`` (the
placement in force; prefix admission places about 300 of the 600 queued jobs, which fill the
cluster), then 8 GPUs fail, 4 on each of two servers drawn from the seed.  Timed, each in a new
interpreter (wall and the child's CPU time, median and minimum of ``--repeats`` runs, after one
untimed run that writes Python's bytecode cache, as an installed package has it):

* ``pal-opt repair ROUND PLACEMENT --failed ... --backend B --quiet -o OUT`` (unaffected jobs
  kept; the target: ≤ 1 s, proven optimal among the placements that keep them);
* the same with ``--allow-migration COST --time-limit T`` (unaffected jobs may move);
* once per seed, ``--allow-migration COST`` on HiGHS with a long limit (``--optimum-limit``,
  default 600 s): the time to the proven optimum of the whole round program.

Every output is read back and verified: the checker passes (``pal_opt.check``), no failed GPU is
used, by default every unaffected job is where it was, and with migration the cost is not above
the default answer's (priced on the same round).  Floors: ``python -c pass`` and an interpreter
importing what a repair cannot do without (numpy, scipy.sparse.csgraph, highspy).

Usage::

    nice -n 10 python benchmarks/repair.py [--seeds 0 1 2] [--repeats 5] [--update]

Writes ``repair.md`` to ``benchmarks/results/`` with ``--update``, else to the scratch directory
(:mod:`benchmarks._results`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this tree's pal_opt, as the timed subprocesses use
sys.path.insert(0, str(ROOT / "benchmarks"))

from _procs import source_env, timed_runs  # noqa: E402
from _results import (  # noqa: E402
    add_output_arguments,
    at_least,
    check_backends,
    check_values,
    memory_gib,
    output_dir,
    partial_run,
    positive_seconds,
    produced_by,
    run_time,
)

from pal_opt.binning import binned_factors  # noqa: E402
from pal_opt.check import check  # noqa: E402
from pal_opt.cost import evaluate  # noqa: E402
from pal_opt.generate import generate_instance  # noqa: E402
from pal_opt.ilp import available_backends, get_backend  # noqa: E402
from pal_opt.inforce import in_force_placement, repair_round  # noqa: E402
from pal_opt.io import save_instance  # noqa: E402
from pal_opt.model import RoundInstance  # noqa: E402
from pal_opt.solve import solve  # noqa: E402

NODES, PER_NODE, QUEUE = 256, 8, 600


def timed(argv: list[str], repeats: int, *, warm: bool = True) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeats`` runs of ``python ARGV`` (one untimed run first)."""
    cmd = [sys.executable, *argv]
    if warm:
        subprocess.run(cmd, cwd=ROOT, env=source_env(), capture_output=True, check=True)

    def run_child() -> None:
        done = subprocess.run(cmd, cwd=ROOT, env=source_env(), capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")

    return timed_runs(run_child, repeats)


def failed_gpus(inst: RoundInstance, seed: int) -> list[int]:
    """4 GPUs on each of two servers, drawn from the seed."""
    rng = np.random.default_rng(1000 + seed)
    cl = inst.cluster
    out: list[int] = []
    for s in rng.choice(cl.num_servers, size=2, replace=False).tolist():
        out += rng.choice(cl.gpu_ids[cl.server_of == s], size=4, replace=False).tolist()
    return sorted(int(g) for g in out)


def prepare(seed: int, work: Path) -> dict[str, Any]:
    """The round, the placement in force and the failed GPUs of one seed, written to ``work``."""
    inst = generate_instance(NODES, PER_NODE, QUEUE, seed=seed)
    placed = solve(inst, "ilp", backend="highs", gap=0.005)
    rp, pp = work / f"round-s{seed}.json", work / f"placement-s{seed}.json"
    save_instance(inst, rp)
    pp.write_text(placed.to_json() + "\n")
    failed = failed_gpus(inst, seed)
    rr = repair_round(inst, in_force_placement(inst, placed), failed)
    return {"seed": seed, "inst": inst, "placed": placed, "round": rp, "placement": pp, "failed": failed,
            "displaced": len(rr.displaced), "displaced_gpus": sum(rr.instance.jobs[i].demand for i in rr.displaced),
            "free": inst.cluster.num_gpus - placed.gpus_used}


def verify(case: dict[str, Any], out: Path, migration: float | None, keep_doc: dict[str, Any] | None) -> dict[str, Any]:
    """Read a repair's output back and check every promise; its figures."""
    inst, placed, failed = case["inst"], case["placed"], case["failed"]
    doc = json.loads(out.read_text())
    problems = check(inst, doc)
    used = {g for gs in doc["placements"].values() for g in gs}
    bad = set(failed)
    unaffected = {str(j): list(g) for j, g in placed.placements.items() if not bad & set(g)}
    kept = sum(doc["placements"].get(j) == g for j, g in unaffected.items())
    row = {"status": doc["status"], "gap": doc["gap"], "objective": doc["objective"], "check": not problems,
           "failed_used": bool(used & bad), "kept": kept, "unaffected": len(unaffected),
           "replaced": len(doc["info"]["repair"]["replaced"]), "left_out": len(doc["unplaceable"]),
           "migrated": len(doc["info"]["repair"]["migrated"]), "solve_s": doc["solve_seconds"],
           "build_s": doc["build_seconds"]}
    if migration is not None and keep_doc is not None:
        rr = repair_round(inst, in_force_placement(inst, placed), failed, migration_per_gpu=migration)
        factors = binned_factors(rr.instance.cluster, rr.instance.params.binning)
        keep = in_force_placement(rr.instance, keep_doc)  # the file's job ids as the round's
        keep_cost = evaluate(rr.instance, keep, factors).cost
        row["keep_cost"] = keep_cost
        row["not_above"] = doc["objective"] <= keep_cost + 1e-9
    return row


def repair_argv(case: dict[str, Any], backend: str, out: Path, extra: list[str]) -> list[str]:
    return ["-m", "pal_opt.cli", "repair", str(case["round"]), str(case["placement"]), "--failed",
            ",".join(map(str, case["failed"])), "--backend", backend, "--quiet", "-o", str(out), *extra]


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"load_start": os.getloadavg(), "rows": [], "unlimited": [], "cases": []}
    report["floors"] = {
        "`python -c pass`": timed(["-c", "pass"], args.repeats, warm=False),
        "`python -c 'import numpy, scipy.sparse.csgraph, highspy'`":
            timed(["-c", "import numpy, scipy.sparse.csgraph, highspy"], args.repeats, warm=False),
    }
    for seed in args.seeds:
        case = prepare(seed, work)
        report["cases"].append({k: case[k] for k in ("seed", "failed", "displaced", "displaced_gpus", "free")}
                               | {"placed": len(case["placed"].placements), "placed_gpus": case["placed"].gpus_used})
        for backend in args.backends:
            out = work / f"keep-s{seed}-{backend}.json"
            t = timed(repair_argv(case, backend, out, []), args.repeats)
            keep_doc = json.loads(out.read_text())
            report["rows"].append({"seed": seed, "backend": backend, "mode": "keep", "times": t,
                                   **verify(case, out, None, None)})
            print(f"seed {seed} {backend} keep: {statistics.median(t[0]):.3f} s", file=sys.stderr)
            mout = work / f"mig-s{seed}-{backend}.json"
            extra = ["--allow-migration", str(args.cost), "--time-limit", str(args.time_limit)]
            t = timed(repair_argv(case, backend, mout, extra), args.repeats)
            report["rows"].append({"seed": seed, "backend": backend, "mode": "migrate", "times": t,
                                   **verify(case, mout, args.cost, keep_doc)})
            print(f"seed {seed} {backend} migrate: {statistics.median(t[0]):.3f} s", file=sys.stderr)
            if backend == "highs":
                uout = work / f"mig-unlimited-s{seed}.json"
                extra = ["--allow-migration", str(args.cost), "--time-limit", str(args.optimum_limit)]
                t = timed(repair_argv(case, backend, uout, extra), 1, warm=False)
                report["unlimited"].append({"seed": seed, "backend": backend, "times": t,
                                            **verify(case, uout, args.cost, keep_doc)})
    report["load_end"] = os.getloadavg()
    return report


def machine() -> list[str]:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        keep = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket")
        cpu = [ln.strip() for ln in lscpu.splitlines() if ln.startswith(keep)]
    except (OSError, subprocess.SubprocessError):
        cpu = [platform.processor() or "?"]
    mem = memory_gib()
    versions = ", ".join(f"{b} {get_backend(b).version()}" for b in available_backends())
    return [*(f"- {c}" for c in cpu), f"- Memory {mem}",
            f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
            f"- numpy {np.__version__}; solvers: {versions}"]


def _cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f})"


def _gap(g: float | None) -> str:
    return "–" if g is None else f"{100 * g:.4f} %"


def _checked(w: dict[str, Any]) -> str:
    """A run's *check* cell: ``pass`` when ``pal_opt.check`` passed the written file and it uses no failed GPU."""
    return "pass" if w["check"] and not w["failed_used"] else "FAIL"


def _run_cells(w: dict[str, Any]) -> str:
    """The first cells of a timed run's row, the same in both modes' tables: seed, backend, wall
    and CPU seconds (median (min)), status, gap."""
    return (f"| {w['seed']} | {w['backend']} | {_cell(w['times'][0])} | {_cell(w['times'][1])} | "
            f"{w['status']} | {_gap(w['gap'])} |")


def _migration_cells(w: dict[str, Any]) -> str:
    """The last cells of a run allowed to migrate, the same in its table and the unlimited HiGHS one:
    GPUs migrated, objective, the keep answer's cost, whether it is not above it, the check."""
    return (f"{w['migrated']} | {w['objective']:.4f} | {w['keep_cost']:.4f} | "
            f"{'yes' if w['not_above'] else 'NO'} | {_checked(w)} |")


def _load(x: tuple[float, ...]) -> str:
    return " / ".join(f"{v:.2f}" for v in x)


def to_markdown(r: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    n = args.repeats
    lines = [
        "# Failure repair at 2,048 GPUs",
        "",
        f"{command} (seeds {', '.join(map(str, args.seeds))}; "
        f"{n} runs each).  `generate_instance(256, 8, 600, seed)`: 256 servers × 8 GPUs, 600 queued Sia-Philly "
        "jobs; the placement in force is `solve(..., \"ilp\", backend=\"highs\", gap=0.005)` (prefix admission: "
        "it places the longest queue prefix that fits, about 300 jobs on nearly every GPU); then 8 GPUs fail, 4 "
        "on each of two servers drawn from the seed.",
        "",
        "Each command runs in a new interpreter after one untimed run that writes Python's bytecode cache (as an "
        f"installed package has it).  Wall and CPU (user + system) seconds of the whole process, median of {n} "
        "(minimum in brackets).  The load averages below tell how busy the 2 cores were: on a busy machine "
        "the wall time includes waiting for a core; on an idle one the CPU time can exceed it (numpy and the "
        "solvers start threads).",
        "",
        f"Load average (1/5/15 min) at the start: {_load(r['load_start'])}; at the end: {_load(r['load_end'])}.",
        "",
        "## The rounds",
        "",
        "| seed | jobs placed | GPUs used | GPUs free | failed GPUs | displaced jobs (their GPUs) |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for c in r["cases"]:
        lines.append(f"| {c['seed']} | {c['placed']} | {c['placed_gpus']:,} | {c['free']} | "
                     f"{', '.join(map(str, c['failed']))} | {c['displaced']} ({c['displaced_gpus']}) |")
    lines += [
        "",
        "## `pal-opt repair` (unaffected jobs kept)",
        "",
        "Target: ≤ 1 s for the whole process, proven optimal among the placements that keep the unaffected jobs.",
        "*kept*: unaffected jobs on exactly their GPUs (of all unaffected); *re-placed / left out*: displaced "
        "jobs (left out: no room, with the reason in `unplaceable`); *check*: `pal_opt.check` on the written "
        "file, no failed GPU used.",
        "",
        "| seed | backend | wall s | CPU s | status | gap | kept | re-placed / left out | solve s | check |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for w in (x for x in r["rows"] if x["mode"] == "keep"):
        lines.append(f"{_run_cells(w)} {w['kept']} / {w['unaffected']} | {w['replaced']} / {w['left_out']} | "
                     f"{w['solve_s']:.3f} | {_checked(w)} |")
    lines += ["", "Per backend (all seeds):", "", "| backend | median wall s | median CPU s | worst CPU s | optimal |",
              "|---|---:|---:|---:|---:|"]
    for b in args.backends:
        rows = [x for x in r["rows"] if x["mode"] == "keep" and x["backend"] == b]
        walls = [t for x in rows for t in x["times"][0]]
        cpus = [t for x in rows for t in x["times"][1]]
        opt = sum(x["status"] == "optimal" for x in rows)
        lines.append(f"| {b} | {statistics.median(walls):.3f} | {statistics.median(cpus):.3f} | {max(cpus):.3f} | "
                     f"{opt}/{len(rows)} |")
    lines += [
        "",
        f"## `pal-opt repair --allow-migration {args.cost:g} --time-limit {args.time_limit:g}`",
        "",
        f"Unaffected jobs may move at {args.cost:g} per GPU moved.  The whole round program is solved from the "
        "answer that keeps them, so the cost is never above it (*keep cost*: the default answer priced on the "
        "same round, migration price included; *≤ keep*: verified).  *gap* is against the whole round "
        "program's bound at the time limit.",
        "",
        "| seed | backend | wall s | CPU s | status | gap | migrated | objective | keep cost | ≤ keep | check |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for w in (x for x in r["rows"] if x["mode"] == "migrate"):
        lines.append(f"{_run_cells(w)} {_migration_cells(w)}")
    lines += ["", f"HiGHS with a {args.optimum_limit:g} s limit (one run per seed): the time to the proven optimum "
              "of the whole round program.", "",
              "| seed | wall s | CPU s | status | gap | migrated | objective | keep cost | ≤ keep | check |",
              "|---:|---:|---:|---|---:|---:|---:|---:|---|---|"]
    for w in r["unlimited"]:
        lines.append(f"| {w['seed']} | {w['times'][0][0]:.2f} | {w['times'][1][0]:.2f} | {w['status']} | "
                     f"{_gap(w['gap'])} | {_migration_cells(w)}")
    lines += ["", "## Floors", "", "| command | wall s | CPU s |", "|---|---:|---:|"]
    for name, (wall, cpu) in r["floors"].items():
        lines.append(f"| {name} | {_cell(wall)} | {_cell(cpu)} |")
    lines += ["", "## Machine", "", *machine(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="round seeds (default 0 1 2)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per command; median and minimum (default 5)")
    ap.add_argument("--backends", nargs="+", default=None, help="backends to time (default: every installed backend)")
    ap.add_argument("--cost", type=float, default=0.05, help="--allow-migration price (default 0.05)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="migration runs' --time-limit (default 10)")
    ap.add_argument("--optimum-limit", type=float, default=600.0,
                    help="--time-limit of the one HiGHS migration run per seed that seeks the optimum (default 600)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    check_values(ap, "--seeds", args.seeds, lambda s: s >= 0, "seeds are integers >= 0")
    at_least(ap, args, 1, "repeats")
    if args.backends is not None:
        check_backends(ap, "--backends", args.backends)
    if not (np.isfinite(args.cost) and args.cost >= 0):
        ap.error(f"--cost {args.cost:g}: a price >= 0 expected")
    positive_seconds(ap, args, "time_limit", "optimum_limit")
    # subsets of the committed page's rounds and backends
    partial = partial_run(ap, args, "seeds", also={
        "--backends": args.backends is not None and set(args.backends) != set(available_backends())})
    args.backends = args.backends or available_backends()
    out = output_dir(args, "repair", partial=partial)
    with tempfile.TemporaryDirectory(prefix="pal_opt_repair_bench_") as tmp:
        report = run(args, Path(tmp))
    path = out / "repair.md"
    path.write_text(to_markdown(report, args, produced_by(__file__, argv)), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
