"""Rules of pal_opt/simulate/failures.py that no test held (mutation review round 5,
2026-12-06): the failure process, checkpoints and the failure figures, each test failing on a
one-rule change of failures.py that the rest of the suite let pass."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from pal_opt.errors import OptionError
from pal_opt.model import Cluster, GpuState, Job, RoundInstance
from pal_opt.options import SolveOptions
from pal_opt.simulate.failures import (
    Checkpoints,
    FailureConfig,
    FailureEvent,
    FailureProcess,
    FailureStats,
    repair_in_round,
)

NEVER = dict(gpu_mtbf_hours=math.inf, server_mtbf_hours=math.inf)


def _named_cluster() -> Cluster:
    # two servers named as a cluster file names them, two GPUs each
    return Cluster.from_arrays([10, 11, 20, 21], ["nodeA", "nodeA", "nodeB", "nodeB"], {"classA": [1.0] * 4})


def _process(events: list[tuple[float, int, int]], repair: float = 100.0) -> FailureProcess:
    """A process on :func:`_named_cluster` that fails exactly at ``events`` (time, 0 GPU / 1 server, index)."""
    p = FailureProcess(_named_cluster(), FailureConfig(repair_time=repair, **NEVER), 0)
    for e in events:
        heapq.heappush(p.heap, e)
    return p


def test_a_boolean_failure_seed_is_refused() -> None:
    """``failure-seed`` must be an integer; ``True`` is a bool, not a seed (F3 accepted it)."""
    FailureConfig(seed=3).validate()
    FailureConfig(seed=np.int64(3)).validate()
    with pytest.raises(OptionError, match="failure-seed"):
        FailureConfig(seed=True).validate()  # type: ignore[arg-type]


def test_scale_divides_both_mtbfs() -> None:
    """``scale=100``: GPUs *and* servers fail 100x as often (F4 left the server MTBF unscaled)."""
    assert FailureConfig(gpu_mtbf_hours=10.0, server_mtbf_hours=20.0, scale=100.0).mtbf_seconds() == \
        pytest.approx((360.0, 720.0))


def test_seeds_2_to_the_32_apart_are_different_processes() -> None:
    """The seed is not reduced modulo 2**32 (F5 made seeds 2**32 apart one process)."""
    cl = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    cfg = FailureConfig(scale=1000.0)
    a = [e.time for e in FailureProcess(cl, cfg, 5).pop_until(1e12, most=4)]
    b = [e.time for e in FailureProcess(cl, cfg, 5 + 2**32).pop_until(1e12, most=4)]
    assert len(a) == len(b) == 4 and a != b


def test_pop_until_hands_out_failures_before_end_or_at_it_when_inclusive() -> None:
    """``pop_until(end)`` hands out failures strictly before ``end``; ``inclusive`` adds those
    exactly at ``end`` and nothing later (F6: up to end + 1; F7: at ``end`` without inclusive)."""
    p = _process([(10.0, 0, 0), (20.0, 0, 1), (20.5, 0, 2)])
    assert [e.time for e in p.pop_until(20.0)] == [10.0]
    assert [e.time for e in p.pop_until(20.0, inclusive=True)] == [20.0]
    assert [e.time for e in p.pop_until(21.0)] == [20.5]


def test_pop_until_hands_out_at_most_most() -> None:
    """``most=1`` hands out one failure at a time (F8 handed out two)."""
    p = _process([(10.0, 0, 0), (11.0, 0, 1), (12.0, 0, 2)])
    assert [e.time for e in p.pop_until(100.0, most=1)] == [10.0]
    assert [e.time for e in p.pop_until(100.0, most=2)] == [11.0, 12.0]


def test_a_gpu_failure_is_out_for_the_repair_time_and_names_its_server() -> None:
    """A GPU failing at t is out of service until t + repair_time, back at that instant; its
    event names the GPU and the server as the cluster file does (F9/F29: back at once;
    F10: the server's position instead of its id; F12: still out at t + repair_time)."""
    p = _process([(10.0, 0, 2)], repair=100.0)
    (e,) = p.pop_until(50.0)
    assert e == FailureEvent(10.0, "gpu", 20, (20,), 110.0, "nodeB")
    assert p.out_of_service(50.0).tolist() == [False, False, True, False]
    assert p.out_of_service(109.0).tolist() == [False, False, True, False]
    assert p.out_of_service(110.0).tolist() == [False] * 4


def test_a_server_failure_takes_all_its_gpus_out_of_service() -> None:
    """A server's failure puts each of its GPUs out of service (F13 ignored server failures)."""
    p = _process([(10.0, 1, 0)], repair=100.0)
    (e,) = p.pop_until(50.0)
    assert (e.kind, e.gpus, e.server, e.until) == ("server", (10, 11), "nodeA", 110.0)
    assert p.out_of_service(50.0).tolist() == [True, True, False, False]


def test_the_next_failure_of_a_component_comes_after_its_repair() -> None:
    """A component is up again only after its repair: its next failure is drawn from then,
    never while it is still down (F11 drew it from the failure time)."""
    cl = Cluster.uniform(1, 1, {"classA": [1.0]})
    # MTBF 1 s and repairs of 1000 s: every next failure comes at least 1000 s after the last
    p = FailureProcess(cl, FailureConfig(gpu_mtbf_hours=1 / 3600, server_mtbf_hours=math.inf, repair_time=1000.0), 1)
    ev = p.pop_until(1e6, most=20)
    assert len(ev) == 20
    assert all(b.time >= a.until for a, b in zip(ev, ev[1:], strict=False))


def test_checkpoints_keep_the_work_since_the_last_periodic_checkpoint() -> None:
    """Interval 100 s, 1 s per iteration: after 250 s of work the job checkpointed at 200 s, so a
    failure loses 50 s and the job resumes with the iterations it had then
    (F14: a checkpoint exactly at the interval missed; F15: resume from ``remaining``;
    F16: ``since`` reset to 0 at a checkpoint; F17: ``lose`` does not reset ``since``)."""
    ck = Checkpoints(100.0, [1000.0])
    ck.worked(0, 250.0, remaining=750.0, seconds_per_iteration=1.0)
    assert ck.lose(0) == (50.0, 800.0)
    assert ck.lose(0) == (0.0, 800.0)  # lost once, not twice
    ck2 = Checkpoints(100.0, [1000.0])
    ck2.worked(0, 100.0, remaining=900.0, seconds_per_iteration=1.0)  # exactly one interval
    assert ck2.lose(0) == (0.0, 900.0)


def test_a_planned_stop_saves_a_checkpoint() -> None:
    """``save`` (the scheduler stops the job) loses nothing afterwards (F18 kept ``since``)."""
    ck = Checkpoints(math.inf, [1000.0])
    ck.worked(0, 30.0, remaining=970.0, seconds_per_iteration=1.0)
    ck.save(0, 970.0)
    assert ck.lose(0) == (0.0, 970.0)


def test_failure_figures() -> None:
    """The headline figures and the log: lost GPU-hours weigh each job's loss by its GPUs
    (F19), out-of-service GPU-hours by the failure's GPUs (F22), restarts and failure restarts
    are their own figures (F23, F24), ``jobs_hit`` counts hits not failures (F30), repairs
    are repairs (F28), and the log lists the jobs each failure stopped (F27)."""
    st = FailureStats({"x": 1})
    st.events = [FailureEvent(0.0, "server", 0, (0, 1, 2, 3), 3600.0, "s0"),
                 FailureEvent(10.0, "gpu", 5, (5,), 3610.0, "s1")]
    st.hit(0, 0.0, "a", 4, 900.0)
    st.hit(0, 0.0, "b", 2, 1800.0)
    st.hit(1, 10.0, "c", 1, 3600.0)
    st.repairs, st.replaced = 2, 3
    s = st.summary(restarts=[4, 1, 1], failure_restarts=[2, 0, 0])
    assert s["lost_gpu_hours"] == pytest.approx((4 * 900 + 2 * 1800 + 3600) / 3600)
    assert s["gpu_hours_out_of_service"] == pytest.approx(5.0)
    assert (s["failures"], s["gpu_failures"], s["server_failures"], s["jobs_hit"]) == (2, 1, 1, 3)
    assert (s["repairs"], s["replaced_by_repair"]) == (2, 3)
    assert (s["restarts_per_job_mean"], s["restarts_per_job_max"]) == (2.0, 4)
    assert (s["failure_restarts_per_job_mean"], s["failure_restarts_per_job_max"]) == (pytest.approx(2 / 3), 2)
    assert [d["jobs"] for d in st.log()] == [["a", "b"], ["c"]]


def test_runs_that_meet_are_merged_and_empty_runs_are_not_recorded() -> None:
    """``ran``: a job holding a GPU over [0, 5] then [5, 9] ran one interval [0, 9]; an empty
    interval records nothing (F20 recorded it; F21 did not merge)."""
    st = FailureStats({})
    st.ran([7], 0.0, 5.0)
    st.ran([7], 5.0, 9.0)
    st.ran([7, 8], 9.0, 9.0)
    assert st.runs == [(7, 0.0, 9.0)]


def test_a_repair_in_round_keeps_busy_gpus_and_queued_jobs_out() -> None:
    """The round given to the repair has only the jobs running now (not the queue's waiting
    ones: F26) and the GPUs of jobs that finished in the round are busy (F25)."""
    cl = Cluster.uniform(2, 2, {"classA": [1.0] * 4})
    inst = RoundInstance(cl, (Job("a", 2, "classA"), Job("b", 1, "classA"), Job("w", 1, "classA")))
    rnd, res = repair_in_round(inst, {"a": (0, 1), "b": (2,)}, [0], [3], SolveOptions())
    assert [j.id for j in rnd.jobs] == ["a", "b"]
    assert rnd.cluster.state[rnd.cluster.positions([3])].tolist() == [GpuState.BUSY]
    assert res.placements["b"] == (2,)
    assert 3 not in res.placements.get("a", ()) and 0 not in res.placements.get("a", ())
