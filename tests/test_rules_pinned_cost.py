"""Rules of pal_opt/cost/ that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pal_opt.cost import evaluate, geomean_slowdown, left_out_charge, relative_gap, validate_cost_params
from pal_opt.cost.restart import restart_cost_seconds, restart_cost_units
from pal_opt.errors import InputTypeError, OptionError
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams


def test_relative_gap_never_negative_when_objective_below_bound() -> None:
    # an objective a hair below the bound (floating noise, or another solver's bound) is gap 0, not < 0
    assert relative_gap(1.0, 1.5, 4) == 0.0


def test_geomean_of_empty_placement_is_one() -> None:
    assert geomean_slowdown(0.0, 0) == 1.0
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.2]})
    inst = RoundInstance(c, (Job("a", 1, "classA"),))
    assert evaluate(inst, {}, c.factors).geomean == 1.0
    assert math.isclose(evaluate(inst, {"a": (1,)}, c.factors).geomean, 1.2)


def test_geomean_leaves_out_preemption_charges() -> None:
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.1]})
    inst = RoundInstance(c, (Job("r", 1, "classA", placement=(0,)), Job("a", 1, "classA")))
    s = evaluate(inst, {"a": (1,)}, c.factors)  # the running job r is left out (preempted)
    assert s.by_term["preemption"] > 0
    assert math.isclose(s.geomean, 1.1)


def test_waiting_job_left_out_pays_no_preemption() -> None:
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    inst = RoundInstance(c, (Job("w", 1, "classA"), Job("a", 1, "classA")))
    assert left_out_charge(inst, {"a"}) == 0.0
    assert evaluate(inst, {"a": (0,)}, c.factors).cost == 0.0


def test_a_job_id_given_as_placed_is_refused_not_matched_as_a_substring() -> None:
    # a str is a collection of its letters: "ra" in place of {"ra"} found running job "r" placed
    # (a substring) and charged it nothing; it is refused, naming the argument
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    inst = RoundInstance(c, (Job("r", 1, "classA", placement=(0,)), Job("ra", 1, "classA")))
    assert left_out_charge(inst, {"ra"}) > 0  # r left out pays its preemption
    with pytest.raises(InputTypeError, match=r"^placed: must be a collection of job ids .*got str 'ra'$"):
        left_out_charge(inst, "ra")


def test_a_job_on_an_allowed_count_pays_per_gpu_it_holds() -> None:
    # a strong-scaling job of demand 4 placed on 2 of its allowed counts pays for 2 GPUs, not 4
    c = Cluster.uniform(2, 2, {"classA": [1.2, 1.2, 1.0, 1.0]})
    job = Job("s", 4, "classA", kind="strong-scaling", allowed_counts=(1, 2, 4), locality=(1.0, 1.5, 1.5))
    inst = RoundInstance(c, (job,))
    s = evaluate(inst, {"s": (0, 2)}, c.factors)  # 2 GPUs on two servers: factor 1.2, penalty 1.5
    assert math.isclose(s.by_term["variability"], 2 * math.log(1.2))
    assert math.isclose(s.by_term["locality"], 2 * math.log(1.5))


def test_a_job_whose_gpu_was_taken_by_other_work_pays_no_migration() -> None:
    c = Cluster.uniform(1, 4, {"classA": [1.0] * 4})
    c = c.with_state(np.array([GpuState.BUSY, 0, 0, 0], dtype=np.int8))  # GPU 0 now busy with other work
    inst = RoundInstance(c, (Job("r", 2, "classA", placement=(0, 1)),),
                         RoundParams(costs={"migration": {"per_job": 0.5}}))
    assert evaluate(inst, {"r": (2, 3)}, c.factors).by_term["migration"] == 0.0


def test_negative_restart_seconds_cost_nothing() -> None:
    assert restart_cost_units(-36.0, 360.0) == 0.0


def test_a_non_finite_cost_parameter_is_refused() -> None:
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    for bad in (float("inf"), float("nan")):
        inst = RoundInstance(c, (), RoundParams(costs={"migration": {"per_job": bad}}))
        with pytest.raises(OptionError, match="finite"):
            validate_cost_params(inst)


def test_a_boolean_cost_parameter_is_refused() -> None:
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    inst = RoundInstance(c, (), RoundParams(costs={"migration": {"per_job": True}}))
    with pytest.raises(OptionError, match="finite number"):
        validate_cost_params(inst)


# -- 2026-12-07 -----------------------------------------------------------------------------------------
def test_a_restart_losing_a_whole_round_costs_all_but_a_millionth_of_it() -> None:
    # S/R is capped at 1 - 1e-6 (module docstring: "just below 1"): -ln(1e-6) per GPU, finite
    assert restart_cost_units(360.0, 360.0) == pytest.approx(-math.log(1e-6))
    assert restart_cost_units(720.0, 360.0) == pytest.approx(-math.log(1e-6))


def test_no_restart_cost_is_no_seconds_lost() -> None:
    assert restart_cost_seconds(0.0, 360.0) == 0.0
