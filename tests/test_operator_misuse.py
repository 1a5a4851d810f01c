"""An operator's bad day at the command line (fourteenth session's review): a file of another
format given to the wrong option, an empty trace, flags at the edges of their range.  Each case
runs ``main`` in process and checks one error line naming the file (or the flag), exit 2 and no
output written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_opt.cli import main
from pal_opt.generate import generate_instance
from pal_opt.io import save_instance

TRACE = "job_id,num_gpus,submit_time,duration,model\n1,2,0,100,BERT\n"
GPUS = "GPU_ID,Node_ID,IN_USE,JOB_IDS,PerfVar_classA\n0,0,False,,1.0\n1,0,False,,1.1\n"
NODES = {"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n0", "labels": {}},
                                      "status": {"capacity": {"nvidia.com/gpu": "4"}}}]}
GRAPHML = '<?xml version="1.0"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph/></graphml>\n'


def _one_error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith("pal-opt") and "Traceback" not in err, err
    return err.split(" error: ", 1)[1].rstrip("\n")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    inst = tmp_path / "round.json"
    save_instance(generate_instance(2, 2, 2, seed=0), inst)
    placement = tmp_path / "pl.json"
    placement.write_text(json.dumps({"format": "pal-opt/placement", "version": 1, "placements": {}}))
    out = {"round": inst, "placement": placement, "trace": tmp_path / "trace.csv", "gpus": tmp_path / "gpus.csv",
           "nodes": tmp_path / "nodes.json", "graphml": tmp_path / "c.graphml", "other": tmp_path / "other.json",
           "empty": tmp_path / "empty.csv", "out": tmp_path / "out.json"}
    out["trace"].write_text(TRACE)
    out["gpus"].write_text(GPUS)
    out["nodes"].write_text(json.dumps(NODES))
    out["graphml"].write_text(GRAPHML)
    out["other"].write_text('[{"a": 1}]')
    out["empty"].write_text("\n\n")
    return out


@pytest.mark.parametrize("argv,expected", [
    # a JSON or XML file where a CSV is read said "line 2: has 2 fields but the header has 1"
    (["import", "blox", "--gpus", "{round}", "-o", "{out}"], "{round}: is a pal-opt instance file (JSON), not a GPU table (CSV)"),
    (["import", "blox", "--gpus", "{graphml}", "-o", "{out}"], "{graphml}: is GraphML (XML), not a GPU table (CSV)"),
    (["import", "blox", "--gpus", "{gpus}", "--jobs", "{placement}", "-o", "{out}"],
     "{placement}: is a pal-opt placement file (JSON), not a job CSV"),
    (["simulate", "{round}", "--trace-format", "pal", "-o", "{out}"], "{round}: is a pal-opt instance file (JSON), not a trace file (CSV)"),
    (["simulate", "{trace}", "--variability", "classB={other}", "-o", "{out}"], "{other}: is JSON, not a measurement file (CSV)"),
    # with the format read from the header: "cannot tell the trace format from the header ... got '{'"
    (["simulate", "{nodes}", "-o", "{out}"], "{nodes}: is a Kubernetes node list (JSON), not a trace (CSV)"),
    # an empty (or blank) trace: "cannot tell the trace format from the header ...; got ''"
    (["simulate", "{empty}", "-o", "{out}"], "{empty}: trace file is empty"),
    (["simulate", "{tmp}", "-o", "{out}"], "{tmp}: is a directory, expected a trace (CSV)"),
    # Slurm: "line 1: expected KEY=VALUE, got '{'", and a gres.conf named "configuration file"
    (["import", "slurm", "{nodes}", "--gpus-per-node", "4", "-o", "{out}"],
     "{nodes}: is a Kubernetes node list (JSON), not a topology.conf"),
    (["import", "slurm", "{empty}", "--gpus-per-node", "4", "-o", "{out}"], "{empty}: topology.conf is empty"),
    (["partition", "{round}", "--machines", "4", "--bandwidth", "1e9"],
     "{round}: is a pal-opt instance file (JSON), not a PipeDream profile (graph.txt)"),
    # Kubernetes: "kind: must be a List or NodeList of nodes, got kind None"
    (["import", "k8s", "{round}", "-o", "{out}"], "{round}: is a pal-opt instance file, not a node list (kubectl get nodes -o json)"),
    (["import", "k8s", "{other}", "-o", "{out}"], "{other}: top level: must be a JSON object (kubectl get nodes -o json)"),
    (["import", "graphml", "{nodes}", "-o", "{out}"], "{nodes}: is a Kubernetes node list (JSON), not a GraphML file"),
])
def test_a_file_of_another_format_is_named_as_such(argv, expected, files, tmp_path, capsys):
    subs = {**files, "tmp": tmp_path}
    msg = _one_error(capsys, main([a.format(**subs) for a in argv]))
    assert msg == expected.format(**subs)
    assert not files["out"].exists()


def test_a_sia_table_reader_names_json_too(files):
    """The Sia readers (workloads, profiles, the Philly trace) read their CSVs with pandas."""
    from pal_opt.errors import InstanceError
    from pal_opt.hetero.tables import read_table

    with pytest.raises(InstanceError) as exc:
        read_table(files["round"], required=("name",), what="workload file")
    assert str(exc.value) == f"{files['round']}: is a pal-opt instance file (JSON), not a workload file (CSV)"


def test_a_node_list_without_kind_says_so(tmp_path, capsys):
    nodes = tmp_path / "n.json"
    nodes.write_text('{"items": []}')
    msg = _one_error(capsys, main(["import", "k8s", str(nodes), "-o", str(tmp_path / "o.json")]))
    assert msg == f"{nodes}: kind: must be a List or NodeList of nodes (kubectl get nodes -o json), the document has no 'kind'"


@pytest.mark.parametrize("argv,expected", [
    # 1e308 hours were inf seconds: "max-time must be a finite number of seconds > 0, got inf" (a Sia
    # trace printed the default-profiles warning first, then "max_time must be a positive number ...")
    (["simulate", "{trace}", "--max-hours", "1e308", "-o", "{out}"],
     "argument --max-hours: must be at most 2.778e+11 hours, got '1e308'"),
    (["simulate-sia", "{trace}", "--max-hours", "1e308", "-o", "{out}"],
     "argument --max-hours: must be at most 2.778e+11 hours, got '1e308'"),
    # a round of 1e308 s ran, summed the job times to inf with numpy's overflow warning on stderr
    # and printed "avg JCT inf h" and a p99 of 300 digits
    (["simulate", "{trace}", "--round", "1e308", "-o", "{out}"], "argument --round: must be at most 1e+15 seconds, got '1e308'"),
    (["simulate-sia", "{trace}", "--round", "1e16", "-o", "{out}"], "argument --round: must be at most 1e+15 seconds, got '1e16'"),
])
def test_simulated_time_is_bounded(argv, expected, files, capsys):
    msg = _one_error(capsys, main([a.format(**files) for a in argv]))
    assert msg.startswith(expected) and msg.endswith("--help')")
    assert not files["out"].exists()


def test_simulation_configs_bound_their_times():
    from pal_opt.errors import OptionError
    from pal_opt.hetero.simulate import SimConfig as SiaConfig
    from pal_opt.simulate import SimConfig

    with pytest.raises(OptionError, match=r"round_length must be a number of seconds > 0 and at most 1e\+15, got 1e\+308"):
        SimConfig(round_length=1e308).validate()
    with pytest.raises(OptionError, match=r"max_time must be .* at most 1e\+15, got 1e\+300"):
        SimConfig(max_time=1e300).validate()
    with pytest.raises(OptionError, match=r"round_length must be a number of seconds > 0 and at most 1e\+15, got 1e\+300"):
        SiaConfig(round_length=1e300)


def _installed(name: str) -> bool:
    from pal_opt.ilp.backends import available_backends

    return name in available_backends()


@pytest.mark.parametrize("backend", ["highs", "cpsat", "cbc"])
def test_a_backend_parameter_the_solver_refuses_is_refused_when_the_solver_is_not_run(backend, tmp_path, capsys):
    """With a gap target the starts met (``<backend> not run: the start placement is within the
    gap of the LP bound``), a repair with nothing to re-place, or a simulation whose rounds never
    reached their solver, ``--backend-param foo=1`` was taken without a word (exit 0); a solve that
    ran its solver refused it (exit 2).  It is checked before any work now."""
    if not _installed(backend):
        pytest.skip(f"{backend} not installed")
    import pal_opt
    from pal_opt.errors import OptionError

    inst = generate_instance(16, 4, 40, seed=1)
    with pytest.raises(OptionError, match=f"{backend} rejected backend parameter 'foo' = 1"):
        pal_opt.solve(inst, "ilp", backend=backend, gap=0.5, backend_params={"foo": 1})
    with pytest.raises(OptionError, match=f"{backend} rejected backend parameter 'foo' = 1"):
        pal_opt.RoundPolicy("ilp", backend=backend, backend_params={"foo": 1})
    path, out = tmp_path / "round.json", tmp_path / "pl.json"
    save_instance(inst, path)
    msg = _one_error(capsys, main(["solve", str(path), "--method", "ilp", "--backend", backend, "--gap", "0.5",
                                   "--backend-param", "foo=1", "-o", str(out)]))
    assert msg.startswith(f"{backend} rejected backend parameter 'foo' = 1") and not out.exists()
    # a repair whose failed GPU no job holds: nothing to re-place, no program
    assert main(["solve", str(path), "--method", "pal", "-o", str(out)]) == 0
    capsys.readouterr()
    held = {g for gs in json.loads(out.read_text())["placements"].values() for g in gs}
    idle = next(g for g in range(64) if g not in held) if len(held) < 64 else None
    failed = str(idle) if idle is not None else "0"
    rep = tmp_path / "rep.json"
    msg = _one_error(capsys, main(["repair", str(path), str(out), "--failed", failed, "--backend", backend,
                                   "--backend-param", "foo=1", "-o", str(rep)]))
    assert msg.startswith(f"{backend} rejected backend parameter 'foo' = 1") and not rep.exists()


def test_good_backend_parameters_still_pass():
    import pal_opt

    inst = generate_instance(4, 4, 8, seed=0)
    for backend, params in (("highs", {"presolve": "off", "mip_max_nodes": 200}),
                            ("cpsat", {"max_deterministic_time": 1.0, "num_workers": 2}), ("cbc", {"maxNodes": 200})):
        if _installed(backend):
            assert pal_opt.solve(inst, "ilp", backend=backend, backend_params=params).status.value == "optimal"


def test_partition_names_the_flag_for_too_many_workers(tmp_path, capsys):
    """``--machines 4,100000000`` said ``machines[1]: must be an integer from 1 to 1024`` (the
    Python argument's name, not the flag's)."""
    profile = Path(__file__).resolve().parents[1] / "examples" / "data" / "tinynet_graph.txt"
    msg = _one_error(capsys, main(["partition", str(profile), "--machines", "4,100000000", "--bandwidth", "1e9,1e8"]))
    assert msg.startswith("argument --machines: at most 1,024 workers per level, got '100000000'")
    assert main(["partition", str(profile), "--machines", "1024", "--bandwidth", "1e9"]) == 0


def test_fewer_parts_than_asked_are_said(tmp_path, capsys):
    """``--parts 1000000`` on 16 servers solved 4 parts, and only ``info.partition.k_requested``
    said that 1,000,000 had been asked for."""
    import pal_opt

    inst = generate_instance(16, 4, 40, seed=1)
    res = pal_opt.solve(inst, "ilp-partitioned", parts=1_000_000, executor="serial")
    k = res.info["partition"]["k"]
    assert k < 1_000_000 and res.info["partition"]["k_requested"] == 1_000_000
    assert res.message.endswith(f"{k} parts, not the 1,000,000 asked: the round splits into no more")
    asked = pal_opt.solve(inst, "ilp-partitioned", parts=2, executor="serial")
    assert asked.info["partition"]["k"] == 2 and "asked" not in asked.message


@pytest.mark.parametrize("value", ["1e308", "1e-9"])
def test_a_blox_factor_out_of_range_names_its_cell(value, tmp_path, capsys):
    """``PerfVar_classA`` of 1e308 said ``factors.classA: factor of GPU 1 must be in 1e-06..1e+06``:
    the instance file's field and the GPU id, not the table's line and column."""
    gpus = tmp_path / "gpus.csv"
    gpus.write_text(GPUS.replace("0,0,False,,1.0", f"0,0,False,,{value}"))
    msg = _one_error(capsys, main(["import", "blox", "--gpus", str(gpus), "-o", str(tmp_path / "o.json")]))
    assert msg == (f"{gpus}: line 2, column PerfVar_classA: must be in 1e-06..1e+06 (a slowdown relative to a "
                   f"typical GPU), got '{value}'")
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("command", ["solve", "simulate"])
def test_admission_is_not_listed_as_an_exact_method_option(command, capsys):
    """``--admission`` sat under "integer program options (exact methods only)" while its own help
    said "(greedy methods too)": the greedy methods take it (pal, pmfirst, packed, random)."""
    try:
        main([command, "--help"])
    except SystemExit:
        pass
    text = capsys.readouterr().out
    general, _, exact = text.partition("integer program options (exact methods only):")
    assert exact and "--admission {prefix,backfill}\n" in general and "--admission {prefix,backfill}\n" not in exact
    assert "greedy methods too" not in text


def test_generate_names_measurements_for_a_missing_file(tmp_path, capsys):
    """``generate --measurements EMPTY_DIR`` said ``EMPTY_DIR/resnet-longhorn-agg.csv: no such
    file``, naming no option (``simulate --variability DIR`` names its option)."""
    d = tmp_path / "lh"
    d.mkdir()
    msg = _one_error(capsys, main(["generate", "--nodes", "2", "--gpus-per-node", "2", "--jobs", "1",
                                   "--measurements", str(d), "-o", str(tmp_path / "o.json")]))
    assert msg == f"{d / 'resnet-longhorn-agg.csv'}: --measurements {d}: no such file"


def test_a_csv_cut_short_says_so(tmp_path, capsys):
    """A table whose last row stops in the middle, with no line break (a copy interrupted), said
    only ``line 7: has 1 fields but the header has 5``; a short row elsewhere still says just that."""
    from pal_opt.errors import InstanceError
    from pal_opt.hetero.tables import read_table

    cut = tmp_path / "trace.csv"
    cut.write_text(TRACE + "2,4,0")
    msg = _one_error(capsys, main(["simulate", str(cut), "--synthetic-variability", "0", "-o", str(tmp_path / "o.json")]))
    assert msg == f"{cut}: line 3: has 3 fields but the header has 5 (the last line, with no line break: is the file cut short?)"
    whole = tmp_path / "short.csv"
    whole.write_text(TRACE + "2,4,0\n")
    msg = _one_error(capsys, main(["simulate", str(whole), "--synthetic-variability", "0", "-o", str(tmp_path / "o.json")]))
    assert msg == f"{whole}: line 3: has 3 fields but the header has 5"
    sia = tmp_path / "w.csv"
    sia.write_text("name,time,application,num_replicas,batch_size\nx-0,0,cifar10,2,128\nx-1,5,cif")
    with pytest.raises(InstanceError) as exc:
        read_table(sia, required=("name",), what="workload file")
    assert str(exc.value) == (f"{sia}: line 3: has 3 fields but the header has 5 (the last line, with no line break: "
                              "is the file cut short?)")


def test_a_huge_gpu_count_on_a_node_says_it_is_too_large(tmp_path, capsys):
    """``"nvidia.com/gpu": "99999999999"`` said ``must be a whole number of GPUs such as "8"``,
    which it is."""
    nodes = tmp_path / "n.json"
    doc = json.loads(json.dumps(NODES))
    doc["items"][0]["status"]["capacity"]["nvidia.com/gpu"] = "99999999999"
    nodes.write_text(json.dumps(doc))
    msg = _one_error(capsys, main(["import", "k8s", str(nodes), "-o", str(tmp_path / "o.json")]))
    assert msg == f'{nodes}: items[0].status.capacity["nvidia.com/gpu"]: must be at most 999,999,999 GPUs, got \'99999999999\''


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_an_output_that_is_a_pipe_through_a_link_is_not_a_file(tmp_path):
    """``-o /dev/stdout`` with standard output a pipe said ``cannot write: no new file can be made
    in /proc/5110/fd``: the link's target, ``pipe:[N]``, is no path, so the check of a device or
    FIFO missed it (``-o /dev/null`` said ``not a regular file``)."""
    import os

    from pal_opt.io.atomic import check_writable

    r, w = os.pipe()
    try:
        with pytest.raises(OSError, match=r"not a regular file \(a device, FIFO or socket\); give a file name"):
            check_writable(f"/proc/self/fd/{w}")
    finally:
        os.close(r)
        os.close(w)
    check_writable(tmp_path / "fine.json")


def test_check_counts_in_the_singular_and_says_its_exit_statuses(tmp_path, capsys):
    """``INVALID (1 violations)`` and ``job 3: needs 1 distinct GPUs``; ``check --help`` did not say
    what its exit statuses mean (README: 0 valid, 1 invalid, 2 bad input)."""
    inst = generate_instance(2, 4, 4, seed=0)
    path, pl = tmp_path / "round.json", tmp_path / "pl.json"
    save_instance(inst, path)
    one = next(j for j in inst.jobs if j.demand == 1)
    pl.write_text(json.dumps({"format": "pal-opt/placement", "version": 1, "placements": {str(one.id): [0, 1]}}))
    assert main(["check", str(path), str(pl)]) == 1
    out = capsys.readouterr().out
    assert f"{pl}: INVALID (1 violation)\n" in out and f"job {one.id}: needs 1 distinct GPU, got [0, 1]" in out
    try:
        main(["check", "--help"])
    except SystemExit:
        pass
    assert "Exit status: 0 valid; 1 invalid" in " ".join(capsys.readouterr().out.split())


def test_solve_jobs_names_a_given_job_that_can_never_fit(tmp_path, capsys):
    """``solve --jobs 1,3`` with job 3 larger than the cluster said only ``jobs 1, 3 need 10004 GPUs
    but only 16 are free``, as if the cluster were merely full."""
    import pal_opt

    inst = generate_instance(4, 4, 3, seed=0)
    jobs = [{"id": "big", "demand": 10000, "class": "classA"}] + [
        {"id": j.id, "demand": 1, "class": j.perfclass} for j in inst.jobs]
    path = tmp_path / "big.json"
    save_instance(pal_opt.make_instance(inst.cluster, jobs), path)
    assert main(["solve", str(path), "--method", "ilp", "--jobs", f"big,{inst.jobs[0].id}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith(
        "; job 'big' can never be placed: needs 10000 GPUs; the cluster has 16")
    res = pal_opt.solve(pal_opt.load_instance(path), "ilp", jobs=["big"])
    assert res.status.value == "infeasible" and res.message.endswith("job 'big' can never be placed: needs 10000 GPUs; "
                                                                     "the cluster has 16")


@pytest.mark.parametrize("fmt", ["slurm", "k8s", "graphml"])
def test_export_help_says_what_its_files_are(fmt, capsys):
    """``export FORMAT --help`` listed ``INSTANCE.json`` and ``PLACEMENT.json`` with no word on
    either (graphml's placement is optional; a placement that cannot be applied is refused)."""
    try:
        main(["export", fmt, "--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert "INSTANCE.json the round" in text and "PLACEMENT.json the placement (what solve --out or repair --out wrote)" in text
    assert ("without it, the cluster alone" in text) == (fmt == "graphml")


def test_solve_help_says_what_its_file_is(capsys):
    try:
        main(["solve", "--help"])
    except SystemExit:
        pass
    assert "INSTANCE.json the round: an instance file (the generate and import commands write one)" in " ".join(
        capsys.readouterr().out.split())


@pytest.mark.parametrize("doc,what", [
    ({"n_jobs": 3, "job_results": []}, "a simulation result (pal-opt simulate --out)"),
    ({"policies": ["pal"], "results": {}}, "a simulation result (pal-opt simulate --out)"),
    ({"time_per_sample": 0.1, "stages": []}, "a pipeline partition (pal-opt partition --out)"),
    ({"apiVersion": "v1", "kind": "PodPlacements", "items": []},
     "a placement exported for Kubernetes (pal-opt export k8s)"),
])
def test_another_output_of_pal_opt_is_named_where_a_round_or_placement_is_read(doc, what, files, tmp_path, capsys):
    """``solve result.json`` said ``format: is required``; ``check round.json result.json`` said
    ``placements: missing, and the file is not a bare {job id: [GPU ids]} object either (n_jobs:
    must be an array, got 24)``."""
    other = tmp_path / "other-output.json"
    other.write_text(json.dumps(doc))
    assert _one_error(capsys, main(["solve", str(other)])) == f"{other}: is {what}, not an instance file"
    assert _one_error(capsys, main(["check", str(files["round"]), str(other)])) == f"{other}: is {what}, not a placement file"


def test_a_trace_with_a_byte_order_mark_names_the_bad_byte_where_it_is(tmp_path, capsys):
    # the header was decoded with utf-8-sig, which counts offsets from after the mark: byte 7, not 10
    trace = tmp_path / "trace.csv"
    trace.write_bytes(b"\xef\xbb\xbfname,ti\xffme\n")
    out = tmp_path / "out.json"
    line = _one_error(capsys, main(["simulate", str(trace), "--cluster", "aws:1x4", "-o", str(out)]))
    assert line == f"{trace}: trace file is not valid UTF-8 (byte 10: invalid start byte)"
    assert not out.exists()


@pytest.mark.parametrize("param, problem", [
    ("mip_rel_gap=NaN", "a solver parameter must be a finite number, got nan"),
    ("time_limit=-Infinity", "a solver parameter must be a finite number, got -inf"),
    ("mip_rel_gap=1e400", "a solver parameter must be a finite number, got inf"),
    ("mip_rel_gap=[1,2]", "a solver parameter must be a number, true/false or a string, got [1, 2]"),
    ("presolve=null", "a solver parameter must be a number, true/false or a string, got None"),
    # an integer past a float's range: OverflowError (a traceback) from the finiteness check
    ("mip_max_nodes=" + "1" * 400, "a solver parameter must be an integer of at most 64 bits, got " + "1" * 60),
])
def test_a_backend_parameter_no_solver_takes_is_refused_before_any_work(files, capsys, param, problem):
    """``--backend-param mip_rel_gap=NaN`` reached HiGHS (and CBC), which took it, and the
    placement file's ``info.backend_params``, written as the bare token ``NaN``: not JSON, so
    ``pal-opt check`` refused the file ``solve`` had just written (exit 2); a list reached the
    solver's binding, whose error was a dump of its overloads.  Refused as an argument now."""
    msg = _one_error(capsys, main(["solve", str(files["round"]), "--method", "ilp", "--backend-param", param,
                                   "-o", str(files["out"])]))
    assert msg == f"argument --backend-param: {param!r}: {problem} (see 'pal-opt solve --help')"
    assert not files["out"].exists()


def test_backend_params_must_be_values_a_solver_takes():
    """The same rule in the API: ``SolveOptions`` (and so ``solve``, ``repair``, ``RoundPolicy``)."""
    import math

    from pal_opt import SolveOptions
    from pal_opt.errors import OptionError

    with pytest.raises(OptionError, match=r"^backend_params\['mip_rel_gap'\] must be a finite number, got nan$"):
        SolveOptions(backend_params={"mip_rel_gap": math.nan})
    with pytest.raises(OptionError, match=r"^backend_params\['subsolvers'\] must be a number, True/False or a "
                                          r"string, got \['default_lp'\]$"):
        SolveOptions(backend_params={"subsolvers": ["default_lp"]})
    with pytest.raises(OptionError, match=r"^backend_params\['mip_max_nodes'\] must be an integer of at most 64 "
                                          r"bits, got 1{60}$"):
        SolveOptions(backend_params={"mip_max_nodes": int("1" * 400)})  # OverflowError before
    assert SolveOptions(backend_params={"mip_max_nodes": 2**63 - 1}).backend_params["mip_max_nodes"] == 2**63 - 1
    assert SolveOptions(backend_params={"presolve": "off", "mip_max_nodes": 200, "mip_rel_gap": 0.01,
                                        "parallel": True}).backend_params["mip_max_nodes"] == 200


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs a FIFO")
def test_a_profile_that_is_a_fifo_is_named_as_one(tmp_path, capsys):
    """A Sia profile file that is there but is a FIFO (a directory, a device) was reported as
    ``missing profile file for GPU type 'aws'``: the operator looking at the folder saw it."""
    import os
    import shutil

    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sia-artifact" / "profiles"
    if not (shared / "bert").is_dir():
        pytest.skip("the Sia artifact's profiles are not in ../shared")
    profiles = tmp_path / "profiles"
    shutil.copytree(shared / "bert", profiles / "bert")
    fifo = profiles / "bert" / "placements-aws.csv"
    fifo.unlink()
    os.mkfifo(fifo)
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nbert-0,0,bert,2,384\n")
    out = tmp_path / "out.json"
    msg = _one_error(capsys, main(["simulate", str(trace), "--profiles", str(profiles), "--cluster", "aws:2x4",
                                   "--out", str(out)]))
    assert msg == (f"{fifo}: the profile file for GPU type 'aws' is not a regular file (a FIFO, a device or a "
                   "directory)") and not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["solve", "{round}", "--method", "ilp", "--cost", "migration.per_job=0.5", "--cost", "migration.per_job=0.7",
      "-o", "{out}"], "--cost migration.per_job: given twice (0.5 and 0.7); give it once"),
    (["solve", "{round}", "--method", "ilp", "--backend-param", "presolve=off", "--backend-param", "presolve=on",
      "-o", "{out}"], "--backend-param presolve: given twice ('off' and 'on'); give it once"),
    (["repair", "{round}", "{placement}", "--failed", "0", "--backend-param", "mip_rel_gap=0.1",
      "--backend-param", "mip_rel_gap=0", "-o", "{out}"],
     "--backend-param mip_rel_gap: given twice (0.1 and 0); give it once"),
    (["simulate", "{trace}", "--cluster", "2x2", "--synthetic-variability", "1", "--policy", "ilp",
      "--backend-param", "presolve=off", "--backend-param", "presolve=on", "-o", "{out}"],
     "--backend-param presolve: given twice ('off' and 'on'); give it once"),
])
def test_a_key_given_twice_to_a_repeatable_flag_is_refused(files, capsys, argv, message):
    """``--cost T.P=a --cost T.P=b`` and ``--backend-param K=a --backend-param K=b`` kept the last
    value and dropped the other without a word, where ``--variability`` and ``--model-class``
    refuse a class or model given twice."""
    msg = _one_error(capsys, main([a.format(**files) for a in argv]))
    assert msg == message and not files["out"].exists()


def test_a_cost_of_more_digits_than_a_float_holds_is_one_line(files, capsys):
    """``--cost migration.per_gpu=`` and 400 digits (JSON reads an integer) ended in an
    ``OverflowError`` traceback from the finiteness check, where ``=1e400`` was one line."""
    msg = _one_error(capsys, main(["solve", str(files["round"]), "--cost", "migration.per_gpu=" + "1" * 400,
                                   "-o", str(files["out"])]))
    assert msg == ("argument --cost: migration.per_gpu: expected a finite number, got " + "1" * 60
                   + " (see 'pal-opt solve --help')")
    assert not files["out"].exists()


@pytest.mark.parametrize("argv, example, cut_at", [
    (["partition", "{file}", "--machines", "4", "--bandwidth", "1e9", "--out", "{out}"], "tinynet_graph.txt", "AdaptiveAvg"),
    (["import", "graphml", "{file}", "-o", "{out}"], "cluster.graphml", '<data key="'),
])
def test_a_file_cut_in_its_last_line_is_said_to_be_cut_short(tmp_path, capsys, argv, example, cut_at):
    """A PipeDream profile or a GraphML file cut in the middle of a line (a copy interrupted)
    said only ``line 9: malformed layer line ...`` or ``invalid XML: no element found``, where
    the CSV and JSON readers add that the file looks cut short."""
    text = (Path(__file__).resolve().parents[1] / "examples" / "data" / example).read_text()
    at = text.index(cut_at, len(text) // 3) + len(cut_at)
    cut = tmp_path / example
    cut.write_text(text[:at])
    out = tmp_path / "out.json"
    msg = _one_error(capsys, main([a.format(file=cut, out=out) for a in argv]))
    assert msg.startswith(f"{cut}: ") and msg.endswith(" (the last line, with no line break: is the file cut short?)")
    assert not out.exists()
    cut.write_text(text.rstrip("\n"))  # the whole file, with no line break at its end, reads as before
    assert main([a.format(file=cut, out=out) for a in argv]) == 0 and out.exists()


BIG = "9" * 400  # an integer past a float's range: int() reads it, math.isfinite() raised OverflowError on it


@pytest.mark.parametrize(("argv", "flag"), [
    (["solve", "{inst}", "--threads", BIG], "--threads"),
    (["solve", "{inst}", "--method", "random", "--seed", BIG], "--seed"),
    (["generate", "--nodes", BIG, "--gpus-per-node", "4", "--jobs", "3", "-o", "{tmp}/g.json"], "--nodes"),
    (["simulate", "{trace}", "--synthetic-variability", BIG, "--out", "{tmp}/r.json"], "--synthetic-variability"),
    (["partition", "{graph}", "--machines", BIG, "--bandwidth", "1e9"], "--machines"),
])
def test_an_integer_option_past_a_floats_range_is_refused_in_one_line(files, tmp_path, capsys, argv, flag):
    """Every integer option (cliargs.pos_int/nonneg_int, partition's --machines) gave
    OverflowError's traceback and exit 1 on an integer of 400 digits."""
    data = Path(__file__).resolve().parents[1] / "examples" / "data"
    names = {"inst": str(files["round"]), "tmp": str(tmp_path), "trace": str(data / "trace.csv"),
             "graph": str(data / "tinynet_graph.txt")}
    msg = _one_error(capsys, main([a.format(**names) for a in argv]))
    assert msg.startswith(f"argument {flag}: "), msg
    assert "999999999999999999...9999999999999999999" in msg and BIG not in msg, msg
