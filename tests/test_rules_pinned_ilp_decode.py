"""Rules of pal_opt/ilp/decode.py that no test held: each test here fails on a one-rule change (a mutation review, 2026-12-06) that the rest of the suite let pass."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pal_opt.errors import BackendError
from pal_opt.ilp.decode import INTEGRALITY_TOL, decode, encode
from pal_opt.ilp.formulation import Formulation, build_formulation
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams


def test_a_solution_far_from_integral_is_refused() -> None:
    c = Cluster.uniform(2, 2, {"classA": [1.0, 1.1, 1.0, 1.2]})
    inst = RoundInstance(c, (Job("a", 2, "classA"), Job("b", 1, "classA")))
    form = build_formulation(inst)
    x = encode(form, {"a": (0, 1), "b": (2,)})
    assert set(decode(form, x)) == {"a", "b"}
    k = int(np.flatnonzero(form.integrality & (x > 0))[0])
    y = x.copy()
    y[k] -= 0.3  # 0.7 for a variable that must be 0 or 1
    with pytest.raises(BackendError, match="not integral"):
        decode(form, y)


# ---- decode refuses a malformed solver solution (mutation review, 2026-12-07): each guard of
# decode has a test that fails when the guard is removed or weakened.
def _two_gangs() -> tuple[Formulation, np.ndarray]:
    """Two 2-GPU jobs of one type on two 2-GPU servers, one per server: slots x_t0_v0_s0 and
    x_t0_v0_s1 at 1 (bounds [0, 1]), z_t0_v0 at 0 (bounds [0, 2]), then the flow columns."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    form = build_formulation(RoundInstance(cl, (Job("a", 2, "classA"), Job("b", 2, "classA"))))
    x = encode(form, {"a": (0, 1), "b": (2, 3)})
    assert decode(form, x) == {"a": (0, 1), "b": (2, 3)}
    return form, x


def _var(form: Formulation, name: str) -> int:
    return list(form.var_names).index(name)


def test_a_solution_of_the_wrong_length_or_shape_is_refused() -> None:
    form, x = _two_gangs()
    n = form.num_vars
    with pytest.raises(BackendError, match=re.escape(f"solution has {n - 1} values, the program has {n} variables")):
        decode(form, x[:-1])
    with pytest.raises(BackendError, match=re.escape(f"solution has {n} values, the program has {n} variables")):
        decode(form, x.reshape(1, n))  # the right count in the wrong shape


def test_a_value_within_the_integrality_tolerance_is_rounded_to_the_nearest_integer() -> None:
    form, x = _two_gangs()
    y = x.copy()
    y[_var(form, "x_t0_v0_s0")] = 1.0 - INTEGRALITY_TOL / 2
    y[_var(form, "z_t0_v0")] = INTEGRALITY_TOL / 2
    assert decode(form, y) == decode(form, x)


def test_a_value_just_beyond_the_integrality_tolerance_is_refused_and_named() -> None:
    form, x = _two_gangs()
    y = x.copy()
    k = _var(form, "x_t0_v0_s1")  # (not the first integer variable: the message names the bad one)
    y[k] = 1.0 - 2 * INTEGRALITY_TOL
    with pytest.raises(BackendError, match=re.escape(f"variable x_t0_v0_s1 = {float(y[k])!r} is not integral")):
        decode(form, y)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_missing_or_infinite_value_is_refused(bad: float) -> None:
    """NaN (a value the solver did not give) and ±inf are not integers (NaN passed the
    integrality check, which compared ``> tol``, and was read as a huge negative integer)."""
    form, x = _two_gangs()
    y = x.copy()
    y[_var(form, "z_t0_v0")] = bad
    with pytest.raises(BackendError, match=re.escape(f"variable z_t0_v0 = {bad!r} is not integral")):
        decode(form, y)


@pytest.mark.parametrize("name, value, bounds", [("x_t0_v0_s0", 2.0, "[0, 1]"), ("z_t0_v0", -1.0, "[0, 2]")])
def test_an_integer_value_outside_its_bounds_is_refused(name: str, value: float, bounds: str) -> None:
    form, x = _two_gangs()
    y = x.copy()
    y[_var(form, name)] = value
    with pytest.raises(BackendError, match=re.escape(f"variable {name} = {value!r} is outside its bounds {bounds}")):
        decode(form, y)


def test_fractional_flow_values_are_not_read() -> None:
    """The flow columns are continuous: decode recomputes the flows from the slots, so a
    fractional (even infeasible) flow vector decodes as the slots say."""
    form, x = _two_gangs()
    y = x.copy()
    y[~form.integrality] = 0.5
    assert decode(form, y) == decode(form, x)


@pytest.mark.parametrize("name, value, have", [("z_t0_v0", 1.0, 3), ("x_t0_v0_s1", 0.0, 1)])
def test_a_job_type_given_more_or_fewer_slots_than_jobs_is_refused(name: str, value: float, have: int) -> None:
    form, x = _two_gangs()
    y = x.copy()
    y[_var(form, name)] = value
    with pytest.raises(BackendError, match=re.escape(f"job type 0 has 2 jobs to place but {have} slots")):
        decode(form, y)


def _preemptible() -> tuple[Formulation, np.ndarray]:
    """r (2 GPUs) and s (1 GPU) run, both optional, with a restart cost (keep columns k_j0, k_j1
    and drop columns u_j0, u_j1); w (1 GPU) waits.  The vector keeps r, drops s, places w."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    jobs = (Job("r", 2, "classA", placement=(0, 1)), Job("s", 1, "classA", placement=(2,)),
            Job("w", 1, "classA", priority=1))
    form = build_formulation(RoundInstance(cl, jobs, RoundParams(restart_cost=30.0)), [0, 1, 2], optional=[0, 1])
    x = encode(form, {"r": (0, 1), "w": (3,)})
    got = decode(form, x)
    assert set(got) == {"r", "w"} and got["r"] == (0, 1)
    return form, x


def test_a_job_both_kept_and_left_out_is_refused() -> None:
    form, x = _preemptible()
    y = x.copy()
    assert y[_var(form, "k_j0")] == 1
    y[_var(form, "u_j0")] = 1.0
    with pytest.raises(BackendError, match="a job both keeps its GPUs and is left out"):
        decode(form, y)


def test_a_job_neither_kept_dropped_nor_given_a_slot_is_refused() -> None:
    """s's drop column back at 0: s must be placed, and its type (s and w) has one slot."""
    form, x = _preemptible()
    y = x.copy()
    y[_var(form, "u_j1")] = 0.0
    with pytest.raises(BackendError, match=re.escape("job type 1 has 2 jobs to place but 1 slots")):
        decode(form, y)


def test_slots_whose_pool_the_free_gpus_cannot_hold_are_refused() -> None:
    """Every count matches, but the three jobs' slots all sit on server 0 (4 GPUs on a 2-GPU
    server): the maximum flow routes only 2."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0] * 4})
    inst = RoundInstance(cl, (Job("a", 2, "classA"), Job("b", 1, "classA"), Job("c", 1, "classA")))
    form = build_formulation(inst)
    y = np.zeros(form.num_vars)
    y[_var(form, "x_t0_v0_s0")] = 1.0
    y[_var(form, "x_t1_v0_s0")] = 2.0
    with pytest.raises(BackendError, match=re.escape("solution is not placeable: 2 of 4 GPUs routed")):
        decode(form, y)
