"""Speed of the greedy policies on a 2,048-GPU round (256 servers × 8 GPUs, 600 queued jobs).

Runs for about 3 s on the machine of the committed page (the page does not say; timed once under
``nice`` on 2026-12-07 at load 3.5: 2.7 s).

Target: PAL under 26 ms inside the policy (the PAL artifact's pandas implementation takes about
2.6 s on such a round).  Times are of the policy call only: the binned factors are computed once
beforehand (binning is per cluster and cached), the first call of each policy also builds the
cluster-level indexes it caches, and that first ("cold") call is reported separately.

Round: :func:`pal_opt.generate.generate_instance` (Longhorn-like synthetic factors, Sia-Philly
job mix), or if that module is missing a seeded lognormal stand-in with the same job mix
(:func:`make_round`).  Every queued job waits (none running), no GPU is busy, λ = 1.7.

Usage::

    python benchmarks/greedy_speed.py [--repeats 30] [--seed 0] [--update | --out-dir DIR]

Writes ``greedy_speed.md``; it replaces the committed one in ``benchmarks/results/`` only with
``--update`` (see ``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _results import (
    add_output_arguments,
    at_least,
    check_values,
    load_average,
    output_dir,
    produced_by,
    run_time,
    write_page,
)

from pal_opt.binning import binned_factors
from pal_opt.io import load_instance
from pal_opt.model import MODEL_CLASS, PAL_CLASSES, Cluster, Job, RoundInstance, RoundParams, pal_locality
from pal_opt.policies import get_policy

#: GPU counts and their frequencies over the six Sia-Philly traces of the PAL artifact.
SIZES = {1: 401, 4: 60, 6: 142, 8: 122, 12: 118, 16: 95, 24: 5, 32: 9, 48: 8}
#: Models and their frequencies over the same traces.
MODELS = {"vgg19": 401, "PointNet": 371, "resnet50": 82, "DCGAN": 61, "BERT": 25, "GPT2": 20}

POLICIES = ("pal", "pmfirst", "packed", "packed-sticky", "random")


def make_round(
    seed: int = 0,
    generator: str = "generate",
    servers: int = 256,
    per_server: int = 8,
    jobs: int = 600,
    lam: float = 1.7,
) -> RoundInstance:
    """The benchmark round.

    ``generator="generate"``: :func:`pal_opt.generate.generate_instance` (Longhorn-like
    synthetic factors, Sia-Philly job mix).  ``generator="lognormal"``: a seeded stand-in, per
    class a lognormal factor (median 1, σ 4 %) with 2 % of GPUs 1.15-1.5× slower, which after
    binning has many more factor levels (each outlier is its own level) and so stresses PAL's
    walk; jobs from the same Sia-Philly mix.
    """
    name = f"{generator}-{servers}x{per_server}-j{jobs}-s{seed}"
    if generator == "generate":
        from pal_opt.generate import generate_instance

        return generate_instance(servers, per_server, jobs, seed=seed, locality_penalty=lam, name=name)
    rng = np.random.default_rng(seed)
    g = servers * per_server
    factors = {}
    for c in PAL_CLASSES:
        f = rng.lognormal(0.0, 0.04, g)
        slow = rng.random(g) < 0.02
        f[slow] *= rng.uniform(1.15, 1.5, int(slow.sum()))
        factors[c] = f / np.median(f)
    cluster = Cluster.uniform(servers, per_server, factors)
    sizes = rng.choice(list(SIZES), size=jobs, p=np.array(list(SIZES.values())) / sum(SIZES.values()))
    models = rng.choice(list(MODELS), size=jobs, p=np.array(list(MODELS.values())) / sum(MODELS.values()))
    queue = tuple(
        Job(k, int(d), MODEL_CLASS[str(m)], k, pal_locality(lam), model=str(m)) for k, (d, m) in enumerate(zip(sizes, models, strict=True))
    )
    return RoundInstance(cluster, queue, RoundParams(locality_penalty=lam), name=name)


def generators() -> list[str]:
    try:
        import pal_opt.generate  # noqa: F401
    except ImportError:
        return ["lognormal"]
    return ["generate", "lognormal"]


def time_policy(name: str, instance: RoundInstance, repeats: int, seed: int) -> dict[str, float]:
    policy = get_policy(name)
    factors = binned_factors(instance.cluster)
    times = []
    placed = 0
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        out = policy(instance, factors, seed=seed)
        times.append(time.perf_counter() - t0)
        placed = len(out.placements)
    return {
        "cold_ms": times[0] * 1e3,
        "median_ms": statistics.median(times[1:]) * 1e3,
        "min_ms": min(times[1:]) * 1e3,
        "placed": placed,
    }


def machine() -> str:
    try:
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines()[:10]
    except OSError:
        cpu = [platform.processor() or "unknown CPU"]
    return "\n".join(cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=run_time(__doc__))
    ap.add_argument("--repeats", type=int, default=30, help="timed calls per policy after the cold one (default 30)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated rounds (default 0)")
    ap.add_argument(
        "--instance",
        type=Path,
        action="append",
        default=[Path(__file__).resolve().parents[1] / "instances" / "large-256x8.json"],
        help="an instance file to time as well (default: the committed 2048-GPU round)",
    )
    add_output_arguments(ap)
    args = ap.parse_args(argv)
    at_least(ap, args, 1, "repeats")
    at_least(ap, args, 0, "seed")
    check_values(ap, "--instance", args.instance, Path.is_file, "no such instance file")
    out = output_dir(args, "greedy_speed") / "greedy_speed.md"

    lines = [
        "# Greedy policy speed",
        "",
        f"{produced_by(__file__, argv)}.",
        "",
        f"Time inside the policy call (``place(instance, factors)``); median and minimum of {args.repeats} "
        "calls after one cold call.  The cold call also builds the per-cluster indexes the policies "
        "cache on the cluster (as binning is cached).  Binning (k-means, once per cluster) is not included.",
    ]
    rounds = [load_instance(path) for path in args.instance]
    rounds += [make_round(args.seed, gen) for gen in generators()]
    for inst in rounds:
        t0 = time.perf_counter()
        factors = binned_factors(inst.cluster)
        binning_s = time.perf_counter() - t0
        levels = ", ".join(f"{c} {np.unique(v).size}" for c, v in factors.items())
        cum = np.cumsum([j.demand for j in inst.jobs])
        prefix = int(np.searchsorted(cum, inst.cluster.num_gpus, side="right"))
        rows = {name: time_policy(name, inst, args.repeats, args.seed) for name in POLICIES}
        lines += [
            "",
            f"## Round {inst.name}",
            "",
            f"{inst.cluster.num_gpus} GPUs ({inst.cluster.num_servers} servers, {inst.free_gpus} free), "
            f"{len(inst.jobs)} queued jobs (Sia-Philly sizes 1-48, {int(cum[-1])} GPUs in all; "
            f"{prefix} jobs in the prefix that fits the cluster), λ = 1.7.  "
            f"Binned factor levels per class: {levels}.  Binning took {binning_s * 1e3:.0f} ms.",
            "",
            "| policy | jobs placed | median (ms) | min (ms) | cold call (ms) |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, r in rows.items():
            lines.append(f"| {name} | {r['placed']} | {r['median_ms']:.2f} | {r['min_ms']:.2f} | {r['cold_ms']:.2f} |")
    lines += [
        "",
        "Target: PAL under 26 ms per round (the PAL artifact's pandas implementation takes about 2.6 s on such a round; not re-measured here).",
        "",
        "## Machine",
        "",
        "```",
        machine(),
        f"python {platform.python_version()} ({sys.implementation.name}), numpy {np.__version__}",
        f"load average at the end of the run: {load_average(' ', 'unknown')}",
        "```",
        "",
    ]
    text = "\n".join(lines)
    write_page("greedy_speed", out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
