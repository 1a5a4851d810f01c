"""Argument rules of :mod:`pal_opt.pipeline.cost` that a mutation audit (eighteenth session)
found unpinned: each test fails on the one-rule change its docstring names."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pal_opt.errors import InputTypeError, OptionError
from pal_opt.pipeline.cost import allreduce_time, stage_time


def test_replicas_as_an_array_must_be_integers() -> None:
    """An array of replica counts is integers (floats were taken for counts, in the message too)."""
    with pytest.raises(InputTypeError, match="replicas: must be integers, got an array of float64"):
        stage_time(0.01, 2e8, np.array([2.0]), 25e9)
    assert stage_time(0.01, 2e8, np.array([2]), 25e9) == pytest.approx([stage_time(0.01, 2e8, 2, 25e9)])


def test_a_0d_array_is_checked_as_its_number() -> None:
    """A 0-d array (or numpy scalar) is its number: NaN and 0 replicas are refused, as they are as
    Python numbers (taken for an array of numbers, they were not checked at all)."""
    with pytest.raises(OptionError, match="compute must be a finite number >= 0, got nan"):
        stage_time(np.asarray(math.nan), 2e8, 2, 25e9)
    with pytest.raises(OptionError, match="replicas must be an integer >= 1, got 0"):
        stage_time(0.01, 2e8, np.asarray(0), 25e9)


@pytest.mark.parametrize("position", [0, 1, 2, 3])
def test_a_bool_is_not_a_number(position: int) -> None:
    args: list[object] = [0.01, 2e8, 2, 25e9]
    args[position] = True
    with pytest.raises(InputTypeError, match="got bool True"):
        stage_time(*args)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((math.inf, 2, 25e9), "parameters must be a finite number >= 0, got inf"),
        ((2e8, 2, 25e9, math.inf), "divisor must be a finite number > 0, got inf"),
    ],
)
def test_only_compute_and_bandwidth_may_be_infinite(args: tuple[float, ...], says: str) -> None:
    """``inf`` is a segment without a pipeline (compute) or a level without a link limit
    (bandwidth); the parameter bytes and the divisor are finite (inf was taken for any of them)."""
    with pytest.raises(OptionError, match=says):
        allreduce_time(*args)
    assert stage_time(math.inf, 2e8, 2, math.inf) == math.inf
