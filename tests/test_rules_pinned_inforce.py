"""The placement in force read against its round (pal_opt.inforce): what it refuses."""

from __future__ import annotations

import pytest

from pal_opt.errors import InstanceError
from pal_opt.inforce import in_force_placement
from pal_opt.model import Cluster, GpuState, Job, Pipeline, RoundInstance


def test_a_stage_map_that_does_not_match_the_pipelines_replicas_is_refused() -> None:
    c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    inst = RoundInstance(c, (Job("p", 3, "classA", pipeline=Pipeline(stage_times=(2.0, 1.0), replicas=(2, 1))),))
    # the same three GPUs, but one GPU on stage 0 and two on stage 1 (the pipeline has 2 and 1)
    doc = {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[0], [1, 2]]}}
    with pytest.raises(InstanceError, match=r"stages of \[1, 2\] GPUs, but the pipeline's replicas are \[2, 1\]"):
        in_force_placement(inst, doc)
    assert in_force_placement(inst, {"placements": {"p": [0, 1, 2]}, "stages": {"p": [[2, 0], [1]]}}) == {"p": (2, 0, 1)}


def test_a_gpu_held_by_a_job_outside_the_queue_is_refused() -> None:
    F, B = GpuState.FREE, GpuState.BUSY
    c = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4}, state=[F, B, F, F])
    inst = RoundInstance(c, (Job(1, 2, "classA"),))
    with pytest.raises(InstanceError, match="GPU 1 is busy") as exc:
        in_force_placement(inst, {1: [0, 1]})
    assert exc.value.path == "placements.1"
    assert in_force_placement(inst, {1: [2, 3]}) == {1: (2, 3)}


def _two_servers() -> RoundInstance:
    from pal_opt.model import RoundParams

    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    return RoundInstance(cl, (Job("a", 2, "classA", 0, placement=(0, 1)),),
                         RoundParams(costs={"migration": {"per_job": 0.3}}))


def test_a_migration_price_sets_per_gpu_and_keeps_the_rounds_other_migration_parameters() -> None:
    from pal_opt.inforce import repair_round

    rr = repair_round(_two_servers(), {"a": (0, 1)}, [1], migration_per_gpu=0.05)
    assert rr.instance.params.costs["migration"] == {"per_job": 0.3, "per_gpu": 0.05}
    assert rr.instance.cluster.state.tolist() == [GpuState.FREE, GpuState.FAILED, GpuState.FREE, GpuState.FREE]


def test_a_failed_gpu_id_is_an_integer_not_a_boolean() -> None:
    from pal_opt.errors import OptionError
    from pal_opt.inforce import failed_gpus

    with pytest.raises(OptionError, match="failed GPU id must be an integer, got True"):
        failed_gpus(_two_servers(), [True])
