"""Golden LP exports of the round program (``formulations/golden/*.lp``).

The exports are regenerated from the fixed tiny rounds below and compared byte for byte.  After
an intended change to the formulation or the writer, refresh them with::

    /work/venv/bin/python tests/test_ilp_golden.py --update

and review the diff.  HiGHS reads every golden file back and finds the optimum pal-opt finds.
"""

from __future__ import annotations

import numpy as np
import pytest
from golden import GOLDEN, assert_unchanged
from golden import main as golden_main

from pal_opt.cost.restart import restart_cost_seconds
from pal_opt.ilp import available_backends, build_formulation, solve_ilp
from pal_opt.ilp.lpwriter import lp_text
from pal_opt.inforce import RepairRound, repair_round
from pal_opt.model import Cluster, GpuState, Job, RoundInstance, RoundParams
from pal_opt.repair import reduced_round


def _flat_2x2() -> RoundInstance:
    """Two servers of two GPUs, one class, a 2-GPU and a 1-GPU job."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.0, 1.2, 1.0, 1.0]})
    jobs = (Job(1, 2, "classA", 0, (1.0, 1.7, 1.7)), Job(2, 1, "classA", 1, (1.0, 1.7, 1.7)))
    return RoundInstance(cl, jobs, RoundParams(binning="none"), name="flat_2x2")


def _racked_mixed() -> RoundInstance:
    """Three uneven servers in two racks, one busy and one failed GPU, three classes of which
    two order the GPUs alike (one profile), a 3-GPU job that must span servers."""
    F, B, X = GpuState.FREE, GpuState.BUSY, GpuState.FAILED
    cl = Cluster.from_arrays(
        [10, 11, 12, 13, 14, 15, 16],
        ["a", "a", "b", "b", "b", "c", "c"],
        {
            "classA": [1.0, 1.1, 1.0, 1.3, 1.1, 1.0, 1.0],
            "classB": [0.9, 1.2, 0.9, 1.5, 1.2, 0.9, 0.9],
            "classD": [1.0, 1.0, 1.05, 1.0, 1.0, 1.0, 1.05],
        },
        [F, F, B, F, F, X, F],
        {"a": "r0", "b": "r0", "c": "r1"},
    )
    lam = (1.0, 1.3, 1.7)
    jobs = (
        Job("j1", 3, "classA", 0, lam),
        Job("j2", 1, "classB", 1, lam),
        Job("j3", 1, "classD", 2, lam),
    )
    return RoundInstance(cl, jobs, RoundParams(binning="none"), name="racked_mixed")


def _restart_keep() -> RoundInstance:
    """A running 2-GPU job that may keep its GPUs (restart cost 0.1 per GPU) and a new job."""
    cl = Cluster.from_arrays(np.arange(6), [0, 0, 0, 1, 1, 1], {"classA": [1.2, 1.0, 1.0, 1.0, 1.0, 1.2]})
    jobs = (
        Job(5, 2, "classA", 0, (1.0, 1.7, 1.7), placement=(2, 3)),
        Job(6, 3, "classA", 1, (1.0, 1.7, 1.7)),
    )
    # 0.1 per GPU in round-cost units: 34.26 s of a 360 s round
    params = RoundParams(binning="none", restart_cost=restart_cost_seconds(0.1, 360.0), round_length=360.0)
    return RoundInstance(cl, jobs, params, name="restart_keep")


def _repair(price: float | None) -> RepairRound:
    """Two servers of four GPUs; "s" (1 GPU), "f" (2 GPUs) and "g" (1 GPU) unaffected, "d" (2 GPUs) on
    server 1 loses GPU 5."""
    cl = Cluster.from_arrays(np.arange(8), [0, 0, 0, 0, 1, 1, 1, 1],
                             {"classA": [1.0, 1.1, 1.0, 1.2, 1.0, 1.0, 1.3, 1.0]})
    lam = (1.0, 1.7, 1.7)
    jobs = (Job("s", 1, "classA", 0, lam), Job("d", 2, "classA", 1, lam), Job("f", 2, "classA", 2, lam),
            Job("g", 1, "classA", 3, lam))
    inst = RoundInstance(cl, jobs, RoundParams(binning="none"), name="repair")
    return repair_round(inst, {"s": [0], "d": [4, 5], "f": [1, 2], "g": [6]}, [5], migration_per_gpu=price)


def _repair_keep() -> RoundInstance:
    """The reduced program of a repair (formulations/repair.md): the displaced 2-GPU job alone on
    the GPUs that are neither failed nor held by unaffected jobs."""
    return reduced_round(_repair(None))


def _repair_migrate() -> RoundInstance:
    """The whole-round program of a repair with --allow-migration 0.1: keep variables for the
    unaffected jobs, whose migration charge is the constant (the displaced job pays none)."""
    return _repair(0.1).instance


CASES = {"flat_2x2": _flat_2x2, "racked_mixed": _racked_mixed, "restart_keep": _restart_keep,
         "repair_keep": _repair_keep, "repair_migrate": _repair_migrate}


def golden_text(name: str) -> str:
    inst = CASES[name]()
    doc = " ".join((CASES[name].__doc__ or "").split())
    return lp_text(build_formulation(inst), comment=f"golden round {name!r}: {doc}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_lp_export_is_unchanged(name):
    assert_unchanged(name, golden_text(name), "test_ilp_golden.py")


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_lp_reads_back_into_highs_with_the_same_optimum(name, tmp_path):
    if "highs" not in available_backends():
        pytest.skip("highspy not installed")
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    assert h.readModel(str(GOLDEN / f"{name}.lp")) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    r = solve_ilp(CASES[name]())
    assert h.getInfo().objective_function_value == pytest.approx(r.objective, abs=1e-9)


if __name__ == "__main__":
    golden_main(CASES, golden_text, __doc__)
