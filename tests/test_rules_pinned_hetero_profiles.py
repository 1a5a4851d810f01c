"""Rules of pal_opt/hetero/profiles.py that only the Sia artifact's profiles held, or none
(sixteenth session's mutation audit).

Each profile here is a few hand-written rows whose step times can be read off by eye; nothing
comes from ``../shared``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pal_opt.errors import InstanceError
from pal_opt.hetero.profiles import (
    PLACEMENT_COLUMNS,
    SCALABILITY_COLUMNS,
    Application,
    AppSettings,
    TypeProfile,
    ValidationCurves,
)
from pal_opt.hetero.tables import Table


def _profile(placements: list[tuple[str, int, float, float]],
             scalability: list[tuple[int, int, int, float, float]]) -> TypeProfile:
    return TypeProfile.from_frames("demo", "t", pd.DataFrame(placements, columns=list(PLACEMENT_COLUMNS)),
                                   pd.DataFrame(scalability, columns=list(SCALABILITY_COLUMNS)))


def test_the_memory_clamp_reads_the_rows_of_exactly_that_many_gpus() -> None:
    # one GPU was profiled up to batch 8, two GPUs up to 16: a 1-GPU job is clamped at 8, not at 16
    p = _profile([("1", 4, 1.0, 0.0), ("1", 8, 1.6, 0.0), ("2", 4, 1.5, 0.5), ("2", 16, 2.5, 0.5)],
                 [(2, 2, 4, 3.0, 2.0), (2, 2, 8, 4.0, 2.0)])
    assert (p.replica_limit(1), p.replica_limit(2), p.replica_limit(3)) == (8, 16, None)


def test_the_single_gpu_throughput_is_the_largest_batch_over_the_longest_step() -> None:
    # X(c) = 8 / 1.6 = 5 samples/s (B.3), not 8 / 1.0 (the shortest step)
    p = _profile([("1", 4, 1.0, 0.0), ("1", 8, 1.6, 0.0)], [(2, 2, 4, 3.0, 2.0), (2, 2, 8, 4.0, 2.0)])
    assert p.single_gpu_throughput() == pytest.approx(5.0)


def test_an_unprofiled_shapes_batch_limit_counts_scalability_rows_of_as_many_nodes() -> None:
    # b_hi of the unprofiled '11' (2 nodes, 2 GPUs): the scalability rows with at least 2 nodes and
    # 2 GPUs, the 2-node rows' 32 among them (not only the 3-node rows' 16)
    p = _profile([("1", 4, 1.0, 0.0), ("1", 8, 2.0, 0.0)],
                 [(2, 2, 4, 3.0, 2.0), (2, 2, 32, 4.0, 2.0), (3, 3, 4, 3.0, 2.0), (3, 3, 16, 4.0, 2.0)])
    assert p.placement_limit((1, 1)) == 32
    assert p.placement_limit((1, 1, 1)) == 16 and p.placement_limit((1, 1, 1, 1)) is None
    assert p.placement_limit((1,)) == 8  # a profiled shape: its own rows


def test_a_placement_of_one_row_is_defined_at_its_batch_only() -> None:
    p = _profile([("1", 4, 1.0, 0.0), ("1", 8, 2.0, 0.0), ("2", 8, 1.5, 0.5)],
                 [(2, 2, 4, 3.0, 2.0), (2, 2, 8, 4.0, 2.0)])
    assert p.step_time((2,), 8) == (1.5, 0.5)
    step, sync = p.step_time((2,), [4, 12])  # below and above the one profiled batch
    assert np.isnan(step).all() and np.isnan(sync).all()


def test_the_3d_interpolation_averages_placements_of_one_node_and_gpu_count() -> None:
    # '15' and '24' are both 2 nodes x 6 GPUs: the 3-D point (2, 6, b) is their mean, which the
    # unprofiled '33' (also 2 x 6) reads: (1 + 3) / 2 = 2 at b = 4 and (2 + 4) / 2 = 3 at b = 8.
    p = _profile([("1", 4, 1.0, 0.0), ("1", 8, 2.0, 0.0), ("2", 4, 1.0, 0.0), ("2", 8, 2.0, 0.0),
                  ("15", 4, 1.0, 0.2), ("15", 8, 2.0, 0.2), ("24", 4, 3.0, 0.6), ("24", 8, 4.0, 0.6)],
                 [(3, 6, 4, 5.0, 1.0), (3, 6, 8, 6.0, 1.0)])
    assert not p.is_profiled((3, 3))
    assert p.step_time((3, 3), 4) == pytest.approx((2.0, 0.4))
    assert p.step_time((3, 3), 8) == pytest.approx((3.0, 0.4))


def test_more_than_sixteen_nodes_are_read_as_sixteen() -> None:
    # the scalability rows reach 16 nodes; 20 nodes of 32 GPUs are read at (16, 32, b), inside the hull
    p = _profile([("1", 4, 1.0, 0.0), ("1", 8, 2.0, 0.0), ("2", 4, 1.0, 0.0), ("2", 8, 2.0, 0.0)],
                 [(16, 32, 4, 5.0, 1.0), (16, 32, 8, 6.0, 1.0), (16, 16, 4, 4.0, 1.0), (16, 16, 8, 5.0, 1.0)])
    assert p.step_time([2] * 12 + [1] * 8, 8) == pytest.approx((6.0, 1.0))
    step, sync = p.step_time_shape(20, 32, 8)
    assert (float(step), float(sync)) == pytest.approx((6.0, 1.0))


def test_an_epoch_without_progress_is_accepted() -> None:
    # progress must not decrease; an epoch that adds none (equal cumulative progress) is allowed
    frame = pd.DataFrame({"progress": [10.0, 10.0, 20.0], "iteration": [1, 2, 3], "metric": [0.5, 0.4, 0.3],
                          "grad_sqr": [1.0, 1.0, 1.0], "grad_var": [2.0, 2.0, 2.0]})
    curves = ValidationCurves.from_tables({32: Table.from_frame(frame, "<validation-32>")})
    assert curves.progress.tolist() == [[10.0, 10.0, 20.0]] and curves.epochs == 3


def _validation(grad_sqr: list[float], grad_var: list[float]) -> ValidationCurves:
    frame = pd.DataFrame({"progress": [10.0, 20.0], "iteration": [1, 2], "metric": [0.5, 0.4],
                          "grad_sqr": grad_sqr, "grad_var": grad_var})
    return ValidationCurves.from_tables({32: Table.from_frame(frame, "<validation-32>")})


def test_gradient_statistics_are_refused_only_when_both_are_zero() -> None:
    # no noise (σ² = 0: gain 1 at any batch) or no signal (μ² = 0: gain s) is a curve; both 0 is not
    assert _validation([1.0, 1.0], [0.0, 0.0]).grad_var.tolist() == [[0.0, 0.0]]
    assert _validation([0.0, 0.0], [1.0, 1.0]).grad_sqr.tolist() == [[0.0, 0.0]]
    with pytest.raises(InstanceError, match="both 0"):
        _validation([1.0, 0.0], [1.0, 0.0])


def test_max_epochs_may_be_every_validation_row() -> None:
    curves = _validation([1.0, 1.0], [2.0, 2.0])  # two epochs
    profile = _profile([("1", 4, 1.0, 0.0), ("1", 8, 2.0, 0.0)], [(2, 2, 4, 3.0, 2.0), (2, 2, 8, 4.0, 2.0)])
    assert Application("demo", curves, {"t": profile}, AppSettings(max_epochs=2)).max_epochs == 2
    with pytest.raises(InstanceError, match="max_epochs 3 needs that many validation rows"):
        Application("demo", curves, {"t": profile}, AppSettings(max_epochs=3))
