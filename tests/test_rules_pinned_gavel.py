"""Rules of pal_opt/hetero/gavel.py that no test held (third mutation review)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pal_opt.errors import OptionError
from pal_opt.hetero.configs import GpuType
from pal_opt.hetero.gavel import GavelPolicy, gavel_allocation


def test_a_job_of_zero_gpus_is_refused() -> None:
    with pytest.raises(OptionError, match="scale factors must be >= 1"):
        gavel_allocation(np.array([[1.0, 2.0]]), [0], [2, 2])


def test_the_equal_share_throughput_weights_each_type_by_its_gpus() -> None:
    # T_eq[j] = Σ_k T[j, k] N_k / N: with 1 GPU of type 0 and 3 of type 1 it is (1·1 + 3·3) / 4 = 2.5
    # for job 0, not the plain mean 2 (the types' sizes differ).
    t = np.array([[1.0, 3.0], [2.0, 1.0]])
    n = np.array([1, 3])
    a = gavel_allocation(t, [1, 1], n)
    t_eq = t @ (n / n.sum())
    assert t_eq.tolist() == [2.5, 1.25]
    assert np.allclose(a.normalised, (t * a.x).sum(axis=1) / t_eq)
    assert a.level == pytest.approx(float(a.normalised.min()), rel=1e-6)


def test_a_jobs_normalised_throughput_counts_its_gpus() -> None:
    # s_j · Σ_k T[j, k] X[j, k] / T_eq[j]: a 2-GPU job's effective throughput is twice its per-GPU row's.
    t = np.array([[1.0, 3.0], [2.0, 1.0]])
    n = np.array([2, 2])
    s = np.array([2.0, 1.0])
    a = gavel_allocation(t, s, n)
    t_eq = t @ (n / n.sum())
    assert np.allclose(a.normalised, s * (t * a.x).sum(axis=1) / t_eq)


def test_jobs_off_the_bottleneck_get_the_spare_time() -> None:
    # Job 0 runs only on type 0, job 1 on both (one GPU each).  The max-min level is 1 (job 1 on
    # type 1 all the time); at that level job 0 may have anything from half of type 0 to all of
    # it: the second program gives it all (normalised 2), not the first program's leftover.
    t = np.array([[1.0, 0.0], [1.0, 1.0]])
    a = gavel_allocation(t, [1, 1], [1, 1])
    assert a.level == pytest.approx(1.0)
    assert a.x.round(6).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert np.allclose(a.normalised, [2.0, 1.0])


def test_a_recomputation_settles_each_jobs_deficit_as_owed_minus_received() -> None:
    # Under the old allocation each job should have had half of 4 rounds; job 0 ran 3, job 1 ran 1.
    p = GavelPolicy((GpuType("a", 1, 4),))
    p.jobs = (0, 1)
    p.x = np.array([[0.5], [0.5]])
    p.received = {0: np.array([3.0]), 1: np.array([1.0])}
    p.rounds_since_reset = 4
    p.throughputs = lambda active: np.ones((len(active), 1))  # type: ignore[method-assign]
    active = [SimpleNamespace(index=i, spec=SimpleNamespace(num_replicas=1)) for i in (0, 1)]
    p._recompute(active)  # type: ignore[arg-type]
    assert {j: d.tolist() for j, d in p.deficit.items()} == {0: [-1.0], 1: [1.0]}


def test_equal_priorities_go_to_the_job_owed_more() -> None:
    p = GavelPolicy((GpuType("a", 1, 1),))
    p.jobs = (0, 1)
    p.x = np.array([[0.5], [0.5]])
    p.received = {0: np.array([0.0]), 1: np.array([0.0])}  # priorities equal (neither has run)
    p.deficit = {0: np.array([0.0]), 1: np.array([2.0])}
    active = [SimpleNamespace(index=i, spec=SimpleNamespace(num_replicas=1)) for i in (0, 1)]
    assert p.schedule(active) == {1: 0}  # type: ignore[arg-type]


def test_a_job_is_not_scheduled_on_a_type_its_allocation_gives_it_no_time_on() -> None:
    p = GavelPolicy((GpuType("a", 1, 1), GpuType("b", 1, 1)))
    p.jobs = (0, 1)
    p.x = np.array([[1.0, 0.0], [1.0, 0.0]])  # both only on type a
    p.received = {0: np.zeros(2), 1: np.zeros(2)}
    p.deficit = {}
    active = [SimpleNamespace(index=i, spec=SimpleNamespace(num_replicas=1)) for i in (0, 1)]
    assert p.schedule(active) == {0: 0}  # type: ignore[arg-type]


def test_larger_gangs_take_their_gpus_first_so_they_stay_on_one_node() -> None:
    p = GavelPolicy((GpuType("a", 2, 4),))  # two nodes of 4 GPUs: positions 0-3 and 4-7
    out = p.place({0: 0, 1: 0}, {0: 1, 1: 4})
    assert out == {1: (0, 1, 2, 3), 0: (4,)}


def test_a_job_does_not_keep_a_gpu_that_left_service() -> None:
    p = GavelPolicy((GpuType("a", 1, 4),))
    p.holding = {0: (0, 1)}
    p.out_of_service = np.array([True, False, False, False])
    out = p.place({0: 0}, {0: 2})
    assert out == {0: (1, 2)}


def test_a_job_scheduled_again_keeps_its_gpus() -> None:
    p = GavelPolicy((GpuType("a", 1, 4),))
    p.holding = {0: (2, 3)}
    assert p.place({0: 0}, {0: 2}) == {0: (2, 3)}


def test_a_gpu_leaving_service_under_a_job_is_a_new_decision_at_once() -> None:
    p = GavelPolicy((GpuType("a", 1, 2),))
    p.throughputs = lambda active: np.ones((len(active), 1))  # type: ignore[method-assign]
    active = [SimpleNamespace(index=0, spec=SimpleNamespace(num_replicas=1))]
    assert p.allocate(active, 0.0) == {0: (0,)}  # type: ignore[arg-type]
    p.out_of_service = np.array([True, False])
    assert p.allocate(active, 60.0) == {0: (1,)}  # type: ignore[arg-type]  # not 300 s more on a failed GPU


def test_each_decision_counts_the_rounds_run_per_type() -> None:
    p = GavelPolicy((GpuType("a", 1, 2),))
    p.throughputs = lambda active: np.ones((len(active), 1))  # type: ignore[method-assign]
    active = [SimpleNamespace(index=0, spec=SimpleNamespace(num_replicas=1))]
    p.allocate(active, 0.0)  # type: ignore[arg-type]
    p.allocate(active, 360.0)  # type: ignore[arg-type]  # exactly one Gavel round later: a new decision
    assert p.received[0].tolist() == [2.0] and p.rounds_since_reset == 2


def test_a_job_arriving_exactly_one_round_later_is_scheduled_then() -> None:
    p = GavelPolicy((GpuType("a", 1, 2),))
    p.throughputs = lambda active: np.ones((len(active), 1))  # type: ignore[method-assign]
    one = [SimpleNamespace(index=0, spec=SimpleNamespace(num_replicas=1))]
    two = [*one, SimpleNamespace(index=1, spec=SimpleNamespace(num_replicas=1))]
    p.allocate(one, 0.0)  # type: ignore[arg-type]
    assert p.allocate(two, 360.0)[1] != ()  # type: ignore[arg-type]


def test_a_type_leaving_service_with_the_same_jobs_is_a_new_allocation() -> None:
    """The job set is unchanged but type a's GPUs all left service: the allocation is recomputed
    on the GPUs in service (the job moves to type b with all its GPUs), not kept on type a, where
    the first free GPUs would be too few."""
    p = GavelPolicy((GpuType("a", 1, 2), GpuType("b", 1, 2)))
    p.throughputs = lambda active: np.array([[2.0, 1.0]] * len(active))  # type: ignore[method-assign]
    active = [SimpleNamespace(index=0, spec=SimpleNamespace(num_replicas=2))]
    assert p.allocate(active, 0.0) == {0: (0, 1)}  # type: ignore[arg-type]  # the faster type a
    p.holding = {}  # idle between rounds: nothing held on a, so no decision at once
    p.out_of_service = np.array([True, True, False, False])
    assert p.allocate(active, 360.0) == {0: (2, 3)}  # type: ignore[arg-type]
    assert p.workers.tolist() == [0, 2] and p.x.round(6).tolist() == [[0.0, 1.0]]


def test_a_types_gpus_are_shared_by_the_jobs_gpu_counts() -> None:
    # Two 2-GPU jobs on one type of 2 GPUs: Σ_j s_j X[j, k] <= N_k gives each half the time, not
    # each all of it (4 GPUs' worth on 2).
    a = gavel_allocation(np.array([[1.0], [1.0]]), [2, 2], [2])
    assert a.x.round(6).tolist() == [[0.5], [0.5]]
    assert a.level == pytest.approx(1.0)  # 2 · 1 · 0.5 / T_eq (= 1)
