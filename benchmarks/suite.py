"""The benchmark suite: greedy policies and the round program over registered families of rounds.

Runs for about 12 min on the machine of the committed page (its own run time: 714 s, 2 local
workers); ``--quick`` (the CI profile) takes a minute or less, ``--families`` and ``--max-tasks``
run less.

One command runs it::

    python benchmarks/suite.py --update        # full profile -> benchmarks/results/suite.{csv,md} + PNGs
    python benchmarks/suite.py --quick --out-dir /tmp/s   # CI smoke profile (a minute or less)
    python benchmarks/suite.py --scheduler tcp://host:8786   # the same sweep on a Dask cluster

Families (registry :data:`FAMILIES`, filled by :func:`register`; fixed seeds) -- every round is
:func:`pal_opt.generate.generate_instance` with factors drawn from the Longhorn measurements in
``../shared`` when present (otherwise the generator's synthetic Longhorn-like model; the
``variability`` column says which), the Sia-Philly job mix, and a queue whose total demand is
``load`` times the cluster's GPUs:

* ``size-flat``: 64 to 8,192 GPUs, flat, load 1.9 (the 600-jobs-on-2,048-GPUs ratio), λ = 1.7;
* ``size-racked``: 256 to 8,192 GPUs in racks of 16 servers, a gang spanning racks slowed by
  :data:`RACK_PENALTY` (2.5) instead of λ (with λ for both, a racked round costs what the flat
  one does, and the family measured nothing the flat one does not);
* ``load``: 512 GPUs, load 0.5 to 3, prefix and backfill admission;
* ``lambda``: 512 GPUs, λ from 1.0 to 3.0.

Methods per round: the greedy policies ``pal``, ``pmfirst``, ``packed``, ``random`` and the
round program on HiGHS, CP-SAT and CBC (``ilp-highs``, ``ilp-cpsat``, ``ilp-cbc``; CP-SAT and CBC
up to :attr:`Settings.all_backends_max_gpus` GPUs), plus ``ilp-partitioned`` (HiGHS, 2,048-GPU
parts run one after the other inside the task, bound = the whole round's LP relaxation) from
:attr:`Settings.partition_min_gpus` GPUs.  The program runs with the family's admission rule,
a relative gap target :attr:`Settings.ilp_gap` and a time limit.

Heuristic-vs-optimal gap: for every greedy placement the program is solved on the *same* job set
(``solve(inst, "ilp", jobs=<placed ids>)``, HiGHS, gap :attr:`Settings.ref_gap`) and
``heur_gap = gm(greedy) / gm(bound) − 1`` is recorded (against the proven bound, so it never
understates the gap; ``heur_gap_vs_best`` is against the best placement found).

Memory: every task runs in a fresh worker process (``max_tasks_per_child=1``; ``--reuse-workers``
turns that off) and every method under :func:`pal_opt.parallel.measure_peak`: the Linux RSS
high-water mark is reset before the method and read after it, so ``peak_rss_mib`` is the
process's peak while that method ran (it includes the interpreter and the loaded libraries,
~200 MiB, and what earlier methods of the same task left allocated) and ``rss_delta_mib`` the
growth over the RSS before it.  Where the reset is unavailable the fresh process's
``ru_maxrss`` is used (``mem_method``).  On Dask, workers are long-lived, so give them one
thread each and read ``rss_delta_mib``.  Each placement is also checked by
:func:`pal_opt.check.check` (``violations`` column).

Sweeps run on a local process pool (``--workers``, default 2) or on Dask (``--scheduler``);
tasks are dealt largest first.  Outputs: ``suite.csv`` (one row per round and method),
``suite.md`` (machine, summary tables) and ``suite_time_vs_gpus.png``,
``suite_heuristic_gap.png``, ``suite_gap_vs_load.png``.  They replace the committed ones in
``benchmarks/results/`` only with ``--update`` (else they go to ``benchmarks/results/scratch/``
or ``--out-dir``), and a partial run (``--quick``, ``--families``, ``--max-tasks``) refuses
``--update`` (see ``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LONGHORN = ROOT.parent / "shared" / "data" / "pal-artifact" / "variability" / "longhorn"

GREEDY = ("pal", "pmfirst", "packed", "random")
BACKENDS = ("highs", "cpsat", "cbc")
ILP_METHODS = tuple(f"ilp-{b}" for b in BACKENDS)
PARTITIONED = "ilp-partitioned"
ALL_METHODS = (*GREEDY, *ILP_METHODS, PARTITIONED)
#: The ``size-racked`` family's slowdown of a gang that spans racks (λ within a rack).
RACK_PENALTY = 2.5


#: The page's figures, embedded under its tables.
SUITE_FIGURES = [
    "![the round program's time to the gap target against the cluster size](suite_time_vs_gpus.png)", "",
    "![each heuristic's gap to the optimum bound on the same job set, every round once](suite_heuristic_gap.png)",
    "", "![the heuristics' median gap, and the GPUs each queue rule places, against the load](suite_gap_vs_load.png)",
]


def _mean_demand() -> float:
    from pal_opt.generate import SIA_PHILLY_MIX

    w = sum(SIA_PHILLY_MIX.values())
    return sum(d * n for (d, _), n in SIA_PHILLY_MIX.items()) / w


# ----------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Case:
    """One round of a family."""

    family: str
    nodes: int
    gpus_per_node: int
    racks: int
    load: float
    lam: float
    admission: str
    seed: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def jobs(self) -> int:
        """Queue length whose expected demand is ``load`` × GPUs."""
        return max(1, round(self.load * self.gpus / _mean_demand()))

    @property
    def case_id(self) -> str:
        rk = f"r{self.racks}" if self.racks else "flat"
        return (f"{self.family}/{self.nodes}x{self.gpus_per_node}-{rk}-load{self.load:g}-lam{self.lam:g}-"
                f"{self.admission}-s{self.seed}")

    def instance(self, measurements: dict[str, Path] | None):  # type: ignore[no-untyped-def]
        from pal_opt.generate import generate_instance

        inst = generate_instance(self.nodes, self.gpus_per_node, self.jobs, racks=self.racks, seed=self.seed,
                                 locality_penalty=self.lam, measurements=measurements, name=self.case_id)
        if not self.racks:
            return inst
        from dataclasses import replace

        return replace(inst, jobs=tuple(replace(j, locality=(1.0, self.lam, RACK_PENALTY)) for j in inst.jobs))


@dataclass(frozen=True)
class Family:
    """A registered family: its rounds in the full and the quick profile."""

    name: str
    description: str
    full: tuple[Case, ...]
    quick: tuple[Case, ...] = ()
    axis: str = "gpus"

    def cases(self, profile: str) -> tuple[Case, ...]:
        return self.quick if profile == "quick" else self.full


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` (names are unique)."""
    if family.name in FAMILIES:
        raise ValueError(f"family {family.name!r} already registered")
    FAMILIES[family.name] = family
    return family


def grid(
    family: str,
    sizes: Iterable[tuple[int, int]],
    *,
    servers_per_rack: int = 0,
    loads: Iterable[float] = (1.9,),
    lams: Iterable[float] = (1.7,),
    admissions: Iterable[str] = ("prefix",),
    seeds: Callable[[int], Sequence[int]] | Sequence[int] = (0,),
) -> tuple[Case, ...]:
    """The cartesian product of the given axes (``seeds`` may depend on the GPU count)."""
    out = []
    for nodes, gpn in sizes:
        racks = nodes // servers_per_rack if servers_per_rack else 0
        ss = seeds(nodes * gpn) if callable(seeds) else seeds
        for load in loads:
            for lam in lams:
                for adm in admissions:
                    for s in ss:
                        out.append(Case(family, nodes, gpn, racks, float(load), float(lam), adm, int(s)))
    return tuple(out)


SIZES = ((16, 4), (32, 8), (64, 8), (128, 8), (256, 8), (512, 8), (1024, 8))


def _size_seeds(g: int) -> tuple[int, ...]:
    return (0, 1, 2) if g <= 1024 else (0, 1) if g <= 2048 else (0,)


register(Family(
    "size-flat", "64 to 8,192 GPUs, flat, load 1.9, λ 1.7, prefix",
    grid("size-flat", SIZES, seeds=_size_seeds),
    grid("size-flat", ((16, 4), (32, 8))),
))
register(Family(
    "size-racked", "256 to 8,192 GPUs in racks of 16 servers, load 1.9, λ 1.7 within a rack and 2.5 across, prefix",
    grid("size-racked", SIZES[1:], servers_per_rack=16, seeds=lambda g: (0, 1) if g <= 2048 else (0,)),
    grid("size-racked", ((32, 8),), servers_per_rack=16),
))
register(Family(
    "load", "512 GPUs, queue demand 0.5× to 3× the cluster, prefix and backfill",
    grid("load", ((64, 8),), loads=(0.5, 1.0, 1.5, 2.0, 3.0), admissions=("prefix", "backfill"), seeds=(0, 1)),
    grid("load", ((16, 4),), loads=(0.5, 3.0), admissions=("prefix", "backfill")),
    axis="load",
))
register(Family(
    "lambda", "512 GPUs, λ from 1.0 to 3.0, load 1.9, prefix",
    grid("lambda", ((64, 8),), lams=(1.0, 1.3, 1.7, 2.2, 3.0), seeds=(0, 1)),
    grid("lambda", ((16, 4),), lams=(1.0, 3.0)),
    axis="lam",
))


@dataclass(frozen=True)
class Settings:
    """Solver settings of a profile.

    Rounds above :attr:`large_gpus` GPUs get the ``large_*`` time limits and reference gap:
    HiGHS needs 10-30 s for the LP relaxation alone at 8,192 GPUs, and the greedy policies are
    5-30 % above the optimum there, so a 0.5 % reference is precise enough.
    """

    ilp_gap: float = 1e-3
    ilp_time_limit: float = 20.0
    ref_gap: float = 1e-3
    ref_time_limit: float = 10.0
    large_gpus: int = 2048
    large_time_limit: float = 60.0
    large_ref_gap: float = 5e-3
    part_gap: float = 5e-3
    part_time_limit: float = 10.0
    part_gpus: int = 2048
    partition_min_gpus: int = 4096
    all_backends_max_gpus: int = 2048

    def time_limit(self, gpus: int) -> float:
        return self.large_time_limit if gpus > self.large_gpus else self.ilp_time_limit

    def ref(self, gpus: int) -> tuple[float, float]:
        """(gap, time limit) of the heuristic reference solve."""
        if gpus > self.large_gpus:
            return self.large_ref_gap, self.large_time_limit
        return self.ref_gap, self.ref_time_limit


PROFILES = {
    "full": Settings(),
    "quick": Settings(ilp_time_limit=5.0, ref_time_limit=5.0, part_gpus=128, partition_min_gpus=256,
                      part_time_limit=5.0),
}


def methods_for(case: Case, settings: Settings) -> tuple[str, ...]:
    out = [*GREEDY, "ilp-highs"]
    if case.gpus <= settings.all_backends_max_gpus:
        out += ["ilp-cpsat", "ilp-cbc"]
    if case.gpus >= settings.partition_min_gpus:
        out.append(PARTITIONED)
    return tuple(out)


# ----------------------------------------------------------------------------- tasks
def measurements() -> dict[str, Path] | None:
    if not LONGHORN.is_dir():
        return None
    from pal_opt.io.measurements import longhorn_paths

    return longhorn_paths(LONGHORN)


def factor_source() -> str:
    """What the generated rounds' factors are drawn from, for a page: the Longhorn measurements,
    or (``../shared`` absent, :func:`measurements` ``None``) the synthetic Longhorn-like model."""
    return "Longhorn measurements" if LONGHORN.is_dir() else "synthetic Longhorn-like factors (../shared absent)"


def _mib(x: int | None) -> float | None:
    return None if x is None else x / 2**20


def _fin(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _run_method(inst: Any, case: Case, method: str, settings: Settings) -> Any:
    from pal_opt.solve import solve

    if method in GREEDY:  # only a policy that draws at random takes a seed
        from pal_opt.methods import get_method

        return solve(inst, method, **({"seed": case.seed} if "seed" in get_method(method).options else {}))
    if method == PARTITIONED:
        from pal_opt.ilp.partition import solve_partitioned

        k = max(2, case.gpus // settings.part_gpus)
        return solve_partitioned(inst, k, backend="highs", admission=case.admission, gap=settings.part_gap,
                                 time_limit=settings.part_time_limit, executor="serial")
    return solve(inst, "ilp", backend=method.removeprefix("ilp-"), admission=case.admission, gap=settings.ilp_gap,
                 time_limit=settings.time_limit(case.gpus))


def run_task(case: Case, methods: Sequence[str], settings: Settings, use_measurements: bool = True) -> list[dict[str, Any]]:
    """Generate the round of ``case`` and run ``methods`` on it; one row per method (runs on a worker)."""
    from pal_opt.binning import binned_factors
    from pal_opt.check import check
    from pal_opt.cost import relative_gap
    from pal_opt.parallel import measure_peak
    from pal_opt.solve import solve

    meas = measurements() if use_measurements else None
    t0 = time.perf_counter()
    inst = case.instance(meas)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    binned_factors(inst.cluster)
    bin_s = time.perf_counter() - t0
    refs: dict[frozenset[Any], Any] = {}
    rows = []
    for method in methods:
        res, mem = measure_peak(_run_method, inst, case, method, settings)
        row: dict[str, Any] = {
            **{k: v for k, v in asdict(case).items()},
            "case_id": case.case_id,
            "gpus": case.gpus,
            "jobs_queued": case.jobs,
            "variability": "longhorn" if meas else "synthetic",
            "method": method,
            "backend": res.backend,
            "status": res.status.value,
            "objective": _fin(res.objective),
            "bound": res.bound,
            "gap": res.gap,
            "geomean_slowdown": _fin(res.geomean_slowdown),
            "jobs_placed": res.jobs_placed,
            "gpus_used": res.gpus_used,
            "build_seconds": res.build_seconds,
            "solve_seconds": res.solve_seconds,
            "wall_seconds": mem.seconds,
            "peak_rss_mib": _mib(mem.peak_rss),
            "rss_delta_mib": _mib(mem.delta),
            "mem_method": mem.method,
            "violations": len(check(inst, res)),
            "generate_seconds": gen_s,
            "binning_seconds": bin_s,
            "k": res.info.get("partition", {}).get("k") if method == PARTITIONED else None,
            "message": res.message[:120],
        }
        if method in GREEDY and res.placements:
            key = frozenset(res.placements)
            if key not in refs:
                t1 = time.perf_counter()
                rgap, rtl = settings.ref(case.gpus)
                ref = solve(inst, "ilp", backend="highs", jobs=list(res.placements), gap=rgap, time_limit=rtl)
                refs[key] = (ref, time.perf_counter() - t1)
            ref, ref_s = refs[key]
            d = res.gpus_used
            row.update({
                "ref_objective": ref.objective,
                "ref_bound": ref.bound,
                "ref_gap": ref.gap,
                "ref_status": ref.status.value,
                "ref_seconds": ref_s,
                "heur_gap": relative_gap(res.objective, ref.bound, d) if ref.bound is not None else None,
                "heur_gap_vs_best": relative_gap(res.objective, min(ref.objective, res.objective), d),
            })
        rows.append(row)
    return rows


def _cost(case: Case, methods: Sequence[str]) -> float:
    """Rough relative cost, for dealing the largest tasks first."""
    w = {"ilp-cpsat": 6.0, "ilp-cbc": 5.0, "ilp-highs": 2.0, PARTITIONED: 2.0}
    return case.gpus ** 1.3 * sum(w.get(m, 1.0) for m in methods)


def plan(families: Sequence[str], profile: str, settings: Settings) -> list[tuple[Case, tuple[str, ...]]]:
    """Tasks ``(case, methods)``: rounds up to 1,024 GPUs are one task, larger ones one task per method."""
    tasks = []
    for name in families:
        for case in FAMILIES[name].cases(profile):
            ms = methods_for(case, settings)
            if case.gpus <= 1024:
                tasks.append((case, ms))
            else:
                tasks.extend((case, (m,)) for m in ms)
    tasks.sort(key=lambda t: -_cost(*t))
    return tasks


def run_sweep(
    tasks: Sequence[tuple[Case, tuple[str, ...]]],
    settings: Settings,
    *,
    scheduler: Any = None,
    workers: int = 2,
    fresh_process: bool = False,
    progress: bool = True,
    use_measurements: bool = True,
) -> Any:
    """Run the tasks on a local process pool (or the Dask cluster ``scheduler``); a DataFrame."""
    import pandas as pd
    from tqdm import tqdm

    from pal_opt.parallel import as_completed_indexed, make_executor

    spec = scheduler
    if scheduler is not None and __name__ != "__main__":
        # Dask pickles with cloudpickle: ship this module's functions by value so workers need
        # not import it
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rows: list[dict[str, Any]] = []
    with make_executor(spec, workers=workers, max_tasks_per_child=1 if fresh_process else None) as ex:
        futs = [ex.submit(run_task, c, ms, settings, use_measurements) for c, ms in tasks]
        # disable=None: drawn only when stderr is a terminal
        with tqdm(total=len(futs), desc="suite", unit="task", disable=None if progress else True, file=sys.stderr) as bar:
            for _, out in as_completed_indexed(futs):
                rows.extend(out)
                bar.update(1)
    df = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(ALL_METHODS)}
    df["_m"] = df["method"].map(order)
    df = df.sort_values(["family", "gpus", "racks", "load", "lam", "admission", "seed", "_m"]).drop(columns="_m")
    return df.reset_index(drop=True)


# ----------------------------------------------------------------------------- reporting
def machine() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    from _results import load_average, memory_gib  # here: Dask workers never import it

    from pal_opt.ilp import available_backends, get_backend

    cpu = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        keep = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket", "L3 cache", "CPU max MHz")
        lscpu = [ln.strip() for ln in out.splitlines() if ln.strip().startswith(keep)]
    except (OSError, subprocess.SubprocessError):
        lscpu = []
    for ln in lscpu:
        if ln.startswith("Model name"):
            cpu = ln.split(":", 1)[1].strip()
    mem = memory_gib()
    load = load_average()
    solvers = ", ".join(f"{b} {get_backend(b).version()}" for b in available_backends())
    def _version(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    libs = ", ".join(f"{p} {_version(p)}" for p in ("numpy", "scipy", "pandas", "scikit-learn", "dask", "distributed"))
    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores; memory {mem}",
        *(f"  - lscpu: {ln}" for ln in lscpu),
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- Solvers: {solvers}",
        f"- Libraries: {libs}",
        f"- Load average (1/5/15 min) at the start: {load}",
    ]


def _fmt(x: Any, spec: str = ".3f", scale: float = 1.0, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x * scale:{spec}}{unit}"


def _median(xs: Iterable[Any]) -> float | None:
    v = [float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(v) if v else None


def _q(xs: Iterable[Any], q: float) -> float | None:
    v = sorted(float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x)))
    if not v:
        return None
    i = min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))
    return v[i]


def summarise(df: Any, settings: Settings, profile: str, head: list[str], runtime: float, fresh: bool = True,
              command: str = "") -> str:
    lines = ["# Benchmark suite", "", *([f"{command}.", ""] if command else []), f"Profile `{profile}`; {df['case_id'].nunique()} rounds, {len(df)} rows "
             f"(`suite.csv`); run time {runtime:.0f} s.", "", "Machine:", "", *head, ""]
    lines += [
        "Settings: program gap target "
        f"{settings.ilp_gap:g} (relative, geometric-mean slowdown) with a {settings.ilp_time_limit:g} s limit "
        f"({settings.large_time_limit:g} s above {settings.large_gpus} GPUs; HiGHS may overrun it while presolving "
        "the largest programs); "
        f"CP-SAT and CBC up to {settings.all_backends_max_gpus} GPUs; partitioned ({settings.part_gpus}-GPU parts, "
        f"part gap {settings.part_gap:g}, {settings.part_time_limit:g} s per part, parts one after the other inside the "
        f"task, bound = the whole round's LP relaxation) from {settings.partition_min_gpus} GPUs; heuristic references "
        f"on the greedy's own job set with gap {settings.ref_gap:g} and a {settings.ref_time_limit:g} s limit "
        f"(above {settings.large_gpus} GPUs: gap {settings.large_ref_gap:g}, {settings.large_time_limit:g} s).  "
        "Memory: " + ("one fresh process per task" if fresh else "long-lived workers (figures include memory "
                      "retained from earlier tasks)") + "; methods of one task run one after the other.",
        "",
        f"Variability: {', '.join(sorted(df['variability'].unique()))}.  Checker violations over all rows: "
        f"{int(df['violations'].sum())}.",
        "",
        "Families:",
        "",
        *(f"- `{f.name}`: {f.description}" for f in FAMILIES.values() if f.name in set(df["family"])),
        "",
        "## Round program by size (median over seeds)",
        "",
        "*time* = build + solve seconds of the `solve` call (end to end, excluding instance generation and the "
        "per-cluster binning); *gap* = proven relative gap of the geometric-mean slowdown; *mem* = peak RSS of the "
        "worker while the method ran (MiB).",
        "",
        "| family | GPUs | rounds | admitted jobs | method | median time s | worst time s | median gap | worst gap | "
        "proven ≤ target | median mem MiB |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    ilp = df[df["method"].isin([*ILP_METHODS, PARTITIONED]) & df["family"].str.startswith("size")]
    for (fam, g, m), grp in ilp.groupby(["family", "gpus", "method"], sort=True):
        t = grp["build_seconds"] + grp["solve_seconds"]
        ok = sum(1 for x in grp["gap"] if x is not None and not math.isnan(x) and x <= settings.ilp_gap + 1e-12)
        lines.append(
            f"| {fam} | {g} | {len(grp)} | {_fmt(_median(grp['jobs_placed']), '.0f')} | {m} | {_fmt(_median(t), '.2f')} | "
            f"{_fmt(t.max(), '.2f')} | {_fmt(_median(grp['gap']), '.3f', 100, ' %')} | "
            f"{_fmt(grp['gap'].max(), '.3f', 100, ' %')} | {ok}/{len(grp)} | {_fmt(_median(grp['peak_rss_mib']), '.0f')} |"
        )
    lines += [
        "",
        "## Heuristic vs optimal",
        "",
        "`heur_gap` = gm(greedy) / gm(bound of the program on the greedy's own job set) − 1, over every round of "
        "every family.  A greedy placement does not depend on the program's admission rule, so a round the "
        "`load` family runs under both rules is counted once (its prefix row).",
        "",
        "| policy | rounds | median | p90 | max | median vs best placement |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    gr = greedy_rounds(df)
    for m in GREEDY:
        g = gr[gr["method"] == m]
        if g.empty:
            continue
        lines.append(
            f"| {m} | {len(g)} | {_fmt(_median(g['heur_gap']), '.2f', 100, ' %')} | "
            f"{_fmt(_q(g['heur_gap'], 0.9), '.2f', 100, ' %')} | {_fmt(g['heur_gap'].max(), '.2f', 100, ' %')} | "
            f"{_fmt(_median(g['heur_gap_vs_best']), '.2f', 100, ' %')} |"
        )
    lines += ["", "Median heuristic gap by family and axis value:", "",
              "| family | axis value | " + " | ".join(GREEDY) + " |",
              "|---|---|" + "---:|" * len(GREEDY)]
    for fam in FAMILIES.values():
        sub = gr[gr["family"] == fam.name]
        if sub.empty:
            continue
        col = {"gpus": "gpus", "load": "load", "lam": "lam"}[fam.axis]
        for v, grp in sub.groupby(col, sort=True):
            cells = [_fmt(_median(grp[grp["method"] == m]["heur_gap"]), ".2f", 100, " %") for m in GREEDY]
            lines.append(f"| {fam.name} | {col} = {v:g} | " + " | ".join(cells) + " |")
    lines += ["", *SUITE_FIGURES, ""]
    return "\n".join(lines)


def greedy_rounds(df: Any) -> Any:
    """The greedy policies' rows, each round once: the same greedy placement is in the table once
    per admission rule of the family, and is counted once (its prefix row)."""
    gr = df[df["method"].isin(GREEDY)]
    return gr.sort_values("admission", key=lambda a: a != "prefix", kind="stable").drop_duplicates(
        subset=["family", "gpus", "racks", "load", "lam", "seed", "method"])


def _legend(ax: Any) -> None:
    """A small legend on ``ax`` if anything drawn on it has a label (an empty family draws nothing)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def plot(df: Any, out: Path, prefix: str = "suite") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: list[Path] = []

    def save(fig: Any, name: str) -> None:
        """Lay ``fig`` out, write it as ``{prefix}_{name}.png`` in ``out``, close it and list it in ``paths``."""
        fig.tight_layout()
        p = out / f"{prefix}_{name}.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        paths.append(p)

    # 1. solve time vs GPUs per backend
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sz = df[df["family"].str.startswith("size")]
    for m, color in zip((*ILP_METHODS, PARTITIONED), ("C0", "C1", "C2", "C3"), strict=True):
        for fam, ls in (("size-flat", "-"), ("size-racked", "--")):
            g = sz[(sz["method"] == m) & (sz["family"] == fam)]
            if g.empty:
                continue
            t = (g["build_seconds"] + g["solve_seconds"]).groupby(g["gpus"]).median()
            ax.plot(t.index, t.values, ls, marker="o", color=color, label=f"{m} ({fam.removeprefix('size-')})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("build + solve seconds (median)")
    ax.set_title("Round program: time to the gap target (or the time limit)")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax)
    save(fig, "time_vs_gpus")
    # 2. heuristic-vs-optimal gap per policy
    fig, ax = plt.subplots(figsize=(6, 4))
    data, labels = [], []
    gr = greedy_rounds(df)  # each round once, as in the page's table (the load rounds were counted twice)
    for m in GREEDY:
        v = [x * 100 for x in gr[gr["method"] == m]["heur_gap"] if x is not None and not math.isnan(x)]
        if v:
            data.append(v)
            labels.append(m)
    if data:
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(labels) + 1), labels)
    ax.set_ylabel("gm(greedy) / gm(optimum bound) − 1  [%]")
    ax.set_title("Heuristic vs optimal on the same job set (every round once)")
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, "heuristic_gap")
    # 3. gap vs load (greedy placements do not depend on the program's admission rule, so the
    # prefix rounds are used), and the GPUs each rule places
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ld = df[df["family"] == "load"]
    for m, color in zip(GREEDY, ("C0", "C1", "C2", "C3"), strict=True):
        g = ld[(ld["method"] == m) & (ld["admission"] == "prefix")]
        if g.empty:
            continue
        s = g.groupby("load")["heur_gap"].median() * 100
        ax.plot(s.index, s.values, "-", marker="o", color=color, label=m)
    ax.set_xlabel("queue demand / cluster GPUs")
    ax.set_ylabel("median heuristic gap [%]")
    ax.set_title("Heuristic vs optimal gap vs load")
    ax.grid(True, alpha=0.3)
    _legend(ax)
    for label, sel, ls in (("ilp, prefix", (ld["method"] == "ilp-highs") & (ld["admission"] == "prefix"), "-"),
                           ("ilp, backfill", (ld["method"] == "ilp-highs") & (ld["admission"] == "backfill"), "--"),
                           ("pal (pal-order)", (ld["method"] == "pal") & (ld["admission"] == "prefix"), ":")):
        g = ld[sel]
        if g.empty:
            continue
        u = (g["gpus_used"] / g["gpus"]).groupby(g["load"]).median() * 100
        ax2.plot(u.index, u.values, ls, marker="o", label=label)
    ax2.set_xlabel("queue demand / cluster GPUs")
    ax2.set_ylabel("GPUs placed [% of cluster] (median)")
    ax2.set_title("What each queue rule places")
    ax2.grid(True, alpha=0.3)
    _legend(ax2)
    save(fig, "gap_vs_load")
    return paths


def main(argv: list[str] | None = None) -> int:
    from _results import (  # here: Dask workers never import it
        add_output_arguments,
        at_least,
        load_average,
        output_dir,
        partial_run,
        produced_by,
        run_time,
    )

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=run_time(__doc__))
    ap.add_argument("--quick", action="store_true", help="the CI smoke profile")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated family names")
    ap.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local process pool)")
    ap.add_argument("--workers", type=int, default=2, help="local pool size")
    ap.add_argument("--reuse-workers", action="store_true",
                    help="keep worker processes across tasks (faster; memory figures then include what earlier "
                         "tasks left allocated)")
    ap.add_argument("--max-tasks", type=int, default=None, help="run only the first N tasks (smallest first)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    ap.add_argument("--synthetic", action="store_true", help="ignore ../shared measurements")
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    profile = "quick" if args.quick else "full"
    settings = PROFILES[profile]
    fams = [f for f in args.families.split(",") if f]
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; registered: {', '.join(FAMILIES)}")
    at_least(ap, args, 1, "workers", "max_tasks")
    partial = partial_run(ap, args, "quick", "max_tasks", also={"--families": set(fams) != set(FAMILIES)})
    out = output_dir(args, "suite", partial=partial)
    tasks = plan(fams, profile, settings)
    if args.max_tasks is not None:
        tasks = sorted(tasks, key=lambda t: _cost(*t))[: args.max_tasks]
    head = machine()
    t0 = time.perf_counter()
    fresh = not args.reuse_workers and args.scheduler is None
    df = run_sweep(tasks, settings, scheduler=args.scheduler, workers=args.workers, fresh_process=fresh,
                   progress=not args.no_progress, use_measurements=not args.synthetic)
    runtime = time.perf_counter() - t0
    load = load_average()
    head = [*head, f"- Load average at the end: {load}; executor: "
            + (f"Dask at {args.scheduler}" if args.scheduler else f"local process pool, {args.workers} workers")]
    df.to_csv(out / "suite.csv", index=False)
    text = summarise(df, settings, profile, head, runtime, fresh, produced_by(__file__, argv))
    (out / "suite.md").write_text(text, encoding="utf-8")
    plot(df, out)
    print(f"wrote {out / 'suite.csv'}, {out / 'suite.md'} and 3 plots ({len(df)} rows, {runtime:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
