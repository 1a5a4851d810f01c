"""The policies of GPU types in the caller's round loop (pal_opt.hetero.scheduler.TypedScheduler).

The fidelity tests drive the scheduler as a scheduler author would, with the simulator's own
jobs standing in for the real ones (:class:`Agent`: a :class:`SimJob` trained by the profiles,
which reports what it measured), and require the simulator's allocations round by round (type,
GPU ids, batch) and its job records (start, completion, restarts, epochs) exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import pal_opt
from pal_opt.errors import InstanceError, OptionError, PalOptError
from pal_opt.hetero import simulate as simulate_module
from pal_opt.hetero.configs import GpuType
from pal_opt.hetero.goodput import JobKind
from pal_opt.hetero.gpus import Layout, Variability
from pal_opt.hetero.methods import HETERO_POLICIES, hetero_policy_names
from pal_opt.hetero.profiles import Application, load_applications
from pal_opt.hetero.roundstep import round_step_unchecked
from pal_opt.hetero.scheduler import Change, JobAllocation, RoundPlan, StepTime, TypedScheduler
from pal_opt.hetero.simjob import SimJob, epoch_grad_stats, true_step_time
from pal_opt.hetero.simulate import JobRecord, SimConfig, build_cluster, parse_cluster, simulate_sia
from pal_opt.hetero.workload import Workload, read_workload, workload_from_frame

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "examples" / "data" / "newtrace-mini.csv"
CLUSTER = "aws:6x4,rtx:3x8,dgx-ext:2x8"
ROUND = 60.0

#: per round: {job name: (GPU type, GPU ids, global batch)} of the jobs the round allocated for
Rounds = list[dict[str, tuple[str | None, tuple[int, ...], int | None]]]


@pytest.fixture(scope="module")
def apps(profiles: Path) -> dict[str, Application]:
    return dict(load_applications(profiles, ["bert", "cifar10", "deepspeech2"]))


@pytest.fixture(scope="module")
def cluster(apps: dict[str, Application]) -> tuple[GpuType, ...]:
    return build_cluster(parse_cluster(CLUSTER), apps)


# -- the caller's loop, with the simulator's jobs as the real ones ---------------------------------
class Agent(SimJob):
    """A real job: it trains by the profiles (the simulator's progress model) and logs every
    step time it measures, for its report."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.log: list[tuple[tuple[int, int, int], tuple[float, float], tuple[float, float]]] = []

    def observe(self, type_index: int, key: tuple[int, int, int], times: tuple[float, float], grad: tuple[float, float]) -> None:
        self.log.append((key, times, grad))
        super().observe(type_index, key, times, grad)

    def run(self, sched: TypedScheduler, now: float) -> None:
        """Train one round, report what was measured, say when done."""
        self.log.clear()
        self.advance(ROUND, now)
        if self.log:
            grad = self.log[-1][2]
            sched.report(self.name, epoch=self.epoch, progress=self.progress, grad_sqr=grad[0], grad_var=grad[1],
                         step_times=[StepTime(key[2], *times) for key, times, _ in self.log])
        if self.done:
            assert self.completion_time is not None
            sched.finish(self.name, self.completion_time)

    def take(self, alloc: JobAllocation, types: list[str], now: float) -> None:
        """Launch on the round's GPUs (as the simulator applies an allocation)."""
        if alloc.gpus != (self.allocation or ()) or (self.allocation is None and alloc.gpus):
            t = None if alloc.gpu_type is None else types.index(alloc.gpu_type)
            self.reallocate(t, alloc.shape, now)
            self.allocation = alloc.gpus


def drive(workload: Workload, apps: Mapping[str, Application], cluster: Any, policy: str) -> tuple[Rounds, tuple[JobRecord, ...], list[RoundPlan]]:
    """The workload through a :class:`TypedScheduler`, round by round, until every job is done."""
    sched = TypedScheduler(cluster, apps, policy)
    types = [t.name for t in sched.cluster]
    rigid = HETERO_POLICIES.get_item(policy).rigid
    agents = {}
    for i, spec in enumerate(workload):
        sched.submit(spec.name, spec.application, spec.num_replicas, spec.batch_size, spec.submit_time,
                     kind=spec.kind.value)
        agents[spec.name] = Agent(i, replace(spec, kind=JobKind.RIGID) if rigid else spec, apps[spec.application], types)
    now, rounds, plans = 0.0, [], []
    while any(not a.done and a.name not in sched.unplaceable for a in agents.values()):
        for agent in agents.values():
            if agent.shape and not agent.done:
                agent.run(sched, now)
        now += ROUND
        plan = sched.schedule(now)
        for alloc in plan.jobs:
            agents[alloc.name].take(alloc, types, now)
        if plan.jobs:
            plans.append(plan)
            rounds.append({a.name: (a.gpu_type, a.gpus, a.batch_size) for a in plan.jobs if a.state != "unplaceable"})
    return rounds, sched.records(), plans


def simulate_recorded(workload: Workload, apps: Mapping[str, Application], cluster: Any, policy: str) -> tuple[Rounds, tuple[JobRecord, ...]]:
    """``simulate_sia`` with every round's allocations recorded after its round step."""
    rounds: Rounds = []

    def recording(pol: Any, layout: Layout, variability: Variability, active: list[SimJob], now: float,
                  out_of_service: Any = None) -> dict[int, str]:
        found = round_step_unchecked(pol, layout, variability, active, now, out_of_service)
        rounds.append({
            j.name: (None if j.type_index is None else layout.types[j.type_index].name, tuple(j.allocation or ()),
                     j.choice.global_batch(j.gpus) if j.shape and j.choice else None)
            for j in active if j.index not in found
        })
        return found

    mp = pytest.MonkeyPatch()
    mp.setattr(simulate_module, "round_step_unchecked", recording)
    try:
        result = simulate_sia(workload, apps, cluster, SimConfig(policy=policy))
    finally:
        mp.undo()
    return rounds, result.jobs


def assert_same_as_the_simulator(workload: Workload, apps: Mapping[str, Application], cluster: Any, policy: str) -> list[RoundPlan]:
    sim_rounds, sim_records = simulate_recorded(workload, apps, cluster, policy)
    rounds, records, plans = drive(workload, apps, cluster, policy)
    assert len(rounds) == len(sim_rounds)
    for i, (mine, theirs) in enumerate(zip(rounds, sim_rounds, strict=True)):
        assert mine == theirs, f"round {i + 1} ({(i + 1) * ROUND:g} s) differs"
    assert records == sim_records  # start, completion (so the JCT), restarts and epochs of every job
    assert all(r.completion_time is not None for r in records if r.name not in {u.name for p in plans for u in p.unplaceable})
    # a job keeps its GPUs exactly when the plan says so; every restart the records count is a
    # change the plans announced
    last: dict[str, tuple[int, ...]] = {}
    for plan in plans:
        for a in plan.jobs:
            assert (a.change in (Change.KEEP, Change.NONE)) == (a.gpus == last.get(a.name, ())), (plan.now, a)
            last[a.name] = a.gpus
    for r in records:
        changes = [a.change for p in plans for a in p.jobs if a.name == r.name]
        assert sum(c.restarts for c in changes) == (r.restarts + 1 if r.start_time is not None else 0)
        assert changes.count(Change.START) == (r.start_time is not None)
    return plans


@pytest.mark.parametrize("policy", ["sia", "ilp"])
def test_newtrace_mini_allocations_and_jcts_are_the_simulators(apps: dict[str, Application], cluster: Any, policy: str) -> None:
    plans = assert_same_as_the_simulator(read_workload(MINI), apps, cluster, policy)
    assert {a.change for p in plans for a in p.jobs} == {Change.START, Change.KEEP, Change.RESHAPE, Change.MIGRATE,
                                                         Change.MOVE}


@pytest.mark.parametrize("policy", ["sia", "ilp"])
def test_a_newtrace7_slice_allocations_and_jcts_are_the_simulators(shared_dir: Path, apps: dict[str, Application],
                                                                   cluster: Any, policy: str) -> None:
    full = read_workload(shared_dir / "data" / "sia-artifact" / "workloads" / "newtrace-7.csv")
    workload = workload_from_frame(full.frame().iloc[:20].copy(), source="newtrace-7[:20]")
    plans = assert_same_as_the_simulator(workload, apps, cluster, policy)
    assert max(len(p.allocated) for p in plans) >= 8  # the jobs contend for the cluster
    assert any(a.change is Change.MIGRATE for p in plans for a in p.jobs)


@pytest.mark.parametrize("policy", hetero_policy_names())
def test_every_policy_and_kind_is_the_simulators(apps: dict[str, Application], cluster: Any, policy: str) -> None:
    frame = read_workload(MINI).frame()
    frame["category"] = ["rigid", "adaptive", "scale-gpus", "rigid", "scale-gpus", "adaptive"]
    assert_same_as_the_simulator(workload_from_frame(frame, source="mini, kinds"), apps, cluster, policy)


# -- what a report leaves out ------------------------------------------------------------------------
def _life(apps: dict[str, Application], cluster: Any, steps: str, grad: tuple[float, float] | None = None) -> list[JobAllocation]:
    """A cifar10 job's allocations over three rounds, reporting after each: step times
    ``"derived"`` (left out), ``"profile"`` (the profile's, given) or ``"none"``; ``grad`` given,
    or the curves' (``steps == "profile"``) or left out."""
    app = apps["cifar10"]
    sched = TypedScheduler(cluster, apps)
    sched.submit("c", "cifar10", 4, 2048, 0.0)
    out = [sched.schedule(60.0)["c"]]
    for k, epoch in enumerate((3, 4), start=2):
        a = out[-1]
        assert a.gpu_type is not None and a.atomic_bsz is not None and a.batch_size is not None
        kw: dict[str, Any] = {}
        g = grad
        if steps == "profile":
            # the profile's step time of the shape at the job's per-GPU batch, and the validation
            # curves' gradient statistics of the epoch in progress at its global batch
            kw["step_times"] = [StepTime(a.atomic_bsz, *true_step_time(app.profile(a.gpu_type), a.shape, a.atomic_bsz))]
            g = g or epoch_grad_stats(app, a.batch_size, epoch)
        elif steps == "none":
            kw["step_times"] = ()
        if g is not None:
            kw.update(grad_sqr=g[0], grad_var=g[1])
        sched.report("c", epoch=epoch, **kw)
        out.append(sched.schedule(k * 60.0)["c"])
    return out


def test_a_report_without_observations_measures_as_the_simulator_does(apps: dict[str, Application], cluster: Any) -> None:
    derived = _life(apps, cluster, "derived")
    assert derived[0].state == "allocated" and derived[0].change is Change.START and derived[0].restart
    assert derived == _life(apps, cluster, "profile")
    # with an observation the job has a model, and Sia may double the GPUs it ran on; without, not
    assert [len(a.gpus) for a in derived] == [1, 2, 4]
    assert [len(a.gpus) for a in _life(apps, cluster, "none")] == [1, 1, 1]
    # given gradient statistics replace the curves' whether the step times are given or not
    noisy = _life(apps, cluster, "derived", (1.0, 100.0))
    assert noisy == _life(apps, cluster, "profile", (1.0, 100.0))
    assert noisy != derived


def test_the_same_calls_give_the_same_plans(apps: dict[str, Application], cluster: Any) -> None:
    def run() -> list[dict[str, Any]]:
        sched = TypedScheduler(cluster, apps, "ilp")
        for spec in read_workload(MINI):
            sched.submit(spec.name, spec.application, spec.num_replicas, spec.batch_size, spec.submit_time)
        out = []
        for k in range(1, 25):
            plan = sched.schedule(k * ROUND)
            for a in plan.allocated:
                sched.report(a.name, epoch=k // 4)
            out.append(plan.to_dict())
        return out

    first = run()
    assert first == run()
    json.dumps(first)  # JSON-ready
    assert first[-1]["jobs"][0].keys() >= {"name", "state", "gpu_type", "gpus", "servers", "shape", "batch_size",
                                           "change", "restart", "reason"}


def test_plans_name_gpus_servers_and_shape(apps: dict[str, Application], cluster: Any) -> None:
    sched = TypedScheduler(cluster, apps)
    for n in range(70):
        sched.submit(f"c{n}", "cifar10", 4, 2048, 0.0)
    plan = sched.schedule(0.0)
    layout = Layout(sched.cluster)
    servers = layout.server_of()
    taken: set[int] = set()
    for a in plan.allocated:
        assert a.gpu_type is not None and a.batch_size is not None and a.atomic_bsz is not None and a.accum_steps is not None
        assert {sched.cluster[int(layout.type_of[g])].name for g in a.gpus} == {a.gpu_type}
        assert a.servers == tuple(int(servers[g]) for g in a.gpus)
        assert sum(a.shape) == len(a.gpus) and a.batch_size == len(a.gpus) * a.atomic_bsz * (a.accum_steps + 1)
        assert not taken & set(a.gpus)
        taken |= set(a.gpus)
    # a job that has run nowhere may have one GPU (Sia's cap): 64 of the 70 run
    assert (len(plan.allocated), len(plan.waiting), len(taken)) == (64, 6, 64)
    assert [a.name for a in plan.jobs] == [f"c{n}" for n in range(70)]
    from pal_opt.errors import UnknownJobError

    # a pal-opt error naming the round (a KeyError too): Python's bare KeyError('nope') before
    with pytest.raises(UnknownJobError, match=r"^job 'nope' is not in the plan of round \d+: it was not submitted by "
                                              r"then, or has finished or been removed$"):
        plan["nope"]
    with pytest.raises(KeyError):
        plan["nope"]


# -- jobs that never run, finishing, removing ----------------------------------------------------
def test_a_job_that_can_never_run_is_listed_with_its_reason_until_removed(apps: dict[str, Application], cluster: Any) -> None:
    sched = TypedScheduler(cluster, apps)
    why = sched.submit("huge", "bert", 40, 384, 0.0, kind="rigid")
    assert why == "a rigid job needs 40 GPUs of one type; the largest type, aws, has 24"
    sched.submit("small", "cifar10", 1, 2048, 0.0, kind="rigid")
    plan = sched.schedule(0.0)
    assert [(a.name, a.reason) for a in plan.unplaceable] == [("huge", why)]
    assert plan["huge"].gpus == () and plan["small"].state == "allocated"
    assert sched.unplaceable == {"huge": why}
    sched.remove("huge")
    assert [a.name for a in sched.schedule(60.0).jobs] == ["small"]
    sched.finish("small", 100.0)
    assert sched.schedule(120.0).jobs == ()
    (rec,) = sched.records()
    assert (rec.name, rec.start_time, rec.completion_time, rec.jct) == ("small", 0.0, 100.0, 100.0)


@pytest.mark.parametrize("policy", ["sia", "ilp"])
def test_a_long_run_keeps_no_state_of_finished_or_removed_jobs(apps: dict[str, Application], cluster: Any,
                                                                policy: str) -> None:
    """A scheduler runs for weeks.  The policy kept a goodput row for every job it had ever
    scored (2,400 after 1,200 rounds in a review's loop, removed jobs included), and every round
    scanned every finished job's entry (36 ms a round with 40,000 kept)."""
    sched = TypedScheduler(cluster, apps, policy)
    for k in range(8):
        now = 60.0 * k
        sched.submit(f"a{k}", "cifar10", 1, 2048, now)
        sched.submit(f"b{k}", "bert", 2, 384, now)
        plan = sched.schedule(now)
        assert {a.name for a in plan.jobs} == {f"a{k}", f"b{k}"} | ({f"a{k - 1}"} if k else set())
        # rows of this round's jobs only: none of a finished or removed one
        assert set(sched._policy._rows) <= {e.job.index for e in sched._live.values()}
        sched.finish(f"b{k}", now + 1.0)  # finished, its record kept
        if k:
            sched.finish(f"a{k - 1}", now + 1.0)
            sched.remove(f"a{k - 1}")  # finished and forgotten
    assert set(sched._live) == {"a7"}
    assert [r.name for r in sched.records()] == [f"b{k}" for k in range(7)] + ["a7", "b7"]  # submission order


def test_jobs_wait_for_their_submission_time_and_gavel_runs_them_rigid(apps: dict[str, Application], cluster: Any) -> None:
    sched = TypedScheduler(cluster, apps, "gavel")
    sched.submit("later", "cifar10", 2, 2048, 90.0)
    assert sched.schedule(60.0).jobs == ()
    assert sched.schedule(120.0)["later"].state == "waiting"  # gavel decides every 360 s: at 60, 420, ...
    plan = sched.schedule(420.0)
    assert plan["later"].state == "allocated" and len(plan["later"].gpus) == 2 and plan["later"].change is Change.START
    assert sched.records()[0].kind == "rigid"


def test_a_plan_says_what_the_round_did_to_each_job(apps: dict[str, Application]) -> None:
    # two rigid 4-GPU jobs on one 4-GPU server under gavel: they take turns, one gavel round each
    sched = TypedScheduler("aws:1x4", apps, "gavel")
    sched.submit("a", "cifar10", 4, 2048, 0.0)
    sched.submit("b", "cifar10", 4, 2048, 0.0)
    seen = [[(j.change, j.restarts) for j in sched.schedule(t).jobs] for t in (0.0, 60.0, 360.0, 720.0)]
    assert seen == [
        [(Change.START, 0), (Change.NONE, 0)],
        [(Change.KEEP, 0), (Change.NONE, 0)],
        [(Change.SUSPEND, 0), (Change.START, 0)],
        [(Change.RESUME, 1), (Change.SUSPEND, 0)],
    ]
    assert [c.restarts for c in Change] == [True, True, True, True, False, False, False, False]


# -- errors: one clear line each -------------------------------------------------------------------
def _one_line(err: pytest.ExceptionInfo[PalOptError], *parts: str) -> None:
    text = str(err.value)
    assert "\n" not in text
    for part in parts:
        assert part in text


def test_bad_calls_are_clear_one_line_errors(apps: dict[str, Application], cluster: Any) -> None:
    sched = TypedScheduler(cluster, apps)
    sched.submit("a", "cifar10", 2, 2048, 0.0)
    cases: list[tuple[Any, type[PalOptError], tuple[str, ...]]] = [
        (lambda: sched.submit("x", "resnet", 2, 64, 0.0), InstanceError, ("job 'x'", "unknown application 'resnet'", "cifar10")),
        (lambda: sched.submit("a", "cifar10", 2, 2048, 0.0), OptionError, ("duplicate job name 'a'",)),
        # said of the argument and the job, with the kinds submit takes (it said "unknown job category",
        # the workload CSV's column, and offered "guaranteed (or empty)" but not "strong-scaling")
        (lambda: sched.submit("x", "cifar10", 2, 2048, 0.0, kind="elastic"), OptionError,
         ("job 'x': unknown kind 'elastic' (choose from adaptive, strong-scaling or scale-gpus, rigid)",)),
        (lambda: sched.submit("x", "cifar10", 2, 2048, 0.0, kind="guaranteed"), InstanceError, ("no model of guaranteed",)),
        (lambda: sched.submit("x", "cifar10", 2, 7, 0.0), InstanceError, ("batch size 7 outside cifar10's validated range",)),
        (lambda: sched.submit("x", "cifar10", 0, 2048, 0.0), OptionError, ("num_replicas must be an integer >= 1",)),
        (lambda: sched.report("ghost", epoch=1), OptionError, ("unknown job 'ghost'",)),
        (lambda: sched.finish("ghost", 1.0), OptionError, ("unknown job 'ghost'",)),
        (lambda: sched.remove("ghost"), OptionError, ("unknown job 'ghost'",)),
        (lambda: sched.report("a", step_times=[StepTime(64, 0.2, 0.01)]), OptionError, ("holds no GPUs",)),
        (lambda: sched.report("a", grad_sqr=1.0), OptionError, ("grad_sqr and grad_var together",)),
        (lambda: StepTime(64, 0.2, 0.3), OptionError, ("below the step time",)),
    ]
    for call, kind, parts in cases:
        with pytest.raises(kind) as err:
            call()
        _one_line(err, *parts)
    sched.schedule(120.0)
    sched.report("a", epoch=2)
    for call, kind, parts in [
        (lambda: sched.schedule(60.0), OptionError, ("schedule(60) after schedule(120)", "time cannot go backwards")),
        (lambda: sched.submit("y", "cifar10", 2, 2048, 30.0), OptionError, ("before the last round at 120 s",)),
        (lambda: sched.report("a", epoch=1), OptionError, ("epoch 1 is before the 2 reported already",)),
        (lambda: sched.finish("a", 60.0), OptionError, ("before it started at 120 s",)),
    ]:
        with pytest.raises(kind) as err:
            call()
        _one_line(err, *parts)
    sched.schedule(240.0)  # a finish time before a round that gave the job GPUs was accepted (review)
    with pytest.raises(OptionError) as err:
        sched.finish("a", 180.0)
    _one_line(err, "finished at 180 s, before the last round at 240 s, which gave it GPUs")
    sched.finish("a", 500.0)
    for call, parts in [(lambda: sched.report("a", epoch=3), ("has finished",)),
                        (lambda: sched.finish("a", 600.0), ("has finished already, at 500 s",))]:
        with pytest.raises(OptionError) as err:
            call()
        _one_line(err, *parts)


def test_bad_construction_is_a_clear_one_line_error(profiles: Path, apps: dict[str, Application], cluster: Any) -> None:
    for kwargs, kind, parts in [
        ({"policy": "fifo"}, OptionError, ("unknown policy 'fifo'", "sia")),
        ({"round_length": 30}, OptionError, ("unknown option 'round_length'", "gavel_round")),
        # a setting of Sia's parameters, given as RoundPolicy takes it: it said only "unknown option"
        ({"time_limit": 5}, OptionError, ("time_limit is one of Sia's parameters: give "
                                          "sia_params=SiaParams(time_limit=...) to TypedScheduler",)),
        ({"variability": Variability(raw={"classA": [1.0] * 3})}, OptionError, ("3 GPUs; the cluster has 64",)),
    ]:
        with pytest.raises(kind) as err:
            TypedScheduler(cluster, apps, **kwargs)
        _one_line(err, *parts)
    with pytest.raises(InstanceError) as err:
        TypedScheduler("aws:1x4,v100:2x8", apps)
    _one_line(err, "no profile for GPU type 'v100'")
    with pytest.raises(OptionError) as err:
        TypedScheduler("aws:1x", apps)
    _one_line(err, "expected TYPE:SERVERSxGPUS")
    with pytest.raises(OptionError) as err:
        TypedScheduler([("aws", 0, 4)], apps)
    _one_line(err, "GPU type 'aws': servers must be an integer >= 1, got 0")
    with pytest.raises(InstanceError) as err:
        TypedScheduler(CLUSTER, apps, applications=["cifar10", "ncf"])
    _one_line(err, "unknown application 'ncf'")
    # a folder: every application the simulator models; the others are named with why
    sched = TypedScheduler(CLUSTER, profiles)
    assert {"bert", "cifar10", "deepspeech2", "imagenet", "yolov3"} <= set(sched.applications)
    with pytest.raises(InstanceError) as err:
        sched.submit("g", "gpt_pmp", 2, 64, 0.0)
    _one_line(err, "unknown application 'gpt_pmp': it is not simulated")


def test_arguments_of_the_wrong_type_are_clear_one_line_errors(apps: dict[str, Application], cluster: Any) -> None:
    """What a caller may get wrong in Python's types: each an OptionError naming the argument,
    never a TypeError, AttributeError or ValueError from inside (and a bad backend at once, not
    in the first round that needs the solver)."""
    for args, kwargs, parts in [
        ((None, apps), {}, ("the cluster must be a text",)),
        ((["aws:1x4"], apps), {}, ("a GPU type of the cluster must be a GpuType", "'aws:1x4'")),
        (([("aws", 1)], apps), {}, ("(name, servers, GPUs per server)", "('aws', 1)")),
        ((CLUSTER, 5), {}, ("profiles must be a folder or a mapping",)),
        ((CLUSTER, apps), {"applications": "cifar10"}, ("applications must be a sequence of application names",)),
        ((CLUSTER, apps), {"sia_params": {"p": -1.0}}, ("sia_params must be a SiaParams",)),
        ((CLUSTER, apps), {"backend": "gurobi"}, ("unknown backend 'gurobi'",)),
    ]:
        with pytest.raises(OptionError) as err:
            TypedScheduler(*args, **kwargs)
        _one_line(err, *parts)
    sched = TypedScheduler(cluster, apps)
    with pytest.raises(OptionError) as err:
        sched.submit("a", "cifar10", 2, 2048, 0.0, kind=3)  # type: ignore[arg-type]
    _one_line(err, "job 'a': kind must be a JobKind or its name, got 3")
    sched.submit("a", "cifar10", 2, 2048, 0.0)
    assert sched.schedule(0.0)["a"].state == "allocated"
    for steps, parts in [([(64, 0.2, 0.01)], ("must hold StepTime", "(64, 0.2, 0.01)")),
                         (5, ("must be a sequence of StepTime, got 5",)), ("ab", ("got 'ab'",))]:
        with pytest.raises(OptionError) as err:
            sched.report("a", step_times=steps)  # type: ignore[arg-type]
        _one_line(err, *parts)


def test_a_report_that_raises_records_nothing(apps: dict[str, Application], cluster: Any) -> None:
    sched = TypedScheduler(cluster, apps)
    sched.submit("a", "cifar10", 2, 2048, 0.0)
    sched.schedule(0.0)
    job = sched._entries["a"].job
    before = (job.epoch, job.progress, job.grad)
    for kwargs in [{"epoch": 3, "progress": 5.0, "grad_sqr": float("nan"), "grad_var": 1.0},
                   {"epoch": 3, "progress": 5.0, "step_times": [StepTime(64, 0.2, 0.01), None]}]:
        with pytest.raises(OptionError):
            sched.report("a", **kwargs)
        assert (job.epoch, job.progress, job.grad) == before

def test_the_cluster_may_be_gpu_types_or_tuples_and_is_exported_at_the_top(apps: dict[str, Application], cluster: Any) -> None:
    by_text = TypedScheduler(CLUSTER, apps).cluster
    assert TypedScheduler(parse_cluster(CLUSTER), apps).cluster == by_text == tuple(cluster)
    assert TypedScheduler([GpuType(t.name, t.nodes, t.gpus_per_node) for t in cluster], apps).cluster == by_text
    assert pal_opt.TypedScheduler is TypedScheduler
    assert "TypedScheduler" in pal_opt.__all__


def test_the_one_blas_thread_limit_holds_until_the_last_overlapping_context_leaves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """BLAS has one thread count per process: two schedulers in two threads each limited it and
    restored it on leaving, so the first to leave ended the limit under the other.  The limit is
    now set by the first context in and restored by the last one out.  (A fake controller
    records it: OpenBLAS's own reading of its thread count, from a thread, is not reliable.)"""
    import threading

    import pal_opt.hetero.roundstep as roundstep

    events: list[str] = []

    class _Limiter:
        def restore_original_limits(self) -> None:
            events.append("restore")

    class _Controller:
        def limit(self, *, limits: int, user_api: str) -> _Limiter:
            assert (limits, user_api) == (1, "blas")
            events.append("limit")
            return _Limiter()

    monkeypatch.setattr(roundstep, "_blas_controller", lambda: _Controller())
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with roundstep.one_blas_thread():
            a_in.set()
            assert b_in.wait(30)
        events.append("first out")
        a_out.set()

    def second() -> None:
        assert a_in.wait(30)
        with roundstep.one_blas_thread():
            b_in.set()
            assert a_out.wait(30)
        events.append("second out")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert events == ["limit", "first out", "restore", "second out"]
    with roundstep.one_blas_thread():  # and again from scratch
        pass
    assert events[-2:] == ["limit", "restore"]


@pytest.mark.parametrize(("limit", "expected"), [(None, 10.0), (0.5, 0.5), (30.0, 10.0)])
def test_ilp_placement_program_keeps_to_the_time_limit(apps: dict[str, Application], cluster: Any,
                                                      monkeypatch: pytest.MonkeyPatch, limit: float | None,
                                                      expected: float) -> None:
    """``SiaParams(time_limit=T)`` bounds every round program, but ``ilp``'s placement program
    after Sia's was given 10 s whatever T was."""
    import importlib

    from pal_opt.hetero.policy import SiaParams

    solve_module = importlib.import_module("pal_opt.solve")
    real = solve_module.solve
    given: list[Any] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        given.append(kwargs.get("time_limit"))
        return real(*args, **kwargs)

    monkeypatch.setattr(solve_module, "solve", recording)
    sched = TypedScheduler(cluster, apps, "ilp", sia_params=SiaParams(time_limit=limit))
    for i in range(3):
        sched.submit(f"c{i}", "cifar10", 2, 2048, 0.0, kind="rigid")
    assert len(sched.schedule(0.0).allocated) == 3
    assert given and set(given) == {expected}
