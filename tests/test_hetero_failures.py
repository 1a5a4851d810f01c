"""GPUs out of service on a cluster of GPU types: ``TypedScheduler.fail`` / ``restore``, and every
policy leaving such GPUs out (the round program's capacity, Sia's placer, the comparators)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pal_opt
from pal_opt.errors import OptionError
from pal_opt.hetero import JobKind, SimJob, load_applications, read_workload
from pal_opt.hetero.configs import GpuType, enumerate_configs
from pal_opt.hetero.gpus import Layout, Variability
from pal_opt.hetero.placer import place_type
from pal_opt.hetero.round import solve_round
from pal_opt.hetero.roundprogram import RoundInput
from pal_opt.hetero.roundstep import round_step

MINI = Path(__file__).resolve().parents[1] / "examples" / "data" / "newtrace-mini.csv"
CLUSTER = "aws:6x4,rtx:3x8,dgx-ext:2x8"
ROUND = 60.0


def test_sia_placer_takes_only_gpus_in_service() -> None:
    # node 0 has 3 GPUs in service: never taken whole, so the 4-GPU job goes to node 1
    assert place_type(2, 4, [4, 2], free=[3, 4]) == [[1, 1, 1, 1], [0, 0]]
    assert place_type(2, 4, [3, 3], free=[3, 3]) == [[0, 0, 0], [1, 1, 1]]
    with pytest.raises(OptionError, match="7 GPUs demanded of a type with 6 in service"):
        place_type(2, 4, [4, 3], free=[3, 3])
    with pytest.raises(OptionError, match="free must give 0..4 GPUs for each of 2 nodes"):
        place_type(2, 4, [1], free=[5, 0])


def test_layout_gives_the_lowest_slots_in_service() -> None:
    layout = Layout((GpuType("a", 2, 4),))
    oos = np.zeros(8, dtype=bool)
    oos[[0, 2]] = True
    assert layout.gpus_of_nodes(0, [[0, 0], [1]], oos) == [(1, 3), (4,)]
    per_type, per_node = layout.in_service(oos)
    assert per_type.tolist() == [6] and per_node == [[2, 4]]


def test_the_round_program_counts_only_gpus_in_service() -> None:
    cs = enumerate_configs((GpuType("a", 1, 4),))
    # two adaptive jobs, each cheaper on more GPUs (A = n^-0.5): 2 + 2 of 4 GPUs; one GPU in
    # service: one job on 1 GPU
    costs = np.tile((cs.num_gpus.astype(np.float32) ** -0.5).round(2), (2, 1))
    full = solve_round(RoundInput(cs, costs), backend="highs")
    short = solve_round(RoundInput(cs, costs, capacity=np.array([1])), backend="highs")
    assert sum(int(cs.num_gpus[k]) for k in full.adaptive if k >= 0) == 4
    assert sum(int(cs.num_gpus[k]) for k in short.adaptive if k >= 0) == 1
    with pytest.raises(OptionError, match="capacity must give 0..GPUs of each of the 1 types"):
        RoundInput(cs, costs, capacity=np.array([5]))


def test_a_policy_without_the_attribute_is_refused_while_gpus_are_out() -> None:
    layout = Layout((GpuType("a", 1, 4),))
    policy = SimpleNamespace(allocate=lambda active, now: {}, unplaceable={})
    assert round_step(policy, layout, Variability(), [], 0.0) == {}
    with pytest.raises(OptionError, match="does not take GPUs out of service"):
        round_step(policy, layout, Variability(), [], 0.0, np.array([True, False, False, False]))


def _loop(profiles: Path, policy: str, fail_at: float, restore_at: float, **opts: object) -> dict[str, object]:
    """The round loop of ``examples/sia_round_loop.py`` with GPUs 0-5 and one GPU of the first
    job holding any taken out of service at ``fail_at`` and restored at ``restore_at``; asserts
    that no round gives a job a GPU out of service."""
    workload = read_workload(MINI)
    sched = pal_opt.TypedScheduler(CLUSTER, profiles, policy, applications=workload.applications(), **opts)
    types = [t.name for t in sched.cluster]
    apps = load_applications(profiles, workload.applications())
    for row in workload:
        sched.submit(row.name, row.application, row.num_replicas, row.batch_size, row.submit_time, kind=row.kind.value)
    kinds = {r.name: JobKind(r.kind) for r in sched.records()}
    jobs = {row.name: SimJob(i, replace(row, kind=kinds[row.name]), apps[row.application], types)
            for i, row in enumerate(workload)}
    now, failed, hit, used_after = 0.0, (), [], set()
    plan = None
    while any(not j.done and j.name not in sched.unplaceable for j in jobs.values()):
        for job in jobs.values():
            if job.shape and not job.done:
                job.advance(ROUND, now)
                sched.report(job.name, epoch=job.epoch, progress=job.progress)
                if job.done and job.completion_time is not None:
                    sched.finish(job.name, job.completion_time)
        if now == fail_at and plan is not None:
            held = [a for a in plan.jobs if a.gpus and not jobs[a.name].done]
            failed = tuple(range(6)) + (held[0].gpus[-1],)
            hit = list(sched.fail(failed))
            assert sched.out_of_service == tuple(sorted(set(failed)))
            for name in hit:  # the stand-in jobs lose their GPUs as the real ones would
                jobs[name].reallocate(None, (), now)
                jobs[name].allocation = ()
            assert held[0].name in hit
        if now == restore_at:
            sched.restore(failed)
            failed = ()
        now += ROUND
        plan = sched.schedule(now)
        for alloc in plan.jobs:
            assert not set(alloc.gpus) & set(failed), (now, alloc)
            if alloc.restart and alloc.name in hit and now > fail_at:
                used_after.add(alloc.name)
            job = jobs[alloc.name]
            if alloc.gpus != (job.allocation or ()):
                job.reallocate(None if alloc.gpu_type is None else types.index(alloc.gpu_type), alloc.shape, now)
                job.allocation = alloc.gpus
        assert now < 100_000, "the loop ran away"
    return {"done": sum(r.jct is not None for r in sched.records()), "hit": hit, "resumed": used_after,
            "restarts": {r.name: r.restarts for r in sched.records()}}


@pytest.mark.parametrize(("policy", "opts"), [("sia", {}), ("ilp", {}), ("ilp", {"ilp_anchor": False}),
                                              ("ilp", {"ilp_levels": True}), ("ilp", {"ilp_joint": True}),
                                              ("pal", {}), ("packed", {}), ("gavel", {})])
def test_every_policy_runs_around_gpus_out_of_service(shared_dir: Path, policy: str, opts: dict) -> None:
    """Jobs on failed GPUs are suspended and re-placed elsewhere (a restart); no round uses a GPU
    out of service; every job still finishes."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    out = _loop(profiles, policy, fail_at=600.0, restore_at=3000.0, **opts)
    assert out["done"] == 6
    assert out["hit"] and set(out["hit"]) <= out["resumed"]  # each one placed again, a restart
    base = _loop(profiles, policy, fail_at=-1.0, restore_at=-1.0, **opts)
    assert base["hit"] == [] and base["done"] == 6


def test_fail_names_bad_ids(shared_dir: Path) -> None:
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    apps = read_workload(MINI).applications()
    sched = pal_opt.TypedScheduler(CLUSTER, profiles, "sia", applications=apps)
    for bad in ([64], [-1], [1.5], ["3"], 3):
        with pytest.raises(OptionError, match="fail"):
            sched.fail(bad)  # type: ignore[arg-type]
    assert sched.fail([3, 3]) == () and sched.out_of_service == (3,)
    sched.restore([3])
    assert sched.out_of_service == ()
    with pytest.raises(OptionError, match="restore: 99 is not a GPU id of this cluster"):
        sched.restore([99])


# --------------------------------------------------------------------------- the simulator
def _simulate(profiles: Path, policy: str, failures: object = None, **opts: object) -> object:
    from pal_opt.hetero.simulate import SimConfig, build_cluster, parse_cluster, simulate_sia

    workload = read_workload(MINI)
    apps = load_applications(profiles, workload.applications())
    cluster = build_cluster(parse_cluster(CLUSTER), apps)
    return simulate_sia(workload, apps, cluster, SimConfig(policy=policy, failures=failures, **opts))


@pytest.mark.parametrize("policy", ["sia", "pal", "gavel"])
def test_the_simulator_of_gpu_types_fails_gpus_and_jobs_recover(shared_dir: Path, policy: str) -> None:
    """Failures (1,000,000 times Llama 3's rates, back after 5 min): jobs are interrupted, lose
    work and still finish; no round uses a GPU out of service (round_step checks); the same seed
    gives the same run, another seed another one; without failures nothing changes."""
    from pal_opt.simulate.failures import FailureConfig, FailureStats

    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    config = FailureConfig(scale=100_000, repair_time=300.0, checkpoint_interval=600.0, seed=1)
    one = _simulate(profiles, policy, config)
    summary = one.summary()  # type: ignore[attr-defined]
    assert summary["failures"]["failures"] > 0 and summary["failures"]["jobs_hit"] > 0
    assert summary["failures"]["lost_gpu_hours"] > 0
    assert summary["n_completed"] == summary["n_jobs"] == 6
    # the PAL simulator's names, the earlier ones as aliases; per failure the jobs it stopped
    f = summary["failures"]
    assert set(FailureStats({}).summary([], [])) <= set(f)
    assert (f["events"], f["interrupted_jobs"], f["repairs"]) == (f["failures"], f["jobs_hit"], 0)
    log = one.failure_log  # type: ignore[attr-defined]
    records = one.jobs  # type: ignore[attr-defined]
    assert len(log) == f["failures"] == f["gpu_failures"] + f["server_failures"]
    assert all(re.fullmatch(r"(aws|rtx|dgx-ext)-\d+", e["server"]) for e in log)
    assert Counter(n for e in log for n in e["jobs"]) == Counter({r.name: r.failures for r in records if r.failures})
    assert sum(r.failures for r in records) == f["jobs_hit"]
    assert sum(r.lost_gpu_seconds for r in records) / 3600 == pytest.approx(f["lost_gpu_hours"])
    again = _simulate(profiles, policy, config).summary()  # type: ignore[attr-defined]
    assert again["avg_jct"] == summary["avg_jct"] and again["failures"] == summary["failures"]
    plain = _simulate(profiles, policy).summary()  # type: ignore[attr-defined]
    assert "failures" not in plain and plain["avg_jct"] < summary["avg_jct"]


def test_a_bad_failure_config_is_refused() -> None:
    from pal_opt.hetero.simulate import SimConfig
    from pal_opt.simulate.failures import FailureConfig

    with pytest.raises(OptionError, match="failures must be a FailureConfig or None"):
        SimConfig(failures={"scale": 10})  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="repair-time must be a finite number > 0"):
        SimConfig(failures=FailureConfig(repair_time=0))


# --------------------------------------------------------------------------- review of the feature
def test_gavel_waits_when_no_type_holds_a_job_and_keeps_its_round_for_idle_failures(shared_dir: Path) -> None:
    """Every GPU out of service: Gavel-like's LP divided by zero (a raw scipy ValueError); now its
    jobs wait and run again after the restore.  A failure of a GPU no job holds no longer
    re-decides before Gavel's 360 s round is up (a failure made a run faster)."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    apps = read_workload(MINI).applications()

    def plans(fail: tuple[int, ...], at: float, back: float) -> list[dict]:
        sched = pal_opt.TypedScheduler(CLUSTER, profiles, "gavel", applications=apps)
        for row in read_workload(MINI):
            sched.submit(row.name, row.application, row.num_replicas, row.batch_size, row.submit_time,
                         kind=row.kind.value)
        out = []
        for k in range(1, 40):
            now = k * ROUND
            if now == at:
                sched.fail(fail)
            if now == back:
                sched.restore(fail)
            out.append({a.name: a.gpus for a in sched.schedule(now).jobs})
        return out

    dark = plans(tuple(range(64)), 600.0, 900.0)
    # out from 600 s, back at 900 s: every job waits, and runs again from Gavel's next decision
    assert all(not g for p in dark[9:14] for g in p.values()) and any(dark[20].values())
    base = plans((), -1.0, -1.0)
    used = {g for p in base for gpus in p.values() for g in gpus}
    idle = next(g for g in range(64) if g not in used)
    assert plans((idle,), 600.0, 900.0) == base


def test_a_job_that_lost_its_gpus_is_forgotten_by_the_policy() -> None:
    """Sia priced going back to a failed job's old configuration as staying (no re-allocation
    factor) while the job had to restart anyway."""
    from pal_opt.hetero.roundstep import forget_allocation

    policy = SimpleNamespace(previous={3: 16, 4: 2}, holding={3: (0, 1)})
    forget_allocation(policy, 3)
    assert policy.previous == {4: 2} and policy.holding == {}
    forget_allocation(SimpleNamespace(), 3)  # a policy without either: nothing to forget


class _LinearJob(SimpleNamespace):
    """A job that gains one unit of progress per second of training (after its restart delay)."""

    def __init__(self) -> None:
        super().__init__(index=0, name="j0", progress=0.0, epoch=0, num_restarts=0, allocation=(0, 1), shape=(2,),
                         rescale_time=0.0, done=False, gpus=2)

    def state_after(self, seconds: float, now: float) -> tuple[float, int]:
        return self.progress + max(seconds - self.rescale_time, 0.0), self.epoch

    def advance(self, seconds: float, now: float) -> None:
        self.progress, self.epoch = self.state_after(seconds, now)
        self.rescale_time = max(self.rescale_time - seconds, 0.0)

    def lose_gpus(self, now: float) -> None:
        self.allocation, self.shape, self.gpus = (), (), 0


def _failures_at(times: dict[float, tuple[int, ...]]):  # type: ignore[no-untyped-def]
    from pal_opt.hetero.failures import TypedFailures
    from pal_opt.simulate.failures import FailureConfig, FailureEvent

    fails = TypedFailures(Layout((GpuType("a", 1, 4),)), FailureConfig(checkpoint_interval=90.0, scale=1.0, seed=0), 0)
    events = [FailureEvent(t, "gpu", g[0], g, t + 300.0) for t, g in sorted(times.items())]

    def pop_until(t: float) -> list:  # type: ignore[type-arg]
        out = [e for e in events if e.time < t]
        del events[:len(out)]
        return out

    fails.process.pop_until = pop_until  # type: ignore[method-assign]
    return fails


def test_periodic_checkpoints_are_taken_at_their_instant_inside_the_round() -> None:
    """The checkpoint of every 90 s of training was taken at the end of the round that reached
    the interval, so a failure lost up to the interval plus a round (here 90 + 60 - 1 s) and the
    checkpoint held the round's end; now it holds the state at 90 s and a failure loses at most
    90 s."""
    fails = _failures_at({119.0: (1,)})
    job = _LinearJob()
    assert fails.advance([job], 0.0, 60.0) == [] and fails.since[0] == 60.0 and 0 not in fails.saved
    assert fails.advance([job], 60.0, 60.0) == [0]  # a checkpoint at 90 s, the failure at 119 s
    assert fails.saved[0] == (90.0, 0)
    assert job.progress == 90.0 and fails.stats.lost_gpu_seconds == 29.0 * 2 and fails.stopped(0) == 1
    assert fails.since[0] == 0.0


def test_a_restart_delay_is_not_training_and_long_rounds_pass_several_checkpoints() -> None:
    fails = _failures_at({280.0: (0,)})
    job = _LinearJob()
    job.rescale_time = 20.0  # trains from 20 s: checkpoints at 110 s and 200 s, fails at 280 s
    assert fails.advance([job], 0.0, 300.0) == [0]
    assert fails.saved[0] == (180.0, 0) and fails.stats.lost_gpu_seconds == 80.0 * 2


def test_only_restarts_and_suspensions_take_a_checkpoint_between_the_periodic_ones() -> None:
    """A move that keeps the shape (no restart in Sia's model) took a free checkpoint."""
    fails = _failures_at({})
    job = _LinearJob()
    fails.advance([job], 0.0, 60.0)
    job.num_restarts = 0
    fails.checkpoint_moved([job], {0: (0, True)})  # type: ignore[list-item]  # moved, same shape
    assert 0 not in fails.saved and fails.since[0] == 60.0
    job.num_restarts = 1
    fails.checkpoint_moved([job], {0: (0, True)})  # type: ignore[list-item]  # restarted
    assert fails.saved[0] == (60.0, 0) and fails.since[0] == 0.0


def test_state_after_leaves_the_job_as_it_was(shared_dir: Path) -> None:
    """A checkpoint inside a round looks ahead on a copy: the job's own run is unchanged."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    workload = read_workload(MINI)
    apps = load_applications(profiles, workload.applications())
    spec = workload.jobs[0]
    job, twin = (SimJob(0, spec, apps[spec.application], ("aws", "rtx", "dgx-ext")) for _ in range(2))
    for j in (job, twin):
        j.reallocate(0, (2,), 0.0)
    state = job.state_after(4000.0, 0.0)
    assert job.progress == 0.0 and job.observations == [{}, {}, {}] and job.params == [None] * 3
    twin.advance(4000.0, 0.0)
    assert state == (twin.progress, twin.epoch) and state[0] > 0
    job.advance(4000.0, 0.0)
    assert (job.progress, job.epoch) == state


def test_failure_seeds_2_to_the_32_apart_are_different_processes() -> None:
    """The seed was masked to 32 bits: --failure-seed 0 and 4294967296 gave the same failures."""
    from pal_opt.simulate.failures import FailureConfig, FailureProcess

    cluster = pal_opt.Cluster.uniform(4, 4, {"classA": [1.0] * 16})
    times = [[e.time for e in FailureProcess(cluster, FailureConfig(scale=1000.0), s).pop_until(1e9, most=5)]
             for s in (0, 2**32, 0)]
    assert times[0] == times[2] != times[1]


def test_gavel_keeps_its_round_when_a_finished_jobs_gpus_fail(shared_dir: Path) -> None:
    """The GPUs a job held until it finished are idle: their failure re-decided before Gavel's
    360 s round was up, as an idle GPU's did before (the finished job's holding was still kept)."""
    profiles = shared_dir / "data" / "sia-artifact" / "profiles"
    apps = read_workload(MINI).applications()

    def plans(fail: bool) -> list[dict]:
        sched = pal_opt.TypedScheduler(CLUSTER, profiles, "gavel", applications=apps)
        for row in read_workload(MINI):
            sched.submit(row.name, row.application, row.num_replicas, row.batch_size, row.submit_time,
                         kind=row.kind.value)
        out, done = [], None
        for k in range(1, 30):
            now = k * ROUND
            if now == 540.0:  # a job holding GPUs since the decision at 420 s finishes
                done = next(a for a in sched.schedule(now).jobs if a.gpus)
                sched.finish(done.name, now)
            if fail and now == 600.0:
                sched.fail(done.gpus)  # type: ignore[union-attr]
            if fail and now == 720.0:
                sched.restore(done.gpus)  # type: ignore[union-attr]
            out.append({a.name: a.gpus for a in sched.schedule(now).jobs})
        return out

    assert plans(fail=True) == plans(fail=False)


# ---------------------------------------------------------------- pinned by the eighteenth session's mutants
def test_a_failure_before_any_checkpoint_sends_the_job_back_to_the_start() -> None:
    """Without a checkpoint yet the job's state goes back to nothing (it kept its progress)."""
    fails = _failures_at({30.0: (0,)})
    job = _LinearJob()
    assert fails.advance([job], 0.0, 60.0) == [0]
    assert (job.progress, job.epoch) == (0.0, 0) and fails.stats.lost_gpu_seconds == 30.0 * 2


def test_training_that_reaches_the_interval_at_the_round_end_checkpoints_there() -> None:
    """90 s of training in a round of 90 s reach the 90 s interval: the checkpoint is taken then,
    so a failure at the very start of the next round (nothing trained since) loses nothing.
    Taken only past the interval, the job went back to 0."""
    fails = _failures_at({90.0: (1,)})
    job = _LinearJob()
    assert fails.advance([job], 0.0, 90.0) == [] and fails.saved[0] == (90.0, 0)
    assert fails.advance([job], 90.0, 60.0) == [0]
    assert job.progress == 90.0 and fails.stats.lost_gpu_seconds == 0.0


def test_a_jobs_first_failure_in_a_round_stops_it() -> None:
    """Two of the job's GPUs fail at 100 s and 110 s: it stops at 100 s (the later one was
    taken), 10 s after its checkpoint at 90 s, and the first failure is the one that stopped it."""
    fails = _failures_at({100.0: (0,), 110.0: (1,)})
    job = _LinearJob()
    fails.advance([job], 0.0, 60.0)
    assert fails.advance([job], 60.0, 60.0) == [0]
    assert job.progress == 90.0 and fails.stats.lost_gpu_seconds == 10.0 * 2
    assert [e["jobs"] for e in fails.log()] == [["j0"], []]


def test_a_job_that_finished_before_its_gpu_failed_is_not_stopped() -> None:
    fails = _failures_at({50.0: (0,)})
    job = _LinearJob()

    def finish(seconds: float, now: float) -> None:  # done after 30 s of training
        _LinearJob.advance(job, seconds, now)
        job.done = job.progress >= 30.0

    job.advance = finish
    assert fails.advance([job], 0.0, 60.0) == []
    assert job.done and job.progress == 50.0 and fails.stopped(0) == 0 and fails.stats.hits == []


def test_a_suspended_job_checkpoints_as_it_stops() -> None:
    """A job the round left without GPUs (no restart counted) is suspended: its state is saved
    then (only restarts did)."""
    fails = _failures_at({})
    job = _LinearJob()
    fails.advance([job], 0.0, 60.0)
    job.allocation = ()
    fails.checkpoint_moved([job], {0: (0, True)})  # type: ignore[list-item]  # held GPUs before
    assert fails.saved[0] == (60.0, 0) and fails.since[0] == 0.0


def test_each_failure_is_logged_with_the_jobs_it_stopped_across_rounds() -> None:
    """Failures of later rounds are numbered after the earlier ones (each round's were counted
    from 0, so a job stopped in the second round was logged under the first failure)."""
    fails = _failures_at({30.0: (0,), 100.0: (1,)})
    job = _LinearJob()
    assert fails.advance([job], 0.0, 60.0) == [0]
    job.allocation, job.shape, job.gpus = (0, 1), (2,), 2  # placed again
    assert fails.advance([job], 60.0, 60.0) == [0]
    assert [e["jobs"] for e in fails.log()] == [["j0"], ["j0"]]
