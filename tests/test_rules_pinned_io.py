"""Rules of pal_opt/io/ that no test held: each test here fails on a one-rule change (mutation
reviews, 2026-12-06 and 2026-12-07) that the rest of the suite let pass."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pal_opt.errors import InstanceError, MissingFileError, OptionError
from pal_opt.io.jobs import load_jobs
from pal_opt.io.measurements import load_measurements, longhorn_files, sample_factors
from pal_opt.io.placements import load_placement_file
from pal_opt.io.traces import parse_pipeline_cell, pipeline_cell, read_trace, trace_name
from pal_opt.model import MODEL_ITER_TIME, Pipeline


def test_classes_sharing_a_file_get_equal_but_separate_arrays(tmp_path: Path) -> None:
    f = tmp_path / "bert.csv"
    f.write_text("uuid,perf\na,1.0\nb,1.1\nc,0.95\n")
    out = sample_factors({"classB": f, "classC": f}, 4, rng=0)
    assert np.array_equal(out["classB"], out["classC"])
    out["classB"][0] = 9.0  # editing one class's factors leaves the other's alone
    assert out["classC"][0] != 9.0


# -- measurements (2026-12-07) -------------------------------------------------------------------------
def test_a_gpus_out_of_range_aggregate_is_reported_at_its_first_run(tmp_path: Path) -> None:
    # with aggregate "max" a value is a GPU's: the error names the line of the GPU's first run
    # (line 5, GPU c), not the line of the value's index among the runs (was: line 4)
    f = tmp_path / "m.csv"
    f.write_text("uuid,perf\na,1.0\na,1.0\nb,1.0\nc,1e9\nc,1.0\n")
    with pytest.raises(InstanceError) as err:
        load_measurements(f, "max")
    assert err.value.path == "line 5, column perf"


def test_every_run_can_be_drawn(tmp_path: Path) -> None:
    # draws are with replacement from every run (was: the last run could never be drawn)
    f = tmp_path / "m.csv"
    f.write_text("perf\n1.0\n3.0\n")  # median 2: factors 0.5 and 1.5
    got = sample_factors({"classA": f}, 200, rng=0)["classA"]
    assert set(got.tolist()) == {0.5, 1.5}


def test_zero_gpus_to_draw_for_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "m.csv"
    f.write_text("perf\n1.0\n")
    with pytest.raises(OptionError, match="n_gpus must be an integer >= 1, got 0"):
        sample_factors({"classA": f}, 0)


def test_perf_near_the_largest_float_is_normalised_by_its_median(tmp_path: Path) -> None:
    # the median of 1e308 and 1.5e308 overflows when averaged; it is 1.25e308, so the factors are
    # 0.8 and 1.2 (was: the median of the scaled values without scaling back, 1.25)
    f = tmp_path / "m.csv"
    f.write_text("perf\n1e308\n1.5e308\n")
    assert load_measurements(f).tolist() == pytest.approx([0.8, 1.2])


def test_an_empty_uuid_is_refused_for_a_per_gpu_aggregate(tmp_path: Path) -> None:
    f = tmp_path / "m.csv"
    f.write_text("uuid,perf\na,1.0\n,1.0\n")
    with pytest.raises(InstanceError, match="must not be empty") as err:
        load_measurements(f, "median")
    assert err.value.path == "line 3, column uuid"


def test_an_unknown_aggregate_is_refused(tmp_path: Path) -> None:
    """Only ``run``, ``max`` and ``median`` are aggregates: ``mean`` is an error naming them, not
    read as the median."""
    f = tmp_path / "m.csv"
    f.write_text("uuid,perf\na,1.0\na,3.0\n")
    with pytest.raises(OptionError, match="unknown aggregate 'mean'; choose one of run, max, median"):
        load_measurements(f, "mean")


def test_factors_on_the_bounds_of_the_factor_range_are_accepted(tmp_path: Path) -> None:
    """A factor of exactly 1e-6 or 1e6 (``FACTOR_RANGE``, which every cluster accepts) is read;
    only one outside is refused."""
    f = tmp_path / "m.csv"
    f.write_text("perf\n1e-6\n1\n1\n1e6\n1\n")
    assert load_measurements(f).tolist() == [1e-6, 1.0, 1.0, 1e6, 1.0]
    f.write_text("perf\n1e-7\n1\n1\n")
    with pytest.raises(InstanceError, match="a factor must be in 1e-06..1e"):
        load_measurements(f)


def test_the_first_run_out_of_range_is_the_one_named(tmp_path: Path) -> None:
    """With several runs out of range the error is about the first in the file (line 3)."""
    f = tmp_path / "m.csv"
    f.write_text("perf\n1\n1e9\n1\n1e-9\n1\n")
    with pytest.raises(InstanceError) as err:
        load_measurements(f)
    assert err.value.path == "line 3, column perf"


def test_two_spellings_of_one_file_share_its_draw(tmp_path: Path) -> None:
    """Classes that name the same file share one draw, however the path is written (here
    ``DIR/./bert.csv`` beside ``DIR/bert.csv``, and a symbolic link to it)."""
    f = tmp_path / "bert.csv"
    f.write_text("perf\n1.0\n1.1\n0.95\n0.9\n1.3\n")
    (tmp_path / "link.csv").symlink_to(f)
    out = sample_factors({"classB": str(f), "classC": f"{tmp_path}/./bert.csv", "classD": tmp_path / "link.csv"},
                         50, rng=0)
    assert np.array_equal(out["classB"], out["classC"]) and np.array_equal(out["classB"], out["classD"])


def test_a_missing_measurement_file_is_a_missing_file_and_a_dangling_link_is_not(tmp_path: Path) -> None:
    """``longhorn_files``: a class's file that is not there is a :class:`MissingFileError` (also a
    ``FileNotFoundError``); one that is a symbolic link leading nowhere is there but unreadable,
    said so (it was reported as "no such file")."""
    with pytest.raises(MissingFileError, match="no such file"):
        longhorn_files(tmp_path, classes=["classA"])
    (tmp_path / "resnet-longhorn-agg.csv").symlink_to(tmp_path / "gone.csv")
    with pytest.raises(InstanceError, match="symbolic link that leads nowhere") as err:
        longhorn_files(tmp_path, classes=["classA"])
    assert not isinstance(err.value, FileNotFoundError)



def test_another_pal_opt_output_is_named_when_read_as_a_placement(tmp_path: Path) -> None:
    """A simulation result given for a placement file is named as what it is, not read as a bare
    ``{job id: [GPU ids]}`` object and refused for its first key."""
    f = tmp_path / "sim.json"
    f.write_text(json.dumps({"policies": ["pal"], "results": {}}))
    with pytest.raises(InstanceError, match=r"is a simulation result \(pal-opt simulate --out\), not a placement file"):
        load_placement_file(f)


def test_stage_gpu_ids_that_are_not_integers_are_left_for_the_checker(tmp_path: Path) -> None:
    """Only an integral float (6.0) of ``stages`` is made an integer; 6.5 stays 6.5 (not 6), and
    a stage list that is not a list at all stays as it is, for :func:`pal_opt.check.check` to
    report (it was iterated, a ``TypeError``)."""
    f = tmp_path / "pl.json"
    f.write_text(json.dumps({"placements": {"p": [6, 7], "q": [8]}, "stages": {"p": [[6.5], [7.0]], "q": 5}}))
    assert load_placement_file(f)["stages"] == {"p": [[6.5], [7]], "q": 5}


def test_a_gpu_id_past_int64_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "pl.json"
    f.write_text(json.dumps({"placements": {"p": [2**63]}}))
    with pytest.raises(InstanceError) as err:
        load_placement_file(f)
    assert err.value.path == "placements.p[0]"



# -- job CSVs (mutation audit, 2026-12-07) ---------------------------------------------------------------
def test_a_job_of_exactly_the_clusters_gpus_is_not_oversized(tmp_path: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text("job_id,num_gpus,perfclass\n1,4,classA\n2,5,classA\n")
    notes = load_jobs(f, max_gpus=4).oversized
    assert [n.row for n in notes] == [3]


def test_priority_and_started_cells_are_bounded(tmp_path: Path) -> None:
    """A priority of exactly 1,000,000 is read (more is refused); a negative ``started`` is
    refused, naming its cell."""
    f = tmp_path / "jobs.csv"
    f.write_text("job_id,num_gpus,perfclass,priority,started\n1,1,classA,1000000,0\n")
    assert load_jobs(f).jobs[0].priority == 1_000_000
    f.write_text("job_id,num_gpus,perfclass,priority,started\n1,1,classA,1000001,0\n")
    with pytest.raises(InstanceError, match="must be an integer in 0..1000000"):
        load_jobs(f)
    f.write_text("job_id,num_gpus,perfclass,priority,started\n1,1,classA,1,-5\n")
    with pytest.raises(InstanceError) as err:
        load_jobs(f)
    assert err.value.path == "line 2, column started"


def test_a_job_tables_warnings_name_the_misspelt_column_first(tmp_path: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text("job_id,num_gpus,perfclass,priorty\n1,9,classA,1\n")
    notes = load_jobs(f, max_gpus=4).warnings()
    assert len(notes) == 2 and "priorty" in str(notes[0]) and "needs 9 GPUs" in str(notes[1])


def test_a_class_without_factors_is_reported_at_the_class_cell(tmp_path: Path) -> None:
    """The row gives both a class and a model: the error is about the class cell, the one that
    set the class (the model cell only when the class came from the model)."""
    f = tmp_path / "jobs.csv"
    f.write_text("job_id,num_gpus,perfclass,model\n1,1,classZ,resnet50\n")
    with pytest.raises(InstanceError) as err:
        load_jobs(f, classes=["classA"])
    assert err.value.path == "line 2, column perfclass"


# -- traces (2026-12-07) -------------------------------------------------------------------------------
def _trace(tmp_path: Path, rows: str, extra: str = "") -> Path:
    f = tmp_path / "t.csv"
    f.write_text(f"job_id,num_gpus,submit_time,duration,model{extra}\n{rows}")
    return f


def test_a_pipeline_whose_replicas_do_not_add_up_to_num_gpus_is_refused(tmp_path: Path) -> None:
    f = _trace(tmp_path, "1,4,0,100,resnet50,1.0x2;1.0x1\n", ",pipeline")
    with pytest.raises(InstanceError, match="the stages' replicas add up to 3, num_gpus is 4"):
        read_trace(f)


def test_a_default_iteration_time_of_zero_is_refused(tmp_path: Path) -> None:
    f = _trace(tmp_path, "1,1,0,100,resnet50\n")
    with pytest.raises(InstanceError, match="default iteration time must be > 0"):
        read_trace(f, default_iter_time=0.0)


def test_a_given_model_class_overrides_the_built_in_one(tmp_path: Path) -> None:
    # resnet50 is classA by PAL's map; the caller's entry wins
    f = _trace(tmp_path, "1,1,0,100,resnet50\n")
    assert read_trace(f)[0].perfclass == "classA"
    assert read_trace(f, model_class={"resnet50": "classD"})[0].perfclass == "classD"


def test_given_iteration_times_override_the_built_in_ones_and_the_default_applies(tmp_path: Path) -> None:
    """A caller's ``iter_time`` entry wins over :data:`~pal_opt.model.MODEL_ITER_TIME` for a model
    it knows (resnet50), and a model it does not know takes ``default_iter_time`` (not 1 s)."""
    f = _trace(tmp_path, "1,1,0,100,resnet50\n2,1,0,100,AlexNet\n")
    builtin = MODEL_ITER_TIME["resnet50"]
    jobs = read_trace(f, iter_time={"resnet50": builtin * 3}, default_class="classB", default_iter_time=2.5)
    assert [j.iter_time for j in jobs] == [builtin * 3, 2.5]
    assert jobs[1].ideal_seconds == 250.0


def test_a_pipeline_cell_keeps_every_digit_of_its_stage_times() -> None:
    """``pipeline_cell`` writes each time as ``repr`` does, so that :func:`parse_pipeline_cell`
    gives back the same floats (``%g`` kept 6 digits: 0.0102345678 came back as 0.0102346)."""
    pipe = Pipeline((0.0102345678, 1 / 3), (3, 1))
    assert parse_pipeline_cell(pipeline_cell(pipe)) == pipe


def test_a_traces_name_is_its_file_stem() -> None:
    """Only the last suffix goes: ``workload.v2.csv`` is ``workload.v2``, not ``workload``."""
    assert trace_name("dir.d/workload.v2.csv") == "workload.v2"
    assert trace_name("workload-6.csv") == "workload-6"


# -- placement files (2026-12-07) ----------------------------------------------------------------------
def test_integral_float_gpu_ids_are_read_as_integers(tmp_path: Path) -> None:
    # "6 and 6.0 are the GPU id 6, read as the integer (in placements and in stages)"
    f = tmp_path / "pl.json"
    f.write_text(json.dumps({"placements": {"p": [6.0, 7]}, "stages": {"p": [[6.0], [7.0]]}}))
    d = load_placement_file(f)
    assert d["placements"]["p"] == [6, 7] and d["stages"]["p"] == [[6], [7]]
    assert all(type(g) is int for g in d["placements"]["p"] + d["stages"]["p"][0] + d["stages"]["p"][1])
