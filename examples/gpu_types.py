"""Sia against pal-opt's ``ilp`` on a cluster of three GPU types with per-GPU variability.

Replays a newTrace workload on the Sia paper's cluster (``aws:6x4,rtx:3x8,dgx-ext:2x8``) under
both policies, every GPU drawing PAL's Longhorn factors, and prints the average JCT, the mean
slowdown the jobs ran at and its placement floor (the best their per-node GPU counts allowed).
By default the workload is ``examples/data/newtrace-mini.csv``; pass a newTrace CSV to replay
another.  The application profiles and the Longhorn measurements are not shipped: they are read
from ``../shared`` (``PAL_OPT_SHARED`` overrides), and without them the script says so and stops.

    python examples/gpu_types.py [WORKLOAD.csv]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pal_opt.errors import PalOptError
from pal_opt.hetero import (
    Layout,
    SimConfig,
    build_cluster,
    draw_variability,
    load_applications,
    parse_cluster,
    read_workload,
    simulate_sia,
)
from pal_opt.io.measurements import PAL_CLASS_FILES
from pal_opt.streams import PipeSafe

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("PAL_OPT_SHARED", HERE.parents[1] / "shared"))
PROFILES = SHARED / "data" / "sia-artifact" / "profiles"
LONGHORN = SHARED / "data" / "pal-artifact" / "variability" / "longhorn"
CLUSTER = "aws:6x4,rtx:3x8,dgx-ext:2x8"


def main(workload_csv: Path = HERE / "data" / "newtrace-mini.csv") -> dict[str, dict] | None:
    if not PROFILES.is_dir() or not LONGHORN.is_dir():
        print(f"gpu_types: skipped: needs the Sia artifact's profiles and PAL's Longhorn measurements under {SHARED}")
        return None
    workload = read_workload(workload_csv)
    apps = load_applications(PROFILES, workload.applications())
    cluster = build_cluster(parse_cluster(CLUSTER), apps)
    files = {(t.name, c): str(LONGHORN / PAL_CLASS_FILES[c]) for t in cluster for c in ("classA", "classB")}
    variability = draw_variability(Layout(cluster), files, seed=0)
    out = {}
    print(f"{workload_csv.name}: {len(workload)} jobs on {CLUSTER}, Longhorn variability (seed 0)")
    print(f"{'policy':<6} {'avg JCT (h)':>11} {'ran at':>7} {'floor':>7} {'restarts/job':>13}")
    for policy in ("sia", "ilp"):
        s = simulate_sia(workload, apps, cluster, SimConfig(policy=policy, variability=variability)).summary()
        v = s["variability_slowdown"]
        print(f"{policy:<6} {s['avg_jct'] / 3600:11.3f} {v['mean']:7.3f} {v['placement_floor']:7.3f} "
              f"{s['avg_restarts_per_job']:13.2f}")
        out[policy] = s
    return out


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        try:
            main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "data" / "newtrace-mini.csv")
        except PalOptError as exc:  # a bad argument (a missing or malformed workload): one line, not a traceback
            sys.exit(f"gpu_types: {exc}")
