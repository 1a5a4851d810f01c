"""Rules of pal_opt/inforce.py that no test held (mutation review round 5, 2026-12-06): each
test fails on a one-rule change of inforce.py that the rest of the suite let pass."""

from __future__ import annotations

import pytest

from pal_opt.errors import InstanceError, OptionError
from pal_opt.inforce import (
    failed_gpus,
    in_force_placement,
    repair_counts,
    repair_info,
    repair_round,
    round_of_result,
)
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance


def _cluster() -> Cluster:
    return Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})


def test_a_displaced_pipeline_is_tried_at_its_demand_only() -> None:
    """A repair never shrinks a pipeline, even one that allows other GPU counts: its stages
    need their replicas (I22 tried the strong-scaling pipeline at 1 GPU too)."""
    p = Job("p", 3, "classA", kind="strong-scaling", allowed_counts=(1, 3),
            pipeline=Pipeline(stage_times=(2.0, 1.0), replicas=(2, 1)))
    assert repair_counts(p) == (3,)
    assert repair_counts(Job("g", 3, "classA", kind="strong-scaling", allowed_counts=(1, 3))) == (3, 1)


def test_a_repair_round_rebuilt_from_its_result_keeps_the_migration_price() -> None:
    """``round_of_result`` rebuilds the repair round from what the result declares, migration
    price included, so the checker prices moves as the repair did (I26 declared no price)."""
    inst = RoundInstance(_cluster(), (Job("a", 2, "classA"), Job("b", 1, "classA")))
    rr = repair_round(inst, {"a": (0, 1), "b": (2,)}, [1], migration_per_gpu=2.5)
    decl = repair_info(rr)
    assert decl["failed"] == [1] and decl["migration_per_gpu"] == 2.5
    again = round_of_result(inst, {"info": {"repair": decl}})
    assert again.params == rr.instance.params
    assert again.params.costs["migration"]["per_gpu"] == 2.5


@pytest.mark.parametrize("failed", [{1: True}, b"\x01", "1"])
def test_failed_gpus_must_be_a_sequence_of_ids(failed: object) -> None:
    """``failed`` is a sequence of GPU ids; a mapping, bytes or a string is refused in one line
    naming the mistake (I28 read ``{1: True}`` and ``b"\\x01"`` as GPU 1)."""
    inst = RoundInstance(_cluster(), ())
    with pytest.raises(OptionError, match=r"failed must be a sequence of GPU ids such as \[3\]"):
        failed_gpus(inst, failed)  # type: ignore[arg-type]
    assert failed_gpus(inst, (1,)) == (1,)


def test_stages_of_a_job_that_is_not_placed_are_refused() -> None:
    """A stage map for a job the placement does not place is an InstanceError naming it, not a
    crash (I29 raised KeyError)."""
    inst = RoundInstance(_cluster(), (Job("p", 3, "classA", pipeline=Pipeline((2.0, 1.0), (2, 1))),
                                      Job("q", 1, "classA")))
    doc = {"placements": {"q": [3]}, "stages": {"p": [[0, 1], [2]]}}
    with pytest.raises(InstanceError, match="job 'p' has stages but is not placed") as exc:
        in_force_placement(inst, doc)
    assert exc.value.path == "stages.p"


def test_stages_of_a_gang_job_are_refused() -> None:
    """Only a pipeline has stages: a stage map for a gang job is an InstanceError naming it, not
    a crash (I30 raised AttributeError)."""
    inst = RoundInstance(_cluster(), (Job("g", 2, "classA"),))
    with pytest.raises(InstanceError, match="job 'g' is not a pipeline") as exc:
        in_force_placement(inst, {"placements": {"g": [0, 1]}, "stages": {"g": [[0, 1]]}})
    assert exc.value.path == "stages.g"
