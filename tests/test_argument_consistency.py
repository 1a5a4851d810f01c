"""Argument checks made alike (fifteenth session).

* The two simulators' configurations test their times with one predicate
  (:func:`pal_opt.options.check_seconds`): a bool, NaN, infinity, a negative or a text is
  refused by both, in the same words (the PAL simulator's took ``True`` as a 1 s round).
* Records a user builds (:class:`~pal_opt.hetero.GpuType`, :class:`~pal_opt.hetero.WorkloadJob`,
  :class:`~pal_opt.hetero.Workload`, :class:`~pal_opt.simulate.ClusterSpec`) check their fields
  when built, instead of running on 0 GPUs or failing deep inside the simulator.
* Public callables check the arguments a call does not read (a mode that leaves them out).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pal_opt.errors import OptionError
from pal_opt.hetero import GpuType
from pal_opt.hetero.simulate import SimConfig as SiaConfig
from pal_opt.simulate import SimConfig

SIA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sia-artifact"
BAD_TIMES = [True, False, math.nan, math.inf, -math.inf, -1.0, 0, 2e15, "60", None]


def _message(make) -> str:
    with pytest.raises(OptionError) as err:
        make()
    assert "\n" not in str(err.value)
    return str(err.value)


# ----------------------------------------------------------------------------- the simulators
@pytest.mark.parametrize("name", ["round_length", "max_time"])
@pytest.mark.parametrize("bad", BAD_TIMES, ids=repr)
def test_both_simulators_refuse_a_bad_time_in_the_same_words(name: str, bad: object) -> None:
    if bad is None and name == "max_time":
        pytest.skip("the PAL simulator's max_time=None means no cap (the Sia one's has no None)")
    pal = _message(lambda: SimConfig(**{name: bad}).validate())
    sia = _message(lambda: SiaConfig(**{name: bad}))
    assert pal == sia == f"{name} must be a number of seconds > 0 and at most 1e+15, got {bad!r}"


@pytest.mark.parametrize("value", [np.int64(60), np.float64(60.0), 60, 1e15])
def test_both_simulators_take_a_number_of_seconds(value: object) -> None:
    SimConfig(round_length=value, max_time=value).validate()  # type: ignore[arg-type]
    assert SiaConfig(round_length=value, max_time=value).round_length == value  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"restart_cost": True}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got True"),
    ({"restart_cost": math.nan}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got nan"),
    ({"restart_cost": "5"}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got '5'"),
    ({"restart_cost": -1}, "restart_cost must be a number of seconds >= 0 and at most 1e+15, got -1"),
    ({"rack_penalty": True}, "rack_penalty must be a finite number >= 1, got True"),
    ({"rack_penalty": "2"}, "rack_penalty must be a finite number >= 1, got '2'"),
    ({"seed": True}, "seed must be an integer >= 0, got True"),
    ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5"),
])
def test_the_pal_simulator_refuses_its_other_bad_numbers(kwargs: dict, expected: str) -> None:
    # True was a 1 s restart cost and a rack penalty of 1; "5" and "2" raised TypeError from math.isfinite
    assert _message(lambda: SimConfig(**kwargs).validate()) == expected


def test_gavels_round_is_a_number_of_seconds_in_the_same_words() -> None:
    from pal_opt.hetero import GavelPolicy

    assert (_message(lambda: SiaConfig(gavel_round=True))
            == "gavel_round must be a number of seconds > 0 and at most 1e+15, got True")
    # "x" raised TypeError from math.isfinite; True was a round of 1 s
    for bad in ("x", True):
        assert (_message(lambda: GavelPolicy((GpuType("a", 1, 1),), round_seconds=bad))  # noqa: B023
                == f"round_seconds must be a number of seconds > 0 and at most 1e+15, got {bad!r}")
