"""Sia in your own round loop: submit jobs, ask for a round, launch, report, finish.

A scheduler that runs its own loop (real jobs, or a simulator of its own such as Blox) keeps one
``pal_opt.TypedScheduler`` and, every round, tells it what happened and asks what to run:

* ``submit(...)`` a job when it arrives (a newTrace workload row: application, GPUs, batch, kind);
* ``schedule(now)`` gives every job's GPU type, GPU ids, servers and batch size, or says it
  waits (or can never run, and why), and whether the round restarts or migrates it;
* ``report(name, epoch=...)`` what a job measured (here only its epochs: the step times and
  gradient statistics then come from the profiles), ``finish(name, time)`` when it is done.

The jobs here stand in for real ones: pal-opt's model of a training job of the Sia artifact
(``SimJob``) runs on the GPUs each round gives it and finishes after its application's epochs.
The application profiles are not shipped: they are read from ``../shared`` (``PAL_OPT_SHARED``
overrides), and without them the script says so and stops.

    python examples/sia_round_loop.py [WORKLOAD.csv] [POLICY]
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pal_opt
from pal_opt.hetero import JobAllocation, JobKind, SimJob, load_applications, read_workload
from pal_opt.streams import PipeSafe

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("PAL_OPT_SHARED", HERE.parents[1] / "shared"))
PROFILES = SHARED / "data" / "sia-artifact" / "profiles"
CLUSTER = "aws:6x4,rtx:3x8,dgx-ext:2x8"
ROUND = 60.0


def launch(job: SimJob, alloc: JobAllocation, types: list[str], now: float) -> None:
    """Start, move or stop a stand-in job on the GPUs of its allocation."""
    if alloc.gpus != (job.allocation or ()):
        job.reallocate(None if alloc.gpu_type is None else types.index(alloc.gpu_type), alloc.shape, now)
        job.allocation = alloc.gpus


def main(workload_csv: Path = HERE / "data" / "newtrace-mini.csv", policy: str = "sia",
         shown: int = 3) -> dict[str, float] | None:
    if not PROFILES.is_dir():
        print(f"sia_round_loop: skipped: needs the Sia artifact's profiles under {SHARED}")
        return None
    workload = read_workload(workload_csv)
    sched = pal_opt.TypedScheduler(CLUSTER, PROFILES, policy, applications=workload.applications())
    types = [t.name for t in sched.cluster]
    apps = load_applications(PROFILES, workload.applications())
    for row in workload:
        sched.submit(row.name, row.application, row.num_replicas, row.batch_size, row.submit_time, kind=row.kind.value)
    kinds = {r.name: JobKind(r.kind) for r in sched.records()}  # under gavel every job runs rigid
    jobs = {row.name: SimJob(i, replace(row, kind=kinds[row.name]), apps[row.application], types)  # the stand-ins
            for i, row in enumerate(workload)}
    print(f"{workload_csv.name}: {len(workload)} jobs on {CLUSTER} under {policy}, {ROUND:g} s rounds")
    now = 0.0
    while any(not j.done and j.name not in sched.unplaceable for j in jobs.values()):
        for job in jobs.values():  # the last round's work, as the jobs report it
            if job.shape and not job.done:
                job.advance(ROUND, now)
                sched.report(job.name, epoch=job.epoch, progress=job.progress)
                if job.done and job.completion_time is not None:
                    sched.finish(job.name, job.completion_time)
        now += ROUND
        plan = sched.schedule(now)
        for alloc in plan.jobs:
            launch(jobs[alloc.name], alloc, types, now)
            if alloc.restart and shown > 0:
                print(f"  {now:6.0f} s  {alloc.name:<14} {alloc.change.value:<8} {len(alloc.gpus):2d} x {alloc.gpu_type:<7} "
                      f"servers {sorted(set(alloc.servers))}, batch {alloc.batch_size}")
        shown -= any(a.restart for a in plan.jobs)
    jct = {r.name: r.jct for r in sched.records() if r.jct is not None}
    print(f"{'job':<14} {'JCT (s)':>8} {'restarts':>9}")
    for r in sched.records():
        print(f"{r.name:<14} {r.jct or float('nan'):8.0f} {r.restarts:9d}")
    print(f"average JCT {sum(jct.values()) / len(jct) / 3600:.3f} h over {len(jct)} jobs; "
          f"{sched.stats.rounds} round programs, {sched.stats.solve_seconds:.2f} s solving")
    return jct


if __name__ == "__main__":
    with PipeSafe():  # output piped into head: the rest dropped, no BrokenPipeError
        try:
            main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "data" / "newtrace-mini.csv",
                 sys.argv[2] if len(sys.argv) > 2 else "sia")
        except pal_opt.PalOptError as exc:  # a bad argument (a workload, a policy): one line, not a traceback
            sys.exit(f"sia_round_loop: {exc}")
