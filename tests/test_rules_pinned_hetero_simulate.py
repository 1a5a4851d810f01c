"""Rules of pal_opt/hetero/simulate.py (summarize) that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pal_opt.hetero.configs import PAPER_CLUSTER, GpuType
from pal_opt.hetero.profiles import Application, load_applications
from pal_opt.hetero.simulate import JobRecord, SiaResult, SimConfig, build_cluster, simulate_sia, summarize
from pal_opt.hetero.workload import Workload, workload_from_frame


def _rec(name: str, submit: float, start: float | None, done: float | None, restarts: int = 0,
         app: str = "cifar10") -> JobRecord:
    return JobRecord(name, app, "adaptive", submit, start, done, restarts, 1)


def _result(jobs: tuple[JobRecord, ...], use: list[list[int]] | None = None, **kw: object) -> SiaResult:
    cluster = (GpuType("aws", 2, 4),)
    u = np.array(use if use is not None else [[4], [8]], dtype=np.int64)
    return SiaResult(jobs=jobs, gpus_in_use=u, cluster=cluster, round_length=60.0, solve_seconds=0.0,
                     max_solve_seconds=0.0, rounds_not_optimal=0, wall_seconds=0.0, **kw)  # type: ignore[arg-type]


def test_p50_jct_is_the_median_not_the_mean() -> None:
    s = summarize(_result((_rec("a", 0, 0, 10), _rec("b", 0, 0, 20), _rec("c", 0, 0, 90))))
    assert s["p50_jct"] == 20.0
    assert s["avg_jct"] == 40.0


def test_makespan_counts_from_first_submission_of_any_job() -> None:
    # the first job to arrive never finished; the makespan still starts at its submission
    jobs = (_rec("early", 50, 50, None), _rec("b", 100, 100, 300))
    assert summarize(_result(jobs))["makespan"] == 250.0


def test_restarts_count_unfinished_jobs_too() -> None:
    jobs = (_rec("a", 0, 0, 50, restarts=1), _rec("b", 0, 0, None, restarts=3))
    s = summarize(_result(jobs))
    assert s["restarts"] == 4
    assert s["avg_restarts_per_job"] == 2.0


def test_queueing_delay_counts_started_unfinished_jobs() -> None:
    jobs = (_rec("a", 0, 10, 50), _rec("b", 0, 30, None), _rec("c", 0, None, None))
    s = summarize(_result(jobs))
    assert s["avg_queueing_delay"] == 20.0
    assert s["p99_queueing_delay"] == 30.0


def test_p99_queueing_delay_uses_the_index_rule() -> None:
    # 200 waits 0..199: index floor(0.99 * 200) = 198, not the maximum 199
    jobs = tuple(_rec(f"j{k}", 0, float(k), float(k) + 1) for k in range(200))
    s = summarize(_result(jobs))
    assert s["p99_queueing_delay"] == 198.0
    assert s["p99_jct"] == 199.0


def test_variability_placement_floor_is_its_own_mean() -> None:
    s = summarize(_result((_rec("a", 0, 0, 10),), slowdown_sum=6.0, floor_sum=3.0, job_rounds=3))
    assert s["variability_slowdown"] == {"mean": 2.0, "placement_floor": 1.0}


def test_utilisation_is_held_gpus_over_cluster_gpus() -> None:
    s = summarize(_result((_rec("a", 0, 0, 10),), use=[[4], [8]]))
    assert s["avg_gpus_in_use"] == 6.0
    assert s["utilisation"] == 0.75


def _sia_profiles() -> Path:
    d = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sia-artifact" / "profiles"
    if not d.is_dir():
        pytest.skip(f"Sia artifact data not available at {d}")
    return d


def _one_job(submit: float) -> tuple[Workload, dict[str, Application]]:
    import pandas as pd

    apps = dict(load_applications(_sia_profiles(), ["cifar10"]))
    frame = pd.DataFrame([("cifar10-0", submit, "cifar10", 4, 2048)],
                         columns=["name", "time", "application", "num_replicas", "batch_size"])
    frame["category"] = ""
    return workload_from_frame(frame, source="hand-made"), apps


def test_a_job_submitted_on_a_round_boundary_starts_that_round() -> None:
    wl, apps = _one_job(60.0)
    res = simulate_sia(wl, apps, PAPER_CLUSTER, SimConfig(max_time=600.0))
    assert res.jobs[0].start_time == 60.0


def test_gpus_in_use_count_jobs_in_their_restart_delay() -> None:
    wl, apps = _one_job(0.0)
    res = simulate_sia(wl, apps, PAPER_CLUSTER, SimConfig(max_time=120.0))
    # the job is placed at t=60 and is in its restart delay when that round's use is recorded
    assert res.gpus_in_use[0].sum() >= 1


def test_node_limit_is_the_smallest_over_the_applications() -> None:
    def app(nodes: list[int]) -> SimpleNamespace:
        prof = SimpleNamespace(placements=SimpleNamespace(num_nodes=np.array(nodes)),
                               scalability=SimpleNamespace(num_nodes=np.array([], dtype=np.int64)))
        return SimpleNamespace(types={"x": prof}, profile=lambda name: prof)

    out = build_cluster([("x", 8, 4)], {"a": app([1, 2]), "b": app([1, 2, 3, 5])})  # type: ignore[dict-item]
    assert out[0].max_physical_nodes == 2
    assert out[0].node_limit == 2


def test_a_rigid_job_holds_all_its_gpus_and_runs_at_its_slowest_factor() -> None:
    import pandas as pd

    from pal_opt.hetero.gpus import Variability

    apps = dict(load_applications(_sia_profiles(), ["cifar10"]))
    frame = pd.DataFrame([("cifar10-0", 0.0, "cifar10", 4, 2048)],
                         columns=["name", "time", "application", "num_replicas", "batch_size"])
    frame["category"] = "rigid"
    wl = workload_from_frame(frame, source="hand-made")
    cluster = build_cluster([("aws", 1, 4)], apps)
    factors = np.array([1.0, 1.0, 2.0, 1.0])
    var = Variability(raw={"cifar10": factors}, binned={"cifar10": factors})
    res = simulate_sia(wl, apps, cluster, SimConfig(max_time=300.0, variability=var))
    assert res.gpus_in_use[:, 0].max() == 4  # GPUs held, not jobs
    assert res.summary()["variability_slowdown"]["mean"] == 2.0  # the slowest of its GPUs


def test_queueing_delay_counts_from_submission() -> None:
    jobs = (_rec("a", 100, 130, 200), _rec("b", 40, 100, None))
    s = summarize(_result(jobs))
    assert s["avg_queueing_delay"] == 45.0 and s["p50_queueing_delay"] == 45.0
