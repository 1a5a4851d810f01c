"""A 16,384-GPU round end to end: generate, save, load (parse + validate), bin, place, check.

Runs for about 10 s on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.2-3.5: 10.2 s); ``--repeats`` fewer.

Round: :func:`pal_opt.generate.generate_instance` with 2,048 servers × 8 GPUs and 4,800 queued
jobs (Sia-Philly job mix, Longhorn-like synthetic factors), seed 1; a second round adds 10 %
busy and 1 % failed GPUs, 30 % running jobs and 16 racks.  Each stage is timed ``--repeats``
times (medians reported, with the minimum); stages that cache their result on the cluster
(binning, the policies' indexes) get a fresh cluster for every repeat, so each repeat is a cold
run.

Stages
------
save
    :func:`pal_opt.io.save_instance` (JSON text, atomic write).
parse
    :func:`pal_opt.io.load_json` (read with guards + ``json.loads`` with number and depth checks).
validate
    :func:`pal_opt.io.instance_from_dict` (every field checked, cluster and jobs built).
load
    :func:`pal_opt.io.load_instance` = parse + validate.
binning
    :func:`pal_opt.binning.binned_factors` in the round's mode (``pal-artifact``: PAL's k-means,
    :mod:`pal_opt.kmeans`, per class).
pal / pmfirst / packed / packed-sticky / random
    the policy call alone (binned factors given), as ``pal_opt.solve.solve`` runs it.
check
    :func:`pal_opt.check.check` of PAL's placement.

Usage::

    python benchmarks/large_instance.py [--repeats 5] [--update | --out-dir DIR]

Writes ``large_instance.md``; it replaces the committed one in ``benchmarks/results/`` only with
``--update`` (see ``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import add_output_arguments, at_least, output_dir, produced_by, run_time, wrote

POLICIES = ("pal", "pmfirst", "packed", "packed-sticky", "random")


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _machine() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        keep = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket", "L3 cache", "CPU max MHz")
        cpu = "\n".join(ln for ln in lscpu.splitlines() if ln.startswith(keep))
    except (OSError, subprocess.SubprocessError):
        cpu = platform.processor()
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            mem = fh.readline().strip()
    except OSError:
        pass
    import numpy

    return (
        f"{cpu}\n{mem}\n{platform.platform()}\nPython {platform.python_version()}, numpy {numpy.__version__}, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )


def _cli_seconds(path: Path, repeats: int) -> list[float]:
    """Wall time of ``pal-opt solve PATH --method pal --out ...`` in a new process."""
    out = path.with_name("placement.json")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pal_opt.cli", "solve", str(path), "--method", "pal", "--out", str(out)],
                       capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    out.unlink()
    return times


def _time_round(inst: Any, path: Path, repeats: int) -> tuple[dict[str, list[float]], dict[str, int], list[str]]:
    """Time every stage ``repeats`` times on ``inst`` (saved to ``path``)."""
    from pal_opt.binning import binned_factors, forget_binnings
    from pal_opt.check import check
    from pal_opt.io import instance_from_dict, load_instance, load_json, save_instance
    from pal_opt.policies import get_policy
    from pal_opt.result import Status, priced_result

    times: dict[str, list[float]] = {}
    placed: dict[str, int] = {}
    violations: list[str] = []
    for _ in range(repeats):
        times.setdefault("save", []).append(_timed(lambda: save_instance(inst, path))[0])
        t, doc = _timed(lambda: load_json(path, what="instance file"))
        times.setdefault("parse", []).append(t)
        t, _ = _timed(lambda: instance_from_dict(doc, str(path)))  # noqa: B023 - called at once
        times.setdefault("validate", []).append(t)
        t, fresh = _timed(lambda: load_instance(path))
        times.setdefault("load", []).append(t)
        forget_binnings()  # a cold binning every repeat, as a new process has
        t, factors = _timed(lambda: binned_factors(fresh.cluster, fresh.params.binning))  # noqa: B023
        times.setdefault("binning", []).append(t)
        for m in POLICIES:
            pol = get_policy(m)
            t, out = _timed(lambda: pol(fresh, factors, seed=0))  # noqa: B023
            times.setdefault(m, []).append(t)
            placed[m] = len(out.placements)
            if m == "pal":
                res = priced_result(fresh, out.placements, factors, method="pal", status=Status.FEASIBLE,
                                    admission=out.admission, solve_seconds=t,
                                    jobs_to_terminate_=out.jobs_to_terminate)
                t, violations = _timed(lambda: check(fresh, res))  # noqa: B023
                times.setdefault("check", []).append(t)
    return times, placed, violations


def run(repeats: int) -> dict[str, Any]:
    from pal_opt.generate import generate_instance

    rounds = {
        "flat, all free": dict(racks=0),
        "16 racks, 10% busy, 1% failed, 30% running": dict(
            racks=16, busy_fraction=0.10, failed_fraction=0.01, running_fraction=0.30),
    }
    report: dict[str, Any] = {"rounds": {}}
    tmp = Path(tempfile.mkdtemp(prefix="pal_opt_large_"))
    for label, kw in rounds.items():
        t0 = time.perf_counter()
        inst = generate_instance(2048, 8, 4800, seed=1, **kw)
        t_gen = time.perf_counter() - t0
        path = tmp / "large.json"
        times, placed, violations = _time_round(inst, path, repeats)
        times["cli"] = _cli_seconds(path, max(1, min(repeats, 3)))
        cl = inst.cluster
        report["rounds"][label] = {
            "gpus": cl.num_gpus,
            "servers": cl.num_servers,
            "racks": len(cl.rack_ids),
            "free": inst.free_gpus,
            "jobs": len(inst.jobs),
            "running": sum(j.placement is not None for j in inst.jobs),
            "bytes": path.stat().st_size,
            "generate": t_gen,
            "times": times,
            "placed": placed,
            "violations": violations,
        }
        path.unlink()
    tmp.rmdir()
    report["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def to_markdown(report: dict[str, Any], repeats: int, machine: str, command: str) -> str:
    lines = [
        "# A 16,384-GPU round end to end",
        "",
        f"{command}.",
        "",
        "2,048 servers × 8 GPUs, 4,800 queued jobs "
        "(`generate_instance(2048, 8, 4800, seed=1)`, Sia-Philly job mix, Longhorn-like synthetic factors).  "
        f"Each stage run {repeats} times on a fresh cluster (nothing cached between repeats); median and minimum "
        "in seconds.  Binning is PAL's k-means (`pal-artifact` mode, `pal_opt.kmeans`, one 1-D fit per class "
        "plus the outlier test).",
        "",
        f"Peak RSS of the benchmark process: {report['max_rss_mb']:.0f} MB.",
        "",
    ]
    order = ["save", "parse", "validate", "load", "binning", *POLICIES, "check", "cli"]
    for label, r in report["rounds"].items():
        lines += [
            f"## Round: {label}",
            "",
            f"{r['gpus']:,} GPUs on {r['servers']:,} servers"
            + (f" in {r['racks']} racks" if r["racks"] else "")
            + f", {r['free']:,} free; {r['jobs']:,} jobs ({r['running']:,} running).  "
            f"File {r['bytes'] / 1e6:.1f} MB.  Generating the round took {r['generate']:.2f} s.  "
            f"PAL placed {r['placed']['pal']:,} jobs; the checker found {len(r['violations'])} violations.",
            "",
            "| stage | median (s) | min (s) |",
            "|---|---:|---:|",
        ]
        for st in order:
            ts = r["times"][st]
            name = st if st not in POLICIES else f"place: {st} ({r['placed'][st]:,} jobs)"
            if st == "cli":
                name = "`pal-opt solve FILE --method pal --out X` (new process, wall)"
            lines.append(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f} |")
        t = {k: statistics.median(v) for k, v in r["times"].items()}
        total = t["load"] + t["binning"] + t["pal"]
        lines += [
            "",
            f"Load + binning + PAL: {total:.2f} s, of which binning is {100 * t['binning'] / total:.0f} %.",
            "",
        ]
    lines += [
        "## Notes",
        "",
        "- `load` = `parse` + `validate` (the instance format is columnar, so a 16k-GPU file is a few MB).",
        "- Binning (PAL's k-means per class) is computed once per cluster "
        "and cached on the `Cluster` object, so a scheduler that keeps its `Cluster` (or uses "
        "`pal_opt.RoundPolicy`) pays it once, not every round; a CLI call pays it every time; "
        "the `cli` row is that whole cost (interpreter start, imports, load, binning, "
        "PAL, summary, atomic write).",
        "- Policy times exclude binning (the factors are passed in), as in `benchmarks/greedy_speed.py`.",
        "",
        "## Machine",
        "",
        "```",
        machine,
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--repeats", type=int, default=5, help="timed runs of each stage; median and minimum (default 5)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "repeats")
    out = output_dir(args, "large_instance") / "large_instance.md"
    machine = _machine()
    report = run(args.repeats)
    text = to_markdown(report, args.repeats, machine, produced_by(__file__, argv))
    out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    wrote("large_instance", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
