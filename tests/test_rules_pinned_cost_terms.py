"""Rules of the cost terms (pal_opt/cost/ other than evaluate.py) that no test held: each test
here fails on a one-rule change of a term or of the registry (a mutation audit, 2026-12-07) that
the rest of the suite let pass.  Expected prices are worked by hand on tiny rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pal_opt.cost import COST_TERMS, CostTerm, evaluate, register_cost_term, validate_cost_params
from pal_opt.cost.registry import cost_terms
from pal_opt.errors import OptionError
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams


def test_a_lost_gpu_is_found_by_its_position_not_its_id() -> None:
    """GPU ids in reverse order of positions: id 5 (position 0) failed.  Job q held ids (5, 4), so
    its move is forced and free; job r held ids (1, 0) (positions 4, 5, both free), so its move is
    charged 0.5 + 0.25 x 2 (read by id, r's GPUs would be positions 0 and 1 and its move free)."""
    c = Cluster.from_arrays([5, 4, 3, 2, 1, 0], [0, 0, 0, 1, 1, 1], {"classA": [1.0] * 6})
    c = c.with_state(np.array([GpuState.FAILED, 0, 0, 0, 0, 0], dtype=np.int8))
    jobs = (Job("q", 1, "classA", placement=(5,)), Job("r", 2, "classA", placement=(1, 0)))
    inst = RoundInstance(c, jobs, RoundParams(costs={"migration": {"per_job": 0.5, "per_gpu": 0.25}}))
    migration = COST_TERMS["migration"]
    assert migration.moved(inst, jobs[0]) == 0.0
    assert migration.moved(inst, jobs[1]) == pytest.approx(1.0)
    s = evaluate(inst, {"q": (4,), "r": (3, 2)}, c.factors)
    assert s.moved == ("q", "r") and s.by_term["migration"] == pytest.approx(1.0)


def test_preemption_charges_the_rounds_own_length() -> None:
    """A running job of 2 GPUs, priority 1, left out of a 720-second round: 100 x 2 x 2 x 720 / 3600
    = 80 (a 360-second round would be 40)."""
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    inst = RoundInstance(c, (Job("r", 2, "classA", priority=1, placement=(0, 1)),), RoundParams(round_length=720.0))
    assert evaluate(inst, {}, c.factors).by_term["preemption"] == pytest.approx(80.0)


def test_a_negative_cost_parameter_is_refused() -> None:
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.0]})
    inst = RoundInstance(c, (), RoundParams(costs={"migration": {"per_job": -0.5}}))
    with pytest.raises(OptionError, match=r"migration\.per_job must be a finite number >= 0"):
        validate_cost_params(inst)


class _Shadow(CostTerm):
    name = "locality"


def test_a_term_name_taken_needs_replace() -> None:
    before = COST_TERMS["locality"]
    with pytest.raises(OptionError, match="registered already"):
        register_cost_term(_Shadow())
    assert COST_TERMS["locality"] is before


def test_terms_are_summed_and_reported_in_registry_order() -> None:
    c = Cluster.uniform(1, 2, {"classA": [1.0, 1.2]})
    inst = RoundInstance(c, (Job("a", 1, "classA"),))
    assert [t.name for t in cost_terms()] == list(COST_TERMS)
    s = evaluate(inst, {"a": (1,)}, c.factors)
    assert list(s.by_term) == list(COST_TERMS)
    assert s.cost == pytest.approx(math.log(1.2))
