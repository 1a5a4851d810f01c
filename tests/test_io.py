"""Instance files, the Blox and job CSV importers, and PAL's measurement files."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pal_opt.errors import InstanceError, TableError
from pal_opt.generate import generate_instance
from pal_opt.io import (
    SCHEMA_PATH,
    instance_from_dict,
    instance_from_frames,
    instance_to_dict,
    load_blox,
    load_instance,
    load_jobs,
    load_measurements,
    longhorn_paths,
    sample_factors,
    save_instance,
)
from pal_opt.io.atomic import atomic_write_json, atomic_write_text
from pal_opt.io.blox import blox_gpu_rows, read_gpu_table
from pal_opt.io.instance import dumps_instance, load_placement_file
from pal_opt.io.jsonfile import parse_json
from pal_opt.model import MODEL_CLASS, GpuState, Pipeline, RoundInstance

REPO = Path(__file__).resolve().parents[1]


def assert_same(a: RoundInstance, b: RoundInstance, *, model: bool = True) -> None:
    ca, cb = a.cluster, b.cluster
    assert ca.gpu_ids.tolist() == cb.gpu_ids.tolist()
    assert ca.server_ids == cb.server_ids
    assert ca.server_of.tolist() == cb.server_of.tolist()
    assert ca.rack_ids == cb.rack_ids
    assert ca.rack_of_server.tolist() == cb.rack_of_server.tolist()
    assert ca.state.tolist() == cb.state.tolist()
    assert list(ca.factors) == list(cb.factors)
    for c in ca.factors:
        assert np.array_equal(ca.factors[c], cb.factors[c]), c  # bit for bit
    if model:
        assert a.jobs == b.jobs
    else:
        assert [replace(j, model=None) for j in a.jobs] == [replace(j, model=None) for j in b.jobs]
    assert a.params == b.params


# --------------------------------------------------------------------------- instance JSON
def test_round_trip_tiny(tiny_instance, tmp_path):
    p = tmp_path / "tiny.json"
    save_instance(tiny_instance, p)
    back = load_instance(p)
    assert_same(tiny_instance, back)
    assert back.name == "tiny"
    # state names are written as words
    doc = json.loads(p.read_text())
    assert doc["cluster"]["gpus"]["state"][2] == "busy"
    assert doc["cluster"]["gpus"]["state"][7] == "failed"


def test_round_trip_racks_states_running_and_odd_ids(tmp_path):
    inst = generate_instance(
        6, 4, 12, racks=2, seed=5, busy_fraction=0.2, failed_fraction=0.1, running_fraction=0.6, restart_cost=0.25
    )
    assert inst.cluster.racked and any(j.placement for j in inst.jobs)
    jobs = list(inst.jobs)
    jobs[0] = replace(jobs[0], id="job-a", locality=(1.0, 1.2, 2.5))
    jobs[1] = replace(jobs[1], model=None)
    inst = RoundInstance(inst.cluster, tuple(jobs), inst.params, "odd")
    p = tmp_path / "r.json"
    save_instance(inst, p, meta={"note": "hello", "n": [1, 2]})
    back = load_instance(p)
    assert_same(inst, back)
    assert back.cluster.rack_ids == ("r0", "r1")
    assert back.params.restart_cost == 0.25
    # saving again gives the same text
    assert dumps_instance(back, meta={"note": "hello", "n": [1, 2]}) == p.read_text()


def test_round_trip_pipeline_job(tiny_instance, tmp_path):
    jobs = list(tiny_instance.jobs)
    jobs[0] = replace(jobs[0], pipeline=Pipeline((0.125, 0.1), (1, jobs[0].demand - 1)))
    inst = RoundInstance(tiny_instance.cluster, tuple(jobs), tiny_instance.params, "piped")
    p = tmp_path / "p.json"
    save_instance(inst, p)
    back = load_instance(p)
    assert back.jobs[0].pipeline == Pipeline((0.125, 0.1), (1, jobs[0].demand - 1))
    assert back.jobs == inst.jobs and "pipeline" not in json.loads(p.read_text())["jobs"][1]


def test_dict_round_trip_without_files(tiny_instance):
    d = instance_to_dict(tiny_instance)
    json.dumps(d)  # JSON-ready
    assert_same(tiny_instance, instance_from_dict(d))
    assert "locality" not in d["jobs"][0]  # the default (1, λ, λ) is implied


def test_loader_accepts_integral_floats_and_declared_flat_servers(tiny_instance):
    d = instance_to_dict(tiny_instance)
    d["jobs"][0]["demand"] = 2.0
    d["cluster"]["servers"] = {"id": [2, 1, 0]}
    inst = instance_from_dict(d, "x.json")
    assert inst.jobs[0].demand == 2 and type(inst.jobs[0].demand) is int
    assert not inst.cluster.racked


def test_job_class_from_model(tiny_instance):
    d = instance_to_dict(tiny_instance)
    del d["jobs"][1]["class"]
    assert instance_from_dict(d).jobs[1].perfclass == MODEL_CLASS["BERT"]


def test_schema_is_valid_and_agrees_with_the_loader(tiny_instance):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    good = instance_to_dict(generate_instance(4, 2, 6, racks=2, seed=1, running_fraction=0.5, busy_fraction=0.2))
    assert not list(v.iter_errors(good))
    bad = json.loads(json.dumps(good))
    bad["jobs"][0]["demand"] = 2.5
    assert list(v.iter_errors(bad))
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.demand"):
        instance_from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["cluster"]["gpus"]["state"][0] = "broken"
    assert list(v.iter_errors(bad))
    with pytest.raises(InstanceError, match=r"cluster\.gpus\.state\[0\]"):
        instance_from_dict(bad)


def test_schema_agrees_with_the_code():
    from pal_opt.binning import BINNING_MODES
    from pal_opt.io.schema import FORMAT, STATE_NAMES, VERSION, instance_schema

    props = instance_schema()["properties"]
    assert props["format"]["const"] == FORMAT and props["version"]["const"] == VERSION
    assert props["params"]["properties"]["binning"]["enum"] == list(BINNING_MODES)
    assert props["cluster"]["properties"]["gpus"]["properties"]["state"]["items"]["enum"] == list(STATE_NAMES)


def test_registered_params_are_validated(tiny_instance):
    from pal_opt.errors import OptionError
    from pal_opt.io.schema import instance_schema, register_param_schema, unregister_param_schema

    d = instance_to_dict(tiny_instance)
    d["params"]["energy_weight"] = 0.5
    with pytest.raises(InstanceError, match=r"^x\.json: params\.energy_weight: unknown field"):
        instance_from_dict(d, "x.json")
    register_param_schema("energy_weight", {"type": "number", "minimum": 0})
    try:
        register_param_schema("energy_weight", {"type": "number", "minimum": 0})  # same again: fine
        assert "energy_weight" in instance_schema()["properties"]["params"]["properties"]
        assert instance_from_dict(d).params == tiny_instance.params  # RoundParams keeps the built-ins
        d["params"]["energy_weight"] = -1
        with pytest.raises(InstanceError, match=r"params\.energy_weight: must be at least 0, got -1$"):
            instance_from_dict(d, "x.json")
        with pytest.raises(OptionError, match="another schema"):
            register_param_schema("energy_weight", {"type": "integer"})
        with pytest.raises(OptionError, match="cannot register"):
            register_param_schema("binning", {"type": "string"})
        with pytest.raises(OptionError, match="not a valid JSON Schema"):
            register_param_schema("bad", {"type": "no-such-type"})
    finally:
        unregister_param_schema("energy_weight")
    with pytest.raises(InstanceError, match="unknown field"):
        instance_from_dict(d)


def test_committed_instances_load_and_match_the_schema():
    files = sorted((REPO / "instances").glob("*.json"))
    assert files, "instances/ holds the committed rounds"
    jsonschema = pytest.importorskip("jsonschema")
    v = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    readme = (REPO / "instances" / "README.md").read_text()
    for f in files:
        inst = load_instance(f)
        assert inst.cluster.num_gpus >= 64 and inst.jobs
        assert not list(v.iter_errors(json.loads(f.read_text()))), f
        assert f.name in readme


def test_large_columnar_file_round_trips(tmp_path):
    inst = generate_instance(512, 8, 300, seed=2, busy_fraction=0.3)  # 4,096 GPUs
    p = tmp_path / "big.json"
    save_instance(inst, p)
    assert_same(inst, load_instance(p))
    # columnar: one line per GPU column, not one per GPU
    assert len(p.read_text().splitlines()) < 400


def test_parse_json_turns_bad_numbers_into_field_errors(tiny_instance):
    text = json.dumps(instance_to_dict(tiny_instance)).replace('"demand": 3', '"demand": NaN', 1)
    d = parse_json(text, source="t.json")
    with pytest.raises(InstanceError, match=r"^t\.json: jobs\[1\]\.demand: must be a positive integer, got NaN"):
        instance_from_dict(d, "t.json")


def test_load_placement_file(tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"0": [1, 2], "x": []}')
    assert load_placement_file(p) == {"placements": {"0": [1, 2], "x": []}}
    p.write_text('{"placements": {"0": [1, "2"]}}')
    with pytest.raises(InstanceError, match=r"placements\.0\[1\]"):
        load_placement_file(p)


def test_placement_file_format_and_version(tmp_path):
    """Results carry format and version; a later version, another format (an instance file given
    for the placement) and a named format without placements are refused; old files (no header)
    still read."""
    from pal_opt.result import PLACEMENT_FORMAT, PLACEMENT_VERSION, PlacementResult, Status

    d = PlacementResult({"a": (0, 1)}, "pal", Status.FEASIBLE, 0.0, 1.0, 2, 0.0, "pal-order").to_dict()
    assert (d["format"], d["version"]) == (PLACEMENT_FORMAT, PLACEMENT_VERSION) == ("pal-opt/placement", 1)
    p = tmp_path / "p.json"
    p.write_text(json.dumps(d))
    assert load_placement_file(p)["placements"] == {"a": [0, 1]}
    p.write_text(json.dumps({**d, "version": 2}))
    with pytest.raises(InstanceError, match=r"version: unsupported version 2 .*newer pal-opt"):
        load_placement_file(p)
    inst = REPO / "instances" / "paper-16x4.json"
    with pytest.raises(InstanceError, match=r"format: must be 'pal-opt/placement' .*got 'pal-opt/instance'"):
        load_placement_file(inst)
    p.write_text(json.dumps({"format": "pal-opt/placement", "version": 1}))
    with pytest.raises(InstanceError, match=r"placements: is required$"):
        load_placement_file(p)
    p.write_text('{"placements": {"0": [1]}, "method": "pal"}')  # written before the header existed
    assert load_placement_file(p)["placements"] == {"0": [1]}


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "out.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [x.name for x in tmp_path.iterdir()] == ["out.txt"]
    q = tmp_path / "out.json"
    atomic_write_json(q, {"a": [1, 2.5]})
    assert json.loads(q.read_text()) == {"a": [1, 2.5]}
    with pytest.raises(ValueError, match="not JSON compliant: nan"):
        atomic_write_json(q, {"a": float("nan")})
    assert json.loads(q.read_text()) == {"a": [1, 2.5]}  # untouched
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.json", "out.txt"]


# --------------------------------------------------------------------------- CSV helpers
def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


GPU_HEADER = ["", "GPU_ID", "GPU_UUID", "Local_GPU_ID", "Node_ID", "IP_addr", "IN_USE", "JOB_IDS",
              "PerfVar_classA", "PerfVar_classB", "PerfVar_classD"]


def small_gpu_rows() -> list[list[object]]:
    """8 GPUs on 2 nodes: job 7 (queued) runs on GPUs 0,1; GPU 5 is held by job 99 (not queued)."""
    rows = []
    for g in range(8):
        use, job = False, ""
        if g in (0, 1):
            use, job = True, "7.0" if g == 0 else "[7]"
        if g == 5:
            use, job = True, 99
        rows.append([g % 4, g, f"GPU-{g}", g % 4, g // 4, "10.0.0.1", use, job, 1 + g / 100, 1.0, 0.99 + g / 1000])
    return rows


def test_blox_small(tmp_path):
    gp = write_csv(tmp_path / "gpus.csv", GPU_HEADER, small_gpu_rows())
    jp = write_csv(tmp_path / "jobs.csv", ["job_id", "num_gpus", "model", "perfclass"],
                   [[3, 4, "resnet50", ""], [7, 2, "BERT", ""], ["x", 1, "mystery", "classD"]])
    inst = load_blox(gp, jp, locality_penalty=1.5)
    cl = inst.cluster
    assert cl.num_gpus == 8 and cl.server_ids == (0, 1) and not cl.racked
    assert cl.state.tolist() == [0, 0, 0, 0, 0, 1, 0, 0]
    assert list(cl.factors) == ["classA", "classB", "classD"]
    assert cl.factors["classA"][3] == pytest.approx(1.03)
    j = inst.job_by_id
    assert j[7].placement == (0, 1) and j[3].placement is None
    assert j[3].perfclass == "classA" and j[7].perfclass == "classB" and j["x"].perfclass == "classD"
    assert j[3].locality == (1.0, 1.5, 1.5)
    assert inst.name == "gpus"


def test_blox_racks_failed_and_running_column(tmp_path):
    rows = [[g, g // 2, f"r{g // 4}", g == 3, g == 1, "5" if g == 1 else "", 1.0 + g / 50] for g in range(8)]
    gp = write_csv(tmp_path / "g.csv", ["GPU_ID", "Node_ID", "Rack_ID", "FAILED", "IN_USE", "JOB_IDS", "PerfVar_classA"], rows)
    rows[1][4] = True
    jp = write_csv(tmp_path / "j.csv", ["job_id", "num_gpus", "perfclass", "is_running", "locality_penalty"],
                   [[5, 1, "classA", "true", 2.0], [6, 2, "classA", "false", ""]])
    inst = load_blox(gp, jp)
    cl = inst.cluster
    assert cl.racked and cl.rack_ids == ("r0", "r1") and cl.num_servers == 4
    assert cl.state.tolist() == [0, 0, 0, GpuState.FAILED, 0, 0, 0, 0]
    assert inst.job_by_id[5].placement == (1,)
    assert inst.job_by_id[5].locality == (1.0, 2.0, 2.0)


def _failed_gpu1(tmp_path, holder: object, running: str | None) -> RoundInstance:
    """GPUs 0-3 on two servers, GPU 1 failed and in use by ``holder``; jobs 7 (2 GPUs, on GPU 0
    and GPU 1 when ``holder`` is 7) and 8 (1 GPU), with an ``is_running`` column when given."""
    rows = [[g, g // 2, g == 1, g == 1 or (g == 0 and holder == 7), holder if g == 1 or (g == 0 and holder == 7)
             else "", 1.0] for g in range(4)]
    gp = write_csv(tmp_path / "g.csv", ["GPU_ID", "Node_ID", "FAILED", "IN_USE", "JOB_IDS", "PerfVar_classA"], rows)
    jobs = [[7, 2, "classA"], [8, 1, "classA"]]
    head = ["job_id", "num_gpus", "perfclass"]
    if running is not None:
        head.append("is_running")
        jobs = [[*j, running if j[0] == holder else "false"] for j in jobs]
    return load_blox(gp, write_csv(tmp_path / "j.csv", head, jobs))


@pytest.mark.parametrize("running", [None, "true"])
def test_blox_a_running_job_on_a_failed_gpu_must_move_as_in_an_instance_file(tmp_path, running):
    inst = _failed_gpu1(tmp_path, 7, running)
    assert inst.cluster.state.tolist() == [0, GpuState.FAILED, 0, 0]
    assert inst.job_by_id[7].placement == (0, 1) and inst.job_by_id[8].placement is None
    doc = instance_to_dict(inst)
    assert doc["jobs"][0]["placement"] == [0, 1]
    assert_same(instance_from_dict(doc), inst)
    # and the round exported to Blox rows reads back the same
    rows = blox_gpu_rows(inst)
    gp = write_csv(tmp_path / "g2.csv", list(rows[0]), [list(r.values()) for r in rows])
    jp = write_csv(tmp_path / "j2.csv", ["job_id", "num_gpus", "perfclass"], [[7, 2, "classA"], [8, 1, "classA"]])
    assert_same(load_blox(gp, jp), inst)


def test_blox_a_waiting_job_named_on_a_failed_gpu_leaves_it_out_of_service(tmp_path):
    inst = _failed_gpu1(tmp_path, 8, "false")
    assert inst.cluster.state.tolist() == [0, GpuState.FAILED, 0, 0]
    assert inst.job_by_id[8].placement is None and inst.job_by_id[7].placement is None
    assert inst.free_gpus == 3


def test_blox_export_round_trip(tmp_path):
    inst = generate_instance(5, 4, 10, racks=2, seed=3, busy_fraction=0.2, failed_fraction=0.1, running_fraction=0.7)
    rows = blox_gpu_rows(inst)
    header = list(rows[0])
    gp = write_csv(tmp_path / "g.csv", header, [[r[h] for h in header] for r in rows])
    jp = write_csv(tmp_path / "j.csv", ["job_id", "num_gpus", "model"], [[j.id, j.demand, j.model] for j in inst.jobs])
    back = load_blox(gp, jp)
    assert_same(inst, back)


def test_blox_on_the_artifact_table(shared_dir, tmp_path):
    gp = shared_dir / "data/pal-artifact/variability/32gpu-variability.csv"
    jp = write_csv(tmp_path / "jobs.csv", ["job_id", "num_gpus", "model"],
                   [[0, 4, "resnet50"], [1, 8, "PointNet"], [2, 1, "vgg19"], [3, 6, "GPT2"]])
    inst = load_blox(gp, jp)
    cl = inst.cluster
    assert cl.num_gpus == 32 and cl.num_servers == 8
    assert set(np.bincount(cl.server_of).tolist()) == {4}
    assert sorted(cl.factors) == ["classA", "classB", "classC", "classD"]
    assert np.array_equal(cl.factors["classB"], cl.factors["classC"])
    assert float(cl.factors["classA"].max()) == pytest.approx(1.117203, abs=1e-6)
    assert (cl.state == GpuState.FREE).all()
    table = read_gpu_table(gp)
    assert table.gpu_ids == list(range(32))


# --------------------------------------------------------------------------- job CSV
def test_jobs_csv_model_or_class(tmp_path):
    p = write_csv(tmp_path / "q.csv", ["ID", "Num_GPUs", "Model", "PerfClass", "submit_time"],
                  [[1, 2, "vgg19", "", 0], [2, "4.0", "", "classB", 3], ["j3", 1, "resnet50", "classD", 9]])
    t = load_jobs(p)
    assert [j.id for j in t.jobs] == [1, 2, "j3"]
    assert [j.perfclass for j in t.jobs] == ["classC", "classB", "classD"]  # explicit class wins
    assert [j.demand for j in t.jobs] == [2, 4, 1]
    assert t.lines == (2, 3, 4) and t.running == (None, None, None)


def test_a_bad_job_row_is_a_table_error_holding_its_row_and_column(tmp_path):
    """The importers' row errors hold the row and column they name (the Blox adapter names the
    job from them, not from the text); the text is unchanged."""
    p = write_csv(tmp_path / "q.csv", ["ID", "Num_GPUs", "Model"], [[1, 2, "vgg19"], [2, 0, "vgg19"]])
    with pytest.raises(TableError) as err:
        load_jobs(p)
    assert str(err.value) == f"{p}: line 3, column Num_GPUs: must be a positive integer, got '0'"
    assert (err.value.row, err.value.column) == (3, "Num_GPUs")  # the column as the header writes it
    moved = err.value.with_source("elsewhere.csv")  # a copy keeps them
    assert (moved.row, moved.column, str(moved)) == (3, "Num_GPUs", str(err.value).replace(str(p), "elsewhere.csv"))
    # the cross-checks against the GPU table (JobTable.error): a cell, and a whole row
    gp = write_csv(tmp_path / "gpus.csv", GPU_HEADER, small_gpu_rows())
    for jobs, row, column, where in (
            ([[3, 4, "resnet50", "true"], [7, 2, "BERT", ""]], 2, "is_running", "line 2, column is_running"),
            ([[3, 4, "resnet50", ""], [7, 1, "BERT", ""]], 3, None, "line 3")):
        jp = write_csv(tmp_path / "j.csv", ["job_id", "num_gpus", "model", "is_running"], jobs)
        with pytest.raises(TableError) as err:
            load_blox(gp, jp)
        assert str(err.value).startswith(f"{jp}: {where}: job ")
        assert (err.value.row, err.value.column) == (row, column)
    # a frame's rows count from 0
    import pandas as pd

    frame = pd.DataFrame({"job_id": [1, 2], "num_gpus": [2, -1], "model": ["vgg19", "vgg19"]})
    gpus = pd.DataFrame({"GPU_ID": [0, 1], "Node_ID": [0, 0], "IN_USE": [False, False], "JOB_IDS": [None, None],
                         "PerfVar_classC": [1.0, 1.1]})
    with pytest.raises(TableError) as err:
        instance_from_frames(gpus, frame)
    # named as the argument is (it said "jobs", the name of the frame the Blox adapter builds)
    assert str(err.value) == "jobs_df: row 1, column num_gpus: must be a positive integer, got '-1'"
    assert (err.value.row, err.value.column) == (1, "num_gpus")


def test_jobs_csv_reads_the_sia_traces(shared_dir):
    t = load_jobs(shared_dir / "data/pal-artifact/traces/workload-1.csv")
    assert len(t.jobs) == 160
    assert {j.perfclass for j in t.jobs} <= set(MODEL_CLASS.values())
    assert all(MODEL_CLASS[j.model] == j.perfclass for j in t.jobs)


def test_a_misspelt_optional_column_is_warned_of_once_per_file(tmp_path, caplog):
    """``priorty`` was ignored without a word (every job lost its priority, exit 0), while an
    instance file with an unknown field is refused.  Unused columns stay allowed (real files carry
    them: the unnamed index, GPU_UUID, IP_addr, submit_time), but one close to an optional
    column's name is reported: one line per file, the GPU table's and the queue's."""
    gp = write_csv(tmp_path / "gpus.csv", [*GPU_HEADER, "Rak_ID"], [[*r, "r0"] for r in small_gpu_rows()])
    jp = write_csv(tmp_path / "q.csv", ["job_id", "num_gpus", "model", "priorty", "strated", "submit_time"],
                   [[1, 2, "resnet50", 5, 0, 0]])
    with caplog.at_level("WARNING", logger="pal_opt"):
        inst = load_blox(gp, jp)
    assert inst.jobs[0].priority == 0 and not inst.cluster.racked  # still not read: a warning, not a guess
    assert [r.getMessage() for r in caplog.records] == [
        f"{gp}: column 'Rak_ID' is not used; did you mean 'Rack_ID'?",
        f"{jp}: columns 'priorty', 'strated' are not used; did you mean 'priority', 'started'?",
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="pal_opt"):  # the column written right: nothing to say
        load_blox(write_csv(tmp_path / "g2.csv", GPU_HEADER, small_gpu_rows()),
                  write_csv(tmp_path / "q2.csv", ["job_id", "num_gpus", "model", "priority", "job_priorty"],
                            [[1, 2, "resnet50", 5, 1]]))
    assert caplog.records == []


def test_the_real_files_unused_columns_are_not_warned_of(shared_dir, caplog):
    """The Blox ``gpu_df`` and the Sia-Philly traces read as queues carry columns no reader uses."""
    data = shared_dir / "data" / "pal-artifact"
    with caplog.at_level("WARNING", logger="pal_opt"):
        for trace in sorted((data / "traces").glob("workload-*.csv")):
            load_jobs(trace).warn()
        load_blox(data / "variability" / "32gpu-variability.csv", REPO / "examples" / "data" / "jobs.csv")
        load_blox(REPO / "examples" / "data" / "gpu_df.csv", REPO / "examples" / "data" / "trace.csv")
    assert caplog.records == []


# --------------------------------------------------------------------------- measurements
def test_measurements_small_file(tmp_path):
    p = write_csv(tmp_path / "m.csv", ["x", "uuid", "perf"],
                  [[0, "a", 10], [1, "a", 14], [2, "b", 12], [3, "c", 8], [4, "c", 9]])
    assert load_measurements(p).tolist() == pytest.approx([10 / 10, 14 / 10, 12 / 10, 8 / 10, 9 / 10])
    assert load_measurements(p, "max").tolist() == pytest.approx([14 / 12, 1.0, 9 / 12])
    assert load_measurements(p, "median").tolist() == pytest.approx([12 / 12, 12 / 12, 8.5 / 12])


def test_sample_factors_shares_draws_and_is_seeded(tmp_path):
    a = write_csv(tmp_path / "a.csv", ["uuid", "perf"], [[i, 1 + i] for i in range(7)])
    b = write_csv(tmp_path / "b.csv", ["uuid", "perf"], [[i, 10 + i] for i in range(5)])
    paths = {"classA": a, "classB": b, "classC": b}
    f1 = sample_factors(paths, 50, 4)
    f2 = sample_factors(paths, 50, 4)
    for c in paths:
        assert np.array_equal(f1[c], f2[c])
    assert np.array_equal(f1["classB"], f1["classC"])
    assert set(f1["classA"].tolist()) <= set(load_measurements(a).tolist())
    assert not np.array_equal(f1["classA"], sample_factors(paths, 50, 5)["classA"])


def test_longhorn_measurements(shared_dir):
    d = shared_dir / "data/pal-artifact/variability/longhorn"
    paths = longhorn_paths(d)
    runs = {c: load_measurements(p) for c, p in paths.items()}
    assert runs["classA"].size == 1404 and runs["classB"].size == 1096 and runs["classD"].size == 880
    for v in runs.values():
        assert np.median(v) == pytest.approx(1.0)
    assert load_measurements(paths["classA"], "max").size == 336
    assert load_measurements(paths["classB"], "max").size == 136
    assert load_measurements(paths["classD"], "median").size == 172
    # the reference rounds' factors are per-run values of these files
    ref = json.loads((shared_dir / "reference/pal/lh-16x4-a.json").read_text())
    for c in ("classA", "classB", "classD"):
        pv = np.asarray(ref["perfvar"][c])
        assert np.isclose(pv[:, None], runs[c][None, :], rtol=1e-9, atol=0).any(axis=1).all()
    f = sample_factors(paths, 64, 0)
    assert np.array_equal(f["classB"], f["classC"])
    assert f["classD"].std() < f["classA"].std()


def test_make_instance_keeps_every_field_of_job_objects() -> None:
    # Job objects once lost kind, GPU types, counts, mixing, pipeline, priority and start time
    from pal_opt import make_instance
    from pal_opt.model import Cluster, Job

    cluster = Cluster.from_arrays(range(8), [0, 0, 0, 0, 1, 1, 1, 1], {"classA": [1.0] * 8}, gpu_types="aaaabbbb")
    jobs = [
        Job("g", 2, "classA", kind="guaranteed", gpu_type="b", priority=5, placement=(4, 5), started=12.5),
        Job("r", 2, "classA", kind="strong-scaling", allowed_types=("a",), allowed_counts=(1, 2),
            locality=(1.0, 2.0, 3.0)),
        Job("m", 3, "classA", mix_types=True, model="resnet50"),
        Job("p", 3, "classA", pipeline=Pipeline((0.01, 0.006), (2, 1))),
    ]
    inst = make_instance(cluster, jobs)
    fields = ("id", "demand", "perfclass", "model", "locality", "placement", "kind", "gpu_type", "allowed_types",
              "allowed_counts", "mix_types", "pipeline", "priority", "started")
    for given, built in zip(jobs, inst.jobs, strict=True):
        assert {f: getattr(built, f) for f in fields} == {f: getattr(given, f) for f in fields}


def test_atomic_write_follows_a_symlink_and_refuses_a_fifo(tmp_path):
    import os

    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"  # the link kept, its target written
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        atomic_write_text(fifo, "x\n")
    assert fifo.exists() and not fifo.is_file()  # still a FIFO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link.json", "real.json"]

# --------------------------------------------------------------------------- in memory and in files: one set of rules
def _small_cluster(**kw):
    from pal_opt.model import Cluster

    return Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0, 1.1, 0.9, 1.0]}, **kw)


def test_make_instance_takes_tuples_and_numpy_scalars_in_job_dicts() -> None:
    # a round loop passes the API's own tuples and numpy values back in
    from pal_opt import make_instance
    from pal_opt.model import Job

    c = _small_cluster()
    given = [{"id": np.int64(3), "demand": np.int64(2), "class": "classA", "placement": (np.int64(0), 1),
              "locality": (np.float64(1.0), 1.5, np.float32(2.0)), "started": np.float64(4.5),
              "priority": np.int32(2)},
             {"id": "b", "demand": 1, "class": "classA", "placement": np.array([2])}]
    inst = make_instance(c, given)
    want = make_instance(c, [Job(3, 2, "classA", locality=(1.0, 1.5, 2.0), placement=(0, 1), started=4.5, priority=2),
                             Job("b", 1, "classA", position=1, placement=(2,))])
    assert inst.jobs == want.jobs
    assert type(inst.jobs[0].id) is int and all(type(g) is int for g in inst.jobs[0].placement)


@pytest.mark.parametrize(("job", "message"), [
    ({"demand": np.float64(2.5)}, "jobs[0].demand: must be a positive integer, got 2.5"),
    ({"placement": (0, "1")}, "jobs[0].placement[1]: must be a GPU id (non-negative integer), got '1'"),
    ({"placement": (0, 0)}, "jobs[0].placement[1]: GPU 0 listed twice"),
    ({"started": np.float64(-1.0)}, "jobs[0].started: must be at least 0, got -1.0"),
    ({"id": np.bool_(True)}, "jobs[0].id: must be an integer or a non-empty string, got true"),
])
def test_make_instance_still_rejects_bad_numpy_and_tuple_values(job, message) -> None:
    from pal_opt import make_instance

    with pytest.raises(InstanceError) as exc:
        make_instance(_small_cluster(), [{"id": 1, "demand": 2, "class": "classA", **job}])
    assert message in str(exc.value)


@pytest.mark.parametrize("state", [GpuState.FAILED, GpuState.BUSY])
def test_a_running_job_on_a_gpu_out_of_service_round_trips(state, tmp_path) -> None:
    # the model allows it (the job must move); the file and make_instance must too
    from pal_opt import make_instance
    from pal_opt.model import Job

    c = _small_cluster(state=[state, 0, 0, 0])
    inst = RoundInstance(c, (Job(1, 2, "classA", placement=(0, 1)),))
    save_instance(inst, tmp_path / "i.json")
    assert load_instance(tmp_path / "i.json").jobs == inst.jobs
    assert make_instance(c, [{"id": 1, "demand": 2, "class": "classA", "placement": [0, 1]}]).jobs == inst.jobs


def test_job_ids_equal_as_text_are_rejected_by_the_model() -> None:
    # 1 and "1" would merge in a file's and a result's JSON object keys
    from pal_opt.model import Job

    with pytest.raises(InstanceError, match=r"jobs\[1\]\.id: duplicate job id '1' \(same as jobs\[0\]\.id as text\)"):
        RoundInstance(_small_cluster(), (Job(1, 1, "classA"), Job("1", 1, "classA", position=1)))


def test_decreasing_locality_is_rejected_by_job_as_by_the_file() -> None:
    from pal_opt.model import Job

    with pytest.raises(InstanceError, match=r"jobs\[0\]\.locality: penalties must not decrease"):
        Job(1, 2, "classA", locality=(1, 2, 1.5))
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.locality: penalties must not decrease"):
        Job(1, 2, "classA", locality=(1.2, 1.0, 1.5))
    assert Job(1, 2, "classA", locality=(0.5, 0.5, 1)).locality == (0.5, 0.5, 1.0)


@pytest.mark.parametrize("bad", [0.5, 1.0, "", None, True, (0, 1), 2**63])
def test_server_and_rack_ids_are_what_a_file_can_hold(bad) -> None:
    from pal_opt.model import Cluster

    with pytest.raises(InstanceError, match=r"gpus\[2\]\.server: must be an integer or a non-empty string"):
        Cluster.from_arrays(range(4), [0, 0, bad, bad], {"classA": [1.0] * 4})
    with pytest.raises(InstanceError, match=r"racks\.s1: must be an integer or a non-empty string"):
        Cluster.from_arrays(range(4), ["s0", "s0", "s1", "s1"], {"classA": [1.0] * 4},
                            rack_of_server={"s0": "r", "s1": bad})


def test_numpy_server_and_rack_ids_become_plain(tmp_path) -> None:
    from pal_opt.model import Cluster

    c = Cluster.from_arrays(range(4), np.array([5, 5, 7, 7]), {"classA": [1.0] * 4},
                            rack_of_server={np.int64(5): np.int64(0), np.int64(7): np.str_("r1")})
    assert c.server_ids == (5, 7) and c.rack_ids == (0, "r1")
    assert all(type(s) is int for s in c.server_ids) and type(c.rack_ids[1]) is str
    save_instance(RoundInstance(c, ()), tmp_path / "i.json")
    back = load_instance(tmp_path / "i.json").cluster
    assert back.server_ids == c.server_ids and back.rack_ids == c.rack_ids


def test_the_graph_keeps_gpu_type_throughputs() -> None:
    from pal_opt import make_instance, solve
    from pal_opt.model import Cluster

    c = Cluster.from_arrays(range(4), [0, 0, 1, 1], {"classA": [1.0] * 4}, gpu_types="aabb",
                            throughput={"classA": {"a": 1, "b": 2}})
    assert Cluster.from_graph(c.graph).throughput == c.throughput == {"classA": {"a": 1.0, "b": 2.0}}
    jobs = [{"id": 1, "demand": 2, "class": "classA"}]
    assert solve(make_instance(c.graph, jobs), "ilp").placements == solve(make_instance(c, jobs), "ilp").placements
    g = c.graph.copy()
    g.graph["throughput"] = {"classA": {"a": 1, "c": 2}}
    with pytest.raises(InstanceError, match=r"throughput\.classA\.c: unknown GPU type 'c'"):
        Cluster.from_graph(g)


def test_a_server_under_two_racks_in_a_graph_is_an_error() -> None:
    from pal_opt.model import Cluster

    g = _small_cluster(rack_of_server={0: "r0", 1: "r1"}).graph.copy()
    g.add_edge(("rack", "r1"), ("server", 0))
    with pytest.raises(InstanceError, match=r"graph\.\('server', 0\): server must hang under at most one rack"):
        Cluster.from_graph(g)


def test_a_multidigraph_reads_as_the_same_digraph() -> None:
    """f207191 read each vertex's parents from ``graph.in_edges`` as pairs; a ``MultiDiGraph``'s
    are triples (one per parallel edge), so ``Cluster.from_graph`` of one failed with
    ``ValueError: too many values to unpack`` where it had read like the ``DiGraph`` (review)."""
    import networkx as nx

    from pal_opt.model import Cluster

    c = Cluster.from_arrays([5, 1, 3, 2], ["b", "a", "b", "a"], {"classA": [1.0, 1.5, 1.2, 1.0]}, [0, 1, 0, 2],
                            {"a": "r0", "b": "r1"})
    multi = nx.MultiDiGraph(c.graph)
    multi.add_edges_from(list(c.graph.edges))  # a parallel edge under every parent: still one parent
    for g in (nx.MultiDiGraph(c.graph), multi):
        back = Cluster.from_graph(g)
        assert back.gpu_ids.tolist() == [1, 2, 3, 5] and back.server_ids == ("a", "b") and back.rack_ids == ("r0", "r1")
        assert back.server_of.tolist() == [0, 0, 1, 1] and back.rack_of_server.tolist() == [0, 1]
        assert back.state.tolist() == [1, 2, 0, 0] and back.factors["classA"].tolist() == [1.5, 1.0, 1.2, 1.0]
    multi.add_edge(("server", "a"), ("gpu", 5))
    with pytest.raises(InstanceError, match=r"graph\.\('gpu', 5\): GPU must hang under exactly one server"):
        Cluster.from_graph(multi)


def test_an_undirected_graph_reads_as_the_digraph_with_the_vertex_kinds_as_the_hierarchy() -> None:
    """``Cluster.from_graph`` of an undirected ``networkx.Graph`` raised a raw ``AttributeError:
    'Graph' object has no attribute 'pred'`` and ``make_instance`` refused it ("must be a Cluster
    or a networkx DiGraph").  A ``("server", s)`` vertex joined to a GPU can only be its server,
    and a rack joined to a server its rack: the same cluster as the ``DiGraph``, with the same
    errors."""
    import networkx as nx

    from pal_opt import make_instance
    from pal_opt.model import Cluster

    c = Cluster.from_arrays([5, 1, 3, 2], ["b", "a", "b", "a"], {"classA": [1.0, 1.5, 1.2, 1.0]}, [0, 1, 0, 2],
                            {"a": "r0", "b": "r1"}, gpu_types="xyxy", devices=[1, 0, 0, 1])
    jobs = [{"id": "j", "demand": 1, "class": "classA"}]
    for g in (nx.Graph(c.graph), nx.MultiGraph(c.graph), nx.Graph(c.graph.reverse())):
        back = Cluster.from_graph(g)
        assert back.gpu_ids.tolist() == [1, 2, 3, 5] and back.server_ids == ("a", "b") and back.rack_ids == ("r0", "r1")
        assert back.server_of.tolist() == [0, 0, 1, 1] and back.rack_of_server.tolist() == [0, 1]
        assert back.state.tolist() == [1, 2, 0, 0] and back.factors["classA"].tolist() == [1.5, 1.0, 1.2, 1.0]
        assert back.gpu_type_names() == ["y", "y", "x", "x"] and back.devices.tolist() == [0, 1, 0, 1]
        assert make_instance(g, jobs).cluster.server_of.tolist() == [0, 0, 1, 1]
    g = nx.Graph(c.graph)
    g.add_edge(("gpu", 5), ("server", "a"))
    with pytest.raises(InstanceError, match=r"graph\.\('gpu', 5\): GPU must hang under exactly one server"):
        Cluster.from_graph(g)
    g = nx.Graph(c.graph)
    g.add_edge(("server", "a"), ("rack", "r1"))
    with pytest.raises(InstanceError, match=r"graph\.\('server', 'a'\): server must hang under at most one rack"):
        Cluster.from_graph(g)
    g = nx.Graph(c.graph)
    g.remove_edge(("server", "a"), ("gpu", 1))
    with pytest.raises(InstanceError, match=r"graph\.\('gpu', 1\): GPU must hang under exactly one server"):
        Cluster.from_graph(g)


@pytest.mark.parametrize("given", [None, {}, "cluster.json", "a Cluster"])
def test_from_graph_of_something_else_names_what_it_takes(given: object) -> None:
    """``Cluster.from_graph(None)`` (or a dict, a path, a Cluster) raised a raw ``AttributeError:
    ... has no attribute 'nodes'``."""
    from pal_opt.model import Cluster

    if given == "a Cluster":
        given = _small_cluster()
    with pytest.raises(InstanceError, match=r"^graph: must be a networkx graph .*, got "):
        Cluster.from_graph(given)  # type: ignore[arg-type]


def test_negative_gpu_ids_are_rejected_by_the_model_as_by_the_file() -> None:
    from pal_opt.model import Cluster

    with pytest.raises(InstanceError, match=r"gpus\[\]\.id: GPU ids must be non-negative, got -1"):
        Cluster.from_arrays([0, -1], [0, 0], {"classA": [1.0, 1.0]})


def test_locality_penalties_are_bounded_above_as_factors_are() -> None:
    """λ = 1e308 was accepted and printed a slowdown of 280 digits (found by review)."""
    from pal_opt.model import Job, RoundParams

    with pytest.raises(InstanceError, match=r"params\.locality_penalty: must be at most 1e\+06"):
        RoundParams(locality_penalty=1e308)
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.locality\[2\]: must be at most 1e\+06"):
        Job(1, 2, "classA", locality=(1, 2, 1e7))
    assert RoundParams(locality_penalty=1e6).locality_penalty == 1e6


def test_cost_terms_and_factors_out_of_range_are_named_with_file_and_path(tmp_path) -> None:
    """Both were reported without the file (the cost terms only when first priced), and a
    factor out of range under the model's path ``factors.classA`` (found by review)."""
    doc = json.loads((Path(__file__).parent.parent / "instances" / "paper-16x4.json").read_text())
    cases = [
        ({"params": {**doc["params"], "costs": {"foo": {}}}}, r"c\.json: params\.costs\.foo: unknown cost term"),
        ({"params": {**doc["params"], "costs": {"migration": {"per_jb": 1}}}},
         r"c\.json: params\.costs\.migration\.per_jb: no such parameter"),
    ]
    factors = {k: list(v) for k, v in doc["cluster"]["factors"].items()}
    name = next(iter(factors))
    factors[name][5] = 2e6
    cases.append(({"cluster": {**doc["cluster"], "factors": factors}},
                  rf"c\.json: cluster\.factors\.{name}\[5\]: must be in 1e-06\.\.1e\+06"))
    for change, message in cases:
        path = tmp_path / "c.json"
        path.write_text(json.dumps({**doc, **change}))
        with pytest.raises(InstanceError, match=message):
            load_instance(path)


def test_job_ids_that_are_not_written_as_integers_keep_their_text(tmp_path: Path) -> None:
    """``int()`` took a Slurm array job ``4567_1`` as 45671 and ``0042`` as 42: the exported
    placements named other jobs, and ``4567_1``, ``456_71`` were refused as duplicates (review)."""
    from pal_opt.io.traces import read_trace

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,num_gpus,model\n4567_1,4,resnet50\n456_71,2,BERT\n0042,4,BERT\n7,1,BERT\n8.0,1,BERT\n")
    assert [j.id for j in load_jobs(jobs).jobs] == ["4567_1", "456_71", "0042", 7, 8]
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n4567_1,4,0,100,PointNet\n4567_2,1,5,100,PointNet\n")
    assert [j.id for j in read_trace(trace)] == ["4567_1", "4567_2"]
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n1,4,0,100,PointNet\n2,1,5,100,PointNet\n")
    assert [j.id for j in read_trace(trace)] == [1, 2]
