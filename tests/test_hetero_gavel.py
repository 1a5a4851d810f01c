"""The Gavel-like comparator of ``sia`` (``--policy gavel``): its max-min allocation LP, its round
mechanism and short simulations on the Sia artifact's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pal_opt import cli
from pal_opt.check import violations
from pal_opt.errors import OptionError
from pal_opt.hetero.gavel import GavelPolicy, gavel_allocation
from pal_opt.hetero.gpus import Layout
from pal_opt.hetero.methods import HETERO_POLICIES
from pal_opt.hetero.profiles import Application, load_applications
from pal_opt.hetero.simulate import SimConfig, build_cluster, parse_cluster, simulate_sia
from pal_opt.hetero.workload import Workload, read_workload, workload_from_frame
from pal_opt.model import Cluster, Job, RoundInstance

PAPER = "aws:6x4,rtx:3x8,dgx-ext:2x8"


# -- the allocation LP ---------------------------------------------------------------------------
def test_two_jobs_each_get_the_type_that_favours_them() -> None:
    a = gavel_allocation(np.array([[3.0, 1.0], [1.0, 3.0]]), [1, 1], [1, 1])
    assert np.allclose(a.x, [[1, 0], [0, 1]], atol=1e-7)
    # equal share: each job half of each GPU, throughput 2; alone on its fast GPU: 3 -> 1.5
    assert a.level == pytest.approx(1.5) and np.allclose(a.normalised, 1.5)


def test_max_min_shares_a_type_both_jobs_prefer() -> None:
    # Both jobs 4x faster on type 0 (one GPU), type 1 (one GPU) slow for both: by symmetry the
    # max-min optimum gives each job half of each type; any other split lowers one job.
    a = gavel_allocation(np.array([[4.0, 1.0], [4.0, 1.0]]), [1, 1], [1, 1])
    assert a.level == pytest.approx(1.0)  # 0.5 * 4 + 0.5 * 1 over the equal share's 2.5, times 2
    assert np.allclose(a.normalised, a.level)
    assert np.allclose(a.x.sum(axis=0), [1, 1]) and np.all(a.x.sum(axis=1) <= 1 + 1e-9)


def test_the_minimum_is_the_best_possible_against_a_grid() -> None:
    # Three jobs on two types: no allocation on a fine grid of feasible X beats the LP's minimum.
    t = np.array([[2.0, 1.0], [1.0, 1.5], [1.0, 1.0]])
    s, n = np.array([1, 2, 1]), np.array([2, 2])
    a = gavel_allocation(t, s, n)
    assert np.all(a.x.sum(axis=1) <= 1 + 1e-9) and np.all(s @ a.x <= n + 1e-9)
    coef = t * (s / (t @ (n / n.sum())))[:, None]
    g = np.linspace(0, 1, 9)
    x = np.stack(np.meshgrid(*[g] * 6, indexing="ij"), axis=-1).reshape(-1, 3, 2)  # every X on the grid
    ok = (x.sum(axis=2) <= 1 + 1e-12).all(axis=1) & (np.einsum("j,ajk->ak", s, x) <= n + 1e-12).all(axis=1)
    best = float((coef * x[ok]).sum(axis=2).min(axis=1).max())
    assert best > 0
    assert a.level >= best - 1e-9
    assert a.normalised.min() == pytest.approx(a.level)


def test_a_type_a_job_cannot_use_gets_nothing_and_bad_input_is_refused() -> None:
    a = gavel_allocation(np.array([[1.0, 0.0], [1.0, 1.0]]), [1, 1], [1, 1])
    assert a.x[0, 1] == 0.0
    with pytest.raises(OptionError, match="run on no type"):
        gavel_allocation(np.array([[0.0, 0.0]]), [1], [1, 1])
    with pytest.raises(OptionError, match="jobs x types"):
        gavel_allocation(np.ones((2, 3)), [1, 1], [1, 1])


def test_priorities_favour_the_job_furthest_behind_its_share() -> None:
    from pal_opt.hetero.configs import GpuType

    p = GavelPolicy((GpuType("a", 1, 1), GpuType("b", 1, 1)))
    p.jobs, p.x = (0, 1), np.array([[0.5, 0.5], [0.5, 0.5]])
    p.received = {0: np.array([2.0, 0.0]), 1: np.array([1.0, 0.0])}
    pri = p.priorities()
    assert pri[1, 0] > pri[0, 0]  # job 1 got 1/3 of type a against a share of 1/2
    assert pri[0, 1] == pri[1, 1] == pytest.approx(0.5e9)  # neither has run on b: X * 1e9
    with pytest.raises(OptionError, match=r"round_length must be a number of seconds > 0 and at most 1e\+15, got 0"):
        GavelPolicy((GpuType("a", 1, 1),), round_length=0)


# -- simulations ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sia_dir(shared_dir: Path) -> Path:
    d = shared_dir / "data" / "sia-artifact"
    if not (d / "profiles").is_dir():
        pytest.skip(f"Sia artifact data not available at {d}")
    return d


@pytest.fixture(scope="module")
def prefix(sia_dir: Path) -> Workload:
    wl = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    return workload_from_frame(wl.frame().iloc[:14].copy(), source="newtrace-7[:14]")


@pytest.fixture(scope="module")
def apps(sia_dir: Path, prefix: Workload) -> dict[str, Application]:
    return dict(load_applications(sia_dir / "profiles", prefix.applications()))


def test_gavel_completes_a_prefix_with_valid_rigid_rounds(
    prefix: Workload, apps: dict[str, Application], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = build_cluster(parse_cluster(PAPER), apps)
    layout = Layout(cluster)
    seen: list[tuple[dict[int, Any], dict[int, tuple[int, ...]], np.ndarray]] = []
    original = GavelPolicy.allocate

    def spy(self: GavelPolicy, active: Any, now: float) -> dict[int, tuple[int, ...]]:
        out = original(self, active, now)
        seen.append(({j.index: j for j in active}, out, self.x.copy()))
        return out

    monkeypatch.setattr(GavelPolicy, "allocate", spy)
    result = simulate_sia(prefix, apps, cluster, SimConfig(policy="gavel"))
    assert result.summary()["n_completed"] == 14 and seen
    assert {r.kind for r in result.jobs} == {"rigid"}  # the workload's adaptive jobs run rigid
    core = Cluster.from_arrays(range(layout.num_gpus), layout.server_of(), {"classA": np.ones(layout.num_gpus)})
    for jobs, alloc, x in seen:
        placed = {i: g for i, g in alloc.items() if g}
        assert all(len(g) == jobs[i].spec.num_replicas for i, g in placed.items())
        assert all(len({int(layout.type_of[k]) for k in g}) == 1 for g in placed.values())  # one type per gang
        assert np.all(x.sum(axis=1) <= 1 + 1e-7)
        queue = [Job(i, len(g), "classA", position=k) for k, (i, g) in enumerate(placed.items())]
        assert violations(RoundInstance(core, tuple(queue)), {"placements": {i: list(g) for i, g in placed.items()}}) == []


def test_gavel_is_deterministic_and_its_round_matters(prefix: Workload, apps: dict[str, Application]) -> None:
    cluster = build_cluster(parse_cluster(PAPER), apps)
    a = simulate_sia(prefix, apps, cluster, SimConfig(policy="gavel"))
    b = simulate_sia(prefix, apps, cluster, SimConfig(policy="gavel"))
    assert [r.completion_time for r in a.jobs] == [r.completion_time for r in b.jobs]
    c = simulate_sia(prefix, apps, cluster, SimConfig(policy="gavel", gavel_round=120.0))
    assert [r.completion_time for r in c.jobs] != [r.completion_time for r in a.jobs]


def test_gavel_on_the_command_line(sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = read_workload(sia_dir / "workloads" / "newtrace-7.csv")
    trace = tmp_path / "trace.csv"
    wl.frame().iloc[:4].drop(columns="category").to_csv(trace, index=False)
    out = tmp_path / "out.json"
    rc = cli.main(["simulate", str(trace), "--trace-format", "sia", "--cluster", PAPER, "--profiles",
                   str(sia_dir / "profiles"), "--policy", "gavel", "--round", "60", "--out", str(out), "--quiet"])
    doc = json.loads(out.read_text())
    assert rc == 0 and doc["policy"] == "gavel" and doc["n_completed"] == 4
    pal = tmp_path / "pal.csv"
    pal.write_text("job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n")
    rc = cli.main(["simulate", str(pal), "--policy", "gavel", "--out", str(tmp_path / "x.json"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--policy gavel does not apply to a pal trace" in err and "\n" not in err


def test_gavel_reports_a_job_no_type_can_hold_as_unplaceable(
    sia_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the audit's w.csv: bert asks for 8 GPUs of one node of four; gavel used to stop with exit 2
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\n"
                     "cifar10-0,0,cifar10,4,2048\nbert-1,120,bert,8,384\n")
    out = tmp_path / "out.json"
    rc = cli.main(["simulate-sia", str(trace), "--profiles", str(sia_dir / "profiles"), "--cluster", "aws:1x4",
                   "--category", "rigid", "--policy", "gavel", "--max-hours", "1", "-o", str(out)])
    captured = capsys.readouterr()
    reason = "a rigid job needs 8 GPUs of one type; the largest type, aws, has 4"
    assert rc == 0 and "error" not in captured.err
    doc = json.loads(out.read_text())
    assert doc["unplaceable"] == [{"job": "bert-1", "reason": reason}]
    assert (doc["n_jobs"], doc["n_completed"]) == (2, 1)
    assert f"unplaceable: job bert-1: {reason}" in captured.out.splitlines()


def test_the_registry_lists_gavel_and_refuses_unknown_names() -> None:
    assert "gavel" in HETERO_POLICIES and HETERO_POLICIES["gavel"].rigid
    with pytest.raises(OptionError, match="unknown policy 'gavle'.*gavel"):
        SimConfig(policy="gavle")
