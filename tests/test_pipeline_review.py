"""What a review acting as a researcher and an operator found on the pipeline side (2026-12-06):
each test fails on the code before its fix."""

from __future__ import annotations

import dataclasses
import json

import pytest

import pal_opt
from pal_opt.ilp.backends.base import SolverStatus
from pal_opt.ilp.backends.highs import HighsBackend
from pal_opt.model import Cluster, Job, Pipeline, RoundInstance, RoundParams


def _pipeline_round() -> RoundInstance:
    """Pipelines with slack and gangs on four servers, one slow GPU on each of the first two: PAL's
    start (the gangs on the slow servers, 8 ln 1.5) is above the jobs-alone bound, 0, which is the
    optimum (each slow GPU on a slack stage), so the stage program runs (a start at the bound
    needs none since 2026-12-07)."""
    f = [1.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.5, 1.0] + [1.0] * 8
    cl = Cluster.from_arrays(list(range(16)), [s for s in range(4) for _ in range(4)], {"classA": f})
    pipe = Pipeline((2.0, 1.0), (3, 1))
    jobs = (Job("p0", 4, "classA", 0, pipeline=pipe), Job("p1", 4, "classA", 1, pipeline=pipe),
            Job("g0", 4, "classA", 2), Job("g1", 4, "classA", 3))
    return RoundInstance(cl, jobs, RoundParams(binning="none"))


def test_a_stage_round_stopped_early_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline round the solver stopped before proving (a time limit) says why in its message,
    as a gang round's does (it was empty: a user checking the message for "time limit" took it
    for a finished solve).  It was ``feasible``; since 2026-12-07 the answer also carries the
    jobs-alone bound, which here (0: each job at its best alone, the optimum) proves it, and the
    message says which bound did."""
    real = HighsBackend.solve

    def stopped(self, program, options, start=None):  # type: ignore[no-untyped-def]
        sol = real(self, program, options, start=start)
        return dataclasses.replace(sol, status=SolverStatus.FEASIBLE, message="Time limit reached",
                                   bound=sol.bound - 1.0)

    monkeypatch.setattr(HighsBackend, "solve", stopped)
    res = pal_opt.solve(_pipeline_round(), "ilp", backend="highs")
    assert res.info["program"] == "stage"
    assert res.status.value == "optimal" and res.bound == 0.0 and res.gap == 0.0
    assert res.message == "highs: Time limit reached; bound: each job alone on the free GPUs"


# --------------------------------------------------------------------------- pal-opt partition
LINE = "node{0} -- L -- forward_compute_time={1}, backward_compute_time=0, activation_size={2}, parameter_size=0"


def _profile(tmp_path, text: str) -> str:
    path = tmp_path / "graph.txt"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("text", "says"), [
    (LINE.format(1, 1.0, "[1, 2]"), "line 1: a list's values are separated by ';', not ',': '[1, 2]'"),
    (LINE.format(1, 1.0, 1) + ",", "line 1: an empty field (a comma too many)"),
    ("\n".join([LINE.format(1, 1.0, 1), LINE.format(2, 1.0, 1), "    node1 -- node2"]),
     "line 3: an edge line starts with a tab; this one starts with 4 spaces"),
])
def test_profile_mistakes_are_named_for_what_they_are(tmp_path, capsys, text: str, says: str) -> None:
    from pal_opt.cli import main

    assert main(["partition", _profile(tmp_path, text), "--machines", "2", "--bandwidth", "1e9"]) == 2
    assert says in capsys.readouterr().err


def _chain(tmp_path, n: int) -> str:
    lines = [LINE.format(i, 1.0, 1) for i in range(1, n + 1)]
    lines += [f"\tnode{i} -- node{i + 1}" for i in range(1, n)]
    return _profile(tmp_path, "\n".join(lines))


def test_partition_options_and_outputs(tmp_path, capsys) -> None:
    """``--engine`` with ``--method ip`` is refused (it was ignored); the output records the
    backend; several levels say why no job ``pipeline`` is written; a solver that proves nothing
    in time is exit 1 naming the profile, without a Python class name."""
    from pal_opt.cli import main

    prof = _chain(tmp_path, 6)
    assert main(["partition", prof, "--machines", "2", "--bandwidth", "1e9", "--method", "ip", "--engine", "numpy"]) == 2
    assert "--engine applies to --method dp only" in capsys.readouterr().err
    out = tmp_path / "p.json"
    assert main(["partition", prof, "--machines", "2", "--bandwidth", "1e9", "--method", "ip", "--backend", "highs",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["backend"] == "highs"
    assert "integer programs (highs)" in capsys.readouterr().out
    assert main(["partition", prof, "--machines", "2,2", "--bandwidth", "1e10,1e9"]) == 0
    assert "2 levels: no 'pipeline' for a job is written" in capsys.readouterr().out


def test_a_partition_program_not_proven_in_time_is_exit_1_naming_the_profile(tmp_path, capsys, monkeypatch) -> None:
    from pal_opt.cli import main
    from pal_opt.errors import BackendError
    from pal_opt.pipeline import ip

    def unproven(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise BackendError("cbc did not prove an optimum of the partition program of segment (0, 5)")

    monkeypatch.setattr(ip, "solve_levels_ip", unproven)
    prof = _chain(tmp_path, 6)
    assert main(["partition", prof, "--machines", "2", "--bandwidth", "1e9", "--method", "ip"]) == 1
    err = capsys.readouterr().err
    assert err == f"pal-opt: error: {prof}: cbc did not prove an optimum of the partition program of segment (0, 5)\n"


def test_a_table_too_large_names_the_profile(tmp_path, capsys, monkeypatch) -> None:
    from pal_opt.cli import main
    from pal_opt.pipeline import tables

    monkeypatch.setattr(tables, "MAX_TABLE_BYTES", 1000)
    prof = _chain(tmp_path, 30)
    assert main(["partition", prof, "--machines", "16", "--bandwidth", "1e9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pal-opt: error: {prof}: the partitioner's tables would take")


def test_instance_pipeline_replicas_are_json_integers(tmp_path) -> None:
    from pal_opt.io.instance import instance_from_dict

    d = {"format": "pal-opt/instance", "version": 1,
         "cluster": {"gpus": {"id": [0, 1, 2, 3], "server": [0, 0, 1, 1]}, "factors": {"classA": [1.0] * 4}},
         "jobs": [{"id": 1, "demand": 3.0, "class": "classA",
                   "pipeline": {"stage_times": [2.0, 1.0], "replicas": [2.0, 1]}}]}
    assert instance_from_dict(d, "a.json").jobs[0].pipeline.replicas == (2, 1)


def test_a_trace_names_the_classes_of_models_pal_opt_does_not_know(tmp_path, capsys) -> None:
    from pal_opt.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n0,2,0,100,gnmt\n1,1,10,100,resnet50\n")
    out = tmp_path / "r.json"
    args = ["simulate", str(trace), "--cluster", "2x4", "--policy", "pal", "--synthetic-variability", "1",
            "--out", str(out), "--quiet"]
    assert main(args) == 2
    assert "--model-class gnmt=CLASS, or --default-class CLASS" in capsys.readouterr().err
    assert main([*args, "--model-class", "gnmt=classB"]) == 0
    assert json.loads(out.read_text())["n_completed"] == 2
    # before the trace (one value per flag: it does not swallow the trace), several in one
    assert main(["simulate", "--model-class", "gnmt=classB,vgg16=classC", *args[1:]]) == 0
    assert main([*args, "--model-class", "gnmt"]) == 2
    assert "--model-class expects MODEL=CLASS" in capsys.readouterr().err


def test_second_review_of_the_partition_messages(tmp_path, capsys) -> None:
    """A --machines error names no profile (only the tables' size is the profile's); an indented
    line that is not two declared layers is a malformed layer line; a mixed indent is shown."""
    from pal_opt.cli import main

    prof = _chain(tmp_path, 3)
    assert main(["partition", prof, "--machines", "100000", "--bandwidth", "1e10"]) == 2
    err = capsys.readouterr().err  # the flag's own message since 2026-12-07 (was machines[0]: ...)
    assert err.startswith("pal-opt partition: error: argument --machines: at most 1,024 workers per level")
    assert prof not in err and "graph" not in err
    text = "\n".join([LINE.format(1, 1.0, 1), LINE.format(2, 1.0, 1)])
    assert main(["partition", _profile(tmp_path, text + "\n  node3 -- Linear"), "--machines", "2",
                 "--bandwidth", "1e9"]) == 2
    assert "line 3: malformed layer line" in capsys.readouterr().err
    assert main(["partition", _profile(tmp_path, text + "\n \tnode1 -- node2"), "--machines", "2",
                 "--bandwidth", "1e9"]) == 2
    assert "an edge line starts with a tab; this one starts with ' \\t'" in capsys.readouterr().err
