"""Two methods, one optimum: ``pal-opt partition --method ip`` against the dynamic program on every
PipeDream reference case.

Runs for about 4 min on the machine of the committed page (the page does not say: the sum of its
per-case ``ip`` and ``dp`` process times is 220 s); ``--cases`` runs fewer.

For each case of ``../shared/reference/pipedream/*.json`` (28: alexnet, vgg16, gnmt, resnet50 on 8
and 16 workers flat and straight, 4x4, 8x4, 2x16), the whole ``pal-opt partition --method ip``
process (HiGHS, the threshold programs of :mod:`pal_opt.pipeline.ip`) runs once under a wall-time
limit (``--timeout``, default 120 s); its ``time_per_sample`` is compared with the dynamic
program's (``--method dp``, the default method, run the same way) and with the authors'
optimiser's.  A case that does not finish in time is reported as such, with the number of
integer programs its levels need (one threshold search per real segment at every inner level).

Outputs: ``pipedream_ip.md`` and ``pipedream_ip.csv``; they replace the committed ones in
``benchmarks/results/`` only with ``--update`` (see ``benchmarks/_results.py``).

Usage::

    nice -n 10 python benchmarks/pipedream_ip.py [--timeout 120] [--cases vgg16-8,gnmt-16] [--update]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import add_output_arguments, check_values, output_dir, produced_by, run_time, split_list, wrote  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["case", "segments", "ip_seconds", "ip_status", "ip_time_per_sample", "dp_seconds", "dp_time_per_sample",
           "authors_time_per_sample", "agree_dp", "match_authors"]


def run_case(case: dict[str, Any], shared: Path, method: str, timeout: float) -> tuple[float, str, float]:
    """``(wall seconds, status, time per sample)`` of one whole ``pal-opt partition`` process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, "-m", "pal_opt.cli", "partition",
               str(shared / "data" / "pipedream-profiles" / case["profile"]),
               "--machines", ",".join(map(str, case["machines_per_level"])),
               "--bandwidth", ",".join(repr(b) for b in case["bandwidths"]), "--method", method, "--out", str(out)]
        cmd += ["--straight"] if case["straight_pipeline"] else []
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - t0, f"not finished in {timeout:g} s", math.nan
        wall = time.perf_counter() - t0
        if proc.returncode:
            return wall, f"exit {proc.returncode}: {proc.stderr.strip()[-120:]}", math.nan
        return wall, "solved", float(json.loads(out.read_text())["time_per_sample"])


def segments(case: dict[str, Any], shared: Path) -> int:
    """Threshold searches the integer-program method runs: one per real segment at each inner
    level, one at the outermost."""
    from pal_opt.pipeline.ip import real_segments
    from pal_opt.pipeline.profile import load_profile
    from pal_opt.pipeline.states import build_states

    states = build_states(load_profile(shared / "data" / "pipedream-profiles" / case["profile"]))
    return (len(case["machines_per_level"]) - 1) * len(real_segments(states)) + 1


def main(argv: list[str] | None = None) -> int:
    # the first paragraph, one line (argparse reflows it)
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                 epilog=run_time(__doc__))
    ap.add_argument("--timeout", type=float, default=120.0, help="wall seconds per ip process (default 120)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared",
                    help="the shared data directory (default ../shared)")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        ap.error(f"--timeout {args.timeout:g}: seconds > 0 expected")
    chosen = split_list(ap, "--cases", args.cases, str, "comma-separated case names") if args.cases else []
    ref = args.shared / "reference" / "pipedream"
    if not ref.is_dir():
        print(f"pipedream_ip: reference cases not found at {ref}", file=sys.stderr)
        return 2
    known = sorted(p.stem for p in ref.glob("*.json"))
    check_values(ap, "--cases", chosen, lambda n: n in known, f"no such case; choose among {', '.join(known)}")
    names = chosen or known
    out = output_dir(args, "pipedream_ip", partial="--cases" if args.cases else None)
    rows = []
    for name in names:
        case = json.loads((ref / f"{name}.json").read_text())
        expected = float(case["expected"]["time_per_sample"])
        ip_wall, status, ip_value = run_case(case, args.shared, "ip", args.timeout)
        dp_wall, _, dp_value = run_case(case, args.shared, "dp", args.timeout)
        rows.append({"case": name, "segments": segments(case, args.shared), "ip_seconds": round(ip_wall, 2),
                     "ip_status": status, "ip_time_per_sample": ip_value, "dp_seconds": round(dp_wall, 2),
                     "dp_time_per_sample": dp_value, "authors_time_per_sample": expected,
                     "agree_dp": math.isclose(ip_value, dp_value, rel_tol=1e-6),
                     "match_authors": math.isclose(ip_value, expected, rel_tol=1e-6)})
        print(f"{name}: ip {status} {ip_wall:.1f} s, {ip_value!r} (dp {dp_value!r})", file=sys.stderr)
    with open(out / "pipedream_ip.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    (out / "pipedream_ip.md").write_text(report(rows, args.timeout, produced_by(__file__, argv)), encoding="utf-8")
    wrote("pipedream_ip", out / "pipedream_ip.md", out / "pipedream_ip.csv")
    return 0


def report(rows: list[dict[str, Any]], timeout: float, command: str) -> str:
    solved = [r for r in rows if r["ip_status"] == "solved"]
    lines = ["# Two methods, one optimum: the partition integer program against the dynamic program", "",
             f"{command}.", "",
             "`benchmarks/pipedream_ip.py`: every PipeDream reference case through the whole `pal-opt partition "
             f"--method ip` process (HiGHS, threshold programs), once, limited to {timeout:g} s wall; the dynamic "
             "program (`--method dp`) the same way.  `segments`: the real segments of the case's inner levels plus "
             "the outermost one, the searches an eager method would run; the lazy method solves an inner segment "
             "only when the outer pipeline uses it.", "",
             f"- Solved in time: {len(solved)} of {len(rows)} cases; the integer program's time per sample equals "
             f"the dynamic program's (1e-6 relative) on {sum(r['agree_dp'] for r in solved)} of them and the "
             f"authors' on {sum(r['match_authors'] for r in solved)}.",
             "- Not finished in time: " + (", ".join(f"{r['case']} ({r['segments']} segments)" for r in rows
                                                       if r['ip_status'] != 'solved') or "none") + ".", "",
             "| case | segments | ip (s) | ip status | ip time per sample | dp (s) | agrees with dp | matches authors |",
             "|---|---:|---:|---|---:|---:|:-:|:-:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['segments']} | {r['ip_seconds']:.2f} | {r['ip_status']} | "
                     f"{r['ip_time_per_sample']:.9g} | {r['dp_seconds']:.2f} | {'yes' if r['agree_dp'] else 'no'} | "
                     f"{'yes' if r['match_authors'] else 'no'} |")
    lines += ["", f"Machine: {platform.processor() or platform.machine()}, 2 cores shared with other work, Python "
              f"{platform.python_version()}; run under nice -n 10.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
