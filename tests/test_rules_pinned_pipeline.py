"""Rules of pal_opt/pipeline/ that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import math

import pytest

from pal_opt.errors import OptionError
from pal_opt.pipeline import parse_profile
from pal_opt.pipeline.partition import partition

LINE = ("node{0} -- L -- forward_compute_time={1}, backward_compute_time=0, activation_size=1, "
        "parameter_size={2}")
TWO_LAYERS = "\n".join([LINE.format(1, 4.0, 1e6), LINE.format(2, 1.0, 1e6), "\tnode1 -- node2"])


def test_a_stage_s_communication_time_is_per_sample_like_its_time() -> None:
    r = partition(parse_profile(TWO_LAYERS), [4], [1e9])
    first = r.levels[0][0]
    assert first.replicas == 3
    # allreduce 4 (r - 1) P / (b r) = 8e6 / 3e9 s, shared by the 3 replicas
    assert first.communication_time == pytest.approx(8e6 / 3e9 / 3)
    for s in r.levels[0]:
        assert s.time == pytest.approx(s.level_time / s.replicas + s.communication_time)


def test_each_stage_s_compute_time_is_its_own_layers() -> None:
    r = partition(parse_profile(TWO_LAYERS), [4], [1e9])
    assert [s.compute_time for s in r.levels[0]] == pytest.approx([0.004, 0.001])
    assert sum(s.compute_time for s in r.stages) == pytest.approx(r.single_stage_time)


def test_two_level_data_parallel_baseline_divides_the_outer_sync_by_the_inner_workers() -> None:
    r = partition(parse_profile(TWO_LAYERS), [2, 2], [1e10, 1e9])
    inner = (0.005 + 4 * 1 * 2e6 / (1e10 * 2)) / 2  # 2 GPUs of a server
    outer = (inner + 4 * 1 * 2e6 / (1e9 * 2) / 2) / 2  # 2 servers; the sync divided by the 2 inner workers
    assert r.data_parallel_time == pytest.approx(outer)


def test_an_infinite_bandwidth_is_refused() -> None:
    with pytest.raises(OptionError, match="bandwidths"):
        partition(parse_profile(TWO_LAYERS), [2], [math.inf])
