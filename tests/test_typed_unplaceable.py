"""A job its GPU types can never hold this round is a fact of the queue, not bad input.

In a round -- an instance file given to ``solve`` or ``check``, :func:`pal_opt.make_instance`,
a :class:`~pal_opt.model.RoundInstance` -- a job whose named types have fewer GPUs than its
demand, or fewer in service than its demand, is kept and reported as unplaceable with its
reason, as a job larger than the cluster is (``tests/test_oversized.py``): prefix admission and
PAL's order stop at it, backfill skips it, every method, ``check`` accepts a placement that
leaves it out.  Unknown type names stay bad input (``tests/test_bad_input.py``), and so does a
running job's placement on GPUs it may not use (as one on a failed GPU).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pal_opt import make_instance, solve
from pal_opt.admission import unplaceable
from pal_opt.check import check
from pal_opt.cli import main
from pal_opt.errors import InstanceError
from pal_opt.gputypes import service_problem
from pal_opt.io import load_instance
from pal_opt.io.instance import instance_from_dict
from pal_opt.model import Cluster, GpuState, Job, RoundInstance
from pal_opt.scheduler import RoundPolicy

# type a: GPUs 0-3 on server 0; type b: GPUs 4-11 on servers 1 and 2
TYPED: dict[str, Any] = {
    "format": "pal-opt/instance",
    "version": 1,
    "params": {"binning": "none"},
    "cluster": {
        "gpus": {"id": list(range(12)), "server": [0] * 4 + [1] * 4 + [2] * 4, "type": ["a"] * 4 + ["b"] * 8},
        "factors": {"classA": [1.0, 1.1, 0.9, 1.05, 1.0, 1.2, 0.95, 1.0, 1.1, 1.0, 0.97, 1.02],
                    "classB": [1.0] * 12},
        "throughput": {"classA": {"a": 1.0, "b": 2.0}},
    },
    "jobs": [
        {"id": 0, "demand": 2, "class": "classA"},
        {"id": 1, "demand": 6, "class": "classA", "kind": "guaranteed", "gpu_type": "a"},
        {"id": 2, "demand": 2, "class": "classB"},
        {"id": 3, "demand": 1, "class": "classA", "kind": "guaranteed", "gpu_type": "b"},
    ],
}
TOO_SMALL = "needs 6 GPUs of type 'a', which has 4"


def doc(**job1: Any) -> dict[str, Any]:
    """TYPED with job 1's fields replaced by ``job1`` (a None value drops the field)."""
    d = copy.deepcopy(TYPED)
    j = d["jobs"][1]
    for k, v in job1.items():
        if v is None:
            j.pop(k, None)
        else:
            j[k] = v
    return d


def write(tmp_path: Path, d: dict[str, Any], name: str = "round.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p


def untyped(d: dict[str, Any], demand: int = 100) -> dict[str, Any]:
    """``d`` without GPU types, job 1 larger than the cluster: the untyped equivalent."""
    u = copy.deepcopy(d)
    del u["cluster"]["gpus"]["type"], u["cluster"]["throughput"]
    for j in u["jobs"]:
        for k in ("kind", "gpu_type", "allowed_types"):
            j.pop(k, None)
    u["jobs"][1]["demand"] = demand
    return u


def run_solve(tmp_path: Path, src: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "placement.json"
    out.unlink(missing_ok=True)
    rc = main(["solve", str(src), "--quiet", *argv, "-o", str(out)])
    assert rc == 0
    placed: dict[str, Any] = json.loads(out.read_text())
    return placed


JOB1 = {
    "guaranteed": {},
    "not-guaranteed": {"kind": None},
    "allowed-types": {"kind": None, "gpu_type": None, "allowed_types": ["a"]},
}
METHODS = [["--method", m] for m in ("pal", "pmfirst", "packed", "packed-sticky")] + [
    ["--method", "random", "--seed", "1"], ["--method", "ilp-partitioned", "--parts", "2"],
    *(["--method", "ilp", "--backend", b] for b in ("highs", "cpsat", "cbc")),
]


# --------------------------------------------------------------------------- 1. too few GPUs of the type
@pytest.mark.parametrize("job1", list(JOB1.values()), ids=list(JOB1))
def test_a_file_with_a_type_too_small_loads(job1: dict[str, Any], tmp_path: Path) -> None:
    inst = load_instance(write(tmp_path, doc(**job1)))
    assert unplaceable(inst) == {1: TOO_SMALL}


@pytest.mark.parametrize("argv", METHODS, ids=[" ".join(a[1:]) for a in METHODS])
@pytest.mark.parametrize("job1", list(JOB1.values()), ids=list(JOB1))
def test_solve_reports_the_job_and_places_the_rest(job1: dict[str, Any], argv: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path, doc(**job1))
    got = run_solve(tmp_path, src, *argv, "--admission", "backfill")
    assert set(got["placements"]) == {"0", "2", "3"}
    assert got["unplaceable"] == [{"job": 1, "reason": TOO_SMALL}]
    assert main(["check", str(src), str(tmp_path / "placement.json")]) == 0
    assert check(load_instance(src), got) == []


@pytest.mark.parametrize("argv", METHODS, ids=[" ".join(a[1:]) for a in METHODS])
def test_prefix_stops_at_it_as_at_an_oversized_job(argv: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    typed = run_solve(tmp_path, write(tmp_path, doc()), *argv)
    plain = run_solve(tmp_path, write(tmp_path, untyped(TYPED), "plain.json"), *argv)
    assert typed["unplaceable"] == [{"job": 1, "reason": TOO_SMALL}]
    assert plain["unplaceable"] == [{"job": 1, "reason": "needs 100 GPUs; the cluster has 12"}]
    assert set(typed["placements"]) == set(plain["placements"])
    assert check(load_instance(tmp_path / "round.json"), typed) == []


def test_ignoring_types_places_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = run_solve(tmp_path, write(tmp_path, doc()), "--method", "pal", "--ignore-types", "--admission", "backfill")
    assert set(got["placements"]) == {"0", "1", "2", "3"} and got["unplaceable"] == []


def test_check_accepts_a_placement_leaving_it_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path, doc())
    pl = tmp_path / "given.json"
    pl.write_text(json.dumps({"placements": {"0": [0, 1], "2": [8, 9], "3": [4]}, "admission": "backfill"}))
    assert main(["check", str(src), str(pl)]) == 0
    pl.write_text(json.dumps({"placements": {"0": [0, 1], "2": [8, 9]}, "admission": "backfill"}))
    assert main(["check", str(src), str(pl)]) == 1  # job 3 fits and was left out


def test_the_python_api_reports_it_too() -> None:
    d = doc()
    inst = instance_from_dict(d)
    cluster = inst.cluster
    built = make_instance(cluster, d["jobs"], binning="none")
    for r in (solve(built, method="pal", admission="backfill"), RoundPolicy("ilp", admission="backfill").place(built)):
        assert set(r.placements) == {0, 2, 3} and r.unplaceable == {1: TOO_SMALL} and check(built, r) == []


def test_a_class_without_throughput_on_its_type_is_unplaceable_in_code() -> None:
    c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb",
                            throughput={"classA": {"a": 1.0}})
    inst = make_instance(c, [{"id": "x", "demand": 1, "class": "classA", "gpu_type": "b"},
                             {"id": "y", "demand": 2, "class": "classA"}])
    assert unplaceable(inst) == {"x": "class 'classA' has no throughput on GPU type(s) 'b'"}
    assert set(solve(inst, method="pal", admission="backfill").placements) == {"y"}


def test_an_unknown_type_is_still_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InstanceError, match=r"jobs\[1\].gpu_type: unknown GPU type 'v100'"):
        load_instance(write(tmp_path, doc(gpu_type="v100")))
    with pytest.raises(InstanceError, match=r"jobs\[1\].allowed_types\[0\]: unknown GPU type 'v100'"):
        make_instance(instance_from_dict(TYPED).cluster, doc(kind=None, gpu_type=None, allowed_types=["v100"])["jobs"])


# --------------------------------------------------------------------------- 2. too few in service
def failed(d: dict[str, Any], gpus: list[int]) -> dict[str, Any]:
    d = copy.deepcopy(d)
    d["cluster"]["gpus"]["state"] = ["failed" if g in gpus else "free" for g in range(12)]
    return d


def test_failed_gpus_of_its_type_are_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    half = failed(doc(demand=3), [0, 1])
    reason = "needs 3 GPUs of type 'a'; 2 are in service (2 failed)"
    assert unplaceable(load_instance(write(tmp_path, half))) == {1: reason}
    for argv in (["--method", "pal"], ["--method", "ilp"], ["--method", "ilp", "--admission", "backfill"]):
        got = run_solve(tmp_path, write(tmp_path, half), *argv)
        assert got["unplaceable"] == [{"job": 1, "reason": reason}], argv
        assert check(load_instance(tmp_path / "round.json"), got) == []


@pytest.mark.parametrize("argv", [["--method", "pal"], ["--method", "packed"], ["--method", "ilp"],
                                  ["--method", "pal", "--admission", "backfill"],
                                  ["--method", "ilp", "--admission", "backfill"]])
def test_a_blocked_job_stops_the_queue_as_an_untyped_one(argv: list[str], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Every GPU of type a failed: the guaranteed job on a blocks prefix admission and PAL's
    order exactly as an untyped job needing more GPUs than are in service does."""
    typed = failed(doc(demand=1), [0, 1, 2, 3])
    plain = failed(untyped(TYPED, demand=9), [0, 1, 2, 3])
    got = run_solve(tmp_path, write(tmp_path, typed), *argv)
    ref = run_solve(tmp_path, write(tmp_path, plain, "plain.json"), *argv)
    assert got["unplaceable"] == [{"job": 1, "reason": "needs 1 GPU of type 'a'; 0 are in service (4 failed)"}]
    assert ref["unplaceable"] == [{"job": 1, "reason": "needs 9 GPUs; 8 are in service (4 failed)"}]
    assert set(got["placements"]) == set(ref["placements"])
    assert check(load_instance(tmp_path / "round.json"), got) == []


def test_service_problem_wording() -> None:
    c = Cluster.from_arrays(range(12), [0] * 4 + [1] * 4 + [2] * 4, {"classA": [1.0] * 12}, gpu_types="aaaabbbbbbbb",
                            state=[GpuState.FAILED] * 3 + [0] * 5 + [GpuState.FAILED] * 2 + [0, 0])
    assert service_problem(c, Job(1, 2, "classA", gpu_type="a")) == "needs 2 GPUs of type 'a'; 1 are in service (3 failed)"
    assert service_problem(c, Job(1, 1, "classA", gpu_type="a")) is None
    assert service_problem(c, Job(1, 7, "classA")) == (
        "needs 7 GPUs of one type; the most in service, 'b', has 6 (5 GPUs of types 'a', 'b' failed)")
    # the type with the most in service need not be the one large enough
    c2 = c.with_state([0] * 6 + [GpuState.FAILED] * 6)
    assert service_problem(c2, Job(1, 6, "classA")) == (
        "needs 6 GPUs of one type; the most in service, 'a', has 4 (6 GPUs of types 'a', 'b' failed)")
    assert service_problem(c, Job(1, 8, "classA", mix_types=True)) == (
        "needs 8 GPUs of types 'a', 'b'; 7 are in service (5 failed)")
    assert service_problem(c, Job(1, 7, "classA", mix_types=True)) is None
    assert service_problem(c, Job(1, 2, "classA", gpu_type="v100")) is None  # type_problem's case
    healthy = RoundInstance(c.with_state([0] * 12), (Job(1, 4, "classA", gpu_type="a"),))
    assert unplaceable(healthy) == {}


# --------------------------------------------------------------------------- 3. running jobs on their types
def test_running_jobs_on_their_types_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """(A running job on GPUs it may not use is bad input: ``tests/test_bad_input.py``.)"""
    d = doc(demand=2)
    d["jobs"][2].update(placement=[1, 4], mix_types=True)
    d["jobs"][3]["placement"] = [5]
    src = write(tmp_path, d)
    inst = load_instance(src)
    assert inst.jobs[2].placement == (1, 4) and inst.jobs[3].placement == (5,)
    got = run_solve(tmp_path, src, "--method", "packed-sticky", "--admission", "backfill")
    assert got["placements"]["3"] == [5] and check(inst, got) == []
    d["jobs"][3]["placement"] = [0]
    with pytest.raises(InstanceError, match=r"^<memory>: jobs\[3\].placement\[0\]: GPU 0 is of type 'a', which"):
        make_instance(inst.cluster, d["jobs"])
