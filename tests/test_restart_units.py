"""One restart-cost unit everywhere: seconds of work a moved job loses on each of its GPUs.

``pal-opt generate|import ... --restart-cost S --round R``, ``pal-opt solve --restart-cost S
--round R``, ``pal-opt simulate --restart-cost S --round R``, ``RoundParams`` and ``SimConfig``
all take S in seconds; the round program prices it at ``−ln(1 − S/R)`` per GPU
(:func:`pal_opt.cost.restart.restart_cost_units`), so the same S gives the same round cost in
``solve`` and in the simulator's rounds.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pal_opt.cli import main
from pal_opt.cost.restart import Restart, restart_cost_seconds, restart_cost_units
from pal_opt.errors import InstanceError
from pal_opt.io import load_instance, save_instance
from pal_opt.io.traces import TraceJob
from pal_opt.model import Cluster, Job, RoundInstance, RoundParams
from pal_opt.options import DEFAULT_ROUND_LENGTH
from pal_opt.scheduler import RoundPolicy
from pal_opt.simulate import SimConfig, simulate


def _running_round(restart: float = 0.0, round_length: float = DEFAULT_ROUND_LENGTH) -> RoundInstance:
    """Two servers of two GPUs, server 0 slow; job r (2 GPUs) runs there, job w (1 GPU) waits."""
    cl = Cluster.from_arrays([0, 1, 2, 3], [0, 0, 1, 1], {"classA": [1.3, 1.3, 1.0, 1.0]})
    jobs = (Job("r", 2, "classA", 0, placement=(0, 1)), Job("w", 1, "classA", 1))
    return RoundInstance(cl, jobs, RoundParams(binning="none", restart_cost=restart, round_length=round_length))


def _solve(path: Path, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["solve", str(path), "-o", str(out), "--quiet", *extra]) == 0
    return json.loads(out.read_text())


def test_conversion_and_its_inverse() -> None:
    assert restart_cost_units(36.0, 360.0) == pytest.approx(-math.log(0.9))
    assert restart_cost_units(0.0, 360.0) == 0.0
    assert math.isfinite(restart_cost_units(1e9, 360.0))  # a loss of a whole round stays finite
    assert restart_cost_units(36.0, 720.0) < restart_cost_units(36.0, 360.0)
    for units in (0.01, 0.1, 0.5, 1.0):
        assert restart_cost_units(restart_cost_seconds(units, 360.0), 360.0) == pytest.approx(units)


def test_round_params_hold_seconds_and_the_round_length() -> None:
    inst = _running_round(36.0)
    assert inst.params.restart_cost == 36.0 and inst.params.round_length == DEFAULT_ROUND_LENGTH == 360.0
    assert Restart().moved(inst, inst.jobs[0]) == pytest.approx(2 * -math.log(0.9))
    with pytest.raises(InstanceError, match="params.round_length: must be a finite number > 0"):
        RoundParams(round_length=0.0)


def test_instance_files_carry_the_round_length(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    save_instance(_running_round(36.0, 600.0), path)
    doc = json.loads(path.read_text())
    assert doc["params"]["restart_cost"] == 36.0 and doc["params"]["round_length"] == 600.0
    back = load_instance(path)
    assert (back.params.restart_cost, back.params.round_length) == (36.0, 600.0)
    save_instance(_running_round(0.0), path)  # without a restart cost the file stays as it was
    assert "round_length" not in json.loads(path.read_text())["params"]
    assert load_instance(path).params.round_length == 360.0


def test_generate_and_simulate_give_rounds_the_same_parameters(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    assert main(["generate", "--nodes", "2", "--gpus-per-node", "4", "--jobs", "3", "--restart-cost", "36",
                 "--round", "600", "-o", str(out)]) == 0
    params = load_instance(out).params
    sim = SimConfig(restart_cost=36.0, round_length=600.0).round_params()
    assert (params.restart_cost, params.round_length) == (sim.restart_cost, sim.round_length) == (36.0, 600.0)


def test_solve_restart_cost_is_seconds(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    save_instance(_running_round(), path)
    # PAL frees running jobs: r moves to the fast server and pays 2 GPUs x -ln(1 - 36/360)
    pal = _solve(path, tmp_path / "pal.json", "--method", "pal", "--restart-cost", "36")
    assert pal["info"]["cost_terms"]["restart"] == pytest.approx(2 * -math.log(0.9))
    half = _solve(path, tmp_path / "half.json", "--method", "pal", "--restart-cost", "36", "--round", "720")
    assert half["info"]["cost_terms"]["restart"] == pytest.approx(2 * -math.log(0.95))
    # the program moves r when the loss is small (10 s: 2 x 0.028 < 2 ln 1.3 saved) and keeps it
    # when it is large (300 s of 360: 2 x 1.79 > 2 ln 1.3)
    cheap = _solve(path, tmp_path / "cheap.json", "--method", "ilp", "--restart-cost", "10")
    assert sorted(cheap["placements"]["r"]) == [2, 3]
    dear = _solve(path, tmp_path / "dear.json", "--method", "ilp", "--restart-cost", "300")
    assert sorted(dear["placements"]["r"]) == [0, 1]
    # the flag overrides the file's parameters; without it the file's hold
    save_instance(_running_round(300.0), path)
    assert sorted(_solve(path, tmp_path / "file.json", "--method", "ilp")["placements"]["r"]) == [0, 1]
    assert sorted(_solve(path, tmp_path / "flag.json", "--method", "ilp", "--restart-cost", "10")
                  ["placements"]["r"]) == [2, 3]


def test_the_simulator_round_program_sees_what_solve_sees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same --restart-cost in ``simulate`` and ``solve``: a round the simulator placed with the
    integer program, solved again by ``pal-opt solve --restart-cost 36``, costs the same."""
    seen: list[tuple[RoundInstance, Any]] = []
    place = RoundPolicy.place

    def recording(self: RoundPolicy, instance: RoundInstance, **kw: Any) -> Any:
        res = place(self, instance, **kw)
        seen.append((instance, res))
        return res

    monkeypatch.setattr(RoundPolicy, "place", recording)
    cluster = Cluster.uniform(2, 2, {"classA": np.array([1.3, 1.3, 1.0, 1.0])})
    trace = [TraceJob(id=k, demand=d, submit_time=s, iterations=n, model="m", perfclass="classA", iter_time=1.0)
             for k, (d, s, n) in enumerate([(2, 0.0, 1000.0), (2, 0.0, 500.0), (1, 400.0, 900.0)])]
    cfg = SimConfig(policy="ilp", binning="none", restart_cost=36.0, round_length=360.0, backend="highs")
    simulate(trace, cluster, cfg)
    running = [(i, r) for i, r in seen if any(j.placement is not None for j in i.jobs)]
    assert running, "no round had a running job"
    # job 2 moves from the slow GPU to a fast one freed by job 0: 1 GPU x -ln(1 - 36/360)
    assert any(res.info["cost_terms"]["restart"] == pytest.approx(-math.log(0.9)) for _, res in running)
    for k, (inst, res) in enumerate(running):
        assert (inst.params.restart_cost, inst.params.round_length) == (36.0, 360.0)
        with_params = tmp_path / f"round{k}.json"
        save_instance(inst, with_params)
        bare = tmp_path / f"bare{k}.json"  # the same round without restart parameters
        save_instance(replace(inst, params=RoundParams(binning="none")), bare)
        a = _solve(with_params, tmp_path / f"a{k}.json", "--method", "ilp", "--backend", "highs")
        b = _solve(bare, tmp_path / f"b{k}.json", "--method", "ilp", "--backend", "highs",
                   "--restart-cost", "36", "--round", "360")
        assert a["objective"] == pytest.approx(res.objective, abs=1e-9)
        assert b["objective"] == pytest.approx(res.objective, abs=1e-9)
        assert a["info"]["cost_terms"].get("restart", 0.0) == pytest.approx(res.info["cost_terms"].get("restart", 0.0))
